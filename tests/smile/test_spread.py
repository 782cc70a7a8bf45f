"""Known-posterior checks and the partial refresh on full-batch targets."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.smile import adaptation as adapt
from jaxml.smile import chains, checks, kernel


def test_linear_regression_reference_is_the_posterior():
  check = checks.linear_regression(n=64, p=3, batch_size=64)
  grad = jax.grad(lambda th: check.logdensity_fn(th, check.data))
  assert np.max(np.abs(np.asarray(grad(jnp.asarray(check.ref_mean, jnp.float32))))) < 1e-2 * np.max(1 / check.ref_std)
  hess = np.asarray(jax.hessian(lambda th: check.logdensity_fn(th, check.data))(jnp.zeros(3)), np.float64)
  np.testing.assert_allclose(np.sqrt(np.diag(np.linalg.inv(-hess))), check.ref_std, rtol=1e-4)


def test_spread_errors_units():
  check = checks.anisotropic_gaussian(dim=4)
  rng = np.random.default_rng(0)
  exact = rng.standard_normal((200_000, 4)) * check.ref_std
  mean_err, std_err = checks.spread_errors(exact, check)
  assert mean_err < 0.01 and std_err < 0.01
  _, half = checks.spread_errors(0.5 * exact, check)
  assert abs(half - 0.5) < 0.01
  assert checks.spread_errors(exact * np.nan, check) == (math.inf, math.inf)


def _full_batch_std_error(L: float, precondition: bool) -> float:
  check = checks.anisotropic_gaussian(dim=6, max_scale=5.0)
  eps = 0.5 * math.sqrt(6)
  sampler = kernel.psmile(check.logdensity_fn, step_size=eps, tuner=adapt.fixed_tuner(), L=L, precondition=precondition)
  starts = jax.random.normal(jax.random.key(0), (4, 6))
  res = chains.run_chains(chains.smile_chain_kernel(sampler), starts, check.data, jax.random.key(1), batch_size=1,
                          num_warmup=1000, num_samples=400, thin=5)
  return checks.spread_errors(np.asarray(res.positions).reshape(-1, 6), check)[1]


@pytest.mark.slow
@pytest.mark.parametrize("precondition", [False, True])
def test_full_batch_needs_a_finite_refresh(precondition):
  """Without gradient noise and with L = ∞ the isokinetic flow is deterministic (not ergodic on a
  Gaussian): the spread is wrong. A finite L (√d · rms scale) restores it."""
  finite = _full_batch_std_error(math.sqrt(6) * 3.0, precondition)
  infinite = _full_batch_std_error(math.inf, precondition)
  assert finite < 0.12, finite
  assert infinite > 2 * finite, (infinite, finite)


@pytest.mark.slow
def test_logistic_reference_converges(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  check = checks.logistic_regression(n=128, p=3)
  assert np.all(check.ref_std > 0) and np.all(np.isfinite(check.ref_mean))
  again = checks.logistic_regression(n=128, p=3)     # from the cache
  np.testing.assert_array_equal(again.ref_mean, check.ref_mean)
