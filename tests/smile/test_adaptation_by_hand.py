"""The tuner and preconditioner of `smile/adaptation.py` against their formulas written out in numpy
(module doc of `adaptation`), step by step, with non-default settings and at the clips and ties."""

import numpy as np
import pytest
from scipy.special import ndtri

from jaxml.smile import adaptation as adapt

# numpy at import time (no XLA client before mutmut's fork server forks its workers).
_CFG = adapt.RefConfig(p_reset=0.9, alpha=0.3, delta=0.1, beta=0.2, freeze_steps=4, eps_min=1e-3, eps_max=0.5,
                       eps_floor_frac=0.1)


def _quantile(mean, std, p):
  var = std ** 2 + 1e-6
  mean = max(mean, 1e-12)
  k, scale = mean ** 2 / var, var / mean
  return max(k * scale * (1.0 - 1.0 / (9.0 * k) + ndtri(p) / (3.0 * np.sqrt(k))) ** 3, 0.0)


def _state(mean, std, t):
  return adapt.TunerState(np.float32(mean), np.float32(std), np.int32(t))


@pytest.mark.parametrize("mean,std,p", [(2.0, 0.7, 0.9), (0.4, 0.3, 0.1), (5.0, 4.0, 0.5), (1.0, 3.0, 0.02),
                                        (0.0, 0.5, 0.98)])
def test_gamma_quantile_is_the_wilson_hilferty_formula(mean, std, p):
  got = float(adapt.gamma_quantile(np.float32(mean), np.float32(std), p))
  np.testing.assert_allclose(got, _quantile(mean, std, p), rtol=2e-5, atol=1e-9)


def test_gamma_quantile_clips_at_zero_and_uses_the_variance_offset():
  assert float(adapt.gamma_quantile(np.float32(1.0), np.float32(3.0), 0.02)) == 0.0    # cube of a negative
  # std = 0: k = μ²/1e-6, so the quantile is μ up to O(1e-3 · z) and finite (no division by zero).
  got = float(adapt.gamma_quantile(np.float32(1.0), np.float32(0.0), 0.9))
  np.testing.assert_allclose(got, _quantile(1.0, 0.0, 0.9), rtol=1e-5)
  assert 1.0 < got < 1.01


def test_thresholds_are_the_three_quantiles():
  st = _state(1.5, 0.8, 30)
  got = [float(q) for q in adapt.tuner_thresholds(st, _CFG)]
  want = [_quantile(1.5, 0.8, p) for p in (0.9, 1.0 - 2.0 * 0.3 / 3.0, 0.3 / 3.0)]
  np.testing.assert_allclose(got, want, rtol=2e-5)


def test_tuner_update_follows_the_recursion_step_by_step():
  """t = 1, 2 take a itself as mean; σ² starts from 0 at t = 1; bias correction 1 − 0.5^(t−4) from t = 5."""
  draws = [0.0, 3.0, 1.0, 2.5, 0.5, 4.0, 1.5, 2.0e7, 0.7]
  beta = _CFG.beta
  st, mean, std = adapt.tuner_init(), 0.0, 0.0
  assert st.t.dtype == np.int32 and st.mean.dtype == st.std.dtype == np.float32   # an exact step counter
  for t, a in enumerate(draws, start=1):
    assert int(st.t) == t
    new_mean = a if t < 3 else (1 - beta) * mean + beta * a
    new_mean = min(max(new_mean, 1e-6), 1e6)
    var = (1 - beta) * std ** 2 * (t != 1) + beta * (a - new_mean) ** 2
    corr = 1.0 if t < 5 else 1.0 - 0.5 ** (t - 4)
    mean, std = new_mean, min(max(np.sqrt(var / corr), 1e-6), 1e7)
    st = adapt.tuner_update(st, np.float32(a), _CFG)
    np.testing.assert_allclose([float(st.mean), float(st.std)], [mean, std], rtol=2e-5, err_msg=f"t={t}")
    assert st.mean.dtype == np.float32 and st.std.dtype == np.float32
  assert int(st.t) == len(draws) + 1


def test_tuner_update_clips():
  low = adapt.tuner_update(adapt.tuner_init(), np.float32(0.0), _CFG)     # μ = max(0, 1e-6), σ = max(·, 1e-6)
  np.testing.assert_allclose([float(low.mean), float(low.std)], [1e-6, 1e-6], rtol=1e-5)
  high = adapt.tuner_update(adapt.tuner_init(), np.float32(5e6), _CFG)    # μ = min(5e6, 1e6), σ = √0.2 · 4e6
  assert float(high.mean) == 1e6                                         # exact in float32
  np.testing.assert_allclose(float(high.std), np.sqrt(0.2) * 4e6, rtol=1e-5)
  top = adapt.tuner_update(_state(1.0, 1.0, 2), np.float32(1e9), _CFG)   # σ clipped at 1e7
  assert float(top.std) == 1e7
  # From t = 2 the previous σ² enters ((1 − β) σ²); the recursion alone always hands t = 2 a σ of
  # 1e-6 (t = 1 sets μ = a), so only a state written by hand shows it.
  second = adapt.tuner_update(_state(2.0, 1.0, 2), np.float32(3.0), _CFG)
  np.testing.assert_allclose([float(second.mean), float(second.std)], [3.0, np.sqrt(0.8)], rtol=1e-6)


def test_step_size_rule_at_the_thresholds_the_freeze_and_the_clips():
  st = _state(1.0, 0.5, 4)              # t = freeze_steps: active
  _, q_hi, q_lo = (float(q) for q in adapt.tuner_thresholds(st, _CFG))
  eps, eps0, no, yes = np.float32(0.2), np.float32(0.3), np.bool_(False), np.bool_(True)

  def rule(a, state=st, step=eps, bad=no):
    return float(adapt.adapt_step_size(step, np.float32(a), state, _CFG, eps0, bad))

  np.testing.assert_allclose(rule(q_hi * 1.01), 0.2 * 0.9, rtol=1e-6)
  np.testing.assert_allclose(rule(q_lo * 0.99), 0.2 * 1.1, rtol=1e-6)
  np.testing.assert_allclose(rule(np.float32(q_hi)), 0.2, rtol=1e-6)      # strict: a = Q(1 − 2α/3) keeps ε
  np.testing.assert_allclose(rule(np.float32(q_lo)), 0.2, rtol=1e-6)      # strict: a = Q(α/3) keeps ε
  np.testing.assert_allclose(rule(q_hi * 2, state=_state(1.0, 0.5, 3)), 0.2, rtol=1e-6)   # frozen
  np.testing.assert_allclose(rule(1.0, bad=yes), 0.1, rtol=1e-6)          # halved, even where it would grow
  np.testing.assert_allclose(rule(q_lo * 0.5, bad=yes), 0.1, rtol=1e-6)
  np.testing.assert_allclose(rule(q_lo * 0.5, step=np.float32(0.48)), 0.5, rtol=1e-6)   # eps_max
  np.testing.assert_allclose(rule(q_hi * 2, step=np.float32(0.032)), 0.03, rtol=1e-6)   # floor 0.1 · ε₀
  tiny = adapt.adapt_step_size(np.float32(1e-3), np.float32(q_hi * 2), st, _CFG._replace(eps_floor_frac=1e-4),
                               eps0, no)
  np.testing.assert_allclose(float(tiny), 1e-3, rtol=1e-6)                # eps_min


def test_preconditioner_state_update_and_inverse_mass():
  cfg = adapt.PrecondConfig(rate=0.3, q_min=0.5, q_max=20.0, r_min=0.4, r_max=1.5, var_floor=0.5)
  init = adapt.precond_init(4)
  assert init.grad_mean.shape == init.grad_var.shape == (4,)
  np.testing.assert_array_equal(init.grad_mean, 1.0)
  np.testing.assert_array_equal(init.grad_var, 1.0)
  st, mean, var = init, np.ones(4), np.ones(4)
  for g in [np.array([3.0, 1.0, -2.0, 1.0]), np.array([9.0, 1.0, 0.0, 1.2]), np.array([-4.0, 1.0, 5.0, 0.9])]:
    mean = 0.7 * mean + 0.3 * g
    var = np.maximum(0.7 * var + 0.3 * (g - mean) ** 2, 0.5)
    st = adapt.precond_update(st, g.astype(np.float32), cfg)
    np.testing.assert_allclose(st.grad_mean, mean, rtol=1e-5)
    np.testing.assert_allclose(st.grad_var, var, rtol=1e-5)
  assert np.min(var) == 0.5                                                # the floor was active
  wide = cfg._replace(r_min=0.01, r_max=100.0)                           # the q clips alone act
  for c, w in [(cfg, var), (cfg, np.array([1e-4, 0.3, 1.0, 900.0])), (cfg, np.array([1e-2, 1e-2, 1e-2, 4e3])),
               (wide, np.array([0.04, 1.0, 4.0, 900.0]))]:
    q = np.clip(np.sqrt(w), c.q_min, c.q_max)
    r = np.clip(q / np.sqrt(np.mean(q ** 2)), c.r_min, c.r_max)
    got = adapt.precond_inverse_mass(adapt.PrecondState(np.zeros(4, np.float32), w.astype(np.float32)), c)
    np.testing.assert_allclose(got, 1.0 / r ** 2, rtol=1e-5)


def _mile_reference(logd, pos, rng, num_steps, f1, f2, f3, energy_var, n_eff, trust, l_factor, eps0, diagonal):
  """MILE's warmup written out: blackjax's MCLMC tuner started from L = max(√d, 15), ε₀ and a unit mass."""
  import blackjax
  import jax
  import jax.numpy as jnp
  from blackjax.adaptation.mclmc_adaptation import MCLMCAdaptationState
  from blackjax.mcmc import integrators, mclmc

  init_rng, tune_rng = jax.random.split(rng)
  dim = pos.shape[0]
  params = MCLMCAdaptationState(L=jnp.float32(max(np.sqrt(dim), 15.0)), step_size=jnp.float32(eps0),
                                inverse_mass_matrix=jnp.ones((dim,), jnp.float32))
  return blackjax.mclmc_find_L_and_step_size(
      mclmc.build_kernel(integrator=integrators.isokinetic_mclachlan, desired_energy_var=energy_var), num_steps,
      mclmc.init(pos, logd, init_rng), tune_rng, logdensity_fn=logd, frac_tune1=f1, frac_tune2=f2, frac_tune3=f3,
      desired_energy_var=energy_var, trust_in_estimate=trust, num_effective_samples=n_eff,
      diagonal_preconditioning=diagonal, params=params, l_factor=l_factor)


def test_mile_warmup_defaults_are_mile_s():
  """MILE's warmup settings (the docstring's): 80/10/10 % phases, energy-variance target 0.1, ε₀ = 1e-3."""
  import inspect

  defaults = {k: v.default for k, v in inspect.signature(adapt.mile_warmup).parameters.items()
              if v.default is not inspect.Parameter.empty}
  assert defaults == dict(frac_tune1=0.8, frac_tune2=0.1, frac_tune3=0.1, desired_energy_var=0.1,
                          num_effective_samples=100, trust_in_estimate=1.5, l_factor=0.4, initial_step_size=1e-3,
                          diagonal_preconditioning=False)


@pytest.mark.parametrize("diagonal", [True, False])
def test_mile_warmup_is_blackjax_tuning_from_the_mile_start(diagonal):
  """Every setting differs from blackjax's defaults and MILE's, so each one must reach the tuner
  (the preconditioning flag both ways: blackjax's default is True, ours False)."""
  import jax
  import jax.numpy as jnp

  scales = jnp.asarray([0.3, 1.0, 3.0], jnp.float32)
  logd = lambda x: -0.5 * jnp.sum((x / scales) ** 2)
  pos, rng = jnp.asarray([0.5, -0.2, 1.0], jnp.float32), jax.random.key(4)
  got = adapt.mile_warmup(logd, pos, rng, num_steps=24, frac_tune1=0.5, frac_tune2=0.2, frac_tune3=0.25,
                          desired_energy_var=0.02, num_effective_samples=30, trust_in_estimate=2.5, l_factor=0.7,
                          initial_step_size=0.3, diagonal_preconditioning=diagonal)
  want = _mile_reference(logd, pos, rng, 24, 0.5, 0.2, 0.25, 0.02, 30, 2.5, 0.7, 0.3, diagonal)
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


_VT = adapt.VirialConfig(target=1.2, gain=0.3, adapt_steps=7, settle_frac=0.0, eps_min=1e-3, eps_max=0.5,
                         eps_floor_frac=0.1)


def _vt_update(eps, temp, t, mean, cfg, eps0, nonfinite):
  """The virial rule of the module doc in float64: (ε, running mean of log ε, t + 1)."""
  horizon = cfg.adapt_steps
  half = max(horizon // 2, 1)
  gain = cfg.gain * (min(1.0, half / t) if horizon > 0 else 1.0)
  if cfg.settle_frac > 0 and horizon > 0 and t <= cfg.settle_frac * horizon:
    gain = 0.0
  log_e = np.log(eps) + gain * (0.5 if (not nonfinite and temp <= cfg.target) else -0.5)
  if nonfinite:
    log_e = np.log(eps / 2)
  log_e = np.clip(log_e, np.log(max(cfg.eps_min, cfg.eps_floor_frac * eps0)), np.log(cfg.eps_max))
  if horizon <= 0:
    return np.exp(log_e), mean, t + 1
  avg = mean + (log_e - mean) / max(t - half, 1) if t > half else log_e
  if t > horizon:
    return eps, mean, t + 1
  return (np.exp(avg) if t == horizon else np.exp(log_e)), avg, t + 1


# (ε, T̂, t, running mean, non-finite, config changes)
_VT_CASES = [
    (0.1, 1.5, 2, 0.0, False, {}),                     # hot: shrink
    (0.1, 1.2, 2, 0.0, False, {}),                     # at the target: grow (T̂ ≤ target)
    (0.1, 0.6, 4, -2.0, False, {}),                    # t > adapt_steps // 2 = 3: gain 3/4, averaging
    (0.1, 1.5, 7, -2.3, False, {}),                    # t = adapt_steps: ε is the average
    (0.1, 0.6, 9, -2.3, False, {}),                    # frozen
    (0.1, 0.6, 2, 0.0, False, dict(adapt_steps=3)),    # half = 1: gain 1/2
    (0.1, 0.6, 3, -2.0, False, dict(adapt_steps=0)),   # constant gain, never frozen
    (0.1, 0.6, 2, -2.3, False, dict(adapt_steps=1)),   # one tuning step: frozen from t = 2
    (0.1, 0.6, 2, 0.0, False, dict(settle_frac=0.5)),  # settling: held
    (0.1, 0.6, 2, 0.0, True, dict(settle_frac=0.5)),   # ... but halved on a non-finite step
    (0.1, 0.6, 5, 0.0, False, dict(settle_frac=0.5)),  # settled: grows
    (0.1, 1e9, 2, 0.0, False, {}),                     # the sign: the tail does not matter
    (0.1, 0.6, 2, 0.0, True, {}),                      # non-finite: halve
    (0.011, 1.5, 2, 0.0, False, {}),                   # the floor 0.1 ε₀ = 0.01
    (0.48, 0.6, 2, 0.0, False, {}),                    # the cap eps_max
]


@pytest.mark.parametrize("case", range(len(_VT_CASES)))
def test_virial_update_follows_its_formula(case):
  eps, temp, t, mean, bad, change = _VT_CASES[case]
  cfg = _VT._replace(**change)
  anchor = np.arange(3, dtype=np.float32)
  state = adapt.VirialState(np.float32(mean), np.int32(t), anchor)
  got_eps, got = adapt.virial_update(np.float32(eps), np.float32(temp), state, cfg, np.float32(0.1), np.bool_(bad))
  want_eps, want_mean, want_t = _vt_update(eps, temp, t, mean, cfg, 0.1, bad)
  np.testing.assert_allclose(float(got_eps), want_eps, rtol=2e-6)
  np.testing.assert_allclose(float(got.log_eps_avg), want_mean, rtol=2e-6, atol=1e-7)
  assert int(got.t) == want_t and np.array_equal(np.asarray(got.anchor), anchor)
  assert got.log_eps_avg.dtype == np.float32 and (cfg.adapt_steps == 0 or got_eps.dtype == np.float32)
