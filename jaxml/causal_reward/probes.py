"""Post-hoc linear probes on frozen features (numpy, closed-form ridge).

The adversary's own loss is not evidence that information was removed; fresh probes are.
MLP preference probes are trained through `core.fit` by the experiment (a `RewardMLP` on the
frozen factors).
"""

import numpy as np

__all__ = ["ridge_fit", "ridge_r2", "ridge_accuracy", "spearman"]


def ridge_fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> tuple[np.ndarray, float]:
  """Weights and intercept of min ||y - x w - b||^2 + l2 n ||w||^2 (x standardised inside)."""
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.float64)
  mu, sd = x.mean(0), x.std(0) + 1e-8
  xs = (x - mu) / sd
  w = np.linalg.solve(xs.T @ xs + l2 * len(x) * np.eye(x.shape[1]), xs.T @ (y - y.mean()))
  w = w / sd
  return w, float(y.mean() - mu @ w)


def ridge_r2(x_tr, y_tr, x_te, y_te, l2: float = 1e-3) -> float:
  """Held-out R^2 of a ridge probe."""
  w, b = ridge_fit(x_tr, y_tr, l2)
  pred = np.asarray(x_te, np.float64) @ w + b
  y_te = np.asarray(y_te, np.float64)
  return float(1.0 - np.sum((y_te - pred) ** 2) / np.sum((y_te - y_te.mean()) ** 2))


def ridge_accuracy(x_tr, y_tr, x_te, y_te, l2: float = 1e-3) -> float:
  """Held-out accuracy of a ridge classifier for a 0/1 target (threshold 1/2)."""
  w, b = ridge_fit(x_tr, y_tr, l2)
  pred = (np.asarray(x_te, np.float64) @ w + b) > 0.5
  return float(np.mean(pred == (np.asarray(y_te) > 0.5)))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
  """Spearman rank correlation with average ranks for ties (the binary cue is all ties)."""
  def rank(v):
    v = np.asarray(v, np.float64)
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v))
    _, inv, counts = np.unique(v, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=r)
    return sums[inv] / counts[inv]
  rx, ry = rank(x), rank(y)
  return float(np.corrcoef(rx, ry)[0, 1])
