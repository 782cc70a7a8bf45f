"""Thin wrapper over `core.fit` shared by the method and every baseline: builds (or reuses)
the train step, runs the loop, and measures wall-clock time with and without the first
(compiling) step.

Reuse: jax caches compiled code per jitted function object, so passing the same `cache`
dict and `cache_key` across seeds compiles each loss once. Everything that changes between
seeds (teacher parameters, masks, class priors) must therefore live in params, `extra` or
the batch, never in the loss closure; the key must name every hyper-parameter the closure
reads.
"""

import time
from typing import Any, Callable, Hashable, MutableMapping, NamedTuple

import jax
import optax

from jaxml import core

__all__ = ["FitOutput", "run_fit"]


class FitOutput(NamedTuple):
  """params: trained; wall_s: whole loop incl. compile; steady_s: estimated loop time without
  the first (compiling) step; num_steps; final_loss: mean loss of the last log window."""

  params: Any
  wall_s: float
  steady_s: float
  num_steps: int
  final_loss: float


def run_fit(params: Any, loss_fn: Callable, optimizer: optax.GradientTransformation,
            batch_fn: Callable[[int], dict], *, num_steps: int, seed: int, extra: Any = None,
            cache: MutableMapping[Hashable, Any] | None = None, cache_key: Hashable | None = None,
            name: str = "unlearn", log_every: int = 1000, progress: bool = False,
            mesh: Any = None) -> FitOutput:
  """Trains `params` with `loss_fn(params, batch, rng, extra)` through `core.fit`."""
  if cache is not None and cache_key is not None and cache_key in cache:
    # The cached step's optimizer has the same update rule; hyper-parameters injected into the
    # optimizer state (learning rates) come from `optimizer.init` below, i.e. from this call.
    train_step = cache[cache_key]
  else:
    train_step = core.make_train_step(loss_fn, optimizer, uses_extra=True)
    if cache is not None and cache_key is not None:
      cache[cache_key] = train_step
  state = core.create_train_state(params, optimizer, seed, extra=extra)
  marks: dict[str, float] = {}

  def mark(step: int, st: core.TrainState) -> None:
    if step == 1:
      jax.block_until_ready(st.params)
      marks["first"] = time.perf_counter()

  t0 = time.perf_counter()
  if num_steps <= 0:
    return FitOutput(params, 0.0, 0.0, 0, float("nan"))
  result = core.fit(state, train_step, batch_fn, num_steps=num_steps, mesh=mesh, log_every=log_every,
                    hooks=[core.Hook(1, mark)], name=name, progress=progress)
  jax.block_until_ready(result.state.params)
  t_end = time.perf_counter()
  wall = t_end - t0
  steady = (t_end - marks["first"]) * num_steps / (num_steps - 1) if num_steps > 1 else wall
  return FitOutput(result.state.params, wall, steady, num_steps, result.train_metrics.get("loss", float("nan")))
