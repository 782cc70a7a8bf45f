"""CountDots: an offline image-like ordinal task (numpy only, seeded; spec `sol.md` §6): 28x28 grey
images of k ∈ {0..K−1} Gaussian blobs, 0–2 distractor bars and N(0, 0.1²) noise; the rank is k."""

import numpy as np

__all__ = ["make_countdots", "render_countdots"]


def _centres(rng: np.random.Generator, k: int, size: int, min_sep: float, margin: int = 3) -> np.ndarray:
  pts: list[np.ndarray] = []
  tries = 0
  while len(pts) < k:
    p = rng.uniform(margin, size - 1 - margin, 2)
    tries += 1
    if all(np.hypot(*(p - q)) >= min_sep for q in pts) or tries > 2000:
      pts.append(p)
  return np.asarray(pts).reshape(k, 2)


def render_countdots(rng: np.random.Generator, k: int, *, size: int = 28, min_sep: float = 4.0,
                     pixel_noise: float = 0.1) -> np.ndarray:
  """One [size, size] float32 image with k blobs."""
  yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
  img = np.zeros((size, size))
  for cy, cx in _centres(rng, k, size, min_sep):
    radius, amp = rng.uniform(1.5, 2.5), rng.uniform(0.6, 1.0)
    img = np.maximum(img, amp * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * (radius / 1.5) ** 2)))
  for _ in range(rng.integers(0, 3)):             # distractor bars: thin lines, lower intensity
    length, amp = rng.integers(6, 14), rng.uniform(0.3, 0.6)
    r0, c0 = rng.integers(0, size - length, 2)
    bar = np.s_[r0, c0:c0 + length] if rng.random() < 0.5 else np.s_[r0:r0 + length, c0]
    img[bar] = np.maximum(img[bar], amp)
  return np.clip(img + rng.normal(0.0, pixel_noise, img.shape), 0.0, 1.0).astype(np.float32)


def make_countdots(*, num_train: int = 6000, num_test: int = 2000, num_classes: int = 10,
                   seed: int = 0, size: int = 28) -> dict:
  """Balanced ranks (uniform k), fixed seed. Returns x_train [n, size, size] float32 in [0, 1],
  y_train int32, x_test, y_test, num_classes."""
  rng = np.random.default_rng([seed, 2026])
  out = {}
  for split, n in (("train", num_train), ("test", num_test)):
    y = rng.integers(0, num_classes, n).astype(np.int32)
    images = [render_countdots(rng, int(k), size=size) for k in y]
    out[f"x_{split}"] = np.array(images, np.float32).reshape(n, size, size)
    out[f"y_{split}"] = y
  out["num_classes"] = num_classes
  return out
