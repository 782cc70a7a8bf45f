"""Seeded contextual stochastic block model (CSBM) graphs, numpy only: x_i = μ_c + N(0, noise² I) with
‖μ_c‖ ≈ mean_scale; edge probability p_in within a class, else p_out. Same format as `offline.load_graph`."""

import numpy as np

__all__ = ["make_csbm"]


def make_csbm(*, num_nodes: int = 3000, num_classes: int = 5, num_features: int = 64,
              p_in: float = 0.01, p_out: float = 0.001, mean_scale: float = 2.0, noise: float = 1.0,
              seed: int = 0) -> dict:
  """Samples a CSBM graph: `features` float32 [N, F], `labels` int32 [N], `edges` int32 [2, E] (both
  directions, no self-loops), `num_classes` and `means` float32 [K, F]."""
  rng = np.random.default_rng([seed, 0xC5B])
  labels = rng.integers(0, num_classes, size=num_nodes).astype(np.int32)
  means = rng.normal(size=(num_classes, num_features)) * (mean_scale / np.sqrt(num_features))
  features = means[labels] + noise * rng.normal(size=(num_nodes, num_features))
  # Upper-triangle Bernoulli draws in row blocks keep memory at O(block * N).
  src, dst = [], []
  for start in range(0, num_nodes, 512):
    rows = np.arange(start, min(start + 512, num_nodes))
    prob = np.where(labels[rows, None] == labels[None, :], p_in, p_out)
    hit = rng.random(prob.shape) < prob
    hit &= np.arange(num_nodes)[None, :] > rows[:, None]
    i, j = np.nonzero(hit)
    src.append(rows[i])
    dst.append(j)
  src, dst = np.concatenate(src), np.concatenate(dst)
  edges = np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]).astype(np.int32)
  return {"features": features.astype(np.float32), "labels": labels, "edges": edges,
          "num_classes": num_classes, "means": means.astype(np.float32)}
