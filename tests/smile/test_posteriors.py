"""Known-posterior suite (references are right) and pSMILE with automatic L (the default it proposes)."""

import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.smile import auto_l, chains, checks, kernel, posteriors

ROOT = str(pathlib.Path(__file__).resolve().parents[2] / "data")


def test_banana_reference_matches_its_generative_draws():
  check = posteriors.banana()
  rng = np.random.default_rng(0)
  x1 = 2.0 * rng.standard_normal(400_000)
  x2 = 0.25 * (x1 ** 2 - 4.0) + rng.standard_normal(400_000)
  mean_err, std_err = checks.spread_errors(np.stack([x1, x2], 1), check)
  assert mean_err < 0.01 and std_err < 0.01


@pytest.mark.slow
def test_ar1_reference_is_the_gaussian_posterior():
  check = posteriors.ar1_latent(length=12, batch_size=12)
  full = lambda th: check.logdensity_fn(th, check.data)
  grad = np.asarray(jax.grad(full)(jnp.asarray(check.ref_mean, jnp.float32)))
  assert np.max(np.abs(grad)) < 1e-3 * np.max(1 / check.ref_std ** 2)
  hess = np.asarray(jax.hessian(full)(jnp.zeros(12)), np.float64)
  np.testing.assert_allclose(np.sqrt(np.diag(np.linalg.inv(-hess))), check.ref_std, rtol=1e-4)


def test_eight_schools_quadrature_matches_published_moments():
  # Centred eight schools, half-Cauchy(5) on τ: posterior mean of μ ≈ 4.4 (sd 3.3), of θ_1 ≈ 6.2 (sd 5.6).
  check = posteriors.eight_schools()
  np.testing.assert_allclose(check.ref_mean[[0, 2]], [4.4, 6.2], atol=0.1)
  np.testing.assert_allclose(check.ref_std[[0, 2]], [3.3, 5.6], atol=0.1)
  assert np.isfinite(check.logdensity_fn(jnp.asarray(check.ref_mean, jnp.float32), check.data))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logreg", "logreg_boston", "logreg_concrete"])
def test_cached_nuts_references_agree_with_the_laplace_approximation(name):
  check = posteriors.suite(ROOT, (name,))[0]
  assert check.ref_mean.shape == check.ref_std.shape == (check.data["x"].shape[1],)
  full = lambda th: check.logdensity_fn(th, check.data)
  mean = jnp.asarray(check.ref_mean, jnp.float32)
  # a logistic posterior on hundreds of rows is close to Gaussian: near its mean the gradient is O(1) in std units
  # and the curvature gives the std to ~30 % (boston's second weight is the most skewed: 26 %)
  assert np.max(np.abs(np.asarray(jax.grad(full)(mean)) * check.ref_std)) < 1.0
  laplace = np.sqrt(np.diag(np.linalg.inv(-np.asarray(jax.hessian(full)(mean), np.float64))))
  np.testing.assert_allclose(laplace, check.ref_std, rtol=0.3)


def test_explicit_l_overrides_and_infinite_l_warns():
  check = posteriors.correlated_gaussian(dim=4)
  sampler = auto_l.psmile(check.logdensity_fn, step_size=0.5, L=2.0)
  assert isinstance(sampler.init(jnp.zeros(4), check.data, jax.random.key(0)), kernel.SmileState)
  with pytest.warns(UserWarning, match="spread"):
    auto_l.psmile(check.logdensity_fn, step_size=0.5, L=math.inf)


def _auto_run(check, steps, **kw):
  sampler = auto_l.psmile(check.logdensity_fn, step_size=0.5, num_steps=steps, **kw)
  kern = chains.smile_chain_kernel(sampler)
  starts = jax.random.normal(jax.random.key(0), (4, check.ref_mean.shape[0]))
  return chains.run_chains(kern, starts, check.data, jax.random.key(1), batch_size=check.batch_size,
                           num_warmup=steps // 2, num_samples=steps // 4, thin=2)


@pytest.mark.slow
def test_auto_l_tracks_the_spread_and_freezes_after_warmup():
  check = posteriors.correlated_gaussian(dim=4, rho=0.5)
  res = _auto_run(check, 2000)
  length = np.asarray(res.states.L)
  # the default L = 0.7 √(Σ Var θ) = 0.7 · 2 for four unit variances (blackjax's 0.4 would give 0.8, outside the
  # 10 % band); frozen at the end of warmup (adapt_steps = 1000)
  assert abs(np.median(length) / 1.4 - 1) < 0.1 and np.all((length > 0.7) & (length < 2.8))
  mean_err, std_err = checks.spread_errors(np.asarray(res.positions).reshape(-1, 4), check)
  assert mean_err < 0.25 and std_err < 0.15


def test_l_adapts_during_adapt_steps_then_stays():
  check = posteriors.correlated_gaussian(dim=3, rho=0.0)
  sampler = auto_l.psmile(check.logdensity_fn, step_size=0.5, adapt_steps=4, l_floor=0.01)
  state = sampler.init(jnp.ones(3), check.data, jax.random.key(0))
  step = jax.jit(sampler.step)
  lengths = []
  for i in range(8):
    state, info = step(jax.random.key(i), state, check.data)
    assert bool(info.nonans)
    lengths.append(float(state.L))
  assert len(set(lengths[:4])) > 1 and len(set(lengths[3:])) == 1
