"""Minibatch chain runner shared by SMILE and the SG-MCMC baselines, plus full-batch MCLMC.

Each chain walks its own permutation of the rows in chunks of b; all chains advance in one `lax.scan`,
the kernel `vmap`ped over chains. Cost is in per-example gradient evaluations (PEG): g·b per step for
g minibatch gradients, plus b initially; a full-batch MCLMC step costs 2N."""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.mcmc import integrators, mclmc

from jaxml.core.rng import fold_in_each
from jaxml.smile import adaptation as adapt
from jaxml.smile.kernel import Sampler

__all__ = ["ChainKernel", "ChainResult", "smile_chain_kernel", "auto_chain_kernel", "make_chain_runner",
           "make_mclmc_runner", "run_chains", "run_mclmc"]


class ChainKernel(NamedTuple):
  """init(position, minibatch, rng, hyper) -> state; step(rng, state, minibatch, t) -> (state, info). `hyper`:
  per-chain overrides (e.g. {"step_size": ε₀}), so grids run as extra chains of one compile. info holds scalar
  "logdensity", "reset", "nonfinite", "step_size"; `keep(t)` says whether a sample at t counts."""

  init: Callable[..., Any]
  step: Callable[..., tuple[Any, dict]]
  position: Callable[[Any], Any]
  grads_per_step: int
  keep: Callable[[jax.Array], jax.Array] | None = None


class ChainResult(NamedTuple):
  positions: Any            # leading axes [C, S]
  logdensity: jax.Array     # [C, S] minibatch log posterior at the kept samples
  keep: jax.Array           # [S] bool
  resets: jax.Array         # [C] count over the whole run
  nonfinite: jax.Array      # [C]
  step_size: jax.Array      # [C] final ε
  peg_per_chain: int
  states: Any
  warmup_step_size: Any = None   # [W, C] ε at the end of every warmup block of `thin` steps


def smile_chain_kernel(sampler: Sampler) -> ChainKernel:
  """Adapts a SMILE `Sampler` to the runner; hyper may hold "step_size" (ε₀), "precondition" and "clamp" (per-chain
  bools of the state) and "tuned" (the flag of an `adaptation.per_chain_tuner`)."""

  def init(position, minibatch, rng, hyper):
    state = sampler.init(position, minibatch, rng)
    if "step_size" in hyper:
      eps = jnp.asarray(hyper["step_size"], jnp.float32)
      state = state._replace(step_size=eps, initial_step_size=eps)
    for name in ("precondition", "clamp"):
      if name in hyper:
        state = state._replace(**{name: jnp.asarray(hyper[name], bool)})
    if "tuned" in hyper:
      state = state._replace(tuner=state.tuner._replace(on=jnp.asarray(hyper["tuned"], bool)))
    return state

  return ChainKernel(init, _smile_step(sampler), lambda s: s.integrator.position, sampler.grads_per_step)


def _smile_step(sampler: Sampler) -> Callable:
  def step(rng, state, minibatch, t):
    del t
    state, info = sampler.step(rng, state, minibatch)
    return state, {"logdensity": info.logdensity, "reset": info.reset, "nonfinite": ~info.nonans,
                   "step_size": info.step_size}
  return step


def auto_chain_kernel(make_sampler: Callable[[jax.Array], Sampler]) -> ChainKernel:
  """Adapts a sampler factory ε₀ -> Sampler (`smile.psmile` with automatic L, `kernel.psmile`, ...) to the runner:
  ε₀ per chain from hyper["step_size"] (the step reads ε₀ from the state, so one sampler steps every chain)."""
  sampler = make_sampler(jnp.float32(1.0))

  def init(position, minibatch, rng, hyper):
    return make_sampler(jnp.asarray(hyper["step_size"], jnp.float32)).init(position, minibatch, rng)

  return ChainKernel(init, _smile_step(sampler), lambda s: s.integrator.position, sampler.grads_per_step)


def make_chain_runner(kernel: ChainKernel, *, num_chains: int, data_size: int, batch_size: int, num_warmup: int,
                      num_samples: int, thin: int) -> Callable[..., ChainResult]:
  """Jitted `runner(positions [C, ...], data{"x": [N, p], "y": [N]}, rng, hypers={}, chain_ids=None) -> ChainResult`;
  per-chain keys are `fold_in(·, id)`, so a chain's draws do not depend on what runs beside it. Steps per
  chain: num_warmup (rounded down to a multiple of thin) + num_samples · thin; one compile per shapes."""
  n, b = int(data_size), int(batch_size)
  per_epoch = n // b
  if per_epoch < 1:
    raise ValueError(f"batch size {b} exceeds the {n} training rows")
  step_fn = jax.vmap(kernel.step, in_axes=(0, 0, 0, None), axis_name=adapt.CHAIN_AXIS)   # named: tuners may pool
  warm_blocks = num_warmup // thin

  @jax.jit
  def run(positions, x, y, rng, hypers, ids):
    init_key, data_key, step_key = jax.random.split(rng, 3)

    def perms_for(epoch):
      keys = fold_in_each(jax.random.fold_in(data_key, epoch), ids)
      return jax.vmap(lambda k: jax.random.permutation(k, n))(keys).astype(jnp.int32)

    def batch_at(perms, j):
      idx = jax.lax.dynamic_slice_in_dim(perms, j * b, b, axis=1)          # [C, b]
      return {"x": x[idx], "y": y[idx]}

    def advance(carry, t):
      states, perms, resets, nonfinite = carry
      epoch, j = t // per_epoch, t % per_epoch
      perms = jax.lax.cond(j == 0, lambda: perms_for(epoch), lambda: perms)
      keys = fold_in_each(jax.random.fold_in(step_key, t), ids)
      states, info = step_fn(keys, states, batch_at(perms, j), t)
      carry = (states, perms, resets + info["reset"].astype(jnp.int32),
               nonfinite + info["nonfinite"].astype(jnp.int32))
      return carry, info

    perms = perms_for(0)
    states = jax.vmap(kernel.init)(positions, batch_at(perms, 0), fold_in_each(init_key, ids), hypers)
    zeros = jnp.zeros((num_chains,), jnp.int32)
    carry = (states, perms, zeros, zeros)

    def block(carry, s):
      start = 1 + s * thin
      carry, infos = jax.lax.scan(advance, carry, start + jnp.arange(thin))
      t_last = start + thin - 1
      keep = kernel.keep(t_last) if kernel.keep is not None else jnp.ones((), bool)
      return carry, (kernel.position(carry[0]), infos["logdensity"][-1], keep, infos["step_size"][-1])

    carry, (pos, logd, keep, eps) = jax.lax.scan(block, carry, jnp.arange(warm_blocks + num_samples))
    pos, logd, keep = jax.tree.map(lambda a: a[warm_blocks:], (pos, logd, keep))
    pos = jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1), pos)
    return pos, jnp.swapaxes(logd, 0, 1), keep, carry[2], carry[3], eps[-1], carry[0], eps[:warm_blocks]

  peg = kernel.grads_per_step * b * (warm_blocks + num_samples) * thin + b

  def runner(positions: Any, data: dict, rng: jax.Array, hypers: dict | None = None,
             chain_ids: jax.Array | None = None) -> ChainResult:
    if data["y"].shape[0] != n:
      raise ValueError(f"runner built for {n} rows, got {data['y'].shape[0]}")
    ids = jnp.arange(num_chains, dtype=jnp.int32) if chain_ids is None else jnp.asarray(chain_ids, jnp.int32)
    if ids.shape != (num_chains,):
      raise ValueError(f"chain_ids must have shape ({num_chains},), got {ids.shape}")
    pos, logd, keep, resets, nonfinite, eps, states, warm_eps = run(positions, data["x"], data["y"], rng,
                                                                    hypers or {}, ids)
    return ChainResult(pos, logd, keep, resets, nonfinite, eps, peg, states, warm_eps)

  return runner


def run_chains(kernel: ChainKernel, positions: Any, data: dict, rng: jax.Array, *, batch_size: int,
               num_warmup: int, num_samples: int, thin: int, hypers: dict | None = None,
               chain_ids: jax.Array | None = None) -> ChainResult:
  """Runs C chains (leading axis of `positions`) on data{"x": [N, p], "y": [N]} (see make_chain_runner)."""
  runner = make_chain_runner(kernel, num_chains=jax.tree.leaves(positions)[0].shape[0],
                             data_size=data["y"].shape[0], batch_size=batch_size, num_warmup=num_warmup,
                             num_samples=num_samples, thin=thin)
  return runner(positions, data, rng, hypers, chain_ids)


def make_mclmc_runner(make_logdensity: Callable[[jax.Array, jax.Array], Callable[[Any], jax.Array]], *,
                      num_chains: int, data_size: int, num_tune: int, num_samples: int, thin: int,
                      **mile_kwargs: Any) -> Callable[..., ChainResult]:
  """Jitted full-batch MCLMC / MILE runner (`mile_warmup`, then thinned sampling), vmapped; one compile per
  data shapes. PEG per chain = 2N · (tuning steps + num_samples · thin) + N."""
  kernel = mclmc.build_kernel(integrator=integrators.isokinetic_mclachlan)
  counted = {}

  def one_chain(position, key, x, y):
    logdensity_fn = make_logdensity(x, y)
    tune_key, run_key = jax.random.split(key)
    state, params, n_tune = adapt.mile_warmup(logdensity_fn, position, tune_key, num_steps=num_tune, **mile_kwargs)
    counted["n_tune"] = int(n_tune)

    def body(carry, s):
      def inner(st, k):
        st, info = kernel(k, st, logdensity_fn, params.inverse_mass_matrix, params.L, params.step_size)
        return st, ~info.nonans

      st, bad = carry
      st, nan = jax.lax.scan(inner, st, jax.random.split(jax.random.fold_in(run_key, s), thin))
      return (st, bad + jnp.sum(nan)), (st.position, st.logdensity)

    (state, bad), (pos, logd) = jax.lax.scan(body, (state, jnp.zeros((), jnp.int32)), jnp.arange(num_samples))
    return pos, logd, bad, params.step_size

  run = jax.jit(jax.vmap(one_chain, in_axes=(0, 0, None, None)))

  def runner(positions: Any, data: dict, rng: jax.Array) -> ChainResult:
    pos, logd, bad, eps = run(positions, fold_in_each(rng, jnp.arange(num_chains)), data["x"], data["y"])
    steps = counted.get("n_tune", num_tune) + num_samples * thin
    return ChainResult(pos, logd, jnp.ones((num_samples,), bool), jnp.zeros((num_chains,), jnp.int32), bad, eps,
                       2 * data_size * steps + data_size, None)

  return runner


def run_mclmc(logdensity_fn: Callable[[Any], jax.Array], positions: Any, rng: jax.Array, *, data_size: int,
              num_tune: int, num_samples: int, thin: int, **mile_kwargs: Any) -> ChainResult:
  """Full-batch MCLMC on a fixed log density (see `make_mclmc_runner`)."""
  runner = make_mclmc_runner(lambda x, y: logdensity_fn, num_chains=jax.tree.leaves(positions)[0].shape[0],
                             data_size=data_size, num_tune=num_tune, num_samples=num_samples, thin=thin,
                             **mile_kwargs)
  return runner(positions, {"x": jnp.zeros(()), "y": jnp.zeros(())}, rng)
