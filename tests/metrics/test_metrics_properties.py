"""Metric properties against independent computations: KID, energy distance, MMD and Chamfer distances by hand on
two-point sets, the Fréchet distance of a set to itself with a singular covariance, CKA's invariance to a small
isotropic scale, the ridge of the classifier two-sample test as a shrinkage towards the kernel mean difference,
1-NNA of far-apart clouds, integer and float32 inputs against their float64 copies, and the linear probe's
invariance to an affine change of each feature."""

import numpy as np
import pytest

from jaxml.metrics import generative as gm
from jaxml.metrics import calibration, ood, ranking, representation


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


# ----------------------------------------------------------------------------- the seed-2 sample's survivors
def test_energy_distance_by_hand_on_two_points_per_set():
  # 1-D a = {0, 1}, b = {3, 5}: E|X - Y| = (3 + 5 + 2 + 4) / 4 = 3.5; unbiased E|X - X'| = 1, E|Y - Y'| = 2.
  a, b = np.array([[0.0], [1.0]]), np.array([[3.0], [5.0]])
  assert gm.energy_distance(a, b) == pytest.approx(2 * 3.5 - 1.0 - 2.0)


def test_mmd_rbf_by_hand_on_two_points_per_set():
  # b = {0, 2}: median distance 2, one scale: k(x, y) = exp(-(x - y)^2 / (2 * 2^2)). a = {0, 1}.
  a, b = np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])
  k = lambda d: np.exp(-d ** 2 / 8.0)
  kaa, kbb = k(1.0), k(2.0)                                   # the one off-diagonal pair of each set
  kab = np.mean([k(0.0), k(2.0), k(1.0), k(1.0)])
  assert gm.mmd_rbf(a, b, scales=(1.0,)) == pytest.approx(kaa + kbb - 2 * kab)


def test_chamfer_matrix_sums_both_directions():
  # a: one point at 0; b: points at 0 and e_1. a -> b: 0; b -> a: mean(0, 1) = 1 / 2 (squared distances).
  a = np.zeros((1, 1, 3))
  b = np.array([[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
  np.testing.assert_allclose(gm.chamfer_matrix(a, b), [[0.5]])
  np.testing.assert_allclose(gm.chamfer_matrix(b, a), [[0.5]])


def test_point_cloud_nna_is_one_for_far_apart_sets_and_excludes_self_matches():
  # Clouds near 0 and near 10: each cloud's nearest other cloud is in its own set (never itself), so 1-NNA = 1.
  rng = np.random.default_rng(0)
  gen = 0.1 * rng.normal(size=(4, 5, 3))
  ref = 10.0 + 0.1 * rng.normal(size=(3, 5, 3))
  scores = gm.point_cloud_scores(gen, ref)
  assert scores["nna_cd"] == 1.0


def test_detection_metrics_of_integer_scores_equal_those_of_their_float_copies():
  # Unsigned and bool scores: -s would wrap around or fail without the float64 cast.
  labels = np.array([1, 0, 1, 0, 1, 0])
  for scores in (np.array([200, 3, 7, 0, 250, 7], np.uint8), np.array([1, 0, 1, 1, 0, 0], bool)):
    f = scores.astype(np.float64)
    assert ood.aupr(scores, labels) == ood.aupr(f, labels)
    assert ood.auroc(scores, labels) == ood.auroc(f, labels)
    assert ood.fpr_at_tpr(scores, labels, 0.6) == ood.fpr_at_tpr(f, labels, 0.6)


def test_detection_metrics_name_the_missing_class():
  with pytest.raises(ValueError, match="need both positives and negatives"):
    ood.aupr([0.1, 0.2], [0, 0])


def test_flag_precision_recall_reads_any_nonzero_flag_as_true():
  # Flags as counts and as floats: 2 & 1 would be 0 and floats would not combine without the bool cast.
  p, r = ranking.flag_precision_recall([2, 0, 3, 1], [1, 1, 0, 1])
  assert (p, r) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
  p, r = ranking.flag_precision_recall(np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0, 0.0]))
  assert (p, r) == (0.5, 0.5)


def test_float32_inputs_are_computed_in_float64():
  # A float32 array holds exact float64 values: the float64 computation on them is the reference.
  rng = np.random.default_rng(0)
  probs32 = rng.dirichlet(np.ones(3), size=50).astype(np.float32)
  labels = rng.integers(0, 3, 50)
  assert calibration.ece(probs32, labels) == calibration.ece(probs32.astype(np.float64), labels)
  x32 = (100.0 + rng.normal(size=(40, 3))).astype(np.float32)      # a large mean: float32 centring loses digits
  y = rng.normal(size=(40, 2))
  assert representation.linear_cka(x32, y) == pytest.approx(representation.linear_cka(x32.astype(np.float64), y),
                                                            rel=1e-12, abs=0)


def test_linear_probe_accuracy_is_invariant_to_a_shift_or_a_scale_of_the_features():
  # Features standardised with the training statistics: z + 3 and 1e-3 z give the same standardised inputs. The
  # classes are unbalanced (about a third positive), so a probe that misreads the features falls back to the
  # majority class.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(60, 3))
  y = (x[:, 0] > 0.5).astype(int)
  x[:, 0] += 2.0 * (2 * y - 1)
  for z in (x, x + 3.0, 1e-3 * x):
    assert representation.linear_probe_accuracy(z[:30], y[:30], z[30:], y[30:]) == 100.0
