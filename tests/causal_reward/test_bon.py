"""Best-of-N evaluation and the Gao et al. fit."""

import numpy as np
import pytest

from jaxml.causal_reward import bon, probes


def test_kl_bon():
  np.testing.assert_allclose(bon.kl_bon([1, 2, 1024]), [0.0, np.log(2) - 0.5, np.log(1024) - 1023 / 1024])


def test_best_of_n_with_perfect_and_random_proxy():
  rng = np.random.default_rng(0)
  gold = rng.normal(size=(200, 64))
  ns = bon.powers_of_two(64)
  perfect = bon.best_of_n(gold, {"gold": gold}, ns)
  np.testing.assert_allclose(perfect["gold"][0], gold.mean())
  assert np.all(np.diff(perfect["gold"]) > 0)
  # E[max of 2 N(0,1)] = 1/sqrt(pi)
  assert abs(perfect["gold"][1] - 1 / np.sqrt(np.pi)) < 0.03
  np.testing.assert_allclose(perfect["gold"][-1], gold.max(axis=1).mean())
  noise = bon.best_of_n(rng.normal(size=gold.shape), {"gold": gold}, ns)
  assert np.all(np.abs(noise["gold"]) < 0.15)
  with pytest.raises(ValueError):
    bon.best_of_n(gold, {"gold": gold}, [3])


def test_fit_gao_recovers_parameters():
  kl = bon.kl_bon(bon.powers_of_two(1024))
  d = np.sqrt(kl)
  a, b = bon.fit_gao(kl, d * (1.3 - 0.2 * d))
  np.testing.assert_allclose([a, b], [1.3, 0.2], rtol=1e-8)


def test_probes():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(2000, 3))
  y = x @ np.array([1.0, -2.0, 0.0]) + 0.1 * rng.normal(size=2000)
  assert probes.ridge_r2(x[:1000], y[:1000], x[1000:], y[1000:]) > 0.99
  assert probes.ridge_r2(x[:1000], rng.normal(size=1000), x[1000:], rng.normal(size=1000)) < 0.02
  lab = (x[:, 0] > 0).astype(float)
  assert probes.ridge_accuracy(x[:1000], lab[:1000], x[1000:], lab[1000:]) > 0.9
  np.testing.assert_allclose(probes.spearman(np.arange(10.0), np.arange(10.0) ** 3), 1.0)
  np.testing.assert_allclose(probes.spearman([1, 1, 2, 2], [1, 2, 3, 4]), np.corrcoef([0.5, 0.5, 2.5, 2.5], [0, 1, 2, 3])[0, 1])
