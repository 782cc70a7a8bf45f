"""Readers for the offline benchmark copies under the data root (`data_root`), numpy in, numpy out; every reader
fails with one message naming the path it tried and how to point it elsewhere."""

import gzip
import json
import os
import pathlib
import pickle
import warnings
from typing import Any, Callable

import numpy as np

from jaxml.data import verify

__all__ = ["DataNotFoundError", "DataIntegrityError", "data_root", "is_path", "UCI_DATASETS", "UCI_SMILE_DATASETS",
           "UCI_SMILE_ONLY", "load_uci",
           "ORDINAL_DATASETS", "ORDINAL_TARGETS", "load_ordinal", "GRAPH_DATASETS", "load_graph", "load_hh_rlhf",
           "load_digits", "load_mnist1d", "check_name"]

ENV_VAR = "JAXML_DATA_DIR"


class DataNotFoundError(FileNotFoundError):
  """A data root or file is missing; the message says which path and how to fix it."""


DataIntegrityError = verify.DataIntegrityError


def is_path(name: str) -> bool:
  """A dataset "name" holding a '/' (or starting with '~') is the path of your own data in the
  documented format (data/README.md), e.g. `./mydata` or `/data/my_ordinal`."""
  return "/" in name or os.sep in name or name.startswith("~")


def _own(name: str) -> pathlib.Path:
  path = pathlib.Path(name).expanduser()
  if not path.exists():
    raise DataNotFoundError(f"your data {path} does not exist (a dataset name with '/' is a path; "
                            "formats in data/README.md)")
  return path


def check_name(name: str, allowed: tuple[str, ...], what: str) -> None:
  """Raises a ValueError listing `allowed` when `name` is neither one of them nor a path (`is_path`)."""
  if not is_path(name) and name not in allowed:
    raise ValueError(f"unknown {what} {name!r}; expected one of {', '.join(allowed)}")


def data_root(configured: str | os.PathLike | None = None) -> pathlib.Path:
  """The data root: configured value, else $JAXML_DATA_DIR, else `data/` in the checkout."""
  if configured:
    root, how = pathlib.Path(configured).expanduser(), "the config field data_dir"
  elif os.environ.get(ENV_VAR):
    root, how = pathlib.Path(os.environ[ENV_VAR]).expanduser(), f"${ENV_VAR}"
  else:
    root, how = verify.default_root(), "the default (data/ in the checkout)"
  if not root.is_dir():
    raise DataNotFoundError(f"data root {root} (from {how}) does not exist; set --config.data_dir=PATH or "
                            f"{ENV_VAR}=PATH to the folder holding uci/, ordinal/, graphs/, preferences/")
  return root


def _file(root: pathlib.Path, *parts: str) -> pathlib.Path:
  """`root/parts`, checked against the root's MANIFEST.sha256 when it has one (verify.py)."""
  path = root.joinpath(*parts)
  verify.check_file(root, path)
  if not path.exists():
    raise DataNotFoundError(f"missing data file {path}; check the data root ({root}) or set "
                            f"--config.data_dir / ${ENV_VAR}")
  return path


def _standardise(train: np.ndarray, *others: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
  """Standardises with training statistics; constant columns keep std 1 (naval has two)."""
  mean, std = train.mean(0), train.std(0)
  std = np.where(std > 1e-12, std, 1.0)
  return [((a - mean) / std).astype(np.float32) for a in (train, *others)], mean, std


# --------------------------------------------------------------------------- UCI regression
UCI_DATASETS = ("boston", "concrete", "energy", "kin8nm", "naval", "power-plant", "protein",
                "wine-quality-red", "yacht", "airfoil", "bikesharing")
UCI_SMILE_DATASETS = ("airfoil", "energy", "bikesharing")
UCI_SMILE_ONLY = ("airfoil", "bikesharing")     # no 20-split PBP protocol, only the 70/10/20 splits 1-3
_UCI_COLUMNS = {"airfoil": (list(range(0, 5)), 5), "bikesharing": (list(range(1, 12)), 12)}


def _uci_table(root: pathlib.Path, folder: tuple[str, ...], name: str) -> tuple[np.ndarray, np.ndarray]:
  data = np.loadtxt(_file(root, *folder, "data.txt"), ndmin=2)
  if name in _UCI_COLUMNS:
    features, target = _UCI_COLUMNS[name]
  else:
    features = np.loadtxt(_file(root, *folder, "index_features.txt"), dtype=int).reshape(-1).tolist()
    target = int(np.loadtxt(_file(root, *folder, "index_target.txt"), dtype=int))
  return data[:, features], data[:, target]


def _indices(root: pathlib.Path, *parts: str) -> np.ndarray:
  return np.loadtxt(_file(root, *parts), dtype=np.int64).reshape(-1)


def load_uci(name: str, split: int, *, protocol: str = "standard", root: str | None = None,
             valid_fraction: float = 0.1, row_order: Callable[[int], np.ndarray] | None = None,
             test_batch: int = 0) -> dict[str, Any]:
  """One split of a UCI regression set, standardised with training-row statistics.

  protocol "standard": the 20 (protein 5) PBP splits, validation = the last `valid_fraction` of a seeded
  permutation of the train rows; "smile": the fixed 70/10/20 `index_smile_*_<split>` files (split 1..3).
  `name` may be your own folder in the same layout (data/README.md). `row_order` ("smile" only): a function
  n -> permutation (e.g. `jaxml.smile.authors_row_order`) cut 70/10/20 and standardised on the whole table,
  as the authors' loader does; `test_batch` > 0 cuts the test rows to what their evaluation loop reaches.
  Returns x_* [n, d] float32, y_* [n] float32 (standardised), y_mean, y_std and the row indices."""
  check_name(name, UCI_DATASETS, "UCI dataset")
  own = is_path(name)
  base, folder = (_own(name), ()) if own else (data_root(root), ("uci", name))
  x, y = _uci_table(base, folder, name)
  if row_order is not None and protocol != "smile":
    raise ValueError("row_order exists for protocol='smile' only")
  if protocol == "smile":
    check_name(name, UCI_SMILE_DATASETS, "dataset for the smile protocol")
    if not own and split not in (1, 2, 3):
      raise ValueError(f"smile-protocol split must be 1, 2 or 3, got {split}")
    if row_order is not None:
      return _smile_row_order(x, y, np.asarray(row_order(len(y))), test_batch)
    idx = {part: _indices(base, *folder, f"index_smile_{part}_{split}.txt") for part in ("train", "valid", "test")}
  elif protocol == "standard":
    if name in UCI_SMILE_ONLY:
      raise ValueError(f"{name} has only the smile protocol splits (protocol='smile', split 1..3)")
    if not own or (base / "n_splits.txt").exists():
      n_splits = int(np.loadtxt(_file(base, *folder, "n_splits.txt")))
      if not 0 <= split < n_splits:
        raise ValueError(f"{name} has splits 0..{n_splits - 1}, got {split}")
    train = _indices(base, *folder, f"index_train_{split}.txt")
    perm = np.random.default_rng(split).permutation(train)
    n_valid = int(round(valid_fraction * len(train)))
    idx = {"train": np.sort(perm[:len(train) - n_valid]), "valid": np.sort(perm[len(train) - n_valid:]),
           "test": _indices(base, *folder, f"index_test_{split}.txt")}
  else:
    raise ValueError(f"unknown protocol {protocol!r}; expected 'standard' or 'smile'")
  return _scaled_splits(x, y, idx, idx["train"])


def _scaled_splits(x: np.ndarray, y: np.ndarray, idx: dict, fit: np.ndarray | slice) -> dict[str, Any]:
  """x_*, y_*, index_* per split of `idx`, y_mean and y_std, standardised with the statistics of rows `fit`."""
  _, mean, std = _standardise(x[fit])
  y_mean, y_std = float(y[fit].mean()), float(y[fit].std())
  out = {f"{v}_{k}": ((x[i] - mean) / std if v == "x" else (y[i] - y_mean) / y_std).astype(np.float32)
         for k, i in idx.items() for v in ("x", "y")}
  return out | dict(y_mean=y_mean, y_std=y_std) | {f"index_{k}": i for k, i in idx.items()}


def _smile_row_order(x: np.ndarray, y: np.ndarray, perm: np.ndarray, test_batch: int) -> dict[str, Any]:
  """70/10/20 (floor cuts) of a row permutation; whole-table standardisation (the SMILE authors' loader)."""
  n = len(y)
  if not np.array_equal(np.sort(perm), np.arange(n)):
    raise ValueError(f"row_order must return a permutation of the {n} rows")
  cut_t, cut_v = int(n * 0.7), int(n * 0.8)
  idx = {"train": perm[:cut_t], "valid": perm[cut_t:cut_v], "test": perm[cut_v:]}
  if test_batch > 0:
    b = min(int(test_batch), len(idx["test"]))
    idx["test"] = idx["test"][:len(idx["test"]) // b * b]
  return _scaled_splits(x, y, idx, slice(None))


# --------------------------------------------------------------------------- ordinal
_CHU = ("pyrimidines", "machinecpu", "bostonhousing", "abalone", "stocksdomain", "wisconsin")
_LARGE = ("bank32nh", "computer", "california")
ORDINAL_DATASETS = _CHU + _LARGE + ("winequality",)


def _stratified_split(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  train, test = [], []
  for c in np.unique(y):
    rows = rng.permutation(np.flatnonzero(y == c))
    n_test = int(round(test_fraction * len(rows)))
    test.append(rows[:n_test])
    train.append(rows[n_test:])
  return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


_CHU_SIZES = {"pyrimidines": 50, "machinecpu": 150, "bostonhousing": 300, "abalone": 1000,
              "stocksdomain": 600, "wisconsin": 130}
_RAW_FILES = {"pyrimidines": ("pyrim", ","), "machinecpu": ("machine", ","), "bostonhousing": ("housing", None),
              "stocksdomain": ("stock", None), "wisconsin": ("wpbc", ","), "winequality": ("winequality-red.csv", ";")}
ORDINAL_TARGETS = ("bins", "ranks")


def _raw_ordinal(base: pathlib.Path, name: str) -> tuple[np.ndarray, np.ndarray, bool]:
  """(features, target, native) from the raw files; native: the target is already an integer rank
  (abalone rings, wine quality), otherwise continuous and to be binned."""
  if name == "abalone":
    rows = [line.strip().split(",") for line in open(_file(base, "ordinal", "abalone", "abalone_uci.data"))
            if line.strip()]
    sex = np.array([[r[0] == s for s in "MFI"] for r in rows], np.float64)
    num = np.array([r[1:] for r in rows], np.float64)
    return np.concatenate([sex, num[:, :-1]], 1), num[:, -1], True
  if name in _LARGE:
    d = np.load(_file(base, "ordinal", name, "splits.npz"))
    return np.asarray(d["X"], np.float64), np.asarray(d["y_continuous"], np.float64), False
  fname, sep = _RAW_FILES[name]
  table = np.loadtxt(_file(base, "ordinal", name, fname), delimiter=sep)
  return table[:, :-1], table[:, -1], name == "winequality"


def _partition_rows(base: pathlib.Path, name: str, n: int, partition: int) -> tuple[np.ndarray, np.ndarray]:
  """Train/test rows of partition p: the shipped seeded splits for the large sets, otherwise
  a `default_rng(p)` permutation with Chu's training size (winequality: 75 %)."""
  if name in _LARGE:
    d = np.load(_file(base, "ordinal", name, "splits.npz"))
    return d["train_idx"][partition], d["test_idx"][partition]
  n_train = _CHU_SIZES.get(name, int(round(0.75 * n)))
  perm = np.random.default_rng(partition).permutation(n)
  return np.sort(perm[:n_train]), np.sort(perm[n_train:])


def load_ordinal(name: str, *, bins: int = 10, partition: int = 0, root: str | None = None,
                 target: str = "bins", ranks: int = 30) -> dict[str, Any]:
  """One partition of an ordinal benchmark; features standardised on the train rows.

  target="bins": Chu sets' official 20 partitions (equal-width ranks), bank32nh / computer / california
  (seeded, equal-frequency), winequality (native ranks); a `name` with '/' is your own `chu_{bins}bins.npz`
  folder. target="ranks": native integer targets (abalone, wine quality) or `ranks` equal-width bins of the
  raw target (`_partition_rows`). Returns x_train, x_test float32, y_train, y_test int32 0-based, num_classes."""
  check_name(name, ORDINAL_DATASETS, "ordinal dataset")
  check_name(target, ORDINAL_TARGETS, "ordinal target")
  if target == "ranks" and is_path(name):
    raise ValueError("target='ranks' needs a shipped dataset's raw target; your own folder supports target='bins'")
  base = _own(name) if is_path(name) else data_root(root)
  if not 0 <= partition < 20:
    raise ValueError(f"partition must be in 0..19, got {partition}")
  if target == "ranks" or name == "winequality":   # winequality's bins: its native ranks, stratified 75/25
    if ranks < 2:
      raise ValueError(f"ranks must be at least 2, got {ranks}")
    x, t, native = _raw_ordinal(base, name)
    if native:
      y = np.rint(t).astype(np.int64)
      y -= y.min()
    else:
      y = np.minimum(np.floor((t - t.min()) / (t.max() - t.min()) * ranks), ranks - 1).astype(np.int64)
    train, test = (_partition_rows(base, name, len(y), partition) if target == "ranks"
                   else _stratified_split(y, 0.25, partition))
    x_train, x_test, y_train, y_test = x[train], x[test], y[train], y[test]
    num_classes = int(y.max()) + 1
  else:
    if bins not in (5, 10):
      raise ValueError(f"bins must be 5 or 10, got {bins}")
    if name in _CHU or is_path(name):
      d = np.load(_file(base, *(() if is_path(name) else ("ordinal", name)), f"chu_{bins}bins.npz"))
      if partition >= len(d["X_train"]):
        raise ValueError(f"{name} has partitions 0..{len(d['X_train']) - 1}, got {partition}")
      x_train, x_test, y_train, y_test = (d[k][partition] for k in ("X_train", "X_test", "y_train", "y_test"))
    else:
      d = np.load(_file(base, "ordinal", name, "splits.npz"))
      y = d[f"y_{bins}bins_freq"].astype(int)
      train, test = d["train_idx"][partition], d["test_idx"][partition]
      x_train, x_test, y_train, y_test = d["X"][train], d["X"][test], y[train], y[test]
    num_classes = bins
  (x_train, x_test), _, _ = _standardise(np.asarray(x_train, np.float64), np.asarray(x_test, np.float64))
  return dict(x_train=x_train, y_train=y_train.astype(np.int32), x_test=x_test,
              y_test=y_test.astype(np.int32), num_classes=num_classes)


# --------------------------------------------------------------------------- graphs
GRAPH_DATASETS = ("cora", "citeseer", "cora_ml")


def _csr(d: Any, name: str):
  """CSR matrix `name` of a gnn-benchmark npz, stored as `<name>_matrix.data`, ... or `<name>_data`, ..."""
  import scipy.sparse as sp  # scipy only where graphs are read
  key = f"{name}_matrix." if f"{name}_matrix.data" in d.files else f"{name}_"
  return sp.csr_matrix((d[key + "data"], d[key + "indices"], d[key + "indptr"]), shape=tuple(d[key + "shape"]))


def _edges(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
  """Symmetric edge list [2, E] of the pairs (rows, cols) without self loops or duplicates (both directions)."""
  rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
  keep = rows != cols
  return np.unique(np.stack([rows[keep], cols[keep]], 1), axis=0).T.astype(np.int32)


def _row_normalise(features: np.ndarray) -> np.ndarray:
  sums = features.sum(1, keepdims=True)
  return (features / np.where(sums > 0, sums, 1.0)).astype(np.float32)


def _load_npz_graph(path: pathlib.Path, binarise: bool) -> dict[str, Any]:
  d = np.load(path, allow_pickle=True)
  adj = _csr(d, "adj").tocoo()
  features = _csr(d, "attr").toarray().astype(np.float64)
  if binarise:
    features = (features != 0).astype(np.float64)
  labels = np.asarray(d["labels"]).astype(np.int32)
  return dict(features=_row_normalise(features), labels=labels, edges=_edges(adj.row, adj.col),
              num_classes=int(labels.max()) + 1)


def _load_planetoid(root: pathlib.Path, name: str) -> dict[str, Any]:
  import scipy.sparse as sp
  with warnings.catch_warnings():   # Python-2 pickles name the old scipy.sparse.csr module path; harmless
    warnings.simplefilter("ignore", DeprecationWarning)
    parts = {part: pickle.loads(_file(root, "graphs", name, f"ind.{name}.{part}").read_bytes(), encoding="latin1")
             for part in ("x", "y", "tx", "ty", "allx", "ally", "graph")}
  test_idx = np.loadtxt(_file(root, "graphs", name, f"ind.{name}.test.index"), dtype=np.int64)
  tx, ty = parts["tx"], np.asarray(parts["ty"])
  lo, hi = test_idx.min(), test_idx.max()
  if hi - lo + 1 != tx.shape[0]:  # CiteSeer: isolated test ids have no rows; pad with zeros
    full_ty = np.zeros((hi - lo + 1, ty.shape[1]))
    full_ty[np.sort(test_idx) - lo, :] = ty
    full_tx = sp.lil_matrix((hi - lo + 1, tx.shape[1]))
    full_tx[np.sort(test_idx) - lo, :] = tx
    tx, ty = full_tx, full_ty
  features = sp.vstack([parts["allx"], tx]).tolil()
  onehot = np.vstack([np.asarray(parts["ally"]), ty])
  order = np.sort(test_idx)
  features[test_idx, :] = features[order, :]
  onehot[test_idx, :] = onehot[order, :]
  labels = np.where(onehot.sum(1) > 0, onehot.argmax(1), -1).astype(np.int32)
  pairs = np.array([(u, v) for u, vs in parts["graph"].items() for v in vs], np.int64).reshape(-1, 2)
  n_train = np.asarray(parts["y"]).shape[0]
  ids = np.arange(features.shape[0])
  return dict(features=_row_normalise(features.toarray().astype(np.float64)), labels=labels,
              edges=_edges(pairs[:, 0], pairs[:, 1]), num_classes=int(labels.max()) + 1, train_mask=ids < n_train,
              val_mask=(ids >= n_train) & (ids < n_train + 500), test_mask=np.isin(ids, test_idx) & (labels >= 0))


def load_graph(name: str | None = None, *, root: str | None = None, fmt: str = "npz",
               path: str | None = None) -> dict[str, Any]:
  """A node-classification graph: features [N, F] float32 (row-normalised as GPN does), labels [N] int32
  (-1 = unlabelled), edges [2, E] int32 (symmetric, no self loops), num_classes (planetoid adds the
  public split masks). `path` reads any gnn-benchmark style npz."""
  if path is not None:
    return _load_npz_graph(_own(path), binarise=False)
  check_name(name, GRAPH_DATASETS, "graph dataset")
  base = data_root(root)
  if fmt == "planetoid":
    if name == "cora_ml":
      raise ValueError("cora_ml exists only as npz (fmt='npz')")
    return _load_planetoid(base, name)
  if fmt != "npz":
    raise ValueError(f"unknown graph format {fmt!r}; expected 'npz' or 'planetoid'")
  return _load_npz_graph(_file(base, "graphs", name, f"{name}.npz"), binarise=name == "cora_ml")


# --------------------------------------------------------------------------- preferences
def _split_last_turn(dialogue: str) -> tuple[str, str]:
  context, _, reply = dialogue.rpartition("\n\nAssistant:")
  return context, reply.strip()


def load_hh_rlhf(*, root: str | None = None, limit: int | None = None,
                 path: str | None = None) -> list[dict[str, str]]:
  """HH-RLHF harmless-base test pairs: {"context", "chosen", "rejected"} (final turns split off).

  `path`: your own preferences JSONL (plain or .gz; data/README.md). Content warning: red-teaming
  dialogues; keep them out of logs and fixtures."""
  own = _own(path) if path is not None else None
  file = (_file(own.parent, own.name) if own else
          _file(data_root(root), "preferences", "hh_rlhf_harmless_base", "test.jsonl.gz"))
  pairs = []
  with (gzip.open if file.name.endswith(".gz") else open)(file, "rt", encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      if limit is not None and len(pairs) >= limit:
        break
      if not line.strip():
        continue
      try:
        rec = json.loads(line)
        if "context" in rec:
          context, chosen, rejected = str(rec["context"]), str(rec["chosen"]), str(rec["rejected"])
        else:
          context, chosen = _split_last_turn(rec["chosen"])
          _, rejected = _split_last_turn(rec["rejected"])
      except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{file}:{number}: not a preference pair ({type(e).__name__}: {e}); expected "
                         'a JSON object with "chosen" and "rejected" (and optionally "context")') from None
      pairs.append({"context": context, "chosen": chosen, "rejected": rejected})
  return pairs


# --------------------------------------------------------------------------- shipped / generated
def load_digits(*, seed: int = 0, test_fraction: float = 0.25) -> dict[str, np.ndarray]:
  """sklearn's 8x8 digits (shipped with sklearn): x [n, 8, 8] in [0, 1], stratified split."""
  from sklearn.datasets import load_digits as _sk_digits
  d = _sk_digits()
  x = (d.images / 16.0).astype(np.float32)
  y = d.target.astype(np.int32)
  train, test = _stratified_split(y, test_fraction, seed)
  return dict(x_train=x[train], y_train=y[train], x_test=x[test], y_test=y[test])


def load_mnist1d(*, seed: int = 0) -> dict[str, np.ndarray]:
  """MNIST-1D generated locally (never downloaded): 4000 train / 1000 test signals of length 40."""
  from mnist1d.data import get_dataset_args, make_dataset
  args = get_dataset_args()
  args.seed = seed
  d = make_dataset(args)
  return dict(x_train=np.asarray(d["x"], np.float32), y_train=np.asarray(d["y"], np.int32),
              x_test=np.asarray(d["x_test"], np.float32), y_test=np.asarray(d["y_test"], np.int32))
