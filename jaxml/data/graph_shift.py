"""Distribution-shift settings for node classification (GPN-style), numpy only.

`gpn_split` (5% / 15% / 80% per class), `leave_out_classes` (poisoning: the last classes unlabelled, their
test nodes OOD), `perturb_features` / `feature_shift` (evasion: rows replaced by `normal` or `bernoulli`
noise), `scale_shift`, `mix_shift`, `zero_shift`, `rewire_shift` (named in `SHIFT_BUILDERS`), and
`apply_shift`: a shift is any `(features, graph, rng) -> (features', graph', ood_mask)`."""

from typing import Any, Callable

import numpy as np

__all__ = ["gpn_split", "leave_out_classes", "select_perturbed", "perturb_features", "isolated_nodes",
           "SHIFT_KINDS", "ShiftFn", "feature_shift", "apply_shift", "scale_shift", "mix_shift", "zero_shift",
           "rewire_shift", "SHIFT_BUILDERS"]

ShiftFn = Callable[[np.ndarray, dict, np.random.Generator], tuple[np.ndarray, dict, np.ndarray]]

SHIFT_KINDS = ("normal", "bernoulli")


def gpn_split(labels: np.ndarray, seed: int, *, train: float = 0.05, val: float = 0.15) -> dict:
  """Per-class random split: max(1, round(train·n_c)) train and max(1, round(val·n_c)) val nodes of each class c,
  the rest test; nodes with label -1 belong to no split."""
  rng = np.random.default_rng([seed, 0x5B1])
  masks = {k: np.zeros(labels.shape[0], bool) for k in ("train_mask", "val_mask", "test_mask")}
  for c in np.unique(labels[labels >= 0]):
    idx = rng.permutation(np.flatnonzero(labels == c))
    n_tr = max(1, int(round(train * idx.size)))
    n_va = max(1, int(round(val * idx.size)))
    masks["train_mask"][idx[:n_tr]] = True
    masks["val_mask"][idx[n_tr:n_tr + n_va]] = True
    masks["test_mask"][idx[n_tr + n_va:]] = True
  return masks


def leave_out_classes(labels: np.ndarray, num_classes: int, masks: dict, *, fraction: float = 0.45) -> dict:
  """Removes the last ⌊fraction · K⌋ classes from training and validation labels. Returns `labels` (ID
  classes 0..K_id-1, others -1), `num_classes` = K_id, `ood_mask`, ID-only `train_mask`, `val_mask`,
  `test_mask` and `ood_test_mask`."""
  n_out = int(np.floor(fraction * num_classes))
  if n_out < 1 or n_out >= num_classes:
    raise ValueError(f"leaving out {n_out} of {num_classes} classes is not a valid split")
  k_id = num_classes - n_out
  ood = labels >= k_id
  return {"labels": np.where(ood, -1, labels).astype(np.int32), "num_classes": k_id, "ood_mask": ood,
          "train_mask": masks["train_mask"] & ~ood, "val_mask": masks["val_mask"] & ~ood,
          "test_mask": masks["test_mask"] & ~ood, "ood_test_mask": masks["test_mask"] & ood}


def select_perturbed(masks: dict, seed: int | np.random.Generator, *, budget: float = 0.1) -> np.ndarray:
  """Boolean [N]: a random `budget` fraction of the non-training nodes (val, test and others)."""
  rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng([seed, 0x9E7])
  candidates = np.flatnonzero(~masks["train_mask"])
  chosen = rng.choice(candidates, size=int(round(budget * candidates.size)), replace=False)
  return np.isin(np.arange(masks["train_mask"].shape[0]), chosen)


def perturb_features(features: np.ndarray, nodes: np.ndarray, kind: str, seed: int | np.random.Generator, *,
                     scale: float = 1.0, p: float = 0.5) -> np.ndarray:
  """A copy of `features` with the rows in `nodes` (bool mask or indices) replaced: normal, N(0, scale²) entries;
  bernoulli, Bernoulli(p) entries divided by their row sum (as row-normalised real features; zero rows stay)."""
  if kind not in SHIFT_KINDS:
    raise ValueError(f"unknown perturbation {kind!r}; expected one of {SHIFT_KINDS}")
  rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng([seed, 0xFEA])
  idx = np.flatnonzero(nodes) if nodes.dtype == bool else np.asarray(nodes)
  out = np.array(features, dtype=np.float32, copy=True)
  shape = (idx.size, features.shape[1])
  if kind == "normal":
    out[idx] = (scale * rng.normal(size=shape)).astype(np.float32)
  else:
    rows = (rng.random(shape) < p).astype(np.float64)
    out[idx] = (rows / np.maximum(rows.sum(1, keepdims=True), 1.0)).astype(np.float32)
  return out


def isolated_nodes(test_mask: np.ndarray, count: int, seed: int) -> np.ndarray:
  """Indices of `count` test nodes (sorted) to perturb one at a time."""
  rng = np.random.default_rng([seed, 0x150])
  cand = np.flatnonzero(test_mask)
  return np.sort(rng.choice(cand, size=min(count, cand.size), replace=False))


def _on_chosen(budget: float, edit: Callable) -> ShiftFn:
  """A shift that edits a random `budget` fraction of the non-training nodes (`select_perturbed`):
  edit(features, graph, mask, rng) -> (features', graph')."""
  def shift(features: np.ndarray, graph: dict, rng: np.random.Generator):
    mask = select_perturbed(graph, rng, budget=budget)
    return (*edit(features, graph, mask, rng), mask)

  return shift


def feature_shift(kind: str, *, budget: float = 0.1, scale: float = 1.0, p: float = 0.5) -> ShiftFn:
  """The built-in evasion shift: a `budget` fraction of the non-training nodes get `kind` rows."""
  if kind not in SHIFT_KINDS:
    raise ValueError(f"unknown perturbation {kind!r}; expected one of {SHIFT_KINDS}")
  return _on_chosen(budget, lambda x, g, mask, rng: (perturb_features(x, mask, kind, rng, scale=scale, p=p), g))


def scale_shift(*, factor: float, budget: float = 0.1) -> ShiftFn:
  """A `budget` fraction of the non-training nodes get their feature rows multiplied by `factor`."""
  return _on_chosen(budget, lambda x, g, mask, rng: (np.where(mask[:, None], x * factor, x), g))


def mix_shift(*, budget: float = 0.1) -> ShiftFn:
  """Chosen rows become λ x_j + (1 − λ) x_k, λ ~ U(0, 1), j, k random nodes (GNNSafe's feature interpolation)."""
  def mix(features, graph, mask, rng):
    idx = np.flatnonzero(mask)
    j, k = rng.integers(0, features.shape[0], size=(2, idx.size))
    lam = rng.random((idx.size, 1)).astype(features.dtype)
    features[idx] = lam * features[j] + (1 - lam) * features[k]
    return features, graph

  return _on_chosen(budget, mix)


def zero_shift(*, budget: float = 0.1) -> ShiftFn:
  """Chosen rows are set to zero (a node whose features went missing)."""
  return _on_chosen(budget, lambda x, g, mask, rng: (np.where(mask[:, None], 0.0, x), g))


def rewire_shift(*, budget: float = 0.1) -> ShiftFn:
  """Every edge of the chosen nodes is redirected to a uniformly random node (kept symmetric)."""
  def rewire(features, graph, mask, rng):
    src, dst = graph["edges"]
    keep = ~(mask[src] | mask[dst])
    hit = mask[src] & (src < dst) | mask[src] & ~mask[dst]       # each undirected edge of a chosen node once
    s2, d2 = src[hit], rng.integers(0, features.shape[0], size=int(hit.sum()))
    edges = np.concatenate([np.stack([src[keep], dst[keep]]), np.stack([s2, d2]), np.stack([d2, s2])], 1)
    return features, dict(graph, edges=edges[:, edges[0] != edges[1]])

  return _on_chosen(budget, rewire)


# name -> builder(budget=..., **kwargs) -> ShiftFn
SHIFT_BUILDERS = {"scale": scale_shift, "mix": mix_shift, "zero": zero_shift, "rewire": rewire_shift}


def apply_shift(shift: ShiftFn, features: np.ndarray, graph: dict[str, Any], seed: int) -> dict[str, Any]:
  """Runs `shift` on copies (the caller's arrays stay) with a generator seeded by `seed`; checks and returns
  {features, graph, mask}."""
  rng = np.random.default_rng([seed, 0x5F1])
  graph_in = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in graph.items()}
  x, g, mask = shift(np.array(features, copy=True), graph_in, rng)
  n, mask = features.shape[0], np.asarray(mask)
  if mask.dtype != bool or mask.shape != (n,):
    raise ValueError(f"a shift must return a bool mask of shape ({n},), got {mask.dtype} {mask.shape}")
  if np.asarray(x).shape[0] != n:
    raise ValueError(f"a shift must keep the {n} nodes, got features of shape {np.asarray(x).shape}")
  edges = np.asarray(g["edges"])
  if edges.ndim != 2 or edges.shape[0] != 2 or (edges.size and (edges.min() < 0 or edges.max() >= n)):
    raise ValueError(f"a shift must return edges [2, E] with node ids in [0, {n}), got shape {edges.shape}")
  return {"features": np.asarray(x, np.float32), "graph": dict(g, edges=edges.astype(np.int32)), "mask": mask}
