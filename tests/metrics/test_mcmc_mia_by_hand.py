"""`metrics.mcmc` and `metrics.mia` against loop formulas: several chains, odd and even lengths,
trailing axes, float32 inputs (the diagnostics compute in float64), the τ floor and degenerate chains.

`metrics.mcmc` takes R-hat and ESS from `blackjax.diagnostics`. R-hat is the same split-R-hat as before (blackjax's
Gelman–Rubin on the split chains). ESS is blackjax's (Stan's) estimator; `_ess` below is the plain Geyer estimator
jaxml computed before, and `test_ess_column_against_the_previous_formula` states how far the two are apart."""

import warnings

import numpy as np
import pytest
from scipy.special import ndtri
from scipy.stats import rankdata
from sklearn.svm import SVC

from jaxml.metrics import mcmc, mia


def _autocov(chain):
  """Biased autocovariance (1/n) Σ_i (x_i − x̄)(x_{i+t} − x̄), t = 0..n−1, by a direct sum."""
  n = len(chain)
  c = chain - chain.mean()
  return np.array([np.dot(c[:n - t], c[t:]) / n for t in range(n)])


def _ess(chains):
  """ESS of one quantity, chains [C, n]: Geyer's initial positive, then monotone, sequence of lag pairs (the
  previous formula; blackjax's adds Stan's last even lag and uses ⌊n/2⌋ pairs)."""
  c, n = chains.shape
  acov = np.array([_autocov(ch) for ch in chains])
  w = np.mean(acov[:, 0] * n / (n - 1))
  means = chains.mean(axis=1)
  b = np.sum((means - means.mean()) ** 2) / (c - 1) if c > 1 else 0.0
  var_plus = (n - 1) / n * w + b
  rho = 1.0 - (w - acov.mean(axis=0)) / var_plus
  rho[0] = 1.0
  total, smallest = 0.0, np.inf
  for k in range((n - 1) // 2):            # pairs (ρ_2k, ρ_2k+1) with 2k + 1 ≤ n − 2
    p = rho[2 * k] + rho[2 * k + 1]
    if not p > 0:
      break
    smallest = min(smallest, p)
    total += smallest
  tau = max(-1.0 + 2.0 * total, 1.0 / np.log10(c * n))
  return c * n / tau


def _rhat(chains):
  m, n = chains.shape
  w = np.mean([np.var(ch, ddof=1) for ch in chains])
  means = chains.mean(axis=1)
  b = np.sum((means - means.mean()) ** 2) / (m - 1)
  return np.sqrt(((n - 1) / n * w + b) / w)


def _split(chains):
  half = chains.shape[1] // 2
  return np.concatenate([chains[:, :half], chains[:, chains.shape[1] - half:]])


def _normal_scores(chains):
  r = rankdata(chains.ravel(), method="average").reshape(chains.shape)
  return ndtri((r - 0.375) / (chains.size + 0.25))


def _ar_chains(rng, c, n, k, rho, offsets):
  x = np.zeros((c, n, k))
  x[:, 0] = rng.normal(size=(c, k))
  for t in range(1, n):
    x[:, t] = rho * x[:, t - 1] + rng.normal(size=(c, k))
  return (x + np.asarray(offsets)[:, None, None]).astype(np.float32)


@pytest.mark.parametrize("c,n,rho", [(3, 10, 0.95), (3, 31, 0.5), (2, 40, -0.3), (1, 11, 0.95), (1, 24, 0.6)])
def test_ess_and_rhat_equal_the_loop_formulas_per_trailing_coordinate(c, n, rho):
  rng = np.random.default_rng(n)
  x = _ar_chains(rng, c, n, 2, rho, offsets=np.linspace(4.0, 5.5, c))   # float32, chain means ≠ 0 and differ
  x64 = x.astype(np.float64)
  ess, bulk = mcmc.ess(x), mcmc.bulk_ess(x)
  rhat, rank_rhat = mcmc.split_rhat(x), mcmc.rank_split_rhat(x)
  assert ess.shape == bulk.shape == rhat.shape == rank_rhat.shape == (2,)
  assert ess.dtype == rhat.dtype == np.float64
  for j in range(2):
    np.testing.assert_allclose(rhat[j], _rhat(_split(x64[:, :, j])), rtol=1e-9)
    z = _normal_scores(_split(x64[:, :, j]))
    np.testing.assert_allclose(bulk[j], mcmc.ess(z[:, :, None])[0], rtol=1e-12)
    np.testing.assert_allclose(rank_rhat[j], _rhat(z), rtol=1e-9)
    assert 0.8 < ess[j] / _ess(x64[:, :, j]) < 1.2     # short chains: within 20 % of the previous formula
  z = mcmc.rank_normalize(x)
  assert z.shape == x.shape and z.dtype == np.float64
  for j in range(2):
    np.testing.assert_allclose(z[:, :, j], _normal_scores(x64[:, :, j]), rtol=1e-12)


def test_ess_column_against_the_previous_formula():
  """A fixed sample shaped as the experiment's diagnostic (2 half-chains of 500 draws, 6 quantities of AR(1) with
  ρ from −0.3 to 0.9): blackjax's ESS is within 2 % of the previous formula's, and R-hat is unchanged."""
  rng = np.random.default_rng(11)
  x = np.concatenate([_ar_chains(rng, 1, 1000, 1, rho, offsets=[3.0]) for rho in (-0.3, 0.0, 0.3, 0.6, 0.8, 0.9)],
                     axis=-1).astype(np.float64)
  new = mcmc.bulk_ess(x)
  old = np.array([_ess(_normal_scores(_split(x[:, :, j]))) for j in range(6)])
  np.testing.assert_allclose(new, old, rtol=0.02)
  assert not np.allclose(new, old, rtol=1e-9)          # the estimators do differ
  np.testing.assert_allclose(mcmc.split_rhat(x), [_rhat(_split(x[:, :, j])) for j in range(6)], rtol=1e-12)


def test_split_chains_is_float64_and_keeps_trailing_axes():
  x = np.arange(2 * 5 * 3).reshape(2, 5, 3)
  s = mcmc.split_chains(x)
  assert s.dtype == np.float64 and s.shape == (4, 2, 3)
  np.testing.assert_array_equal(s[1], x[1, :2])
  np.testing.assert_array_equal(s[3], x[1, 3:])


def test_the_ess_pair_count_and_the_tau_floor():
  # A short, strongly autocorrelated chain: the positive sequence runs to the last pair, so one more pair
  # (ρ_{n-2} + ρ_{n-1}) would change the result.
  rng = np.random.default_rng(3)
  for n in (10, 12, 9):
    x = np.cumsum(rng.normal(size=(1, n)), axis=1) + np.linspace(0, 3, n)
    np.testing.assert_allclose(mcmc.ess(x), _ess(x), rtol=1e-12)
  # Anti-correlated draws: τ = −1 + 2 Σ P_k falls below the floor 1 / log10(C n).
  alt = np.where(np.arange(60) % 2 == 0, 1.0, -1.0) + 0.05 * rng.normal(size=(2, 60))
  floor_ess = 120 * np.log10(120)
  np.testing.assert_allclose(mcmc.ess(alt), floor_ess, rtol=1e-12)
  np.testing.assert_allclose(_ess(alt), floor_ess, rtol=1e-12)


def test_ess_needs_four_draws():
  x = np.random.default_rng(0).normal(size=(2, 4))
  assert np.isfinite(mcmc.ess(x)) and mcmc.ess(x) == pytest.approx(_ess(x), rel=1e-12)
  with pytest.raises(ValueError, match="^need at least 4 draws per chain$"):
    mcmc.ess(x[:, :3])


def test_degenerate_chains_give_inf_or_nan_without_numpy_warnings():
  same = np.ones((2, 8))
  apart = np.stack([np.ones(8), 2.0 * np.ones(8)])
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert np.isnan(mcmc.split_rhat(same)) and np.isinf(mcmc.split_rhat(apart))
    assert np.isfinite(mcmc.ess(same)) and np.isfinite(mcmc.ess(apart))


def test_mia_features_are_float64_loop_values():
  rng = np.random.default_rng(1)
  logits = (rng.normal(size=(7, 4)) * 3).astype(np.float32)
  labels = rng.integers(0, 4, 7)
  z = logits.astype(np.float64)
  p = np.array([np.exp(row[y]) / np.sum(np.exp(row)) for row, y in zip(z, labels)])
  ce = np.array([np.log(np.sum(np.exp(row))) - row[y] for row, y in zip(z, labels)])
  np.testing.assert_allclose(mia.true_label_confidence(logits, labels), p, rtol=1e-13)
  np.testing.assert_allclose(mia.cross_entropy(logits, labels), ce, rtol=1e-13)


def test_svc_mia_efficacy_is_an_rbf_svc_with_c3_and_gamma_auto():
  # A noisy case where C = 1 or 4 and gamma = "scale" each call a different share of forget rows non-members.
  rng = np.random.default_rng(0)
  n = 40
  retain = rng.normal(size=(n, 3)) * 2
  retain[:, 0] += 1.5
  test = rng.normal(size=(n + 5, 3)) * 2
  forget = rng.normal(size=(25, 3)) * 2
  forget[:, 0] += 0.7
  yr, yt, yf = np.zeros(n, int), rng.integers(0, 3, n + 5), rng.integers(0, 3, 25)

  def by_hand(**svc):
    feat = np.r_[mia.true_label_confidence(retain, yr), mia.true_label_confidence(test[:n], yt[:n])][:, None]
    clf = SVC(**svc).fit(feat, np.r_[np.ones(n), np.zeros(n)])
    return 100.0 * np.mean(clf.predict(mia.true_label_confidence(forget, yf)[:, None]) == 0)

  want = by_hand(C=3.0, gamma="auto", kernel="rbf")
  assert want not in {by_hand(C=1.0, gamma="auto"), by_hand(C=4.0, gamma="auto"), by_hand(C=3.0, gamma="scale")}
  assert mia.svc_mia_efficacy(retain, yr, test, yt, forget, yf) == want
  assert mia.svc_mia_efficacy(retain, yr, test, yt, forget, yf, c=1.0, gamma=0.5) == by_hand(C=1.0, gamma=0.5)
