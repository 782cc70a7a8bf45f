"""Small seeded generators with known ground truth, shared by tests and smoke runs."""

import numpy as np

__all__ = ["gaussian_blobs", "linear_regression"]


def gaussian_blobs(n: int, *, num_classes: int = 3, dim: int = 2, scale: float = 0.5,
                   seed: int = 0) -> dict[str, np.ndarray]:
  """Isotropic Gaussian classes around seeded centres: x [n, dim] float32, y [n] int32."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(num_classes, dim)) * 3.0
  y = rng.integers(0, num_classes, size=n)
  x = centres[y] + scale * rng.normal(size=(n, dim))
  return dict(x=x.astype(np.float32), y=y.astype(np.int32), centres=centres.astype(np.float32))


def linear_regression(n: int, *, dim: int = 3, noise: float = 0.1, seed: int = 0) -> dict[str, np.ndarray]:
  """y = x w + b + noise; returns x, y and the true (w, b) for closed-form checks."""
  rng = np.random.default_rng(seed)
  w, b = rng.normal(size=(dim,)), rng.normal()
  x = rng.normal(size=(n, dim))
  y = x @ w + b + noise * rng.normal(size=n)
  return dict(x=x.astype(np.float32), y=y.astype(np.float32), w=w.astype(np.float32), b=np.float32(b))
