"""Seeded numpy generators with known structure for generative-model experiments (no jax): 2-D toys (checkerboard,
8 Gaussians, two moons), GP function samples on a grid (exact covariance) and point clouds of parametric surfaces."""

from typing import Callable

import numpy as np

__all__ = ["TOY2D", "Target", "checkerboard", "eight_gaussians", "eight_gaussian_centers", "moons", "toy2d",
           "sample_target", "toy_domain", "standardize", "gp_functions", "SHAPES", "point_clouds", "random_rotations"]

TOY2D = ("checkerboard", "8gaussians", "moons")


def checkerboard(n: int, rng: np.random.Generator) -> np.ndarray:
  """Uniform on the 8 'black' unit cells of a 4x4 board on [-2, 2]^2: [n, 2] float32."""
  cells = np.array([(i, j) for i in range(4) for j in range(4) if (i + j) % 2 == 0])
  pick = cells[rng.integers(0, len(cells), n)]
  return (pick - 2 + rng.uniform(size=(n, 2))).astype(np.float32)


def eight_gaussian_centers(radius: float = 2.0) -> np.ndarray:
  ang = np.arange(8) * np.pi / 4
  return radius * np.stack([np.cos(ang), np.sin(ang)], axis=-1)


def eight_gaussians(n: int, rng: np.random.Generator, *, radius: float = 2.0, std: float = 0.1) -> np.ndarray:
  """Equal mixture of 8 isotropic Gaussians on a circle: [n, 2] float32."""
  return (eight_gaussian_centers(radius)[rng.integers(0, 8, n)] + std * rng.normal(size=(n, 2))).astype(np.float32)


def moons(n: int, rng: np.random.Generator, *, noise: float = 0.05) -> np.ndarray:
  """Two interleaved half circles (scikit-learn's make_moons) with Gaussian noise: [n, 2] float32."""
  from sklearn.datasets import make_moons
  x, _ = make_moons(n, noise=noise, random_state=int(rng.integers(0, 2 ** 31 - 1)))
  return x.astype(np.float32)


def toy2d(name: str, n: int, seed: int) -> np.ndarray:
  if name not in TOY2D:
    raise ValueError(f"unknown 2-D toy {name!r}; expected one of {TOY2D}")
  return {"checkerboard": checkerboard, "8gaussians": eight_gaussians, "moons": moons}[name](
      n, np.random.default_rng(seed))


# A toy target: a built-in name (TOY2D) or any seeded sampler fn(n, rng) -> [n, d] (or [n] for 1-D).
Target = str | Callable[[int, np.random.Generator], np.ndarray]


def sample_target(target: Target, n: int, seed: int) -> np.ndarray:
  """n draws [n, d] float32 from a built-in toy or a user-defined sampler (1-D results get d = 1)."""
  if isinstance(target, str):
    return toy2d(target, n, seed)
  x = np.asarray(target(n, np.random.default_rng(seed)), np.float32)
  x = x[:, None] if x.ndim == 1 else x
  if x.ndim != 2 or x.shape[0] != n:
    raise ValueError(f"a toy target must return [n, d] or [n] samples with n = {n}, got shape {x.shape}")
  return x


def toy_domain(target: Target, *, num_train: int, num_eval: int, seeds: tuple[int, int, int] = (100, 101, 102)
               ) -> dict:
  """Train, held-out eval and a disjoint real 'floor' set (eval-sized), all standardised by the
  training set's mean and std; the 8-Gaussians toy also gets its (standardised) mode centres and std."""
  sizes = (num_train, num_eval, num_eval)
  tr, ev, fl, mean, std = standardize(*(sample_target(target, n, seed) for n, seed in zip(sizes, seeds)))
  out = {"train": tr, "eval": ev, "floor": fl, "mean": mean, "std": std}
  if isinstance(target, str) and target == "8gaussians":
    out["centers"] = (eight_gaussian_centers() - mean) / std
    out["mode_std"] = float(0.1 / np.mean(std))
  return out


def standardize(train: np.ndarray, *others: np.ndarray) -> tuple[np.ndarray, ...]:
  """Scales every array by the training set's per-feature mean and std (returns mean, std last)."""
  axes = tuple(range(train.ndim - 1))
  mean, std = train.mean(axis=axes), train.std(axis=axes) + 1e-8
  return tuple(((a - mean) / std).astype(np.float32) for a in (train,) + others) + (mean, std)


def gp_functions(n: int, rng: np.random.Generator, *, num_points: int = 64, lengthscale: float = 0.1,
                 variance: float = 1.0, jitter: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
  """Samples f [n, num_points] float32 of a zero-mean RBF-kernel GP on a uniform grid of [0, 1], and the exact
  covariance [num_points, num_points] (with jitter)."""
  grid = np.linspace(0.0, 1.0, num_points)
  cov = variance * np.exp(-0.5 * ((grid[:, None] - grid[None, :]) / lengthscale) ** 2) + jitter * np.eye(num_points)
  return (rng.normal(size=(n, num_points)) @ np.linalg.cholesky(cov).T).astype(np.float32), cov


SHAPES = ("sphere", "torus", "cube", "cylinder", "cone")


def random_rotations(n: int, rng: np.random.Generator) -> np.ndarray:
  """Haar-random rotations [n, 3, 3] (QR of Gaussian matrices, signs fixed, det +1)."""
  q, r = np.linalg.qr(rng.normal(size=(n, 3, 3)))
  q = q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
  q[:, :, 0] *= np.linalg.det(q)[:, None]
  return q


def _surface(shape: str, m: int, rng: np.random.Generator) -> np.ndarray:
  if shape == "sphere":
    p = rng.normal(size=(m, 3))
    return p / np.linalg.norm(p, axis=-1, keepdims=True)
  if shape == "torus":  # R = 1, r = 0.35; area-uniform by rejection on the tube angle
    big, small = 1.0, 0.35
    u, v = rng.uniform(0, 2 * np.pi, (2, 4 * m))
    keep = rng.uniform(size=4 * m) < (big + small * np.cos(v)) / (big + small)
    u, v = u[keep][:m], v[keep][:m]
    return np.stack([(big + small * np.cos(v)) * np.cos(u), (big + small * np.cos(v)) * np.sin(u),
                     small * np.sin(v)], axis=-1)
  if shape == "cube":
    p = rng.uniform(-1, 1, size=(m, 3))
    face = rng.integers(0, 3, m)
    p[np.arange(m), face] = rng.choice([-1.0, 1.0], m)
    return p * 0.8
  if shape == "cylinder":  # side surface, radius 0.7, height 2
    u = rng.uniform(0, 2 * np.pi, m)
    return np.stack([0.7 * np.cos(u), 0.7 * np.sin(u), rng.uniform(-1, 1, m)], axis=-1)
  if shape == "cone":  # lateral surface, apex at z = 1, base radius 1 at z = -1 (area-uniform)
    h = 1 - np.sqrt(rng.uniform(size=m))
    u = rng.uniform(0, 2 * np.pi, m)
    return np.stack([(1 - h) * np.cos(u), (1 - h) * np.sin(u), 2 * h - 1], axis=-1)
  raise ValueError(f"unknown shape {shape!r}; expected one of {SHAPES}")


def point_clouds(n: int, rng: np.random.Generator, *, num_points: int = 128,
                 shapes: tuple[str, ...] = SHAPES) -> tuple[np.ndarray, np.ndarray]:
  """Clouds of `num_points` surface points of a random shape, anisotropically scaled by factors in
  [0.7, 1.3]^3 and randomly rotated. Returns x [n, num_points, 3] float32 and shape labels [n] int32."""
  labels = rng.integers(0, len(shapes), n).astype(np.int32)
  clouds = np.stack([_surface(shapes[k], num_points, rng) for k in labels]) * rng.uniform(0.7, 1.3, size=(n, 1, 3))
  clouds = np.einsum("nij,npj->npi", random_rotations(n, rng), clouds)
  return clouds.astype(np.float32), labels
