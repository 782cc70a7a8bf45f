"""SMILE kernels: minibatch microcanonical Langevin steps built from blackjax integrator parts.

One step (one chain) on the minibatch log posterior log p̂_B(θ) = log p(θ) + (N/b) Σ_B log p(y|x,θ):

1. (pSMILE) inverse mass matrix c² from the running gradient-noise statistics;
2. optional partial refresh of the unit velocity u (L finite; default L = ∞: the minibatch
   noise plays the refresh's role);
3. one isokinetic McLachlan step  V(b1 ε) X(ε/2) V(b2 ε) X(ε/2) V(b1 ε)  where V is the exact
   ESH velocity map (`esh_dynamics_momentum_update_one_step`) and X moves θ ← θ + (ε/2) c⊙u and
   evaluates (ℓ, g) on the current batch (2 batch gradients per step; the first V reuses the
   previous batch's gradient, as the reference does);
4. ΔE = ΔK − (ℓ_new − ℓ_old);
5. guardrails: a non-finite ΔE / θ / ℓ / g reverts the step, reverses the unit velocity,
   halves ε (unless `nonfinite_halving=False`, the reference: ε kept, the event only counted)
   and leaves the tuner statistics untouched; (tuned variants) a reset reverts θ,
   ℓ, g and zeros u when |ΔE| exceeds the Gamma quantile Q(p_reset); ε adapts by the
   Gamma-quantile rule (see `adaptation`);
6. (pSMILE) the preconditioner statistics absorb the new raw gradient.

Variants: SMILE-naive = `smile(tuned=False)`, SMILE = `smile()`, pSMILE-naive =
`psmile(tuned=False)`, pSMILE = `psmile()`; `smile_family()` compiles all four at once and reads
the variant per chain from `state.variant` (used to vmap variants and ε₀ grids as chains).
"""

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.mcmc import integrators
from blackjax.util import generate_unit_vector
from jax.flatten_util import ravel_pytree

from jaxml.smile import adaptation as adapt

__all__ = ["SmileState", "SmileInfo", "Sampler", "smile", "psmile", "smile_family", "make_integrator", "GRAD_CLIP"]

GRAD_CLIP = 1e6
TUNERS = ("ref", "energy_var", "energy_quantile", "virial", "virial_ladder")


class SmileState(NamedTuple):
  """integrator: blackjax IntegratorState (position, unit momentum, ℓ and g of the last batch)."""

  integrator: integrators.IntegratorState
  step_size: jax.Array
  initial_step_size: jax.Array
  tuner: adapt.TunerState
  precond: adapt.PrecondState
  variant: jax.Array              # bool [2]: (preconditioned, tuned); read only by `smile_family`
  clamp: jax.Array                # bool: r clamped to the PrecondConfig's [r_min, r_max]; read only by `smile_family`
  anchor: Any = None              # tuner="virial": the raveled start θ₀, the centre of T̂ = −(θ − θ₀)·∇log p̂/d;
                                  # "virial_ladder": (θ₀, ℓ₀, g₀ raveled), where its restarted chains resume

  @property
  def position(self) -> Any:
    return self.integrator.position


class SmileInfo(NamedTuple):
  logdensity: jax.Array
  kinetic_change: jax.Array
  energy_change: jax.Array
  nonans: jax.Array
  reset: jax.Array
  step_size: jax.Array


class Sampler(NamedTuple):
  """init(position, minibatch, rng) -> SmileState; step(rng, state, minibatch) -> (state, info)."""

  init: Callable[..., SmileState]
  step: Callable[..., tuple[SmileState, SmileInfo]]
  grads_per_step: int = 2         # batch gradients per step (3 with tuner="energy_var" / "energy_quantile")


def _tree_finite(tree: Any) -> jax.Array:
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]))


def _sanitize(g: jax.Array) -> jax.Array:
  """NaN -> 0, then every coordinate (±inf included) clipped to ±GRAD_CLIP."""
  return jnp.clip(jnp.where(jnp.isnan(g), 0.0, g), -GRAD_CLIP, GRAD_CLIP)


def _static_inf(L: Any) -> bool:
  """True when L is a Python number equal to ∞: the partial refresh is then skipped at trace time."""
  return isinstance(L, (int, float)) and math.isinf(L)


def _refresh(momentum: Any, key: jax.Array, half_step: jax.Array, L: float | jax.Array) -> Any:
  """blackjax's partial refresh; compiled away for a static L = ∞ (under vmap its lax.cond is a
  select that would still draw and normalise a d-dimensional Gaussian twice per step)."""
  if _static_inf(L):
    return momentum
  return integrators.partially_refresh_momentum(momentum, key, half_step, L)


def _ravel_state(state: integrators.IntegratorState) -> integrators.IntegratorState:
  return integrators.IntegratorState(ravel_pytree(state.position)[0], ravel_pytree(state.momentum)[0],
                                     state.logdensity, ravel_pytree(state.logdensity_grad)[0])


def _bind(logdensity_fn: Callable[[Any, Any], jax.Array], minibatch: Any) -> Callable[[Any], jax.Array]:
  return lambda position: logdensity_fn(position, minibatch)


def make_integrator(logdensity_fn: Callable[[Any], jax.Array], inverse_mass_matrix: Any = 1.0, *,
                    sanitize: bool = True, coefficients=integrators.mclachlan_coefficients):
  """Isokinetic integrator (recipe B) whose position op also checks and cleans gradients.

  Returns `step(state, step_size) -> (IntegratorState, kinetic_change, finite)`; `finite` is
  False if any evaluated ℓ or g was non-finite. With `sanitize`, NaN gradients become 0 and
  every coordinate is clipped to ±GRAD_CLIP before the velocity map uses it. For finite
  gradients inside the clip range it equals `integrators.isokinetic_mclachlan` exactly.
  """
  value_and_grad = jax.value_and_grad(logdensity_fn)

  def position_op(position, kinetic_grad, step_size, coef, aux):
    new_position = jax.tree.map(lambda x, v: x + step_size * coef * v, position, kinetic_grad)
    logdensity, grad = value_and_grad(new_position)
    finite = jnp.isfinite(logdensity) & _tree_finite(grad)
    if sanitize:
      grad = jax.tree.map(_sanitize, grad)
    finite = finite if aux is None else aux & finite
    return new_position, logdensity, grad, finite

  def fmt(position, momentum, logdensity, logdensity_grad, kinetic_grad, position_info, momentum_info):
    del kinetic_grad
    return integrators.IntegratorState(position, momentum, logdensity, logdensity_grad), momentum_info, position_info

  return integrators.generalized_two_stage_integrator(
      integrators.esh_dynamics_momentum_update_one_step(inverse_mass_matrix), position_op, coefficients,
      format_output_fn=fmt)


def _build(logdensity_fn: Callable[[Any, Any], jax.Array], *, step_size: float | jax.Array, L: float | jax.Array,
           precondition: bool | None, tuned: bool | None, tuner: adapt.TunerConfig, precond: adapt.PrecondConfig,
           clamp: bool, same_batch_energy: bool) -> Sampler:
  """precondition / tuned = None: read per chain from `state.variant` (one compile for all variants); the
  r clamp is then read per chain from `state.clamp` (`clamp` is its initial value), else `clamp` itself.

  `step_size` and `L` may be traced arrays: a sampler built inside `jax.vmap` over a grid of ε₀
  (or L) compiles once for the whole grid.
  """
  dynamic = precondition is None or tuned is None
  if tuner.tuner not in TUNERS:
    raise ValueError(f"tuner must be one of {TUNERS}, got {tuner.tuner!r}")
  if tuner.pool_stat not in adapt.POOL_STATS:
    raise ValueError(f"pool_stat must be one of {adapt.POOL_STATS}, got {tuner.pool_stat!r}")
  same_batch_tuner = (dynamic or tuned) and tuner.tuner in ("energy_var", "energy_quantile")
  virial = (dynamic or tuned) and tuner.tuner in ("virial", "virial_ladder")
  ladder = (dynamic or tuned) and tuner.tuner == "virial_ladder"
  if ladder and tuner.adapt_steps <= 0:
    raise ValueError("tuner='virial_ladder' needs adapt_steps > 0 (its pilot is a fraction of the warmup)")

  def init(position: Any, minibatch: Any, rng: jax.Array) -> SmileState:
    target = _bind(logdensity_fn, minibatch)
    logdensity, grad = jax.value_and_grad(target)(position)
    state = integrators.IntegratorState(position, generate_unit_vector(rng, position), logdensity, grad)
    dim = ravel_pytree(position)[0].shape[0]
    if dim < 2:
      raise ValueError("SMILE needs at least 2 parameters")
    variant = jnp.array([True if precondition is None else precondition, True if tuned is None else tuned])
    eps0 = jnp.asarray(step_size, jnp.float32)
    return SmileState(integrator=state, step_size=eps0, initial_step_size=eps0, tuner=adapt.tuner_init(),
                      precond=adapt.precond_init(dim), variant=variant, clamp=jnp.asarray(clamp, bool),
                      anchor=((ravel_pytree(position)[0], logdensity, ravel_pytree(grad)[0]) if ladder
                              else ravel_pytree(position)[0] if virial else None))

  def step(rng: jax.Array, state: SmileState, minibatch: Any) -> tuple[SmileState, SmileInfo]:
    # Same key layout as blackjax.mclmc.build_kernel, so the full-batch naive step matches it.
    if _static_inf(L):   # no randomness in the step: no key work either
      refresh_key1 = refresh_key2 = rng
    else:
      kernel_key = jax.random.split(rng, 3)[0]
      refresh_key1, refresh_key2 = jax.random.split(kernel_key)
    # The step works on raveled vectors: one op per update instead of one per parameter leaf (the
    # per-leaf version compiled to ~2x the fused ops, a fixed cost that showed at small batch).
    tree_target = _bind(logdensity_fn, minibatch)
    _, unravel = ravel_pytree(state.integrator.position)
    target = lambda z: tree_target(unravel(z))
    use_pre = state.variant[0] if dynamic else precondition
    use_tuner = state.variant[1] if dynamic else tuned
    if dynamic:
      imm = jnp.where(use_pre, adapt.precond_inverse_mass(state.precond, precond, state.clamp), 1.0)
    else:
      imm = adapt.precond_inverse_mass(state.precond, precond, clamp) if precondition else 1.0
    old = _ravel_state(state.integrator)
    if same_batch_tuner:
      # ℓ_old and g_old on the current batch (+1 batch gradient): ΔE is then the integration error
      # of one fixed potential, which MCLMC's absolute Var[ΔE]/d target is about.
      logdensity, grad = jax.value_and_grad(target)(old.position)
      grad = jax.tree.map(_sanitize, grad)
      old = old._replace(logdensity=logdensity, logdensity_grad=grad)
    elif same_batch_energy:  # ablation: ℓ_old on the current batch (one extra forward pass)
      old = old._replace(logdensity=target(old.position))
    eps = state.step_size
    # The chains that pool one ε (tuner "energy_quantile" / "virial" with pool_chains, and the "virial_ladder" pilot's
    # rungs and choice): same ε₀ and variant.
    pool_key = jnp.concatenate([state.initial_step_size[None], state.variant.astype(jnp.float32)])
    if ladder:   # first step: each chain starts at its pilot rung's ε
      rung = adapt.ladder_rung(pool_key, tuner)
      eps = jnp.where(use_tuner & (state.tuner.t == 1), adapt.ladder_step_size(state.initial_step_size, rung, tuner),
                      eps)
    st = old._replace(momentum=_refresh(old.momentum, refresh_key1, eps * 0.5, L))
    new, kinetic_change, finite = make_integrator(target, imm)(st, eps)
    new = new._replace(momentum=_refresh(new.momentum, refresh_key2, eps * 0.5, L))
    energy_change = kinetic_change - new.logdensity + old.logdensity
    ok = (finite & jnp.isfinite(energy_change) & jnp.isfinite(kinetic_change) & _tree_finite(new.position)
          & _tree_finite(new.momentum))
    abs_de = jnp.where(ok, jnp.abs(energy_change), 0.0)
    floor = tuner.eps_floor_frac * state.initial_step_size
    # Naive kernels: a non-finite step halves ε (our guardrail) or, with nonfinite_halving=False (the
    # reference), keeps it; the step is reverted and counted either way.
    eps_fixed = jnp.where(ok, eps, jnp.maximum(eps * 0.5, floor)) if tuner.nonfinite_halving else eps

    restart_chain = jnp.zeros((), bool)   # virial_ladder: this chain resumes from its start after this step
    if same_batch_tuner:
      dim = ravel_pytree(old.position)[0].shape[0]
      reset = jnp.zeros((), bool)
      if tuner.tuner == "energy_quantile":   # divergence guard: revert a step with x ≫ τ
        limit = tuner.divergence_factor * adapt.energy_quantile_threshold(tuner)
        reset = use_tuner & ok & (abs_de ** 2 / dim > limit)
      if tuner.tuner == "energy_var":
        eps_tuned, tun_tuned = adapt.energy_var_update(eps, energy_change, dim, state.tuner, tuner,
                                                       state.initial_step_size, ~ok)
      else:
        scale = jnp.maximum(jnp.abs(old.logdensity), jnp.abs(new.logdensity))
        eps_tuned, tun_tuned = adapt.energy_quantile_update(eps, energy_change, dim, state.tuner, tuner,
                                                            state.initial_step_size, ~ok, scale, pool_key)
    elif virial:
      # No extra gradient: T̂ = −(θ − θ₀)·g/d of the new state, with the gradient the step has already evaluated.
      reset = jnp.zeros((), bool)
      theta0 = state.anchor[0] if ladder else state.anchor
      temperature = adapt.virial_temperature(new.position - theta0, new.logdensity_grad)
      if ladder:
        eps_tuned, tun_tuned, restart_chain = adapt.ladder_update(eps, temperature, ~ok, state.tuner, tuner,
                                                                  state.initial_step_size, pool_key, rung)
        restart_chain = restart_chain & use_tuner
      else:
        eps_tuned, tun_tuned = adapt.virial_update(eps, temperature, state.tuner, tuner, state.initial_step_size, ~ok,
                                                   pool_key)
    if same_batch_tuner or virial:   # the absolute-target tuners: no statistics gate on `ok` (they handle ~ok)
      eps_new = jnp.where(use_tuner, eps_tuned, eps_fixed)
      tun = jax.tree.map(lambda a, b: jnp.where(use_tuner, a, b), tun_tuned, state.tuner)
    elif dynamic or tuned:
      q_reset, _, _ = adapt.tuner_thresholds(state.tuner, tuner)
      reset = use_tuner & ok & (state.tuner.t >= tuner.freeze_steps) & (abs_de > q_reset)
      eps_tuned = adapt.adapt_step_size(eps, abs_de, state.tuner, tuner, state.initial_step_size, ~ok)
      eps_new = jnp.where(use_tuner, eps_tuned, eps_fixed)
      tun = jax.tree.map(lambda a, b: jnp.where(ok & use_tuner, a, b),
                         adapt.tuner_update(state.tuner, abs_de, tuner), state.tuner)
    else:
      reset = jnp.zeros((), bool)
      eps_new, tun = eps_fixed, state.tuner
    # Reverted state: a reset zeros u (reference); a non-finite step restarts from the unit velocity
    # −u (or ĝ_old when u = 0 after a reset), a new direction without a d-dimensional Gaussian draw
    # per step (under vmap a conditional draw would be paid on every step).
    u_sq = sum(jnp.sum(u ** 2) for u in jax.tree.leaves(old.momentum))
    g_norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(old.logdensity_grad))) + 1e-30
    restart = jax.tree.map(lambda u, g: jnp.where(u_sq > 0, -u, g / g_norm), old.momentum, old.logdensity_grad)
    reverted = old._replace(momentum=jax.tree.map(lambda r: jnp.where(ok, 0.0, r), restart))
    keep = ok & ~reset
    out = jax.tree.map(lambda a, b: jnp.where(keep, a, b), new, reverted)
    if ladder:   # a chain above the chosen rung resumes from its start (the velocity is kept)
      theta0, logdensity0, grad0 = state.anchor
      start = out._replace(position=theta0, logdensity=logdensity0, logdensity_grad=grad0)
      out = jax.tree.map(lambda a, b: jnp.where(restart_chain, a, b), start, out)

    if dynamic or precondition:
      g_flat = ravel_pytree(out.logdensity_grad)[0]
      pre = jax.tree.map(lambda a, b: jnp.where(keep & use_pre, a, b),
                         adapt.precond_update(state.precond, g_flat, precond), state.precond)
    else:
      pre = state.precond
    info = SmileInfo(logdensity=out.logdensity, kinetic_change=jnp.where(ok, kinetic_change, 0.0),
                     energy_change=jnp.where(ok, energy_change, 0.0), nonans=ok, reset=reset | restart_chain,
                     step_size=eps_new)
    out = integrators.IntegratorState(unravel(out.position), unravel(out.momentum), out.logdensity,
                                      unravel(out.logdensity_grad))
    return SmileState(out, eps_new, state.initial_step_size, tun, pre, state.variant, state.clamp, state.anchor), info

  return Sampler(init, step, 3 if same_batch_tuner else 2)


def psmile(logdensity_fn: Callable[[Any, Any], jax.Array], *, step_size: float | jax.Array,
           L: float | jax.Array = math.inf,
           precondition: bool = True, tuned: bool = True, same_batch_energy: bool = False,
           precond: adapt.PrecondConfig | None = None, clamp: bool = True, **tuner: Any) -> Sampler:
  """Preconditioned SMILE (pSMILE; pSMILE-naive with `tuned=False`).

  Args:
    logdensity_fn: `logdensity_fn(position, minibatch) -> scalar`, the minibatch log posterior
      log p(θ) + (N/b) Σ_B log p(y|x,θ).
    step_size: initial ε (ε₀; the floor is `eps_floor_frac · ε₀`); a float or a (traced) array.
    L: partial-refresh length (∞: none, the authors' default for minibatch runs); a float or an
      array. With L = ∞ the gradient noise is the only refresh: on full-batch or low-noise targets
      the flow is then deterministic and not ergodic, and with non-diagonal noise the spread is
      biased; a finite L ≈ 0.1–1 · √d · (posterior scale) fixes both (docs/methods/smile.md).
    precondition: use the gradient-noise preconditioner.
    tuned: step-size tuner on; off = fixed ε (naive variants).
    **tuner: TunerConfig fields; `tuner="ref"` (default) is the authors' Gamma-quantile rule with
      resets, `tuner="energy_var"` the absolute same-batch energy-error target (EMA of ΔE²/d),
      `tuner="energy_quantile"` the Robbins–Monro quantile tracker on the same signal; give it
      `adapt_steps` (the warmup length) so that ε is averaged and frozen, `decay_steps` for the
      restarted gain of the second half and `pool_chains=True` for one ε per ε₀ over the chains
      (then vmap the step with axis_name=adaptation.CHAIN_AXIS, as the chain runner does; see `adaptation`),
      `pool_stat="midmean"` to pool robustly to chains with heavy-tailed energy errors. `tuner="virial"` steers
      the median of the configurational temperature T̂ = −(θ − θ₀)·∇log p̂/d to `virial_target` (1.1) with the
      same Robbins–Monro machinery, after `settle_frac` of `adapt_steps` (no extra gradient; `adaptation`);
      `tuner="virial_ladder"` chooses one ε from a pilot ladder of ε by the same T̂ target (`ladder_*` fields;
      needs `adapt_steps` and the chain axis; its restarts are counted as resets).
    same_batch_energy: re-evaluate ℓ_old on the current batch (ablation, +1 forward pass).
    precond: PrecondConfig.
    clamp: clamp the preconditioner's normalised scale r to [precond.r_min, precond.r_max] (off: the
      authors' kernel, r unbounded).
  """
  return _build(logdensity_fn, step_size=step_size, L=L, precondition=precondition, tuned=tuned,
                tuner=adapt.TunerConfig(**tuner), precond=precond or adapt.PrecondConfig(), clamp=clamp,
                same_batch_energy=same_batch_energy)


def smile_family(logdensity_fn: Callable[[Any, Any], jax.Array], *, step_size: float | jax.Array,
                 L: float | jax.Array = math.inf,
                 same_batch_energy: bool = False, precond: adapt.PrecondConfig | None = None,
                 clamp: bool = True, **tuner: Any) -> Sampler:
  """All four variants in one compiled step: `state.variant` = (precondition, tuned) per chain, and the
  r clamp per chain (`state.clamp`, initially `clamp`).

  `init` gives pSMILE; set `state._replace(variant=..., clamp=..., step_size=ε₀, initial_step_size=ε₀)` to
  switch a chain to another variant, clamp or initial step size (used to vmap variants and ε₀ grids).
  """
  return _build(logdensity_fn, step_size=step_size, L=L, precondition=None, tuned=None,
                tuner=adapt.TunerConfig(**tuner), precond=precond or adapt.PrecondConfig(), clamp=clamp,
                same_batch_energy=same_batch_energy)


def smile(logdensity_fn: Callable[[Any, Any], jax.Array], *, step_size: float | jax.Array,
          L: float | jax.Array = math.inf,
          tuned: bool = True, same_batch_energy: bool = False, **tuner: Any) -> Sampler:
  """SMILE without preconditioning (SMILE-naive with `tuned=False`). See `psmile`."""
  return psmile(logdensity_fn, step_size=step_size, L=L, precondition=False, tuned=tuned,
                same_batch_energy=same_batch_energy, **tuner)
