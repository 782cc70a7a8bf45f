"""Seeded label-noise models for ordinal ranks (train labels only; numpy only).

Kinds (ranks 0..K−1, s = rate · scale, scale = K−1 unless given): none; gaussian ỹ = round(y + ε),
ε ~ N(0, s²); adjacent (prob. rate, y ± 1, reflected); symmetric (prob. rate, uniform rank); skewed
ỹ = y + round(|ε|); input_dependent (gaussian with s_i ∝ the ridge residual |y_i − ŷ_i|, mean s).
A callable `noise(y, rate, rng, *, scale, x)` is a user-defined kind. Clipping: "both" [0, K−1], "low"
only at 0 (the authors' open range), "none". Returns (noisy labels int32, realised corruption rate)."""

from typing import Callable, Union

import numpy as np

__all__ = ["NOISE_KINDS", "CLIP_MODES", "NoiseModel", "add_label_noise", "noisy_rank_count"]

NOISE_KINDS = ("none", "gaussian", "adjacent", "symmetric", "skewed", "input_dependent")
CLIP_MODES = ("both", "low", "none")
NoiseModel = Callable[..., np.ndarray]


def _ridge_residual(x: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> np.ndarray:
  x = np.asarray(x, np.float64).reshape(len(y), -1)
  xc, ym = x - x.mean(0), y.mean()
  w = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ (y - ym))
  return np.abs(y - (xc @ w + ym))


def _builtin(kind: str, y: np.ndarray, rate: float, rng: np.random.Generator, *, scale: float, k: int,
             x: np.ndarray | None) -> np.ndarray:
  n, s = y.size, rate * scale
  if kind == "none" or rate == 0:
    return y.copy()
  if kind == "gaussian":
    return y + rng.normal(0.0, s, n)
  if kind == "skewed":
    return y + np.rint(np.abs(rng.normal(0.0, s, n)))
  if kind == "adjacent":
    hit = rng.random(n) < rate
    moved = y + np.where(rng.random(n) < 0.5, -1, 1)
    moved = np.where(moved < 0, 1, np.where(moved > k - 1, k - 2, moved))   # reflect
    return np.where(hit, moved, y)
  if kind == "symmetric":
    return np.where(rng.random(n) < rate, rng.integers(0, k, n), y)
  if x is None:
    raise ValueError("input_dependent noise needs the features x")
  diff = _ridge_residual(x, y.astype(np.float64))
  return y + rng.normal(0.0, 1.0, n) * diff / max(diff.mean(), 1e-12) * s


def add_label_noise(y: np.ndarray, num_classes: int, kind: Union[str, NoiseModel], rate: float, *, seed: int,
                    x: np.ndarray | None = None, scale: float | None = None,
                    clip: str = "both") -> tuple[np.ndarray, float]:
  """Corrupts ranks `y` ([n] int, 0-based) with a named (NOISE_KINDS) or callable noise model and a seed;
  `rate` is a fraction of `scale` (default K−1); `clip` is one of CLIP_MODES."""
  if rate < 0:
    raise ValueError(f"noise rate must be non-negative, got {rate}")
  if clip not in CLIP_MODES:
    raise ValueError(f"unknown clip mode {clip!r}; expected one of {CLIP_MODES}")
  y = np.asarray(y, np.int64)
  k = int(num_classes)
  scale = float(k - 1 if scale is None else scale)
  if callable(kind):
    rng = np.random.default_rng([seed, len(NOISE_KINDS)])
    noisy = np.asarray(kind(y.copy(), rate, rng, scale=scale, x=x), np.float64)
    if noisy.shape != y.shape:
      raise ValueError(f"noise model returned shape {noisy.shape}, expected {y.shape}")
  elif kind in NOISE_KINDS:
    rng = np.random.default_rng([seed, NOISE_KINDS.index(kind)])
    noisy = _builtin(kind, y, rate, rng, scale=scale, k=k, x=x)
  else:
    raise ValueError(f"unknown noise kind {kind!r}; expected one of {NOISE_KINDS} or a callable")
  noisy = np.rint(noisy)
  if clip == "both":
    noisy = np.clip(noisy, 0, k - 1)
  elif clip == "low":
    noisy = np.maximum(noisy, 0)
  noisy = noisy.astype(np.int32)
  return noisy, float(np.mean(noisy != y))


def noisy_rank_count(*label_sets: np.ndarray) -> int:
  """The rank count that holds every given label set (max label + 1): the rank set follows the
  noisy labels, so a noise setting can need more ranks than the clean data has."""
  return int(max(int(np.max(np.asarray(s))) for s in label_sets)) + 1
