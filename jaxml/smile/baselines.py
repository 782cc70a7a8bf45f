"""SG-MCMC baselines as `ChainKernel`s on the same minibatch log posterior as SMILE.

- SGLD (blackjax's overdamped-Langevin solver): θ ← θ + ε ĝ + sqrt(2 T ε) z.
- Cyclical SGLD: ε_t = ε₀/2 (cos(π (t mod P) / P) + 1), P = steps / cycles; the first `explore_frac` of a
  cycle runs without noise and keeps no sample.
- SGHMC (blackjax `diffusions.sghmc(alpha=m/ε, beta=0)`): θ ← θ + ε p;  p ← (1 − m) p + ε ĝ + sqrt(2 m T) z.
One minibatch gradient per step (b PEG); non-finite positions are counted, not rescued."""

import math
from typing import Callable

import jax
import jax.numpy as jnp
from blackjax.sgmcmc import diffusions

from jaxml import core
from jaxml.smile.chains import ChainKernel

__all__ = ["sgld_kernel", "csgld_kernel", "sghmc_kernel"]


def _sgld(logdensity_fn: Callable, default_step: float,
          schedule: Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]],
          keep: Callable[[jax.Array], jax.Array] | None) -> ChainKernel:
  solver = diffusions.overdamped_langevin()
  value_and_grad = jax.value_and_grad(logdensity_fn)

  def init(position, minibatch, rng, hyper):
    del rng
    eps0 = jnp.asarray(hyper.get("step_size", default_step), jnp.float32)
    return {"position": position, "logdensity": logdensity_fn(position, minibatch), "step_size": eps0}

  def step(rng, state, minibatch, t):
    eps, temperature = schedule(t, state["step_size"])
    logdensity, grad = value_and_grad(state["position"], minibatch)
    position = solver(rng, state["position"], grad, eps, temperature)
    bad = ~core.tree_all_finite(position)
    return ({"position": position, "logdensity": logdensity, "step_size": state["step_size"]},
            {"logdensity": logdensity, "reset": jnp.zeros((), bool), "nonfinite": bad,
             "step_size": jnp.asarray(eps, jnp.float32)})

  return ChainKernel(init, step, lambda s: s["position"], 1, keep)


def sgld_kernel(logdensity_fn: Callable, *, step_size: float, temperature: float = 1.0) -> ChainKernel:
  """Constant-step SGLD; `logdensity_fn(position, minibatch)` as for SMILE; hyper "step_size" overrides ε."""
  return _sgld(logdensity_fn, step_size, lambda t, eps0: (eps0, temperature), None)


def csgld_kernel(logdensity_fn: Callable, *, step_size: float, total_steps: int, num_cycles: int = 4,
                 explore_frac: float = 0.33, temperature: float = 1.0) -> ChainKernel:
  """Cyclical SGLD (cosine schedule, noise-free exploration stage, samples only after it)."""
  period = max(total_steps // num_cycles, 1)

  def phase(t):
    return ((t - 1) % period).astype(jnp.float32) / period

  def schedule(t, eps0):
    r = phase(t)
    eps = 0.5 * eps0 * (jnp.cos(math.pi * r) + 1.0)
    return eps, jnp.where(r < explore_frac, 0.0, temperature)

  return _sgld(logdensity_fn, step_size, schedule, lambda t: phase(t) >= explore_frac)


def sghmc_kernel(logdensity_fn: Callable, *, step_size: float, momentum_decay: float = 0.05,
                 temperature: float = 1.0) -> ChainKernel:
  """SGHMC whose momentum persists across minibatches (one Euler step per batch)."""
  value_and_grad = jax.value_and_grad(logdensity_fn)

  def init(position, minibatch, rng, hyper):
    leaves, treedef = jax.tree.flatten(position)
    keys = jax.random.split(rng, len(leaves))
    momentum = jax.tree.unflatten(treedef, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])
    eps = jnp.asarray(hyper.get("step_size", step_size), jnp.float32)
    return {"position": position, "momentum": momentum, "logdensity": logdensity_fn(position, minibatch),
            "step_size": eps}

  def step(rng, state, minibatch, t):
    del t
    eps = state["step_size"]
    solver = diffusions.sghmc(alpha=momentum_decay / eps, beta=0.0)
    logdensity, grad = value_and_grad(state["position"], minibatch)
    position, momentum = solver(rng, state["position"], state["momentum"], grad, eps, temperature)
    bad = ~core.tree_all_finite(position)
    return ({"position": position, "momentum": momentum, "logdensity": logdensity, "step_size": eps},
            {"logdensity": logdensity, "reset": jnp.zeros((), bool), "nonfinite": bad, "step_size": eps})

  return ChainKernel(init, step, lambda s: s["position"], 1, None)
