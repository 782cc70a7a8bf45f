"""The `energy_quantile` step-size tuner: a Robbins–Monro quantile tracker on the same-batch ΔE²/d."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxml.smile import adaptation as adapt
from jaxml.smile import chains, checks, kernel
from tests.smile import analytic


def test_threshold_is_the_chi2_quantile_of_the_target():
  for q in (0.5, 0.9, 0.99):
    cfg = adapt.TunerConfig(energy_quantile=q, target_energy_var=3e-4)
    np.testing.assert_allclose(float(adapt.energy_quantile_threshold(cfg)), 3e-4 * stats.chi2.ppf(q, 1), rtol=1e-4)


def _update(eps, de, t, cfg, *, nonfinite=False, scale=0.0, avg=0.0):
  state = adapt.TunerState(jnp.float32(avg), jnp.float32(0.0), jnp.int32(t))
  return adapt.energy_quantile_update(jnp.float32(eps), jnp.float32(de), 1, state, cfg, jnp.float32(1.0),
                                      jnp.bool_(nonfinite), scale)


def test_update_rule_steps_gates_and_gain():
  cfg = adapt.TunerConfig(energy_quantile=0.9, quantile_gain=0.1, target_energy_var=1.0, adapt_steps=100)
  tau = float(adapt.energy_quantile_threshold(cfg))
  small, big = math.sqrt(0.5 * tau), math.sqrt(2.0 * tau)
  np.testing.assert_allclose(_update(0.1, small, 5, cfg)[0], 0.1 * math.exp(0.1 * 0.1), rtol=1e-5)     # grow γ(1−q)
  np.testing.assert_allclose(_update(0.1, big, 5, cfg)[0], 0.1 * math.exp(-0.1 * 0.9), rtol=1e-5)      # shrink γq
  # |ΔE| below the float32 resolution of |ℓ| is no evidence: no growth; a large error still shrinks.
  np.testing.assert_allclose(_update(0.1, small, 5, cfg, scale=1e9)[0], 0.1, rtol=1e-6)
  np.testing.assert_allclose(_update(0.1, big, 5, cfg, scale=1e3)[0], 0.1 * math.exp(-0.09), rtol=1e-5)
  np.testing.assert_allclose(_update(0.1, small, 5, cfg, nonfinite=True)[0], 0.05, rtol=1e-6)         # halve
  # Gain γ₀ · (adapt_steps/2) / t after the first half: at t = 80 it is 0.1 · 50/80.
  np.testing.assert_allclose(_update(0.1, big, 80, cfg, avg=math.log(0.1))[0], 0.1 * math.exp(-0.1 * 0.9 * 50 / 80),
                             rtol=1e-5)
  np.testing.assert_allclose(_update(0.1, big, 5, cfg._replace(adapt_steps=0))[0], 0.1 * math.exp(-0.09), rtol=1e-5)
  # decay_steps = t₀: the count restarts at h = 50, γ₀ / (1 + (t − h)/t₀); unchanged in the first half.
  fast = cfg._replace(decay_steps=20)
  np.testing.assert_allclose(_update(0.1, big, 80, fast, avg=math.log(0.1))[0], 0.1 * math.exp(-0.1 * 0.9 / (1 + 30 / 20)),
                             rtol=1e-5)
  np.testing.assert_allclose(_update(0.1, big, 50, fast)[0], 0.1 * math.exp(-0.09), rtol=1e-5)


def test_pool_over_chains_averages_within_equal_keys_only():
  values, keys = jnp.asarray([1.0, 2.0, 3.0, 5.0]), jnp.asarray([[1e-3], [1e-3], [1e-2], [1e-2]])
  pooled = jax.vmap(adapt.pool_over_chains, axis_name=adapt.CHAIN_AXIS)(values, keys)
  np.testing.assert_allclose(pooled, [1.5, 1.5, 4.0, 4.0])


def test_average_then_freeze():
  """ε at t = adapt_steps is exp(mean log ε over the second half); afterwards ε does not move."""
  cfg = adapt.TunerConfig(energy_quantile=0.5, quantile_gain=0.2, target_energy_var=1.0, adapt_steps=8)
  tau = float(adapt.energy_quantile_threshold(cfg))
  signs = [1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1]         # 1: error above τ
  eps, state, logs = jnp.float32(0.1), adapt.TunerState(jnp.float32(0), jnp.float32(0), jnp.int32(1)), []
  for s in signs:
    de = jnp.float32(math.sqrt((4.0 if s else 0.25) * tau))
    new_eps, state = adapt.energy_quantile_update(eps, de, 1, state, cfg, jnp.float32(0.1), jnp.bool_(False))
    logs.append(float(new_eps))
    eps = new_eps
  # Live iterates of steps 5..7 and the step-8 iterate before it is replaced by the average.
  live, e = [], 0.1
  for t, s in enumerate(signs[:8], start=1):
    g = 0.2 * min(1.0, 4 / t)
    e = e * math.exp(g * ((0.0 if s else 1.0) - 0.5))
    live.append(e)
  np.testing.assert_allclose(logs[:7], live[:7], rtol=1e-5)
  np.testing.assert_allclose(logs[7], math.exp(np.mean(np.log(live[4:8]))), rtol=1e-5)
  assert all(v == logs[7] for v in logs[8:])


def _eps_trace(sampler, check, starts, steps, batch):
  """(ε per step, same-batch ΔE per step) of the chains."""
  return analytic.trace_chains(sampler, check, starts, steps, batch,
                               record=lambda st, info, start: (info.step_size, info.energy_change))


@pytest.mark.parametrize("decay_steps,pool", [(0, False), (100, False), (100, True)])
def test_gaussian_converges_to_the_target_quantile_from_either_side(decay_steps, pool):
  """Full-batch linear regression (a Gaussian posterior, d = 8): from ε₀ 10× too small and 10× too large the
  frozen ε agree, and at that fixed ε the fraction of steps with ΔE²/d ≤ τ is q; with the plain gain, the restarted
  gain and the chain-pooled signal (one ε for all chains)."""
  check = checks.linear_regression(n=256, p=8, batch_size=256)
  d, q, steps = 8, 0.8, 4000
  base = float(check.ref_std.min()) * math.sqrt(d)
  starts = jnp.asarray(check.ref_mean, jnp.float32) + 0.5 * jnp.asarray(check.ref_std, jnp.float32) * \
      jax.random.normal(jax.random.key(0), (4, d))
  opts = dict(precondition=False, L=math.sqrt(d) * float(np.sqrt(np.mean(check.ref_std ** 2))),
              tuner="energy_quantile", energy_quantile=q, target_energy_var=1e-3, adapt_steps=steps * 3 // 4,
              decay_steps=decay_steps, pool_chains=pool)
  finals = []
  for eps0 in (0.1 * base, 10.0 * base):
    eps, _ = _eps_trace(kernel.psmile(check.logdensity_fn, step_size=eps0, **opts), check, starts, steps, 256)
    half = eps[:, steps * 3 // 8: steps * 3 // 4]
    assert np.max(half.max(1) / half.min(1)) < 2.0
    assert np.all(eps[:, -1] == eps[:, steps * 3 // 4 - 1])         # frozen for sampling
    if pool:
      assert np.all(eps == eps[:1])
    finals.append(eps[:, -1])
  np.testing.assert_allclose(np.median(finals[0]), np.median(finals[1]), rtol=0.3)
  fixed = float(np.median(np.concatenate(finals)))
  _, de = _eps_trace(kernel.psmile(check.logdensity_fn, step_size=fixed, tuned=False,
                                   **{k: v for k, v in opts.items()
                                      if k not in ("tuner", "adapt_steps", "decay_steps", "pool_chains")}),
                     check, starts, 3000, 256)
  tau = float(adapt.energy_quantile_threshold(adapt.TunerConfig(energy_quantile=q, target_energy_var=1e-3)))
  frac = float(np.mean(de[:, 500:] ** 2 / d <= tau))
  assert abs(frac - q) < 0.08, frac


def test_minibatch_eps_does_not_drift():
  """Minibatch linear regression: the authors' rule drifts (see test_spread); energy_quantile stays within 2×."""
  check = checks.linear_regression(n=512, p=6, batch_size=32)
  eps0 = 0.5 * float(check.ref_std.min()) * math.sqrt(6)
  starts = jnp.asarray(check.ref_mean, jnp.float32) + 0.01 * jax.random.normal(jax.random.key(0), (4, 6))
  steps = 6000
  eps, _ = _eps_trace(kernel.psmile(check.logdensity_fn, step_size=eps0, tuner="energy_quantile", adapt_steps=steps),
                      check, starts, steps, 32)
  half = eps[:, steps // 2:]
  assert np.all(np.isfinite(eps))
  assert np.max(half.max(1) / half.min(1)) < 2.0


def test_restarted_gain_stops_the_drift_of_the_decaying_gain():
  """Minibatch linear regression with γ₀ = 0.5: under the plain gain γ₀h/t (still ≥ γ₀/2 at the end) the live ε moves
  more than 2× over the second half; with the count restarted at h (t₀ = 50) it moves less than 2×, per chain and
  with the signal pooled over the chains (which then share one ε)."""
  check = checks.linear_regression(n=512, p=6, batch_size=32)
  eps0 = 0.5 * float(check.ref_std.min()) * math.sqrt(6)
  starts = jnp.asarray(check.ref_mean, jnp.float32) + 0.01 * jax.random.normal(jax.random.key(0), (4, 6))
  steps = 4000
  drift = {}
  for t0, pool in ((0, False), (50, False), (50, True)):
    eps, _ = _eps_trace(kernel.psmile(check.logdensity_fn, step_size=eps0, tuner="energy_quantile", adapt_steps=steps,
                                      quantile_gain=0.5, decay_steps=t0, pool_chains=pool), check, starts, steps, 32)
    half = eps[:, steps // 2:]
    drift[t0, pool] = half.max(1) / half.min(1)
    if pool:
      assert np.all(eps == eps[:1])
  assert np.max(drift[0, False]) > 2.0, drift
  assert np.max(drift[50, False]) < 2.0 and np.max(drift[50, True]) < 2.0, drift


def test_divergence_guard_reverts_and_costs_three_gradients():
  check = checks.anisotropic_gaussian(dim=4)
  f = check.logdensity_fn
  sampler = kernel.psmile(f, step_size=50.0, tuner="energy_quantile", precondition=False, divergence_factor=10.0)
  assert chains.smile_chain_kernel(sampler).grads_per_step == 3
  pos = jnp.asarray(check.ref_std, jnp.float32)
  state = sampler.init(pos, check.data, jax.random.key(0))
  new, info = sampler.step(jax.random.key(1), state, check.data)
  assert bool(info.reset)
  np.testing.assert_array_equal(np.asarray(new.position), np.asarray(pos))
  assert float(new.step_size) < 50.0
  calm = kernel.psmile(f, step_size=1e-3, tuner="energy_quantile", precondition=False)
  _, info = calm.step(jax.random.key(1), calm.init(pos, check.data, jax.random.key(0)), check.data)
  assert not bool(info.reset)


def test_pool_over_chains_midmean_within_equal_keys_only():
  """rank_by keeps the middle half of each key group (ranks ⌊n/4⌋ … n − 1 − ⌊n/4⌋): of 4 chains the middle 2, of
  5 the middle 3; the outlying values do not count."""
  values = jnp.asarray([1.0, 2.0, 3.0, 100.0, 10.0, 20.0, 30.0, 40.0, -500.0])
  keys = jnp.asarray([[1.0]] * 4 + [[2.0]] * 5)
  score = jnp.asarray([0.1, 0.2, 0.3, 0.9, 0.4, 0.5, 0.6, 0.7, 0.0])     # ranks: 0 1 2 3 | 1 2 3 4 0
  pooled = jax.vmap(adapt.pool_over_chains, axis_name=adapt.CHAIN_AXIS)(values, keys, score)
  np.testing.assert_allclose(pooled, [2.5] * 4 + [20.0] * 5)


def _pooled_eps(stat, *, heavy, steps=6000, chains=5, eps_star=0.01):
  """ε of `chains` pooled chains whose ΔE²/d = (ε/ε*)⁶ · target · χ²₁ (so P(x ≤ τ) = q exactly at ε = ε*); with
  `heavy`, chain 0's error is 1e3 · target (≫ τ) on a random 60 % of its steps, whatever ε (a heavy tail)."""
  cfg = adapt.TunerConfig(tuner="energy_quantile", energy_quantile=0.9, target_energy_var=1e-3, quantile_gain=0.1,
                          pool_chains=True, pool_stat=stat, pool_window=100.0, eps_floor_frac=1e-3)

  def one(key, bad):
    def body(carry, k):
      eps, state = carry
      kz, kb = jax.random.split(k)
      x = (eps / eps_star) ** 6 * cfg.target_energy_var * jax.random.normal(kz) ** 2
      x = jnp.where(bad & (jax.random.uniform(kb) < 0.6), 1e3 * cfg.target_energy_var, x)
      eps, state = adapt.energy_quantile_update(eps, jnp.sqrt(x), 1, state, cfg, jnp.float32(0.1 * eps_star),
                                                jnp.bool_(False))
      return (eps, state), eps

    return jax.lax.scan(body, (jnp.float32(0.1 * eps_star), adapt.tuner_init()), jax.random.split(key, steps))[1]

  bad = jnp.arange(chains) == 0 if heavy else jnp.zeros((chains,), bool)
  eps = jax.jit(jax.vmap(one, axis_name=adapt.CHAIN_AXIS))(jax.random.split(jax.random.key(0), chains), bad)
  return np.asarray(eps)


def test_midmean_pooling_ignores_one_heavy_tailed_chain():
  """One of five pooled chains with a heavy-tailed energy error (60 % of its steps far above τ at any ε) does not
  move the midmean-pooled ε (it settles at ε*, where the other chains cross τ at rate 1 − q, as without that
  chain), while the mean-pooled ε is pulled ≥ 3× below ε* by it (to the floor: that chain alone crosses τ more
  often than 5(1 − q)). Pooled chains share one ε either way."""
  eps_star = 0.01
  late = slice(4000, None)
  runs = {(stat, heavy): _pooled_eps(stat, heavy=heavy) for stat in adapt.POOL_STATS for heavy in (False, True)}
  for eps in runs.values():
    assert np.all(eps == eps[:1])
  geo = {k: float(np.exp(np.mean(np.log(v[0, late])))) for k, v in runs.items()}
  for k in (("midmean", False), ("midmean", True), ("mean", False)):
    np.testing.assert_allclose(geo[k], eps_star, rtol=0.15, err_msg=str(geo))
  assert geo["mean", True] < eps_star / 3, geo


def test_midmean_pooling_halves_only_for_a_non_finite_step_in_the_middle_half():
  """A non-finite step halves the shared ε under "mean" pooling whichever chain had it; under "midmean" only if
  that chain ranks in the middle half by its recent signal (here: ranked by the EMA in state.std)."""
  ema = jnp.asarray([-0.5, 0.0, 0.001, 0.002, 0.003])      # chain 0 crossed often recently: outside the middle half
  state = adapt.TunerState(jnp.zeros(5), ema, jnp.full((5,), 5, jnp.int32))

  def eps_after(stat, flags):
    cfg = adapt.TunerConfig(tuner="energy_quantile", energy_quantile=0.9, target_energy_var=1.0, pool_chains=True,
                            pool_stat=stat)
    return np.asarray(jax.vmap(lambda s, f: adapt.energy_quantile_update(jnp.float32(0.1), jnp.float32(0.1), 1, s,
                                                                         cfg, jnp.float32(0.1), f)[0],
                               axis_name=adapt.CHAIN_AXIS)(state, jnp.asarray(flags)))

  np.testing.assert_allclose(eps_after("mean", [True, False, False, False, False]), 0.05, rtol=1e-6)
  assert np.all(eps_after("midmean", [True, False, False, False, False]) > 0.09)
  np.testing.assert_allclose(eps_after("midmean", [False, False, True, False, False]), 0.05, rtol=1e-6)
