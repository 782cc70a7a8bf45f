"""Metric properties against independent computations: KID by hand on a two-point set, the Fréchet distance of a
set to itself with a singular covariance, CKA's invariance to a small isotropic scale, and the ridge of the
classifier two-sample test as a shrinkage towards the kernel mean difference."""

import numpy as np
import pytest

from jaxml.metrics import generative as gm
from jaxml.metrics import representation


def test_kid_by_hand_on_two_points_per_set():
  # d = 1, cubic kernel k(x, y) = (x y + 1)^3. a = {0, 1}: the off-diagonal pair (0, 1) -> 1 (mean over the
  # n (n - 1) = 2 ordered pairs: 1). b = {2, 3}: (6 + 1)^3 = 343. Cross pairs: 1, 1, 27, 64 (mean 93 / 4).
  a, b = np.array([[0.0], [1.0]]), np.array([[2.0], [3.0]])
  assert gm.kid(a, b) == pytest.approx(1.0 + 343.0 - 2 * 93.0 / 4)
  # d = 2 divides the dot product: a = {(0, 0), (1, 1)} (a.a' = 0, so 1), b = {(1, 1), (2, 0)} (b.b' = 2: 8).
  a2, b2 = np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 1.0], [2.0, 0.0]])
  cross = [1.0, 1.0, 2.0 ** 3, 2.0 ** 3]           # a.b = 0 twice (1), a.b = 2 twice ((2 / 2 + 1)^3 = 8)
  assert gm.kid(a2, b2) == pytest.approx(1.0 + 8.0 - 2 * np.mean(cross))


def test_frechet_distance_of_a_set_to_itself_is_zero_with_a_singular_covariance():
  # Fewer rows than features (3 x 6): rank-2 covariances whose zero eigenvalues come out of eigh as round-off of
  # either sign; the PSD square root clips them, so FD(a, a) = 0 and stays finite.
  for seed in range(4):
    a = np.random.default_rng(seed).normal(size=(3, 6))
    fd = gm.frechet_distance(a, a)
    assert np.isfinite(fd) and abs(fd) < 1e-6, (seed, fd)


def test_linear_cka_is_invariant_to_a_small_isotropic_scale():
  # CKA is scale invariant; a tiny scale (both Gram norms below 1) is still a defined, unchanged value.
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(6, 2)), rng.normal(size=(6, 3))
  ref = representation.linear_cka(x, y)
  assert 0.0 < ref < 1.0
  assert representation.linear_cka(1e-3 * x, 1e-3 * y) == pytest.approx(ref, rel=1e-9)
  assert representation.linear_cka(1e-3 * x, 1e-3 * x) == pytest.approx(1.0)


def test_classifier_two_sample_with_a_large_ridge_is_the_kernel_mean_difference():
  # With ridge * n far above the Gram's scale the solve tends to coef = X^T y / (ridge n), the mean-difference
  # classifier in feature space: a positive multiple, so two far-apart sets are still told apart (a ridge that
  # was subtracted instead would give a negative multiple and label them the wrong way round).
  rng = np.random.default_rng(0)
  a = rng.normal(size=(200, 2))
  b = rng.normal(size=(200, 2)) + np.array([6.0, 0.0])
  acc = gm.classifier_two_sample(a, b, num_features=60, ridge=1e3)
  assert acc > 0.9
