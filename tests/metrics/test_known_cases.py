"""jaxml.metrics on hand-made cases whose answers are known (worked out by hand or by scikit-learn)."""

import numpy as np
import pytest
from sklearn import metrics as skm

from jaxml.metrics import calibration, mcmc, mia, ood, ranking, representation


# ----------------------------------------------------------------------------- OOD detection
def test_aupr_counts_tied_scores_as_one_threshold():
  # Sorted: 0.9 (pos), 0.8 (pos), 0.8 (neg), 0.1 (neg). Thresholds: 0.9 -> P 1, R 1/2; 0.8 -> P 2/3, R 1.
  # Ignoring the tie (one point per row) would give 1.0.
  scores, labels = [0.9, 0.8, 0.8, 0.1], [1, 1, 0, 0]
  assert ood.aupr(scores, labels) == pytest.approx(0.5 * 1.0 + 0.5 * 2.0 / 3.0)
  # The order of tied rows in the input does not matter.
  assert ood.aupr([0.9, 0.8, 0.8, 0.1], [1, 0, 1, 0]) == pytest.approx(0.5 + 0.5 * 2.0 / 3.0)


def test_aupr_and_auroc_match_sklearn_on_heavily_tied_scores():
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 2, 300)
  scores = np.round(labels * 0.6 + rng.normal(size=300), 1)      # ~40 distinct values, many ties
  assert ood.aupr(scores, labels) == pytest.approx(skm.average_precision_score(labels, scores), abs=1e-12)
  assert ood.auroc(scores, labels) == pytest.approx(skm.roc_auc_score(labels, scores), abs=1e-12)


def test_auroc_known_values():
  assert ood.auroc([3, 2, 1, 0], [1, 1, 0, 0]) == 1.0
  assert ood.auroc([0, 1, 2, 3], [1, 1, 0, 0]) == 0.0
  assert ood.auroc([1, 1, 1, 1], [1, 0, 1, 0]) == 0.5                 # all tied: one half each
  assert ood.auroc([2, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(7 / 8)   # one tied pos/neg pair
  with pytest.raises(ValueError):
    ood.auroc([1, 2], [1, 1])
  with pytest.raises(ValueError):
    ood.aupr([1, 2, 3], [1, 0])


def _fpr_at_tpr_sklearn(scores, labels, tpr):
  fpr, tpr_curve, _ = skm.roc_curve(labels, scores, drop_intermediate=False)
  return float(fpr[np.argmax(tpr_curve >= tpr - 1e-12)])


def test_fpr_at_95_uses_the_strictest_threshold_reaching_95_percent():
  # 20 positives 1..20: TPR >= 95 % first at threshold 2 (19 / 20); negatives 1.5 and 2 (tie) and 0.
  pos = np.arange(1.0, 21.0)
  neg = np.array([0.0, 1.5, 2.0, 25.0])
  s = np.concatenate([pos, neg])
  y = np.r_[np.ones(20), np.zeros(4)]
  assert ood.fpr_at_tpr(s, y, 0.95) == pytest.approx(2 / 4)        # 2.0 (tie counts) and 25
  assert ood.fpr_at_tpr(s, y, 1.0) == pytest.approx(3 / 4)         # threshold 1: 1.5, 2, 25
  assert ood.fpr_at_tpr(s, y, 0.5) == pytest.approx(1 / 4)         # threshold 11: only 25


def test_fpr_at_tpr_matches_roc_curve_with_ties():
  rng = np.random.default_rng(1)
  for n in (20, 37, 200):
    labels = np.r_[np.ones(n), np.zeros(n)]
    scores = np.round(labels + rng.normal(size=2 * n), 1)
    for t in (0.8, 0.9, 0.95):
      assert ood.fpr_at_tpr(scores, labels, t) == pytest.approx(_fpr_at_tpr_sklearn(scores, labels, t)), (n, t)


# ----------------------------------------------------------------------------- calibration
def test_ece_brier_coverage_known_values():
  probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]])
  labels = np.array([0, 1, 1, 1])
  # Top-label confidences .9 (right), .6 (wrong), .7 (right), .8 (right). Bins of width 1/4:
  # (.5, .75]: acc 1/2, conf .65; (.75, 1]: acc 1, conf .85 -> ECE = 1/2 * .15 + 1/2 * .15.
  assert calibration.ece(probs, labels, bins=4) == pytest.approx(0.15)
  # One bin: |mean acc - mean conf| = |0.75 - 0.75| = 0.
  assert calibration.ece(probs, labels, bins=1) == pytest.approx(0.0, abs=1e-12)
  # Confidence exactly on an edge goes to the lower bin (right-closed bins): .75 with acc 0.
  assert calibration.ece(np.array([[0.75, 0.25], [0.8, 0.2]]), np.array([1, 0]), bins=4) == pytest.approx(
      0.5 * 0.75 + 0.5 * 0.2)
  assert calibration.brier(probs, labels) == pytest.approx(np.mean([0.02, 0.72, 0.18, 0.08]))
  assert calibration.interval_coverage([0, 1, 2, 3], [0, 0, 3, 3], [0, 0.5, 5, 5]) == 0.5   # both edges count


# ----------------------------------------------------------------------------- ranking
def test_ranking_metrics_known_values():
  pred, target = np.array([0, 2, 5, 3]), np.array([0, 1, 2, 3])
  assert ranking.mae(pred, target) == pytest.approx(1.0)
  assert ranking.zero_one(pred, target) == 0.5
  assert ranking.cumulative_score(pred, target, theta=1.0) == 0.75
  assert ranking.cumulative_score(pred, target, theta=0.0) == 0.5
  p, r = ranking.flag_precision_recall([1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
  assert (p, r) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
  p, r = ranking.flag_precision_recall([0, 0], [1, 0])
  assert np.isnan(p) and r == 0.0
  p, r = ranking.flag_precision_recall([1, 0], [0, 0])
  assert p == 0.0 and np.isnan(r)
  assert ranking.wilcoxon_paired([1, 2, 3], [1, 2, 3]) == 1.0
  assert np.isnan(ranking.wilcoxon_paired([1], [2]))
  a = np.arange(10.0)
  assert ranking.wilcoxon_paired(a + 1, a, alternative="greater") == pytest.approx(2.0 ** -10)


# ----------------------------------------------------------------------------- membership inference
def test_cross_entropy_and_confidence_known_values():
  logits = np.array([[0.0, 0.0], [np.log(3.0), 0.0], [1000.0, 0.0]])
  labels = np.array([0, 0, 1])
  np.testing.assert_allclose(mia.true_label_confidence(logits, labels), [0.5, 0.75, 0.0], atol=1e-12)
  np.testing.assert_allclose(mia.cross_entropy(logits, labels), [np.log(2), np.log(4 / 3), 1000.0], rtol=1e-12)


def test_loss_mia_auc_members_with_lower_loss_are_detected():
  members = np.array([[5.0, 0.0], [4.0, 0.0]])           # confident and correct: low CE
  nonmembers = np.array([[0.0, 1.0], [0.0, 2.0]])
  y = np.zeros(2, np.int64)
  assert mia.loss_mia_auc(members, y, nonmembers, y) == 1.0
  assert mia.loss_mia_auc(nonmembers, y, members, y) == 0.0


def test_svc_mia_calls_low_confidence_rows_non_members():
  rng = np.random.default_rng(0)
  n = 60
  retain = np.c_[rng.uniform(4, 6, n), np.zeros(n)]      # members: confident in label 0
  test = np.c_[rng.uniform(-1, 1, n), np.zeros(n)]       # non-members: unsure
  y = np.zeros(n, np.int64)
  forget_like_test = np.c_[rng.uniform(-1, 1, 10), np.zeros(10)]
  forget_like_train = np.c_[rng.uniform(4, 6, 10), np.zeros(10)]
  assert mia.svc_mia_efficacy(retain, y, test, y, forget_like_test, y[:10]) == 100.0
  assert mia.svc_mia_efficacy(retain, y, test, y, forget_like_train, y[:10]) == 0.0
  assert np.isnan(mia.svc_mia_efficacy(retain, y, test, y, forget_like_train[:0], y[:0]))


# ----------------------------------------------------------------------------- MCMC diagnostics
def test_split_rhat_known_values():
  # Two chains, each constant halves -> W = 0 gives inf / nan; use a hand case instead:
  x = np.array([[0.0, 2.0, 0.0, 2.0], [1.0, 3.0, 1.0, 3.0]])      # halves [0,2],[0,2],[1,3],[1,3]
  # n = 2, each half variance 2, W = 2; means 1,1,2,2 -> var 1/3; var+ = 1/2 * 2 + 1/3.
  assert float(mcmc.split_rhat(x)) == pytest.approx(np.sqrt((1.0 + 1 / 3) / 2.0))
  np.testing.assert_array_equal(mcmc.split_chains(np.arange(5.0)[None]), [[0.0, 1.0], [3.0, 4.0]])


def test_ess_of_iid_draws_is_near_the_draw_count_and_lower_for_ar1():
  rng = np.random.default_rng(0)
  iid = rng.normal(size=(4, 2000))
  assert 0.85 * 8000 < float(mcmc.ess(iid)) < 1.15 * 8000
  rho = 0.9
  ar = np.zeros((4, 4000))
  for t in range(1, 4000):
    ar[:, t] = rho * ar[:, t - 1] + rng.normal(size=4)
  expected = 16000 * (1 - rho) / (1 + rho)
  assert 0.7 * expected < float(mcmc.ess(ar)) < 1.3 * expected
  assert 0.7 * expected < float(mcmc.bulk_ess(ar)) < 1.3 * expected
  assert float(mcmc.rank_split_rhat(iid)) == pytest.approx(1.0, abs=0.01)
  with pytest.raises(ValueError):
    mcmc.ess(iid[:, :3])


def test_rank_normalize_known_values():
  z = mcmc.rank_normalize(np.array([[3.0, 1.0], [2.0, 2.0]]))
  # pooled ranks 4, 1, 2.5, 2.5 of S = 4
  from scipy.stats import norm
  expected = norm.ppf((np.array([[4.0, 1.0], [2.5, 2.5]]) - 0.375) / 4.25)
  np.testing.assert_allclose(z, expected, rtol=1e-12)


# ----------------------------------------------------------------------------- representations
def test_linear_cka_and_probe_known_cases():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(50, 4))
  q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
  assert representation.linear_cka(x, 3.0 * x @ q + 1.0) == pytest.approx(1.0)
  assert representation.linear_cka(x, rng.normal(size=(50, 4))) < 0.3
  y = (x[:, 0] > 0).astype(int)
  x[:, 0] += 2.0 * (2 * y - 1)                                     # a clear margin
  assert representation.linear_probe_accuracy(x[:25], y[:25], x[25:], y[25:]) == 100.0
  assert representation.linear_probe_accuracy(x[:25], np.ones(25), x[25:], y[25:]) == 100.0 * y[25:].mean()


def test_ece_low_confidence_bins_are_kept_apart():
  # 3 classes, 4 bins: confidence .4 (bin 1, right) and .2 -> impossible for a top label, so use .3 / .45.
  probs = np.array([[0.2, 0.35, 0.45], [0.45, 0.3, 0.25], [0.3, 0.35, 0.35]])
  labels = np.array([2, 1, 0])
  # confidences .45 (bin 1, right), .45 (bin 1, wrong), .35 (bin 1, wrong): one bin [.25, .5].
  assert calibration.ece(probs, labels, bins=4) == pytest.approx(abs(1 / 3 - (0.45 + 0.45 + 0.35) / 3))
  # bins of width 0.2: .35 goes to (.2, .4], the two .45 to (.4, .6].
  assert calibration.ece(probs, labels, bins=5) == pytest.approx(1 / 3 * 0.35 + 2 / 3 * abs(0.5 - 0.45))
  # A confidence in the first bin stays in it: 10 classes, confidence .12 (bin 0 of 5).
  p10 = np.full((1, 10), 0.88 / 9)
  p10[0, 3] = 0.12
  assert calibration.ece(p10, np.array([3]), bins=5) == pytest.approx(0.88)


def test_fpr_at_tpr_edge_levels():
  pos = np.arange(1.0, 38.0)                       # 37 positives: 37 * 0.05 = 1.85 -> threshold index 1
  neg = np.array([1.5, 2.5, 37.0])
  s, y = np.r_[pos, neg], np.r_[np.ones(37), np.zeros(3)]
  assert ood.fpr_at_tpr(s, y, 0.95) == pytest.approx(2 / 3)         # threshold 2: 2.5 and 37
  assert ood.fpr_at_tpr(s, y, 0.0) == pytest.approx(1 / 3)          # strictest: the top positive, 37
  with pytest.raises(ValueError):
    ood.fpr_at_tpr([1.0, 2.0, 3.0], [1, 0], 0.9)


def test_detection_metrics_flatten_column_inputs():
  scores, labels = np.array([[0.9], [0.8], [0.8], [0.1]]), np.array([[1], [1], [0], [0]])
  assert ood.aupr(scores, labels) == pytest.approx(0.5 + 0.5 * 2.0 / 3.0)
  assert ood.auroc(scores, labels) == pytest.approx(ood.auroc(scores.ravel(), labels.ravel()))


def test_ece_first_two_bins_are_not_merged():
  # 10 classes, 5 bins: a right answer at confidence .12 (bin 0), a wrong one at .3 (bin 1).
  p = np.full((2, 10), 0.0)
  p[0, :] = 0.88 / 9
  p[0, 3] = 0.12
  p[1, :] = 0.7 / 9
  p[1, 5] = 0.3
  assert calibration.ece(p, np.array([3, 0]), bins=5) == pytest.approx(0.5 * 0.88 + 0.5 * 0.3)


def test_zero_one_and_wilcoxon_asymmetric_cases():
  assert ranking.zero_one([0, 1, 2, 3], [0, 1, 2, 0]) == 0.25
  assert ranking.wilcoxon_paired([1.0, 2.0], [0.0, 0.0]) == pytest.approx(0.5)       # exact, n = 2
  # Differences a - b: +1 .. +5 and -6: one-sided p differs from the test on a alone.
  a = np.array([2.0, 3.0, 4.0, 5.0, 6.0, 1.0])
  b = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 7.0])
  from scipy import stats
  assert ranking.wilcoxon_paired(a, b) == pytest.approx(stats.wilcoxon(a - b).pvalue)
  assert ranking.wilcoxon_paired(a, b) != pytest.approx(stats.wilcoxon(a).pvalue)


def test_documented_defaults():
  rng = np.random.default_rng(3)
  probs = rng.dirichlet(np.ones(3), size=200)
  labels = rng.integers(0, 3, 200)
  assert calibration.ece(probs, labels) == calibration.ece(probs, labels, bins=15)
  assert calibration.ece(probs, labels, bins=15) != calibration.ece(probs, labels, bins=16)
  s, y = rng.normal(size=100) + np.r_[np.ones(50), np.zeros(50)], np.r_[np.ones(50), np.zeros(50)]
  assert ood.fpr_at_tpr(s, y) == ood.fpr_at_tpr(s, y, 0.95)
  assert ranking.cumulative_score([0, 2, 4], [0, 0, 0]) == pytest.approx(1 / 3)          # theta = 1
  a, b = np.arange(8.0), np.arange(8.0)[::-1]
  assert ranking.wilcoxon_paired(a, b) == pytest.approx(ranking.wilcoxon_paired(a, b, alternative="two-sided"))


def test_fpr_at_tpr_zero_takes_the_top_positive():
  pos = np.arange(1.0, 11.0)
  s, y = np.r_[pos, [9.5, 10.0]], np.r_[np.ones(10), np.zeros(2)]
  assert ood.fpr_at_tpr(s, y, 0.0) == 0.5          # threshold 10: only the tied negative at 10
