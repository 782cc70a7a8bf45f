"""pSMILE as `jaxml.smile.psmile`: its partial-refresh length L chosen from the chain's own position variance.

`kernel.psmile` is the bare kernel with the authors' defaults (L = ∞). Like blackjax's
`mclmc_find_L_and_step_size`, `psmile` sets L = l_factor · √(Σ_i Var θ_i) online, per chain, during warmup
(running moments at rate min(2 / t, 1)), then freezes it, and in the second half of the warmup caps ε under the
gradient noise, ε ≤ κ (d − 1) / √(d σ̂²), while the running ΔE²/d exceeds 1; docs/methods/smile.md ("Defaults")
gives the rules and why. The wrapper uses only the kernel's public API and `SmileState` fields."""

import math
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxml.smile import adaptation as adapt
from jaxml.smile import kernel

__all__ = ["AutoLState", "psmile", "L_FACTOR", "ADAPT_FRAC", "NOISE_KAPPA", "ENERGY_GATE"]

# L = 0.7 · √(Σ Var θ) (blackjax uses 0.4; 0.7 scores best on `posteriors`, docs/methods/smile.md)
L_FACTOR = 0.7
ADAPT_FRAC = 0.5        # adapt_steps = ½ of num_steps when the run length is given
FORGET = 2.0            # running-variance rate forget / t
NOISE_KAPPA = 0.3       # ε ≤ κ (d − 1) / |c⊙ξ|: the gradient noise turns the velocity by at most ~κ per step
ENERGY_GATE = 1.0       # the noise cap acts only while the running ΔE²/d exceeds this (minibatch noise present)
L_FLOOR = 2.0           # L ≥ 2 ε while the variance estimate is still small


class AutoLState(NamedTuple):
  """smile: the kernel's SmileState; L: current refresh length; mean, var [d]: running θ moments; t: steps."""

  smile: Any
  L: jax.Array
  mean: jax.Array
  var: jax.Array
  t: jax.Array
  initial_step_size: jax.Array
  noise: jax.Array                # running mean_j (g_t − 2 g_{t−1} + g_{t−2})_j² / 6: the gradient-noise variance
  grad_before: jax.Array          # [d] g_{t−2} (g_{t−1} is the kernel state's gradient)
  energy: jax.Array               # running mean of ΔE² / d (ΔE across batches: large only when the batches differ)

  @property
  def position(self) -> Any:
    return self.smile.position

  @property
  def integrator(self) -> Any:
    """The kernel state's IntegratorState, so that `chains.smile_chain_kernel(psmile(...))` runs as is."""
    return self.smile.integrator


def psmile(logdensity_fn: Callable[[Any, Any], jax.Array], *, step_size: float | jax.Array,
           L: float | jax.Array | None = None, num_steps: int | None = None, adapt_steps: int | None = None,
           l_factor: float = L_FACTOR, l_floor: float = L_FLOOR, tuner: adapt.Tuner | None = None,
           **kwargs: Any) -> kernel.Sampler:
  """pSMILE whose L is set during warmup from each chain's running position variance (module docstring).

  Args:
    logdensity_fn: `logdensity_fn(position, minibatch) -> scalar` minibatch log posterior.
    step_size: initial ε₀ (float or traced array).
    L: explicit refresh length, overriding the automatic choice (∞ warns: biased spread).
    num_steps / adapt_steps: run length (adapt_steps = ADAPT_FRAC · num_steps) / steps L adapts, then frozen.
    l_factor: L = l_factor · √(Σ Var θ);  l_floor: L ≥ l_floor · ε in the first half of the warmup.
    tuner: step-size rule (`adaptation`); default none (fixed ε₀ under the noise cap), chosen over the
      authors' `ref_tuner()` on the `posteriors` suite (docs/methods/smile.md).
    **kwargs: as for `kernel.psmile` (precondition, precond, clamp, same_batch_energy).
  Returns Sampler(init, step, grads_per_step) with state `AutoLState` (the kernel's SmileState in `.smile`)."""
  if adapt_steps is None and num_steps is not None:
    adapt_steps = int(ADAPT_FRAC * num_steps)
  build = lambda length, eps: kernel.psmile(logdensity_fn, step_size=eps, L=length,
                                            tuner=adapt.fixed_tuner() if tuner is None else tuner, **kwargs)
  if L is not None:
    if isinstance(L, (int, float)) and math.isinf(L):
      warnings.warn("pSMILE with L = inf underestimates the posterior spread (the "
                    "gradient noise is then the only momentum refresh); leave L=None to choose it from the chains",
                    stacklevel=2)
    return build(L, step_size)

  def init(position: Any, minibatch: Any, rng: jax.Array) -> AutoLState:
    eps0 = jnp.asarray(step_size, jnp.float32)
    flat = ravel_pytree(position)[0]
    length = jnp.maximum(l_floor, 1.0 / 16.0) * eps0
    inner = build(length, eps0).init(position, minibatch, rng)
    return AutoLState(inner, length, flat, jnp.zeros_like(flat), jnp.zeros((), jnp.int32), eps0,
                      jnp.zeros((), jnp.float32), ravel_pytree(inner.integrator.logdensity_grad)[0],
                      jnp.zeros((), jnp.float32))

  def step(rng: jax.Array, state: AutoLState, minibatch: Any) -> tuple[AutoLState, kernel.SmileInfo]:
    inner, info = build(state.L, state.initial_step_size).step(rng, state.smile, minibatch)
    flat = ravel_pytree(inner.position)[0]
    t = state.t + 1
    rate = jnp.minimum(FORGET / t.astype(jnp.float32), 1.0)
    delta = flat - state.mean
    mean = state.mean + rate * delta
    var = (1.0 - rate) * (state.var + rate * delta ** 2)
    grad_last = ravel_pytree(state.smile.integrator.logdensity_grad)[0]
    # second difference: independent batch noise adds 6 σ² to its square, a smooth drift of g almost nothing
    diff = ravel_pytree(inner.integrator.logdensity_grad)[0] - 2.0 * grad_last + state.grad_before
    noise_rate = jnp.where(t > 1, rate, 0.0)    # g_{t−2} exists from the second step on
    noise = state.noise + noise_rate * (jnp.mean(diff ** 2) / 6.0 - state.noise)
    energy = state.energy + rate * (info.energy_change ** 2 / flat.shape[0] - state.energy)
    settle = (adapt_steps // 2) if adapt_steps is not None else 100
    length = l_factor * jnp.sqrt(jnp.sum(var))
    length = jnp.where(t > settle, length, jnp.maximum(length, l_floor * info.step_size))
    # blackjax's refresh draws with scale √((e^{ε/L} − 1)/d): float32 overflows once ε/L ≳ 88 (full refresh long before)
    length = jnp.maximum(length, info.step_size / 16.0)
    adapting = jnp.ones((), bool) if adapt_steps is None else t <= adapt_steps
    new_l = jnp.where(adapting, length, state.L)
    # the noise turns u by δ = ε |c⊙ξ| / (d − 1) per step; keep δ ≤ κ (from the second half of the warmup on)
    dim = flat.shape[0]
    cap = NOISE_KAPPA * (dim - 1) / jnp.sqrt(dim * noise + 1e-30)
    noisy = energy > ENERGY_GATE     # full batch (or tiny noise): ΔE²/d ≪ 1 and the cap stays off
    eps = jnp.where(adapting & noisy & (t > settle), jnp.minimum(inner.step_size, cap), inner.step_size)
    inner = inner._replace(step_size=eps, initial_step_size=jnp.minimum(inner.initial_step_size, eps))
    return AutoLState(inner, new_l, mean, var, t, state.initial_step_size, noise, grad_last, energy), info

  return kernel.Sampler(init, step, build(math.inf, step_size).grads_per_step)
