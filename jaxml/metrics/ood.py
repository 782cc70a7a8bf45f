"""Detection metrics: AUROC, AUPR and FPR at a TPR (positive = label 1 = higher score)."""

import numpy as np
from scipy.stats import rankdata

__all__ = ["auroc", "aupr", "fpr_at_tpr"]


def _prep(scores, labels) -> tuple[np.ndarray, np.ndarray]:
  s = np.asarray(scores, np.float64).reshape(-1)
  y = np.asarray(labels).reshape(-1).astype(bool)
  if s.shape != y.shape:
    raise ValueError(f"scores {s.shape} and labels {y.shape} differ in shape")
  if y.all() or not y.any():
    raise ValueError("need both positives and negatives")
  return s, y


def auroc(scores, labels) -> float:
  """Area under the ROC curve via the Mann-Whitney U statistic (ties count one half)."""
  s, y = _prep(scores, labels)
  ranks = rankdata(s)
  n_pos, n_neg = y.sum(), (~y).sum()
  return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def aupr(scores, labels) -> float:
  """Average precision (area under precision-recall, step interpolation)."""
  s, y = _prep(scores, labels)
  order = np.argsort(-s, kind="stable")
  s, y = s[order], y[order]
  tp = np.cumsum(y)
  # Evaluate only at the last index of each group of tied scores.
  last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]
  precision = tp[last] / (last + 1)
  recall = tp[last] / y.sum()
  return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def fpr_at_tpr(scores, labels, tpr: float = 0.95) -> float:
  """False-positive rate at the largest (strictest) threshold whose true-positive rate reaches `tpr`
  (the first ROC point with TPR >= tpr; scores equal to the threshold count as positive)."""
  s, y = _prep(scores, labels)
  pos = np.sort(s[y])
  # Thresholding at pos[k] keeps at least n - k positives; the largest k with n - k >= tpr n.
  k = int(np.floor(np.round(pos.size * (1.0 - tpr), 9)))
  threshold = pos[min(max(k, 0), pos.size - 1)]
  return float(np.mean(s[~y] >= threshold))
