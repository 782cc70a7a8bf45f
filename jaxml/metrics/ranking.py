"""Ordinal / rank-estimation metrics (numpy), paired run values and a paired Wilcoxon test (scipy)."""

import numpy as np

__all__ = ["mae", "zero_one", "cumulative_score", "flag_precision_recall", "paired_values", "wilcoxon_paired"]


def mae(pred, target) -> float:
  """Mean absolute error over ranks: mean |ŷ − y|."""
  return float(np.mean(np.abs(np.asarray(pred, np.float64) - np.asarray(target, np.float64))))


def zero_one(pred, target) -> float:
  """Mean zero-one error: mean 1[ŷ ≠ y]."""
  return float(np.mean(np.asarray(pred) != np.asarray(target)))


def cumulative_score(pred, target, theta: float = 1.0) -> float:
  """CS(θ): fraction (in [0, 1]) of predictions with |ŷ − y| ≤ θ."""
  err = np.abs(np.asarray(pred, np.float64) - np.asarray(target, np.float64))
  return float(np.mean(err <= theta))


def flag_precision_recall(flagged, corrupted) -> tuple[float, float]:
  """Precision and recall of flagged-noisy labels against the truly corrupted ones (NaN when nothing was flagged,
  resp. corrupted)."""
  f = np.asarray(flagged, bool)
  c = np.asarray(corrupted, bool)
  tp = float(np.sum(f & c))
  precision = tp / f.sum() if f.sum() else float("nan")
  recall = tp / c.sum() if c.sum() else float("nan")
  return float(precision), float(recall)


def paired_values(rows, a: str, b: str, metric: str, *, key: tuple[str, ...] = ("dataset", "split", "seed")
                  ) -> tuple[np.ndarray, np.ndarray]:
  """Values of `metric` for methods a and b (results.json rows) on the runs both have, matched on `key`, in
  key order (a later duplicate row wins). A missing value is NaN: each caller drops what its test needs."""
  def by_key(method):
    return {tuple(r[k] for k in key): np.nan if (v := r["metrics"].get(metric)) is None else float(v)
            for r in rows if r["method"] == method}
  va, vb = by_key(a), by_key(b)
  keys = sorted(va.keys() & vb.keys())
  return np.array([va[k] for k in keys], np.float64), np.array([vb[k] for k in keys], np.float64)


def wilcoxon_paired(a, b, *, alternative: str = "two-sided") -> float:
  """p-value of the Wilcoxon signed-rank test on paired samples a, b (scipy); 1.0 when every difference is zero
  (scipy would raise), NaN for < 2 pairs."""
  from scipy import stats
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.size < 2:
    return float("nan")
  if np.allclose(a, b):
    return 1.0
  return float(stats.wilcoxon(a, b, alternative=alternative).pvalue)
