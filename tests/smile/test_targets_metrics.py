"""BNN targets, predictive metrics and MCMC diagnostics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxml.metrics import mcmc
from jaxml.smile import targets


def test_minibatch_logdensity_scales_to_full():
  model = targets.make_regression_model((4,))
  x = jax.random.normal(jax.random.key(0), (12, 3))
  y = jnp.sin(x[:, 0])
  params = model.init(jax.random.key(1), x)
  full = targets.make_full_logdensity(model.apply, x, y)(params)
  mb = targets.make_minibatch_logdensity(model.apply, data_size=12)
  np.testing.assert_allclose(mb(params, {"x": x, "y": y}), full, rtol=1e-5)
  # Averaging the scaled halves gives the full log density.
  halves = 0.5 * (mb(params, {"x": x[:6], "y": y[:6]}) + mb(params, {"x": x[6:], "y": y[6:]}))
  np.testing.assert_allclose(halves, full, rtol=1e-5)
  # Prior: N(0, 1) density of every parameter (incl. log σ).
  flat = jnp.concatenate([p.ravel() for p in jax.tree.leaves(params)])
  np.testing.assert_allclose(targets.log_prior(params), stats.norm.logpdf(np.asarray(flat)).sum(), rtol=1e-5)


def test_classification_logdensity_equals_a_numpy_computation():
  """log p(θ) + (N/b) Σ_B log softmax(f_θ(x))_y for a linear softmax model, written out in float64 numpy with
  scipy's normal log density: N = 40, b = 8 (a likelihood scaled by N, or not scaled, is far off)."""
  rng = np.random.default_rng(0)
  w, bias = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)
  x, y = rng.normal(size=(8, 3)).astype(np.float32), np.array([0, 1, 2, 3, 3, 2, 1, 0])
  params = {"w": jnp.asarray(w), "b": jnp.asarray(bias)}
  logd = targets.make_classification_logdensity(lambda p, xb: xb @ p["w"] + p["b"], data_size=40, prior_scale=2.0)
  got = float(logd(params, {"x": jnp.asarray(x), "y": jnp.asarray(y)}))
  logits = x.astype(np.float64) @ w.astype(np.float64) + bias
  log_softmax = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
  prior = stats.norm.logpdf(np.r_[w.ravel(), bias].astype(np.float64), scale=2.0).sum()
  want = prior + 40 / 8 * np.sum(log_softmax[np.arange(8), y])
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_heteroscedastic_model_shapes():
  model = targets.make_regression_model((4,), noise="heteroscedastic")
  x = jnp.ones((5, 3))
  mu, ls = model.apply(model.init(jax.random.key(0), x), x)
  assert mu.shape == ls.shape == (5,)


@pytest.mark.slow
def test_predictive_metrics_single_gaussian():
  rng = np.random.default_rng(0)
  y = rng.standard_normal(4000)
  mu, ls = np.zeros((1, 4000)), np.zeros((1, 4000))
  m = targets.predictive_metrics(mu, ls, y, rng=rng, min_draws=2000)
  np.testing.assert_allclose(m["lppd"], stats.norm.logpdf(y).mean(), rtol=1e-6)
  np.testing.assert_allclose(m["rmse"], np.sqrt(np.mean(y ** 2)), rtol=1e-6)
  for p in (80, 90, 95):
    np.testing.assert_allclose(m[f"coverage_{p}"], p / 100, atol=0.03)
  assert m["cal_error"] < 0.03
  np.testing.assert_allclose(m["width_95"], 2 * 1.96, rtol=0.05)


@pytest.mark.slow
def test_ess_matches_ar1_theory():
  rng = np.random.default_rng(0)
  rho, n = 0.6, 4000
  x = np.zeros((4, n))
  for t in range(1, n):
    x[:, t] = rho * x[:, t - 1] + rng.standard_normal(4)
  ours = mcmc.ess(x[..., None])[0]
  np.testing.assert_allclose(ours, 4 * n * (1 - rho) / (1 + rho), rtol=0.15)
  iid = rng.standard_normal((2, 2000))
  np.testing.assert_allclose(mcmc.ess(iid), 4000, rtol=0.15)
  assert mcmc.bulk_ess(x).shape == ()


def test_split_rhat():
  rng = np.random.default_rng(1)
  good = rng.standard_normal((3, 1000))
  np.testing.assert_allclose(mcmc.split_rhat(good), 1.0, atol=0.01)
  # A drifting single chain fails the within-chain check.
  drift = (np.linspace(0, 5, 1000) + rng.standard_normal(1000))[None]
  assert mcmc.split_rhat(drift) > 1.5
  assert mcmc.rank_split_rhat(drift) > 1.5
