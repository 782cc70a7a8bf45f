"""Known-posterior checks, the partial refresh on full-batch targets, and the energy_var tuner."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
  sampler = kernel.psmile(check.logdensity_fn, step_size=eps, tuned=False, L=L, precondition=precondition)
  starts = jax.random.normal(jax.random.key(0), (4, 6))
  res = chains.run_chains(chains.smile_chain_kernel(sampler), starts, check.data, jax.random.key(1), batch_size=1,
                          num_warmup=1000, num_samples=400, thin=5)
  return checks.spread_errors(np.asarray(res.positions).reshape(-1, 6), check)[1]


@pytest.mark.parametrize("precondition", [False, True])
def test_full_batch_needs_a_finite_refresh(precondition):
  """Without gradient noise and with L = ∞ the isokinetic flow is deterministic (not ergodic on a
  Gaussian): the spread is wrong. A finite L (√d · rms scale) restores it."""
  finite = _full_batch_std_error(math.sqrt(6) * 3.0, precondition)
  infinite = _full_batch_std_error(math.inf, precondition)
  assert finite < 0.12, finite
  assert infinite > 2 * finite, (infinite, finite)


def test_energy_var_tuner_does_not_drift_while_ref_does():
  check = checks.linear_regression(n=512, p=6, batch_size=32)
  eps0 = 0.5 * float(check.ref_std.min()) * math.sqrt(6)
  starts = jnp.asarray(check.ref_mean, jnp.float32) + 0.01 * jax.random.normal(jax.random.key(0), (4, 6))
  steps = 6000

  def eps_trace(sampler):
    def one(pos, key):
      batches = jax.random.randint(jax.random.fold_in(key, 1), (steps, 32), 0, 512)
      state = sampler.init(pos, {"x": check.data["x"][:32], "y": check.data["y"][:32]}, key)

      def body(st, inp):
        k, idx = inp
        st, info = sampler.step(k, st, {"x": check.data["x"][idx], "y": check.data["y"][idx]})
        return st, info.step_size

      return jax.lax.scan(body, state, (jax.random.split(key, steps), batches))[1]

    return np.asarray(jax.jit(jax.vmap(one))(starts, jax.random.split(jax.random.key(2), 4)))

  def second_half_ratio(trace):
    half = trace[:, steps // 2:]
    return float(np.max(half.max(1) / half.min(1)))

  new = eps_trace(kernel.psmile(check.logdensity_fn, step_size=eps0, tuner="energy_var"))
  ref = eps_trace(kernel.psmile(check.logdensity_fn, step_size=eps0, tuner="ref"))
  assert np.all(np.isfinite(new))
  assert second_half_ratio(new) < 2.0, second_half_ratio(new)
  assert second_half_ratio(ref) > 2.0, second_half_ratio(ref)


def test_energy_var_costs_three_gradients_and_rejects_unknown_rules():
  f = checks.anisotropic_gaussian(dim=3).logdensity_fn
  assert chains.smile_chain_kernel(kernel.psmile(f, step_size=0.1, tuner="energy_var")).grads_per_step == 3
  assert chains.smile_chain_kernel(kernel.psmile(f, step_size=0.1, tuner="energy_var", tuned=False)).grads_per_step == 2
  assert chains.smile_chain_kernel(kernel.psmile(f, step_size=0.1)).grads_per_step == 2
  with pytest.raises(ValueError):
    kernel.psmile(f, step_size=0.1, tuner="nope")


@pytest.mark.slow
def test_logistic_reference_converges(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  check = checks.logistic_regression(n=128, p=3)
  assert np.all(check.ref_std > 0) and np.all(np.isfinite(check.ref_mean))
  again = checks.logistic_regression(n=128, p=3)     # from the cache
  np.testing.assert_array_equal(again.ref_mean, check.ref_mean)
