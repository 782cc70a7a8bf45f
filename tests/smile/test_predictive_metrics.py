"""LPPD, RMSE and interval coverage of `targets.predictive_metrics` on cases with known answers."""

import numpy as np
import pytest

from jaxml.smile import targets


def test_lppd_of_a_mixture_known_values():
  y = np.array([0.0, 2.0])
  mu = np.array([[-1.0, 2.0], [1.0, 2.0]])          # M = 2 samples, n = 2 targets
  ls = np.zeros((2, 2))
  m = targets.predictive_metrics(mu, ls, y, rng=np.random.default_rng(0), levels=(0.9,))
  c = -0.5 * np.log(2 * np.pi)
  # target 0: both components at distance 1; target 2: both exact.
  assert m["lppd"] == pytest.approx(np.mean([c - 0.5, c]), abs=1e-6)
  assert m["rmse"] == pytest.approx(np.sqrt(np.mean([0.0, 0.0])), abs=1e-12)
  # Mixture of N(-1, 1) and N(1, 1) at 0 vs one component far away: log((p1 + p2) / 2).
  mu2 = np.array([[0.0], [10.0]])
  m2 = targets.predictive_metrics(mu2, np.zeros((2, 1)), np.array([0.0]), rng=np.random.default_rng(0))
  assert m2["lppd"] == pytest.approx(np.log(0.5 * (np.exp(c) + np.exp(c - 50.0))), abs=1e-6)
  assert m2["rmse"] == pytest.approx(5.0)
  # The scale enters: sigma = e gives c - 1 - 0.5 / e^2 at distance 1.
  m3 = targets.predictive_metrics(np.array([[1.0]]), np.array([[1.0]]), np.array([0.0]), rng=np.random.default_rng(0))
  assert m3["lppd"] == pytest.approx(c - 1.0 - 0.5 * np.exp(-2.0), abs=1e-6)


def test_coverage_and_width_of_central_intervals():
  n = 400
  y = np.random.default_rng(1).normal(size=n)
  mu, ls = np.zeros((1, n)), np.zeros((1, n))
  m = targets.predictive_metrics(mu, ls, y, rng=np.random.default_rng(0), levels=(0.5, 0.9), min_draws=20000)
  # Calibrated N(0, 1) predictive for N(0, 1) targets: coverage ~ level, width ~ 2 z_{(1+p)/2}.
  assert m["coverage_50"] == pytest.approx(0.5, abs=0.06)
  assert m["coverage_90"] == pytest.approx(0.9, abs=0.04)
  assert m["width_90"] == pytest.approx(2 * 1.6449, rel=0.03)
  assert m["width_50"] == pytest.approx(2 * 0.6745, rel=0.03)
  far = targets.predictive_metrics(mu, ls, y + 100.0, rng=np.random.default_rng(0), levels=(0.5, 0.9))
  assert far["coverage_50"] == far["coverage_90"] == 0.0
  assert far["cal_error"] == pytest.approx(np.sqrt((0.5 ** 2 + 0.9 ** 2) / 2))


def test_classification_metrics_known_values():
  logp = np.log(np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.4, 0.6]]]))   # [M=2, n=2, C=2]
  m = targets.classification_metrics(logp, np.array([0, 0]))
  assert m["lppd"] == pytest.approx(np.mean(np.log([0.7, 0.3])))
  assert m["accuracy"] == 0.5
