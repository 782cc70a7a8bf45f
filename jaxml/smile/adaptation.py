"""Step-size tuners, the gradient-noise preconditioner and the MILE warmup, as pure functions.

A tuner is a value, `Tuner(init, update)` (as an optax transformation): `init(position) -> state`,
`update(state, step: StepInput) -> (next ε, state, reset)`; the kernel knows none by name.

- `ref_tuner` (the authors' rule): exponentially weighted moments (μ, σ_E) of a = |ΔE| fit a Gamma law
  (k = μ²/σ_E², θ = σ_E²/μ), read with Wilson–Hilferty, Q(p) = k θ (1 − 1/(9k) + z_p / (3√k))³:
  reset when a > Q(p_reset); ε ← ε(1 − δ) when a > Q(1 − 2α/3); ε ← ε(1 + δ) when a < Q(α/3); a
  non-finite step halves ε. No absolute target: ε drifts when batch-to-batch changes of log p̂ dominate.
- `virial_tuner` (ours): a Robbins–Monro median tracker steering T̂ = −(θ − θ₀)·∇log p̂(θ)/d (E_π[T̂] = 1,
  minibatch noise or not) to `target`: log ε moves ±γ_t/2 by the sign of T̂ − target after a settle phase;
  γ_t = γ₀ up to h = adapt_steps/2, then γ₀h/t; log ε averaged over (h, W] and frozen at W = adapt_steps.
  pool_chains averages the signal over chains sharing ε₀ (axis_name=CHAIN_AXIS). No extra gradient.
- `fixed_tuner`: a fixed ε; a non-finite step halves it (or, `halve_nonfinite=False`, only counts).
`per_chain_tuner(tuner, off)` picks one of two tuners per chain, so both run in one compile.

The pSMILE preconditioner tracks the minibatch gradient noise as scale-adapted SGHMC does,
m ← (1−ρ) m + ρ g, w ← max((1−ρ) w + ρ (g − m)², 1e-7), and scales the velocity by c = 1/r,
r = q / rms(q), q = clip(√w, 1e-2, 1e4), r clamped to [r_min, r_max] (`clamp`); c² is blackjax's
inverse mass matrix."""

from typing import Any, Callable, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.mclmc_adaptation import MCLMCAdaptationState
from blackjax.mcmc import integrators, mclmc
from jax.flatten_util import ravel_pytree
from jax.scipy.special import ndtri

__all__ = ["StepInput", "Tuner", "ref_tuner", "virial_tuner", "fixed_tuner", "per_chain_tuner", "PerChainState",
           "RefConfig", "TunerState", "tuner_init", "gamma_quantile", "tuner_thresholds", "tuner_update",
           "adapt_step_size", "VirialConfig", "VirialState", "virial_temperature", "virial_update", "pool_over_chains",
           "CHAIN_AXIS", "PrecondConfig", "PrecondState", "precond_init", "precond_update", "precond_inverse_mass",
           "mile_warmup"]

CHAIN_AXIS = "chains"   # vmap axis name of the chains in `chains.make_chain_runner` (read by pool_chains)


class StepInput(NamedTuple):
  """What one kernel step tells its tuner; position and logdensity_grad [d] are the raveled proposal."""

  step_size: jax.Array
  initial_step_size: jax.Array
  energy_change: jax.Array
  ok: jax.Array                   # bool: the step was finite
  position: jax.Array
  logdensity_grad: jax.Array


class Tuner(NamedTuple):
  """init(position) -> state; update(state, StepInput) -> (next ε, state, reset: bool)."""

  init: Callable[[Any], Any]
  update: Callable[[Any, StepInput], tuple[jax.Array, Any, jax.Array]]


def fixed_tuner(halve_nonfinite: bool = True, eps_floor_frac: float = 0.01) -> Tuner:
  """Fixed ε; a non-finite step halves it down to eps_floor_frac · ε₀ (`halve_nonfinite=False`: kept)."""

  def update(state, x: StepInput):
    eps = jnp.where(x.ok, x.step_size, jnp.maximum(x.step_size * 0.5, eps_floor_frac * x.initial_step_size))
    return (eps if halve_nonfinite else x.step_size), state, jnp.zeros((), bool)

  return Tuner(lambda position: (), update)


class PerChainState(NamedTuple):
  on: jax.Array                   # bool: this chain runs `tuner` (else `off`)
  inner: tuple                    # (tuner's state, off's state)


def per_chain_tuner(tuner: Tuner, off: Tuner, on: bool = True) -> Tuner:
  """`tuner` where state.on, else `off` (a per-chain flag: tuned and fixed-ε chains in one compile); the tuner's
  statistics do not move while a chain runs `off`."""

  def init(position):
    return PerChainState(jnp.asarray(on, bool), (tuner.init(position), off.init(position)))

  def update(state: PerChainState, x: StepInput):
    eps_on, st_on, reset = tuner.update(state.inner[0], x)
    eps_off, st_off, _ = off.update(state.inner[1], x)
    st_on = jax.tree.map(lambda a, b: jnp.where(state.on, a, b), st_on, state.inner[0])
    return jnp.where(state.on, eps_on, eps_off), PerChainState(state.on, (st_on, st_off)), state.on & reset

  return Tuner(init, update)


# ------------------------------------------------------------------------------------------- ref (authors)
class RefConfig(NamedTuple):
  """Gamma-quantile tuner settings (SMILE main-config defaults)."""

  p_reset: float = 0.98
  alpha: float = 0.1
  delta: float = 0.02
  beta: float = 0.01
  freeze_steps: int = 10          # no ε change and no reset while t < freeze_steps
  eps_min: float = 1e-8
  eps_max: float = 10.0
  eps_floor_frac: float = 0.01    # ε ≥ eps_floor_frac · ε₀  [inferred guardrail]


class TunerState(NamedTuple):
  """mean, std: running moments of |ΔE|; t: statistics counter (starts at 1)."""

  mean: jax.Array
  std: jax.Array
  t: jax.Array


def tuner_init() -> TunerState:
  return TunerState(mean=jnp.zeros((), jnp.float32), std=jnp.zeros((), jnp.float32),
                    t=jnp.ones((), jnp.int32))


def gamma_quantile(mean: jax.Array, std: jax.Array, p: float | jax.Array) -> jax.Array:
  """Wilson–Hilferty quantile of the Gamma law with the given mean and standard deviation:
  k θ (1 − 1/(9k) + z_p/(3√k))³, clipped at 0, with k = μ²/(σ²+1e-6), θ = (σ²+1e-6)/μ."""
  var = std ** 2 + 1e-6
  mean = jnp.maximum(mean, 1e-12)
  k = mean ** 2 / var
  scale = var / mean
  z = ndtri(jnp.asarray(p, jnp.float32))
  q = k * scale * (1.0 - 1.0 / (9.0 * k) + z / (3.0 * jnp.sqrt(k))) ** 3
  return jnp.maximum(q, 0.0)


def tuner_thresholds(state: TunerState, cfg: RefConfig) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(reset threshold Q(p_reset), shrink threshold Q(1 − 2α/3), grow threshold Q(α/3))."""
  q_reset = gamma_quantile(state.mean, state.std, cfg.p_reset)
  q_hi = gamma_quantile(state.mean, state.std, 1.0 - 2.0 * cfg.alpha / 3.0)
  q_lo = gamma_quantile(state.mean, state.std, cfg.alpha / 3.0)
  return q_reset, q_hi, q_lo


def tuner_update(state: TunerState, abs_energy_change: jax.Array, cfg: RefConfig) -> TunerState:
  """Folds one |ΔE| into the running moments (bias-corrected σ after t ≥ 5)."""
  a = abs_energy_change
  t = state.t
  mean = jnp.where(t < 3, a, (1.0 - cfg.beta) * state.mean + cfg.beta * a)
  mean = jnp.clip(mean, 1e-6, 1e6)
  var = (1.0 - cfg.beta) * state.std ** 2 * (t != 1) + cfg.beta * (a - mean) ** 2
  correction = jnp.where(t < 5, 1.0, 1.0 - 0.5 ** (t - 4).astype(jnp.float32))
  std = jnp.clip(jnp.sqrt(var / correction), 1e-6, 1e7)
  return TunerState(mean=mean.astype(jnp.float32), std=std.astype(jnp.float32), t=t + 1)


def adapt_step_size(step_size: jax.Array, abs_energy_change: jax.Array, state: TunerState,
                    cfg: RefConfig, initial_step_size: jax.Array, nonfinite: jax.Array) -> jax.Array:
  """ε update from the previous statistics; halves ε on a non-finite step; floor and clip."""
  _, q_hi, q_lo = tuner_thresholds(state, cfg)
  active = state.t >= cfg.freeze_steps
  factor = jnp.where(abs_energy_change > q_hi, 1.0 - cfg.delta,
                     jnp.where(abs_energy_change < q_lo, 1.0 + cfg.delta, 1.0))
  eps = jnp.where(active, step_size * factor, step_size)
  eps = jnp.where(nonfinite, step_size * 0.5, eps)
  eps = jnp.clip(eps, cfg.eps_min, cfg.eps_max)
  return jnp.maximum(eps, cfg.eps_floor_frac * initial_step_size)


def ref_tuner(**config: Any) -> Tuner:
  """The authors' Gamma-quantile rule with resets (`RefConfig` fields as keywords). A reset (|ΔE| > Q(p_reset) once t ≥
  freeze_steps) is judged against the statistics before this step; the statistics absorb every finite step, reset or
  not."""
  cfg = RefConfig(**config)

  def update(state: TunerState, x: StepInput):
    abs_de = jnp.where(x.ok, jnp.abs(x.energy_change), 0.0)
    q_reset, _, _ = tuner_thresholds(state, cfg)
    reset = x.ok & (state.t >= cfg.freeze_steps) & (abs_de > q_reset)
    eps = adapt_step_size(x.step_size, abs_de, state, cfg, x.initial_step_size, ~x.ok)
    new = jax.tree.map(lambda a, b: jnp.where(x.ok, a, b), tuner_update(state, abs_de, cfg), state)
    return eps, new, reset

  return Tuner(lambda position: tuner_init(), update)


# ------------------------------------------------------------------------------------------- virial (ours)
class VirialConfig(NamedTuple):
  target: float = 1.1             # the target median of T̂ (1 = exact; 10 % excess tolerated)
  gain: float = 0.1               # Robbins–Monro gain γ₀ on log ε
  adapt_steps: int = 0            # tuning steps, then ε frozen at the average of log ε (0: never)
  settle_frac: float = 0.0        # ε held at ε₀ while t ≤ settle_frac · adapt_steps
  pool_chains: bool = False       # one ε per ε₀ from the chain-averaged signal (needs CHAIN_AXIS)
  eps_min: float = 1e-8
  eps_max: float = 10.0
  eps_floor_frac: float = 0.01


class VirialState(NamedTuple):
  """log_eps_avg: running average of log ε over the averaging half; t: steps from 1; anchor: raveled θ₀."""

  log_eps_avg: jax.Array
  t: jax.Array
  anchor: jax.Array


def pool_over_chains(value: jax.Array, key: jax.Array) -> jax.Array:
  """Mean of a per-chain scalar over the chains (vmap axis CHAIN_AXIS) whose `key` [k] equals this chain's."""
  values = jax.lax.all_gather(value, CHAIN_AXIS)
  same = jnp.all(jax.lax.all_gather(key, CHAIN_AXIS) == key, axis=-1)
  return jnp.sum(jnp.where(same, values, 0.0)) / jnp.sum(same)


def virial_temperature(offset: jax.Array, logdensity_grad: jax.Array) -> jax.Array:
  """T̂ = −(θ − θ₀)·∇log p̂(θ) / d, the configurational (virial) temperature; `offset` = θ − θ₀. By integration by
  parts E_π[(θ_i − c_i) ∂_i U] = 1 for any constant c, so E_π[T̂] = 1 exactly, and an unbiased minibatch gradient
  does not move the mean; chains running hot show T̂ > 1."""
  return -jnp.vdot(offset, logdensity_grad) / offset.shape[0]


def virial_update(step_size: jax.Array, temperature: jax.Array, state: VirialState, cfg: VirialConfig,
                  initial_step_size: jax.Array, nonfinite: jax.Array) -> tuple[jax.Array, VirialState]:
  """One step of the virial rule (module docstring): signal +½ when T̂ ≤ target, −½ above or on a non-finite
  step, so ε is stationary where the (pooled) median of T̂ is the target; the sign makes it robust to the heavy
  tail of T̂. Returns (next ε, state); the anchor is carried unchanged."""
  signal = jnp.where(~nonfinite & (temperature <= cfg.target), 0.5, -0.5)
  t, horizon = state.t, cfg.adapt_steps
  half = max(horizon // 2, 1)
  tf = t.astype(jnp.float32)
  if cfg.pool_chains:
    key = jnp.atleast_1d(jnp.asarray(initial_step_size, jnp.float32))
    signal = pool_over_chains(signal, key)
    nonfinite = pool_over_chains(nonfinite.astype(jnp.float32), key) > 0
  decay = 1.0 if horizon <= 0 else jnp.minimum(1.0, half / tf)
  if cfg.settle_frac > 0 and horizon > 0:
    decay = decay * (tf > cfg.settle_frac * horizon)
  log_eps = jnp.log(step_size) + cfg.gain * decay * signal
  log_eps = jnp.where(nonfinite, jnp.log(step_size * 0.5), log_eps)
  lo = jnp.log(jnp.maximum(cfg.eps_min, cfg.eps_floor_frac * initial_step_size))
  log_eps = jnp.clip(log_eps, lo, jnp.log(cfg.eps_max))
  if horizon <= 0:
    return jnp.exp(log_eps), state._replace(t=t + 1)
  avg = jnp.where(tf > half, state.log_eps_avg + (log_eps - state.log_eps_avg) / jnp.maximum(tf - half, 1.0), log_eps)
  adapting = t <= horizon
  eps = jnp.where(adapting, jnp.where(t == horizon, jnp.exp(avg), jnp.exp(log_eps)), step_size)
  avg = jnp.where(adapting, avg, state.log_eps_avg).astype(jnp.float32)
  return eps.astype(jnp.float32), VirialState(avg, t + 1, state.anchor)


def virial_tuner(**config: Any) -> Tuner:
  """The virial rule (`VirialConfig` fields as keywords); T̂ is centred at the chain's start θ₀ and read at the
  proposal with the gradient the step has already evaluated."""
  cfg = VirialConfig(**config)

  def init(position):
    return VirialState(jnp.zeros((), jnp.float32), jnp.ones((), jnp.int32), ravel_pytree(position)[0])

  def update(state: VirialState, x: StepInput):
    temperature = virial_temperature(x.position - state.anchor, x.logdensity_grad)
    eps, new = virial_update(x.step_size, temperature, state, cfg, x.initial_step_size, ~x.ok)
    return eps, new, jnp.zeros((), bool)

  return Tuner(init, update)


# ------------------------------------------------------------------------------------------- preconditioner
class PrecondConfig(NamedTuple):
  rate: float = 0.01
  q_min: float = 1e-2
  q_max: float = 1e4
  r_min: float = 0.1              # [inferred] clamp of the normalised scale r
  r_max: float = 10.0
  var_floor: float = 1e-7


class PrecondState(NamedTuple):
  """grad_mean, grad_var: [d] running mean and variance of the raveled raw gradient."""

  grad_mean: jax.Array
  grad_var: jax.Array


def precond_init(dim: int) -> PrecondState:
  return PrecondState(grad_mean=jnp.ones((dim,), jnp.float32), grad_var=jnp.ones((dim,), jnp.float32))


def precond_update(state: PrecondState, grad: jax.Array, cfg: PrecondConfig) -> PrecondState:
  """grad: [d] raw minibatch gradient at the new point."""
  mean = (1.0 - cfg.rate) * state.grad_mean + cfg.rate * grad
  var = jnp.maximum((1.0 - cfg.rate) * state.grad_var + cfg.rate * (grad - mean) ** 2, cfg.var_floor)
  return PrecondState(grad_mean=mean, grad_var=var)


def precond_inverse_mass(state: PrecondState, cfg: PrecondConfig, clamp: bool | jax.Array = True) -> jax.Array:
  """[d] inverse mass matrix c² = 1/r², r = q / rms(q) clamped to [r_min, r_max] when `clamp` (a bool or a
  traced per-chain bool), q = clip(√w)."""
  q = jnp.clip(jnp.sqrt(state.grad_var), cfg.q_min, cfg.q_max)
  r = q / jnp.sqrt(jnp.mean(q ** 2))
  clipped = jnp.clip(r, cfg.r_min, cfg.r_max)
  r = (clipped if clamp else r) if isinstance(clamp, bool) else jnp.where(clamp, clipped, r)
  return 1.0 / r ** 2


def mile_warmup(logdensity_fn: Callable[[Any], jax.Array], position: Any, rng: jax.Array, *,
                num_steps: int, frac_tune1: float = 0.8, frac_tune2: float = 0.1, frac_tune3: float = 0.1,
                desired_energy_var: float = 0.1, num_effective_samples: int = 100,
                trust_in_estimate: float = 1.5, l_factor: float = 0.4, initial_step_size: float = 1e-3,
                diagonal_preconditioning: bool = False):
  """MILE-style full-batch MCLMC warmup via `blackjax.mclmc_find_L_and_step_size`; returns (IntegratorState,
  MCLMCAdaptationState, num_tuning_steps). MILE decays its energy-variance target 0.5 → 0.1; blackjax takes
  one constant, `desired_energy_var`."""
  init_rng, tune_rng = jax.random.split(rng)
  dim = ravel_pytree(position)[0].shape[0]
  state = mclmc.init(position, logdensity_fn, init_rng)

  kernel = mclmc.build_kernel(integrator=integrators.isokinetic_mclachlan,
                              desired_energy_var=desired_energy_var)
  params = MCLMCAdaptationState(L=jnp.maximum(jnp.sqrt(float(dim)), 15.0),
                                step_size=jnp.asarray(initial_step_size, jnp.float32),
                                inverse_mass_matrix=jnp.ones((dim,), jnp.float32))

  return blackjax.mclmc_find_L_and_step_size(
      mclmc_kernel=kernel, num_steps=num_steps, state=state, rng_key=tune_rng,
      logdensity_fn=logdensity_fn, frac_tune1=frac_tune1, frac_tune2=frac_tune2, frac_tune3=frac_tune3,
      desired_energy_var=desired_energy_var, trust_in_estimate=trust_in_estimate,
      num_effective_samples=num_effective_samples, diagonal_preconditioning=diagonal_preconditioning,
      params=params, l_factor=l_factor)
