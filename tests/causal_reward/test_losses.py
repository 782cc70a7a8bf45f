"""Loss terms of the causal RM against plain numpy formulas on small random, asymmetric cases."""

import jax.numpy as jnp
import numpy as np

from jaxml.causal_reward import losses

_RNG = np.random.default_rng(3)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
  return -np.log1p(np.exp(-x))


def test_bt_loss_matches_the_formula_with_and_without_soft_labels():
  r_w, r_l = _RNG.normal(size=5), _RNG.normal(size=5)
  y = np.array([1.0, 0.0, 0.3, 0.8, 0.5])
  np.testing.assert_allclose(losses.bt_loss(jnp.asarray(r_w), jnp.asarray(r_l)),
                             -np.mean(_log_sigmoid(r_w - r_l)), rtol=1e-5)
  expected = -np.mean(y * _log_sigmoid(r_w - r_l) + (1 - y) * _log_sigmoid(r_l - r_w))
  np.testing.assert_allclose(losses.bt_loss(jnp.asarray(r_w), jnp.asarray(r_l), jnp.asarray(y)), expected,
                             rtol=1e-5)


def test_pearson_matches_numpy_and_is_zero_for_a_constant():
  x, y = _RNG.normal(size=7), _RNG.normal(size=7)
  np.testing.assert_allclose(losses.pearson(jnp.asarray(x), jnp.asarray(y)), np.corrcoef(x, y)[0, 1], rtol=1e-4)
  # small-variance inputs: the documented eps = 1e-6 inside the square root, nothing more
  xs, ys = 0.1 * x, 0.1 * (x + y)
  xc, yc = xs - xs.mean(), ys - ys.mean()
  np.testing.assert_allclose(losses.pearson(jnp.asarray(xs), jnp.asarray(ys)),
                             np.sum(xc * yc) / np.sqrt(np.sum(xc**2) * np.sum(yc**2) + 1e-6), rtol=1e-5)
  assert float(losses.pearson(jnp.ones(4), jnp.asarray(y[:4]))) == 0.0


def test_cross_cov_fro2_matches_the_centred_covariance():
  a, b = _RNG.normal(size=(7, 3)) + 2.0, _RNG.normal(size=(7, 2)) - 1.0
  a[:, 1] += 0.7 * b[:, 0]
  cov = (a - a.mean(0)).T @ (b - b.mean(0)) / 7
  np.testing.assert_allclose(losses.cross_cov_fro2(jnp.asarray(a), jnp.asarray(b)), np.sum(cov**2) / (3 * 2), rtol=1e-5)


def test_reconstruction_and_gaussian_kl_match_their_formulas():
  h, h_hat = _RNG.normal(size=(4, 3)), _RNG.normal(size=(4, 3))
  np.testing.assert_allclose(losses.reconstruction(jnp.asarray(h), jnp.asarray(h_hat)),
                             np.mean(np.sum((h - h_hat) ** 2, -1)) / 3, rtol=1e-5)
  mu, logvar = _RNG.normal(size=(4, 3)), _RNG.normal(size=(4, 3))
  kl = 0.5 * np.sum(np.exp(logvar) + mu**2 - 1.0 - logvar, -1)
  np.testing.assert_allclose(losses.gaussian_kl(jnp.asarray(mu), jnp.asarray(logvar)), kl.mean(), rtol=1e-5)


def test_pairwise_accuracy_counts_ties_half_and_follows_soft_labels():
  r_w = jnp.array([1.0, 0.0, 2.0, 0.5, -1.0, 3.0])
  r_l = jnp.array([0.0, 1.0, 2.0, 0.0, 0.0, 3.0])      # d = +, -, tie, +, -, tie
  np.testing.assert_allclose(losses.pairwise_accuracy(r_w, r_l), (1 + 0 + 0.5 + 1 + 0 + 0.5) / 6, rtol=1e-6)
  y = jnp.array([1.0, 0.2, 0.0, 0.5, 0.4, 1.0])        # y = 0.5 counts as "w preferred"
  np.testing.assert_allclose(losses.pairwise_accuracy(r_w, r_l, y), (1 + 1 + 0.5 + 1 + 1 + 0.5) / 6, rtol=1e-6)
  np.testing.assert_allclose(losses.pairwise_accuracy(r_w[:2], r_l[:2], jnp.array([0.0, 0.0])), 0.5, rtol=1e-6)
