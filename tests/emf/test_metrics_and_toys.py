"""Generative metrics against known answers; toy generators against their known structure."""

import numpy as np

from jaxml.data import toys
from jaxml.metrics import generative as gm


def test_frechet_of_gaussians_matches_closed_form():
  rng = np.random.default_rng(0)
  a = rng.normal(size=(20000, 3))
  b = 2.0 * rng.normal(size=(20000, 3)) + np.array([1.0, 0.0, 0.0])
  # means differ by 1, covariances I vs 4I: 1 + 3 * (1 + 4 - 2 * 2) = 4.
  assert abs(gm.frechet_distance(a, b) - 4.0) < 0.15
  assert gm.frechet_distance(a, rng.normal(size=(20000, 3))) < 0.01


def test_distances_separate_equal_from_different_laws():
  rng = np.random.default_rng(1)
  a, b = rng.normal(size=(1500, 2)), rng.normal(size=(1500, 2))
  c = rng.normal(size=(1500, 2)) + 0.5
  for fn in (gm.sliced_wasserstein, gm.energy_distance, gm.mmd_rbf, gm.kid):
    assert fn(a, c) > 5 * abs(fn(a, b)) + 1e-4, fn.__name__
  # SW of a pure shift by s along a random direction averages to |s| / sqrt(2) in 2-D... bounded by |s|.
  assert 0.2 < gm.sliced_wasserstein(a, c) < 0.75


def test_mode_coverage_and_gp_covariance():
  rng = np.random.default_rng(2)
  x = toys.eight_gaussians(4000, rng)
  covered, off = gm.mode_coverage(x, toys.eight_gaussian_centers(), 0.1)
  assert covered == 1.0 and abs(off - np.exp(-4.5)) < 0.005  # 2-D Gaussian: P(|z| > 3) = e^-4.5
  covered, _ = gm.mode_coverage(x[np.linalg.norm(x - [2, 0], axis=1) < 0.5], toys.eight_gaussian_centers(), 0.1)
  assert covered == 1 / 8
  f, cov = toys.gp_functions(20000, rng)
  err, mean_err = gm.covariance_error(f, cov)
  assert err < 0.05 and mean_err < 0.05
  assert gm.covariance_error(1.3 * f, cov)[0] > 0.5


def test_point_clouds_and_chamfer_scores():
  rng = np.random.default_rng(3)
  x, y = toys.point_clouds(40, rng, num_points=32)
  assert x.shape == (40, 32, 3) and y.shape == (40,) and set(np.unique(y)) <= set(range(5))
  sphere = toys._surface("sphere", 500, rng)
  np.testing.assert_allclose(np.linalg.norm(sphere, axis=1), 1.0, rtol=1e-6)
  ref, _ = toys.point_clouds(40, np.random.default_rng(4), num_points=32)
  good = gm.point_cloud_scores(x, ref)
  bad = gm.point_cloud_scores(rng.normal(size=(40, 32, 3)) * 0.3, ref)
  assert good["mmd_cd"] < bad["mmd_cd"] and good["nna_cd"] < bad["nna_cd"]
  assert np.allclose(gm.chamfer_matrix(x[:3], x[:3]).diagonal(), 0.0, atol=1e-9)


def test_toys_are_seeded_and_standardised():
  a = toys.toy2d("checkerboard", 1000, 0)
  np.testing.assert_array_equal(a, toys.toy2d("checkerboard", 1000, 0))
  assert np.all(np.abs(a) <= 2.0)
  cells = np.floor(a + 2).astype(int)
  assert np.all((cells.sum(1) % 2) == 0)
  tr, ev, mean, std = toys.standardize(toys.toy2d("moons", 5000, 0), toys.toy2d("moons", 100, 1))
  np.testing.assert_allclose(tr.std(0), 1.0, rtol=1e-4)


def test_box_coverage_on_checkerboard_cells():
  rng = np.random.default_rng(5)
  x = toys.checkerboard(4000, rng)
  lows = np.array([(i, j) for i in range(4) for j in range(4) if (i + j) % 2 == 0], float) - 2
  covered, off = gm.box_coverage(x, lows, np.ones(2), min_share=0.05)
  assert covered == 1.0 and off == 0.0
  # Samples only in the left half of the board cover half of the cells; white cells are off-mode.
  covered, _ = gm.box_coverage(x[x[:, 0] < 0], lows, np.ones(2), min_share=0.05)
  assert covered == 0.5
  white = np.floor(rng.uniform(-2, 2, (4000, 2)))
  white = white[(white.sum(1) % 2) != 0] + 0.5
  assert gm.box_coverage(white, lows, np.ones(2))[1] == 1.0


def test_classifier_two_sample_test():
  rng = np.random.default_rng(6)
  a, b = toys.eight_gaussians(3000, rng), toys.eight_gaussians(3000, rng)
  assert abs(gm.classifier_two_sample(a, b) - 0.5) < 0.04
  # Half the modes missing (same support otherwise) or a plain Gaussian: clearly distinguishable.
  centers = toys.eight_gaussian_centers()[::2]
  four = (centers[rng.integers(0, 4, 3000)] + 0.1 * rng.normal(size=(3000, 2))).astype(np.float32)
  assert gm.classifier_two_sample(four, b) > 0.6
  assert gm.classifier_two_sample(rng.normal(size=(3000, 2)) * 2, b) > 0.9
