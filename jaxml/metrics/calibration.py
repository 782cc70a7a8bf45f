"""Calibration of classifiers and predictive intervals."""

import numpy as np

__all__ = ["ece", "brier", "interval_coverage"]


def ece(probs, labels, bins: int = 15) -> float:
  """Expected calibration error of the top-label confidence, equal-width bins; probs [n, k] rows summing to one,
  labels [n] int."""
  p = np.asarray(probs, np.float64)
  y = np.asarray(labels)
  conf, pred = p.max(1), p.argmax(1)
  correct = (pred == y).astype(np.float64)
  edges = np.linspace(0.0, 1.0, bins + 1)
  which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
  total = 0.0
  for b in range(bins):
    m = which == b
    if m.any():
      total += m.mean() * abs(correct[m].mean() - conf[m].mean())
  return float(total)


def brier(probs, labels) -> float:
  """Mean squared error between probabilities and the one-hot label (sum over classes)."""
  p = np.asarray(probs, np.float64)
  onehot = np.eye(p.shape[1])[np.asarray(labels)]
  return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def interval_coverage(y, lower, upper) -> float:
  """Fraction of targets inside [lower, upper]."""
  y = np.asarray(y)
  return float(np.mean((y >= np.asarray(lower)) & (y <= np.asarray(upper))))
