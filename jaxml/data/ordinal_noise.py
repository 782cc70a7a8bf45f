"""Seeded label-noise models for ordinal ranks (train labels only; numpy only).

Kinds (spec `sol.md` §6, K ranks 0..K−1, `rate` as a fraction):
  none:            ỹ = y.
  gaussian:        ỹ = clip(round(y + ε), 0, K−1), ε ~ N(0, s²), s = rate · (K−1), every sample.
  adjacent:        with prob. rate, y → y ± 1 (fair coin, reflected at the ends).
  symmetric:       with prob. rate, y → uniform rank in {0..K−1} (may equal y).
  skewed:          ỹ = clip(y + round(|ε|), 0, K−1), ε as in gaussian (one-sided upward).
  input_dependent: like gaussian with per-sample s_i ∝ |y_i − ŷ_i^ridge| (residual of a ridge
                   regression of y on x), rescaled to mean s = rate · (K−1).
Each returns (noisy labels int32, realised corruption rate = mean 1[ỹ ≠ y]).
"""

import numpy as np

__all__ = ["NOISE_KINDS", "add_label_noise"]

NOISE_KINDS = ("none", "gaussian", "adjacent", "symmetric", "skewed", "input_dependent")


def _ridge_residual(x: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> np.ndarray:
  x = np.asarray(x, np.float64).reshape(len(y), -1)
  xm, ym = x.mean(0), y.mean()
  xc = x - xm
  w = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ (y - ym))
  return np.abs(y - (xc @ w + ym))


def add_label_noise(y: np.ndarray, num_classes: int, kind: str, rate: float, *, seed: int,
                    x: np.ndarray | None = None) -> tuple[np.ndarray, float]:
  """Corrupts ranks `y` ([n] int, 0-based) with the named noise model and seed."""
  if kind not in NOISE_KINDS:
    raise ValueError(f"unknown noise kind {kind!r}; expected one of {NOISE_KINDS}")
  if rate < 0:
    raise ValueError(f"noise rate must be non-negative, got {rate}")
  y = np.asarray(y, np.int64)
  k = int(num_classes)
  rng = np.random.default_rng([seed, NOISE_KINDS.index(kind)])
  n = y.size
  s = rate * (k - 1)
  if kind == "none" or rate == 0:
    noisy = y.copy()
  elif kind == "gaussian":
    noisy = np.rint(y + rng.normal(0.0, s, n))
  elif kind == "skewed":
    noisy = y + np.rint(np.abs(rng.normal(0.0, s, n)))
  elif kind == "adjacent":
    hit = rng.random(n) < rate
    step = np.where(rng.random(n) < 0.5, -1, 1)
    moved = y + step
    moved = np.where(moved < 0, 1, np.where(moved > k - 1, k - 2, moved))   # reflect
    noisy = np.where(hit, moved, y)
  elif kind == "symmetric":
    hit = rng.random(n) < rate
    noisy = np.where(hit, rng.integers(0, k, n), y)
  else:  # input_dependent
    if x is None:
      raise ValueError("input_dependent noise needs the features x")
    diff = _ridge_residual(x, y.astype(np.float64))
    scale = diff / max(diff.mean(), 1e-12) * s
    noisy = np.rint(y + rng.normal(0.0, 1.0, n) * scale)
  noisy = np.clip(noisy, 0, k - 1).astype(np.int32)
  return noisy, float(np.mean(noisy != y))
