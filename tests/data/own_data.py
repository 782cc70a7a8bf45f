"""Builders of small datasets in the documented formats (data/README.md), for the own-data tests."""

import json
import pathlib

import numpy as np

__all__ = ["make_ordinal_folder", "make_uci_folder", "make_graph_npz", "make_preferences_jsonl"]


def make_ordinal_folder(folder: pathlib.Path, *, seed: int = 0, partitions: int = 2, n_train: int = 48,
                        n_test: int = 24, d: int = 4) -> pathlib.Path:
  """chu_5bins.npz and chu_10bins.npz: ranks are equal-width bins of a noisy linear score."""
  rng = np.random.default_rng(seed)
  folder.mkdir(parents=True, exist_ok=True)
  n = n_train + n_test
  x = rng.normal(size=(n, d)).astype(np.float32)
  score = x @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
  for bins in (5, 10):
    edges = np.linspace(score.min(), score.max(), bins + 1)[1:-1]
    y = np.digitize(score, edges).astype(np.int8)
    perms = [rng.permutation(n) for _ in range(partitions)]
    np.savez(folder / f"chu_{bins}bins.npz",
             X_train=np.stack([x[p[:n_train]] for p in perms]), y_train=np.stack([y[p[:n_train]] for p in perms]),
             X_test=np.stack([x[p[n_train:]] for p in perms]), y_test=np.stack([y[p[n_train:]] for p in perms]))
  return folder


def make_uci_folder(folder: pathlib.Path, *, seed: int = 0, n: int = 80, d: int = 3, splits: int = 2) -> pathlib.Path:
  """data.txt (inputs then target), index_features/target, standard and smile split files."""
  rng = np.random.default_rng(seed)
  folder.mkdir(parents=True, exist_ok=True)
  x = rng.normal(size=(n, d))
  y = np.sin(x[:, 0]) + 0.5 * x[:, 1] + 0.1 * rng.normal(size=n)
  np.savetxt(folder / "data.txt", np.column_stack([x, y]))
  np.savetxt(folder / "index_features.txt", np.arange(d), fmt="%d")
  np.savetxt(folder / "index_target.txt", [d], fmt="%d")
  np.savetxt(folder / "n_splits.txt", [splits], fmt="%d")
  for s in range(splits):
    perm = rng.permutation(n)
    cut = int(0.8 * n)
    np.savetxt(folder / f"index_train_{s}.txt", np.sort(perm[:cut]), fmt="%d")
    np.savetxt(folder / f"index_test_{s}.txt", np.sort(perm[cut:]), fmt="%d")
    a, b = int(0.7 * n), int(0.8 * n)
    for part, rows in (("train", perm[:a]), ("valid", perm[a:b]), ("test", perm[b:])):
      np.savetxt(folder / f"index_smile_{part}_{s + 1}.txt", np.sort(rows), fmt="%d")
  return folder


def make_graph_npz(path: pathlib.Path, *, seed: int = 0, n: int = 160, classes: int = 4, f: int = 24) -> pathlib.Path:
  """A gnn-benchmark style npz: CSR adjacency (adj_*) and features (attr_*), labels; homophilous."""
  import scipy.sparse as sp
  rng = np.random.default_rng(seed)
  labels = np.repeat(np.arange(classes), n // classes)
  same = labels[:, None] == labels[None, :]
  adj = np.triu(rng.random((len(labels), len(labels))) < np.where(same, 0.12, 0.01), 1)
  adj = sp.csr_matrix((adj | adj.T).astype(np.float32))
  means = rng.random((classes, f)) < 0.3
  attr = sp.csr_matrix((rng.random((len(labels), f)) < np.where(means[labels], 0.6, 0.05)).astype(np.float32))
  path.parent.mkdir(parents=True, exist_ok=True)
  np.savez(path, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=adj.shape,
           attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr, attr_shape=attr.shape,
           labels=labels)
  return path


def make_preferences_jsonl(path: pathlib.Path, *, n: int = 40, dialogue: bool = False) -> pathlib.Path:
  """Synthetic preference pairs; `dialogue`: HH-style full dialogues instead of context/chosen/rejected."""
  topics = ["tea", "bicycles", "rain", "maps", "clocks", "bread", "stars", "rivers", "paper", "glass"]
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w") as f:
    for i in range(n):
      topic = topics[i % len(topics)]
      context = f"\n\nHuman: Tell me something about {topic}, please (question {i})."
      chosen = f"Here is a short and accurate note about {topic}."
      rejected = f"I do not know much about {topic}."
      if dialogue:
        rec = {"chosen": f"{context}\n\nAssistant: {chosen}", "rejected": f"{context}\n\nAssistant: {rejected}"}
      else:
        rec = {"context": context, "chosen": chosen, "rejected": rejected}
      f.write(json.dumps(rec) + "\n")
  return path
