"""Acceptance tests of spec §12 for the SMILE kernels."""

import math

import blackjax
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from blackjax.mcmc import integrators

from jaxml.smile import chains, kernel
from tests.smile import analytic


def _diag_gaussian(dim=6):
  scales = jnp.linspace(0.5, 2.0, dim)
  mean = jnp.linspace(-1.0, 1.0, dim)
  full = lambda x: -0.5 * jnp.sum(((x - mean) / scales) ** 2)
  return mean, scales, full, lambda x, minibatch: full(x)


def test_full_batch_naive_step_equals_blackjax_mclmc():
  _, _, full, batched = _diag_gaussian()
  pos = jnp.ones((6,)) * 0.3
  ours = kernel.smile(batched, step_size=0.2, L=1.5, tuned=False)
  ref = blackjax.mclmc(full, L=1.5, step_size=0.2)
  init_key = jax.random.key(3)
  s_ours = ours.init(pos, None, init_key)
  s_ref = ref.init(pos, init_key)
  chex.assert_trees_all_close(s_ours.integrator, s_ref)
  for i in range(4):
    k = jax.random.key(10 + i)
    s_ours, info = jax.jit(ours.step)(k, s_ours, None)
    s_ref, info_ref = jax.jit(ref.step)(k, s_ref)
    chex.assert_trees_all_close(s_ours.integrator, s_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(info.energy_change, info_ref.energy_change, rtol=1e-4, atol=1e-6)


def test_recipe_b_integrator_matches_isokinetic_mclachlan():
  _, _, full, _ = _diag_gaussian()
  pos = jnp.arange(6.0) / 7.0
  mom = jnp.ones((6,)) / jnp.sqrt(6.0)
  state = integrators.new_integrator_state(full, pos, mom)
  imm = jnp.linspace(0.5, 2.0, 6)
  ref, dk_ref = integrators.isokinetic_mclachlan(full, imm)(state, 0.3)
  ours, dk, finite = kernel.make_integrator(full, imm)(state, 0.3)
  chex.assert_trees_all_close(ours, ref, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(dk, dk_ref, rtol=1e-6)
  assert bool(finite)


def test_full_batch_naive_recovers_gaussian_moments():
  mean, scales, _, batched = _diag_gaussian()
  sampler = kernel.smile(batched, step_size=0.6, L=3.0, tuned=False)

  def chain(key):
    state = sampler.init(jnp.zeros(6), None, key)
    def body(s, k):
      s, _ = sampler.step(k, s, None)
      return s, s.position
    _, xs = jax.lax.scan(body, state, jax.random.split(key, 6000))
    return xs[1000:]

  xs = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(0), 4))).reshape(-1, 6)
  np.testing.assert_allclose(xs.mean(0), mean, atol=0.25)
  np.testing.assert_allclose(xs.std(0), scales, rtol=0.15)


def _bias_pair(eps, steps, num_chains):
  kappa, prec, cov = analytic.rotated_gaussian()
  logd = analytic.noisy_logdensity(prec)
  noise_sd = jnp.sqrt(256.0) * kappa
  out = []
  for precond in (False, True):
    s = kernel.psmile(logd, step_size=eps, L=1000.0, tuned=False, precondition=precond)
    x, _, _ = analytic.run_noisy_chains(s, prec, noise_sd, num_chains=num_chains, num_steps=steps,
                                        burn_in=steps // 10, thin=10)
    out.append(analytic.bias_squared(x, cov))
  return out


def test_preconditioner_reduces_anisotropy_bias_fast():
  # Shorter, larger-ε version of §12.3 (measured: 0.23 vs 0.14).
  naive, pre = _bias_pair(3e-2, 50_000, 4)
  assert pre <= 0.75 * naive, (naive, pre)


@pytest.mark.slow
def test_preconditioner_halves_anisotropy_bias_spec():
  # §12.3 as specified: ε = 3e-3, 400k steps (measured: 0.139 vs 0.066).
  naive, pre = _bias_pair(3e-3, 400_000, 2)
  assert pre <= 0.5 * naive, (naive, pre)


def test_reset_rate_band():
  kappa, prec, _ = analytic.rotated_gaussian()
  s = kernel.psmile(analytic.noisy_logdensity(prec), step_size=3e-3, L=1000.0, p_reset=0.99, alpha=0.05)
  _, resets, eps = analytic.run_noisy_chains(s, prec, jnp.sqrt(256.0) * kappa, num_chains=2, num_steps=20_000,
                                             burn_in=0, thin=1)
  rate = resets.mean()
  assert 0.003 <= rate <= 0.03, rate
  assert np.all(np.isfinite(eps))


def test_nonfinite_injection_reverts_and_halves():
  _, _, _, batched = _diag_gaussian()
  logd = lambda x, minibatch: batched(x, None) + jnp.sum(minibatch) * jnp.sum(x)
  s = kernel.psmile(logd, step_size=0.1)
  state = s.init(jnp.ones(6), jnp.zeros(3), jax.random.key(0))
  step = jax.jit(s.step)
  for i in range(12):
    state, _ = step(jax.random.key(i), state, jnp.zeros(3))
  before = state
  bad_batch = jnp.array([0.0, jnp.inf, 0.0])
  state, info = step(jax.random.key(99), before, bad_batch)
  chex.assert_tree_all_finite(state)
  assert not bool(info.nonans) and not bool(info.reset)
  chex.assert_trees_all_equal(state.position, before.position)
  np.testing.assert_allclose(state.step_size, 0.5 * before.step_size, rtol=1e-6)
  chex.assert_trees_all_equal(state.tuner.mean, before.tuner.mean)
  chex.assert_trees_all_equal(state.tuner.std, before.tuner.std)
  chex.assert_trees_all_equal(state.tuner.t, before.tuner.t)
  chex.assert_trees_all_equal(state.precond, before.precond)
  np.testing.assert_allclose(jnp.linalg.norm(state.integrator.momentum), 1.0, rtol=1e-5)
  # The chain keeps going after the bad batch.
  state, info = step(jax.random.key(100), state, jnp.zeros(3))
  assert bool(info.nonans)
  chex.assert_tree_all_finite(state)


def test_peg_counter():
  n, b, dim = 32, 8, 2
  data = {"x": jnp.ones((n, dim)), "y": jnp.zeros((n,))}
  logd = lambda p, mb: -0.5 * jnp.sum(p ** 2) - jnp.sum((mb["x"] @ p - mb["y"]) ** 2) * n / mb["y"].shape[0]
  from jaxml.smile import baselines
  pos = jnp.zeros((2, dim))
  r = chains.run_chains(chains.smile_chain_kernel(kernel.psmile(logd, step_size=1e-2)), pos, data, jax.random.key(0),
                        batch_size=b, num_warmup=4, num_samples=2, thin=2)
  assert r.peg_per_chain == 2 * b * 8 + b
  r = chains.run_chains(baselines.sgld_kernel(logd, step_size=1e-3), pos, data, jax.random.key(0),
                        batch_size=b, num_warmup=4, num_samples=2, thin=2)
  assert r.peg_per_chain == b * 8 + b
  full = lambda p: logd(p, data) * 1.0
  r = chains.run_mclmc(full, pos, jax.random.key(0), data_size=n, num_tune=10, num_samples=2, thin=3)
  n_tune = round(10 * 0.8) + round(10 * 0.1)   # phase 3 needs >= 2 steps, so it is skipped here
  assert r.peg_per_chain == 2 * n * (n_tune + 6) + n


def test_single_compile_under_vmap():
  _, _, _, batched = _diag_gaussian()
  s = kernel.psmile(lambda x, mb: batched(x, None) + jnp.sum(mb) * 0.0, step_size=0.1)
  states = jax.vmap(s.init)(jnp.zeros((3, 6)), jnp.zeros((3, 4)), jax.random.split(jax.random.key(0), 3))
  step = jax.jit(jax.vmap(chex.assert_max_traces(s.step, n=1)))
  for i in range(3):
    states, info = step(jax.random.split(jax.random.key(i), 3), states, jnp.ones((3, 4)))
  chex.assert_shape(info.energy_change, (3,))
  chex.assert_tree_all_finite(states)


def test_same_key_same_chain():
  _, _, _, batched = _diag_gaussian()
  s = kernel.psmile(batched, step_size=0.1)
  step = jax.jit(s.step)

  def run(key):
    st = s.init(jnp.zeros(6), None, key)
    for i in range(3):
      st, _ = step(jax.random.fold_in(key, i), st, None)
    return st
  chex.assert_trees_all_equal(run(jax.random.key(5)), run(jax.random.key(5)))
  assert not math.isclose(float(run(jax.random.key(6)).position[0]), float(run(jax.random.key(5)).position[0]))


def test_nonfinite_without_halving_keeps_eps_and_counts():
  """The reference's naive kernels: a non-finite step is reverted and counted, ε is kept."""
  _, _, _, batched = _diag_gaussian()
  logd = lambda x, minibatch: batched(x, None) + jnp.sum(minibatch) * jnp.sum(x)
  s = kernel.psmile(logd, step_size=0.1, tuned=False, nonfinite_halving=False)
  state = s.init(jnp.ones(6), jnp.zeros(3), jax.random.key(0))
  for i in range(3):
    state, _ = s.step(jax.random.key(i), state, jnp.zeros(3))
  before = state
  state, info = s.step(jax.random.key(9), before, jnp.array([0.0, jnp.nan, 0.0]))
  assert not bool(info.nonans)
  chex.assert_trees_all_equal(state.position, before.position)
  assert float(state.step_size) == float(before.step_size) == pytest.approx(0.1)
  np.testing.assert_allclose(jnp.linalg.norm(state.integrator.momentum), 1.0, rtol=1e-5)
