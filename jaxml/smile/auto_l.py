"""pSMILE with its partial-refresh length L chosen from the chain's own position variance.

With L = ∞ (the kernel's default) the minibatch gradient noise is the only momentum refresh: at full batch
the flow is deterministic and not ergodic, and with anisotropic noise the spread comes out biased (the known
posteriors of `posteriors` show it; docs/methods/smile.md, "Defaults"). blackjax's
`mclmc_find_L_and_step_size` sets L = l_factor · √(Σ_i Var θ_i) from the sample variance of a tuning run;
`psmile_auto` does the same online, per chain, during warmup:

  m ← m + r_t (θ − m),  v ← (1 − r_t)(v + r_t (θ − m_old)²),  r_t = min(forget / t, 1),
  L_t = max(l_factor · √(Σ_i v_i),  floor · ε_t),

a running variance whose weights grow like (s/t)^(forget − 1) (forget = 2 down-weights the transient from the
start), floored at a few step sizes so that the very first steps are not all refresh. L is updated every step
up to `adapt_steps`, then frozen; without a run length (`num_steps` and `adapt_steps` both None) it keeps
adapting with the decaying rate r_t. An explicit `L=` is used as is. `adapt_steps` defaults to
`adapt_frac` (½) of `num_steps`, and is passed on to the step-size tuners that average and freeze ε
("energy_quantile", "virial").

The wrapper only calls the public kernel API (`kernel.psmile(...)`, `.init`, `.step`): the sampler is rebuilt
inside every step with the state's (traced) L, which the kernel accepts as an array.
"""

import math
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxml.smile import kernel

__all__ = ["AutoLState", "psmile_auto", "L_FACTOR", "ADAPT_FRAC", "DEFAULT_TUNER"]

L_FACTOR = 0.4          # blackjax's l_factor: L = 0.4 · √(Σ Var θ)
ADAPT_FRAC = 0.5        # adapt_steps = ½ of num_steps when the run length is given
FORGET = 2.0            # running-variance rate forget / t
L_FLOOR = 2.0           # L ≥ 2 ε while the variance estimate is still small
DEFAULT_TUNER = "ref"   # step-size rule (chosen by mean error over keys on the posterior suite)
_TUNERS_WITH_ADAPT_STEPS = ("energy_quantile", "virial", "virial_ladder")


class AutoLState(NamedTuple):
  """smile: the kernel's SmileState; L: current refresh length; mean, var [d]: running θ moments; t: steps."""

  smile: Any
  L: jax.Array
  mean: jax.Array
  var: jax.Array
  t: jax.Array
  initial_step_size: jax.Array

  @property
  def position(self) -> Any:
    return self.smile.position


def psmile_auto(logdensity_fn: Callable[[Any, Any], jax.Array], *, step_size: float | jax.Array,
                L: float | jax.Array | None = None, num_steps: int | None = None, adapt_steps: int | None = None,
                adapt_frac: float = ADAPT_FRAC, l_factor: float = L_FACTOR, forget: float = FORGET,
                l_floor: float = L_FLOOR, precondition: bool = True, tuned: bool = True,
                tuner: str = DEFAULT_TUNER, **kwargs: Any) -> kernel.Sampler:
  """pSMILE whose L is set during warmup from each chain's running position variance (see module docstring).

  Args:
    logdensity_fn: `logdensity_fn(position, minibatch) -> scalar` minibatch log posterior.
    step_size: initial ε₀ (float or traced array).
    L: explicit refresh length; given, it overrides the automatic choice (∞ with `tuned` warns: biased spread).
    num_steps: total steps of the run (warmup + sampling), if known: sets adapt_steps = adapt_frac · num_steps.
    adapt_steps: steps during which L adapts (then frozen); None with num_steps None: never frozen.
    l_factor: L = l_factor · √(Σ Var θ);  forget: rate forget/t of the running variance; l_floor: L ≥ l_floor · ε.
    precondition, tuned, tuner, **kwargs: as for `kernel.psmile` (TunerConfig fields, precond, clamp, ...).
  Returns:
    Sampler(init, step, grads_per_step) with state `AutoLState` (the kernel's SmileState in `.smile`).
  """
  if adapt_steps is None and num_steps is not None:
    adapt_steps = int(adapt_frac * num_steps)
  if tuner in _TUNERS_WITH_ADAPT_STEPS and adapt_steps is not None and "adapt_steps" not in kwargs:
    kwargs["adapt_steps"] = adapt_steps
  build = lambda length, eps: kernel.psmile(logdensity_fn, step_size=eps, L=length, precondition=precondition,
                                            tuned=tuned, tuner=tuner, **kwargs)
  if L is not None:
    if tuned and isinstance(L, (int, float)) and math.isinf(L):
      warnings.warn("pSMILE with L = inf and the step-size tuner underestimates the posterior spread (the "
                    "gradient noise is then the only momentum refresh); leave L=None to choose it from the chains",
                    stacklevel=2)
    return build(L, step_size)

  def init(position: Any, minibatch: Any, rng: jax.Array) -> AutoLState:
    eps0 = jnp.asarray(step_size, jnp.float32)
    flat = ravel_pytree(position)[0]
    inner = build(l_floor * eps0, eps0).init(position, minibatch, rng)
    return AutoLState(inner, l_floor * eps0, flat, jnp.zeros_like(flat), jnp.zeros((), jnp.int32), eps0)

  def step(rng: jax.Array, state: AutoLState, minibatch: Any) -> tuple[AutoLState, kernel.SmileInfo]:
    inner, info = build(state.L, state.initial_step_size).step(rng, state.smile, minibatch)
    flat = ravel_pytree(inner.position)[0]
    t = state.t + 1
    rate = jnp.minimum(forget / t.astype(jnp.float32), 1.0)
    delta = flat - state.mean
    mean = state.mean + rate * delta
    var = (1.0 - rate) * (state.var + rate * delta ** 2)
    length = jnp.maximum(l_factor * jnp.sqrt(jnp.sum(var)), l_floor * info.step_size)
    adapting = jnp.ones((), bool) if adapt_steps is None else t <= adapt_steps
    new_l = jnp.where(adapting, length, state.L)
    return AutoLState(inner, new_l, mean, var, t, state.initial_step_size), info

  return kernel.Sampler(init, step, build(math.inf, step_size).grads_per_step)
