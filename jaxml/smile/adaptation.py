"""Step-size tuner, gradient-noise preconditioner and the MILE warmup, as pure functions.

The SMILE tuner works on a = |ΔE|, the absolute energy error of one minibatch step. It keeps
exponentially weighted moments (μ, σ_E) of a, fits a Gamma distribution by moment matching
(k = μ² / σ_E², θ = σ_E² / μ) and reads quantiles with the Wilson–Hilferty cube-root normal
approximation  Q(p) = k θ (1 − 1/(9k) + z_p / (3√k))³,  z_p = Φ⁻¹(p).

- reset:      a > Q(p_reset)            (revert θ, zero the velocity)
- shrink ε:   a > Q(1 − 2α/3)           ε ← ε (1 − δ)
- grow ε:     a < Q(α/3)                ε ← ε (1 + δ)
- non-finite: ε ← ε / 2, statistics untouched.

The pSMILE preconditioner estimates the per-coordinate standard deviation of the minibatch
gradient with the running noise estimator of scale-adapted SGHMC,
m ← (1−ρ) m + ρ g,  w ← max((1−ρ) w + ρ (g − m)², 1e-7),  and scales the velocity with
c = 1 / r,  r = q / rms(q),  q = clip(√w, 1e-2, 1e4), r clamped to [r_min, r_max] (kernels' `clamp`), so that
c ⊙ ξ is (diagonally) isotropic. blackjax calls c² the inverse mass matrix.

`TunerConfig.tuner` picks the step-size rule: "ref" is the authors' Gamma-quantile rule above
(relative thresholds, no absolute target: ε drifts when batch-to-batch changes of log p̂ dominate
|ΔE|); "energy_var" is ours: it measures the *same-batch* energy error (ℓ_old re-evaluated on the
current batch, one extra forward pass) and steers an EMA v of ΔE²/d to the absolute target
`target_energy_var` (MCLMC's Var[ΔE]/d criterion) with log ε ← log ε + gain·(log target − log v)/6
(ΔE² ∝ ε⁶ for the McLachlan integrator). It has no resets; the non-finite guard stays.
"energy_quantile" is ours too and supersedes "energy_var" on UCI (docs/methods/smile.md): the same-batch
x = ΔE²/d is far from Gaussian there (float32-rounding floor ~1e-11 while the chain is far from the
posterior, then rare steps with x ≫ 1 that carry all of Σ x), so an EMA of x follows the tail. It is a
Robbins–Monro quantile tracker instead: with τ = target_energy_var · F⁻¹_χ²₁(q) (the q-quantile of x
if ΔE ~ N(0, d · target)), log ε ← log ε + γ_t (1[x ≤ τ] − q), which is stationary where
P(x ≤ τ) = q, whatever the tail. Gain γ_t = γ₀ up to h = adapt_steps / 2, then γ₀ · h / t
(decay_steps = 0) or, with the Robbins–Monro count restarted at h, γ₀ / (1 + (t − h)/decay_steps)
(decay_steps = t₀ > 0: the gain is γ₀/2 after t₀ more steps instead of after h, so the live ε settles
within the second half); over that second half it averages log ε and at t = adapt_steps freezes ε at the
average (adapt_steps = 0: constant gain, never frozen). With pool_chains the per-chain signal
1[x ≤ τ] − q is averaged over the chains that share ε₀ (they sample the same posterior) before it moves
log ε, so those chains share one ε (a non-finite step in any of them halves it); this needs the chains
vmapped with axis_name=CHAIN_AXIS (the chain runner does this). pool_stat="mean" averages the per-step signal
over all of them, so ε sits where the *pooled* crossing rate is 1 − q: one chain with a heavy tail (UCI without
the r clamp) pulls everyone's ε down. pool_stat="midmean" is robust to such chains: each chain keeps an EMA of its
own signal over pool_window steps (state.std, i.e. its recent crossing rate), and only the chains whose EMA ranks
in the middle half of the pool contribute their per-step signal and non-finite flag (the per-step signal, not the
EMA, moves log ε, so the rule has no extra lag). A non-finite step counts as x > τ and halves ε.
A step with x > divergence_factor · τ is a divergence: it is reverted like a reset of the "ref" rule
(θ, ℓ, g restored, u zeroed; the preconditioner does not see its gradient), in every phase. Without
this guard a catastrophic step (x ~ 1e10 on UCI without the r clamp) feeds its gradient into the
preconditioner, whose scales then make the next steps catastrophic too, and ε runs to its floor.
"virial" (ours) steers a different absolute quantity: the configurational temperature
T̂ = −(θ − θ₀)·∇log p̂(θ)/d, whose expectation under the target is exactly 1 (integration by parts), with or
without minibatch noise. Chains that run hot for their ε show T̂ > 1; below that step size T̂ ≈ 1. The same
Robbins–Monro machinery (pooling, gain schedule, average, freeze) moves log ε by ±γ/2 by the sign of
T̂ − virial_target, after a settle phase (settle_frac of the warmup) in which the chains travel from their
starts and T̂ is not yet an equilibrium reading. It needs no extra gradient. Known limit: at small d the skew of
T̂ keeps its median below 1 at every ε (and chains can run cold, not hot, at large ε), so ε has no stop
(tests/smile/test_virial_tuner.py, strict xfail).
"virial_ladder" (ours, seventh design) uses T̂ to choose ε once instead of steering it, because T̂ responds to a
change of ε only after 10 000+ steps (the chains heat and cool slowly), too slowly for a controller within the
warmup. A pilot (the first ladder_frac of adapt_steps) deals the chains that share ε₀ round-robin onto ladder_rungs
rungs ε₀ · ratio^(r − (R − 1)/2); each chain keeps an EMA of 1[T̂ ≤ target] (a non-finite step counts as 0 and halves
its ε). At the end of the pilot the chosen ε* is the largest rung whose rungs 0..r all have a mean EMA ≥ ½ (median
T̂ ≤ target: not hot; `ladder_choice`); the chains above it restart from their start (θ₀ with the ℓ, g of their
first batch: heat does not dissipate within the warmup), and every chain runs at ε* from then on. Same gradients per
step as the naive kernels; it needs the chains vmapped with CHAIN_AXIS and ≥ ladder_rungs chains per ε₀.
"""

from typing import Any, Callable, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.mclmc_adaptation import MCLMCAdaptationState
from blackjax.mcmc import integrators, mclmc
from jax.flatten_util import ravel_pytree
from jax.scipy.special import ndtri

__all__ = [
    "TunerConfig", "TunerState", "tuner_init", "gamma_quantile", "tuner_thresholds", "tuner_update",
    "adapt_step_size", "energy_var_update", "energy_quantile_threshold", "energy_quantile_update", "virial_temperature", "virial_update",
    "ladder_rung", "ladder_step_size", "ladder_choice", "ladder_update",
    "PrecondConfig", "PrecondState", "precond_init", "precond_update",
    "precond_inverse_mass", "mile_warmup", "CHAIN_AXIS", "POOL_STATS", "pool_over_chains",
]

CHAIN_AXIS = "chains"   # vmap axis name of the chains in `chains.make_chain_runner` (read by pool_chains)


class TunerConfig(NamedTuple):
  """Gamma-quantile tuner settings (SMILE main-config defaults)."""

  p_reset: float = 0.98
  alpha: float = 0.1
  delta: float = 0.02
  beta: float = 0.01
  freeze_steps: int = 10          # no ε change and no reset while t < freeze_steps
  eps_min: float = 1e-8
  eps_max: float = 10.0
  eps_floor_frac: float = 0.01    # ε ≥ eps_floor_frac · ε₀  [inferred guardrail]
  tuner: str = "ref"              # "ref" (Gamma-quantile rule); absolute: "energy_var", "energy_quantile", "virial", "virial_ladder"
  target_energy_var: float = 5e-4  # energy_var / energy_quantile: target of E[ΔE²]/d on the same batch
  energy_var_rate: float = 0.05   # energy_var: EMA rate of ΔE²/d
  energy_var_gain: float = 0.01   # energy_var: gain of the log-ε controller (per step)
  energy_quantile: float = 0.99   # energy_quantile: the quantile q of ΔE²/d that is steered to τ
  quantile_gain: float = 0.1      # energy_quantile / virial: Robbins–Monro gain γ₀ on log ε
  adapt_steps: int = 0            # energy_quantile / virial: tuning steps, then ε frozen at the average (0: never)
  decay_steps: int = 0            # energy_quantile / virial: t₀ of the gain γ₀/(1 + (t − h)/t₀) after h = adapt_steps/2 (0: γ₀h/t)
  pool_chains: bool = False       # energy_quantile / virial: one ε per ε₀ from the chain-averaged signal (needs CHAIN_AXIS)
  pool_stat: str = "mean"         # energy_quantile / virial pooled: "mean" over all chains or "midmean" (middle half by EMA)
  pool_window: float = 200.0      # pool_stat="midmean": EMA length (steps) of each chain's signal
  virial_target: float = 1.1      # virial / virial_ladder: the target median of T̂ (1 = exact; 10 % excess tolerated)
  ladder_rungs: int = 5           # virial_ladder: pilot rungs ε₀ · ladder_ratio^(r − (rungs − 1)/2), chains dealt round-robin
  ladder_ratio: float = 2.0       # virial_ladder: ratio of neighbouring rungs
  ladder_frac: float = 0.4        # virial_ladder: pilot length as a fraction of adapt_steps
  ladder_window: float = 0.25     # virial_ladder: EMA length of each chain's signal 1[T̂ ≤ target], fraction of the pilot
  settle_frac: float = 0.0        # energy_quantile / virial: ε held at ε₀ while t ≤ settle_frac · adapt_steps
  resolution_ulps: float = 4.0    # energy_quantile: |ΔE| ≤ this many float32 ulps of |ℓ| never grows ε
  divergence_factor: float = 1e3  # energy_quantile: revert a step with ΔE²/d > divergence_factor · τ
  nonfinite_halving: bool = True  # naive kernels: halve ε on a non-finite step (False: reference, count only)


class TunerState(NamedTuple):
  """mean, std: running moments of |ΔE|; t: statistics counter (starts at 1)."""

  mean: jax.Array
  std: jax.Array
  t: jax.Array


def tuner_init() -> TunerState:
  return TunerState(mean=jnp.zeros((), jnp.float32), std=jnp.zeros((), jnp.float32),
                    t=jnp.ones((), jnp.int32))


def gamma_quantile(mean: jax.Array, std: jax.Array, p: float | jax.Array) -> jax.Array:
  """Wilson–Hilferty quantile of the Gamma law with the given mean and standard deviation.

  Returns k θ (1 − 1/(9k) + z_p/(3√k))³, clipped at 0, with k = μ²/(σ²+1e-6), θ = (σ²+1e-6)/μ.
  """
  var = std ** 2 + 1e-6
  mean = jnp.maximum(mean, 1e-12)
  k = mean ** 2 / var
  scale = var / mean
  z = ndtri(jnp.asarray(p, jnp.float32))
  q = k * scale * (1.0 - 1.0 / (9.0 * k) + z / (3.0 * jnp.sqrt(k))) ** 3
  return jnp.maximum(q, 0.0)


def tuner_thresholds(state: TunerState, cfg: TunerConfig) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(reset threshold Q(p_reset), shrink threshold Q(1 − 2α/3), grow threshold Q(α/3))."""
  q_reset = gamma_quantile(state.mean, state.std, cfg.p_reset)
  q_hi = gamma_quantile(state.mean, state.std, 1.0 - 2.0 * cfg.alpha / 3.0)
  q_lo = gamma_quantile(state.mean, state.std, cfg.alpha / 3.0)
  return q_reset, q_hi, q_lo


def tuner_update(state: TunerState, abs_energy_change: jax.Array, cfg: TunerConfig) -> TunerState:
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
                    cfg: TunerConfig, initial_step_size: jax.Array, nonfinite: jax.Array) -> jax.Array:
  """ε update from the previous statistics; halves ε on a non-finite step; floor and clip."""
  _, q_hi, q_lo = tuner_thresholds(state, cfg)
  active = state.t >= cfg.freeze_steps
  factor = jnp.where(abs_energy_change > q_hi, 1.0 - cfg.delta,
                     jnp.where(abs_energy_change < q_lo, 1.0 + cfg.delta, 1.0))
  eps = jnp.where(active, step_size * factor, step_size)
  eps = jnp.where(nonfinite, step_size * 0.5, eps)
  eps = jnp.clip(eps, cfg.eps_min, cfg.eps_max)
  return jnp.maximum(eps, cfg.eps_floor_frac * initial_step_size)


def energy_var_update(step_size: jax.Array, energy_change: jax.Array, dim: int, state: TunerState,
                      cfg: TunerConfig, initial_step_size: jax.Array, nonfinite: jax.Array
                      ) -> tuple[jax.Array, TunerState]:
  """The "energy_var" rule: (ε, state) after one step; state.mean holds the EMA v of ΔE²/d.

  v is seeded with the first value; ε moves only once t ≥ freeze_steps, by the factor
  exp(gain · (log target − log v) / 6); a non-finite step halves ε and leaves v alone.
  """
  x = jnp.where(nonfinite, state.mean, energy_change ** 2 / dim)
  v = jnp.where(state.t < 2, x, (1.0 - cfg.energy_var_rate) * state.mean + cfg.energy_var_rate * x)
  v = jnp.maximum(v, 1e-30)
  active = state.t >= cfg.freeze_steps
  log_factor = cfg.energy_var_gain * (jnp.log(cfg.target_energy_var) - jnp.log(v)) / 6.0
  eps = jnp.where(active, step_size * jnp.exp(log_factor), step_size)
  eps = jnp.where(nonfinite, step_size * 0.5, eps)
  eps = jnp.maximum(jnp.clip(eps, cfg.eps_min, cfg.eps_max), cfg.eps_floor_frac * initial_step_size)
  new = TunerState(mean=v.astype(jnp.float32), std=state.std, t=state.t + 1)
  return eps, jax.tree.map(lambda a, b: jnp.where(nonfinite, a, b), state, new)


def energy_quantile_threshold(cfg: TunerConfig) -> jax.Array:
  """τ = target · F⁻¹_χ²₁(q): the q-quantile of ΔE²/d when ΔE ~ N(0, d · target_energy_var)."""
  z = ndtri(0.5 * (1.0 + jnp.asarray(cfg.energy_quantile, jnp.float32)))
  return cfg.target_energy_var * z ** 2


POOL_STATS = ("mean", "midmean")


def _same_key_chains(key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(every chain's `key` [C, k] gathered over the vmap axis CHAIN_AXIS, bool [C]: the chains whose key equals this
  chain's, this chain's rank among them)."""
  keys = jax.lax.all_gather(key, CHAIN_AXIS)
  same = jnp.all(keys == key, axis=-1)
  rank = jnp.sum(same & (jnp.arange(keys.shape[0]) < jax.lax.axis_index(CHAIN_AXIS)))
  return keys, same, rank


def pool_over_chains(value: jax.Array, key: jax.Array, rank_by: jax.Array | None = None) -> jax.Array:
  """Mean of a per-chain scalar over the chains (vmap axis CHAIN_AXIS) whose `key` [k] equals this chain's.

  With `rank_by` (a per-chain score) only the chains whose score ranks in the middle half of that group count
  (ranks ⌊n/4⌋ … n − 1 − ⌊n/4⌋ of n, ties by chain order; the midmean): up to a quarter of the chains on either
  side, e.g. one with a heavy-tailed energy error, then do not move the pooled value.
  """
  values = jax.lax.all_gather(value, CHAIN_AXIS)
  keys, same, _ = _same_key_chains(key)
  if rank_by is not None:
    scores = jax.lax.all_gather(rank_by, CHAIN_AXIS)
    group = jnp.all(keys[:, None, :] == keys[None, :, :], axis=-1)            # [C, C] same key
    order = jnp.arange(scores.shape[0])
    below = (scores[None, :] < scores[:, None]) | ((scores[None, :] == scores[:, None]) & (order[None, :] < order[:, None]))
    rank, n = jnp.sum(group & below, axis=1), jnp.sum(group, axis=1)
    same = same & (rank >= n // 4) & (rank < n - n // 4)
  return jnp.sum(jnp.where(same, values, 0.0)) / jnp.sum(same)


def _robbins_monro(step_size: jax.Array, signal: jax.Array, nonfinite: jax.Array, state: TunerState,
                   cfg: TunerConfig, initial_step_size: jax.Array, pool_key: jax.Array | None
                   ) -> tuple[jax.Array, TunerState]:
  """log ε ← log ε + γ_t · signal (pooled over chains with `cfg.pool_chains`), then average and freeze.

  The shared machinery of "energy_quantile" and "virial": pooling (mean or midmean by each chain's EMA of its
  signal, kept in state.std), the gain schedule (γ₀ up to h = adapt_steps/2, then γ₀h/t or the restarted
  γ₀/(1 + (t − h)/t₀)), halving on a non-finite step, the floor, and the average of log ε over (h, W] at which
  ε is frozen at t = W (adapt_steps = 0: constant gain, never frozen). state.mean holds that average. With
  settle_frac > 0, ε stays at ε₀ (non-finite halving included) for the first settle_frac · W steps: a signal
  that is an equilibrium property (the virial temperature) says nothing while the chains still travel from
  their starts.
  """
  t = state.t
  horizon = cfg.adapt_steps
  half = max(horizon // 2, 1)
  tf = t.astype(jnp.float32)
  smoothed = state.std
  if cfg.pool_chains:
    key = jnp.atleast_1d(jnp.asarray(initial_step_size if pool_key is None else pool_key, jnp.float32))
    rank_by = None
    if cfg.pool_stat == "midmean":   # rank the chains by their own recent signal
      smoothed = rank_by = state.std + (signal - state.std) / cfg.pool_window
    signal = pool_over_chains(signal, key, rank_by)
    nonfinite = pool_over_chains(nonfinite.astype(jnp.float32), key, rank_by) > 0
  if horizon <= 0:
    decay = 1.0
  elif cfg.decay_steps > 0:   # Robbins–Monro count restarted at h: γ₀ / (1 + (t − h)/t₀)
    decay = 1.0 / (1.0 + jnp.maximum(tf - half, 0.0) / cfg.decay_steps)
  else:
    decay = jnp.minimum(1.0, half / tf)
  if cfg.settle_frac > 0 and horizon > 0:
    decay = decay * (tf > cfg.settle_frac * horizon)
  log_eps = jnp.log(step_size) + cfg.quantile_gain * decay * signal
  log_eps = jnp.where(nonfinite, jnp.log(step_size * 0.5), log_eps)
  lo = jnp.log(jnp.maximum(cfg.eps_min, cfg.eps_floor_frac * initial_step_size))
  log_eps = jnp.clip(log_eps, lo, jnp.log(cfg.eps_max))
  if horizon <= 0:
    return jnp.exp(log_eps), state._replace(std=smoothed.astype(jnp.float32), t=t + 1)
  averaging = tf > half
  avg = jnp.where(averaging, state.mean + (log_eps - state.mean) / jnp.maximum(tf - half, 1.0), log_eps)
  adapting = t <= horizon
  eps = jnp.where(adapting, jnp.where(t == horizon, jnp.exp(avg), jnp.exp(log_eps)), step_size)
  new = TunerState(mean=jnp.where(adapting, avg, state.mean).astype(jnp.float32), std=smoothed.astype(jnp.float32),
                   t=t + 1)
  return eps.astype(jnp.float32), new


def energy_quantile_update(step_size: jax.Array, energy_change: jax.Array, dim: int, state: TunerState,
                           cfg: TunerConfig, initial_step_size: jax.Array, nonfinite: jax.Array,
                           logdensity_scale: jax.Array | float = 0.0,
                           pool_key: jax.Array | None = None) -> tuple[jax.Array, TunerState]:
  """The "energy_quantile" rule: (ε, state) after one step; state.mean holds the running average of log ε
  over the averaging half (t > adapt_steps / 2), state.std this chain's EMA of its signal (only with
  pool_stat="midmean"), state.t counts steps from 1.

  With `cfg.pool_chains` the signal and the non-finite flag are pooled over the chains with the same
  `pool_key` (float [k], e.g. (ε₀, variant)) along CHAIN_AXIS (see `pool_over_chains`): over all of
  them, or (pool_stat="midmean") over the middle half ranked by each chain's EMA of its signal.
  """
  below = ~nonfinite & (energy_change ** 2 / dim <= energy_quantile_threshold(cfg))
  # |ΔE| within `resolution_ulps` float32 ulps of |ℓ| is rounding, not integration error: no evidence to grow ε.
  resolved = jnp.abs(energy_change) > cfg.resolution_ulps * 2.0 ** -23 * logdensity_scale
  signal = jnp.where(below, resolved * (1.0 - cfg.energy_quantile), -cfg.energy_quantile)
  return _robbins_monro(step_size, signal, nonfinite, state, cfg, initial_step_size, pool_key)


def virial_temperature(offset: jax.Array, logdensity_grad: jax.Array) -> jax.Array:
  """T̂ = −(θ − θ₀)·∇log p̂(θ) / d, the configurational (virial) temperature of one state; `offset` = θ − θ₀.

  Under any target π ∝ e^{−U} that vanishes fast enough at infinity, integration by parts gives
  E_π[(θ_i − c_i) ∂_i U] = 1 for every coordinate and any constant c, so E_π[T̂] = 1 exactly; a minibatch
  gradient is unbiased, so its noise does not move the mean. A sampler whose chains run hot (too large ε for
  the gradient noise) shows T̂ > 1. The kernel takes c = θ₀, the chain's start: a constant, so no bias, and
  close to the posterior mass, so (θ − θ₀)·noise stays small (with c = 0 a posterior mean far from 0 in units
  of the posterior scale lets the minibatch noise swamp T̂). A running mean of θ would be closer still but is
  correlated with θ and biases T̂ low.
  """
  return -jnp.vdot(offset, logdensity_grad) / offset.shape[0]


def virial_update(step_size: jax.Array, temperature: jax.Array, state: TunerState, cfg: TunerConfig,
                  initial_step_size: jax.Array, nonfinite: jax.Array, pool_key: jax.Array | None = None
                  ) -> tuple[jax.Array, TunerState]:
  """The "virial" rule: a Robbins–Monro median tracker that steers T̂ (see `virial_temperature`) to the
  absolute target `virial_target`: signal +½ when T̂ ≤ target, −½ above or on a non-finite step, so ε is
  stationary where the (pooled) median of T̂ is the target. The sign makes it robust to the heavy tail of T̂
  (rare steps with huge minibatch gradients); the rest is `_robbins_monro`. T̂ ≈ 1 for every ε below the
  step size where the chains start to run hot, so a target of exactly 1 gives no drive there (ε random-walks);
  the default 1.1 tolerates a 10 % excess temperature and makes ε climb to that edge and stay.
  """
  signal = jnp.where(~nonfinite & (temperature <= cfg.virial_target), 0.5, -0.5)
  return _robbins_monro(step_size, signal, nonfinite, state, cfg, initial_step_size, pool_key)


def ladder_rung(key: jax.Array, cfg: TunerConfig) -> jax.Array:
  """The pilot rung of this chain (vmapped with CHAIN_AXIS): its rank among the chains with the same pool `key`
  (same ε₀ and variant), modulo `ladder_rungs`, so that each rung gets every ladder_rungs-th of those chains."""
  return _same_key_chains(key)[2] % cfg.ladder_rungs


def ladder_step_size(initial_step_size: jax.Array, rung: jax.Array, cfg: TunerConfig) -> jax.Array:
  """ε of a rung: ε₀ · ratio^(r − (rungs − 1)/2), so the rungs span ε₀ symmetrically in log ε (r = −1: one below)."""
  return initial_step_size * cfg.ladder_ratio ** (rung - (cfg.ladder_rungs - 1) / 2)


def ladder_choice(cool: jax.Array, rung: jax.Array, key: jax.Array, cfg: TunerConfig) -> jax.Array:
  """The chosen rung r* of the `virial_ladder` pilot (every chain of a pool key gets the same r*).

  cool: this chain's EMA of 1[T̂ ≤ target]. A rung is "not hot" when the mean of its chains' `cool` is ≥ ½ (their
  median T̂ ≤ target); an empty rung counts as hot. r* is the largest r whose rungs 0..r are all not hot, −1 when
  rung 0 is already hot (then ε* is one ratio below the ladder)."""
  _, same, _ = _same_key_chains(key)
  cools, rungs = jax.lax.all_gather(cool, CHAIN_AXIS), jax.lax.all_gather(rung, CHAIN_AXIS)
  members = same[None, :] & (rungs[None, :] == jnp.arange(cfg.ladder_rungs)[:, None])          # [R, C]
  mean = jnp.sum(jnp.where(members, cools[None, :], 0.0), axis=1) / jnp.maximum(jnp.sum(members, axis=1), 1)
  not_hot = (mean >= 0.5) & jnp.any(members, axis=1)
  return jnp.sum(jnp.cumprod(not_hot.astype(jnp.int32))) - 1


def ladder_update(step_size: jax.Array, temperature: jax.Array, nonfinite: jax.Array, state: TunerState,
                  cfg: TunerConfig, initial_step_size: jax.Array, key: jax.Array, rung: jax.Array
                  ) -> tuple[jax.Array, TunerState, jax.Array]:
  """One step of the "virial_ladder" rule (see the module docstring): (next ε, state, restart this chain now).

  state.std is the chain's EMA of 1[T̂ ≤ target] over the pilot, state.mean log ε* once chosen. A non-finite step
  halves ε (floor as the other rules) in every phase; at t = pilot every chain of the pool key gets ε*."""
  t = state.t
  pilot = max(int(cfg.ladder_frac * cfg.adapt_steps), 1)
  window = max(cfg.ladder_window * pilot, 1.0)
  signal = jnp.where(~nonfinite & (temperature <= cfg.virial_target), 1.0, 0.0)
  cool = jnp.where(t <= pilot, state.std + (signal - state.std) / window, state.std)
  floor = jnp.maximum(cfg.eps_min, cfg.eps_floor_frac * initial_step_size)
  eps = jnp.where(nonfinite, jnp.maximum(step_size * 0.5, floor), step_size)
  chosen = ladder_choice(cool, rung, key, cfg)
  at_end = t == pilot
  eps_star = ladder_step_size(initial_step_size, chosen, cfg)
  new = TunerState(mean=jnp.where(at_end, jnp.log(eps_star), state.mean).astype(jnp.float32),
                   std=cool.astype(jnp.float32), t=t + 1)
  return jnp.where(at_end, eps_star, eps).astype(jnp.float32), new, at_end & (rung > chosen)


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
  """MILE-style full-batch MCLMC warmup via `blackjax.mclmc_find_L_and_step_size`.

  Returns (IntegratorState, MCLMCAdaptationState(L, step_size, inverse_mass_matrix),
  num_tuning_steps). MILE decays its energy-variance target 0.5 → 0.1; blackjax takes one
  constant, so `desired_energy_var` (0.1 by default) is used throughout.
  """
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
