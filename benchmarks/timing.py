"""Timing and cost read-outs the benchmarks share: blocked wall / CPU times and compiled FLOPs."""

import statistics
import time
from typing import Any, Callable

import jax

__all__ = ["timed", "repeat_time", "flops"]


def timed(fn: Callable, *args: Any, clock: Callable[[], float] = time.perf_counter) -> tuple[float, Any]:
  """(seconds, fn(*args)), waiting for the result's arrays to be ready."""
  t0 = clock()
  out = jax.block_until_ready(fn(*args))
  return clock() - t0, out


def repeat_time(fn: Callable[[], Any], repeats: int, reduce: Callable = statistics.median) -> float:
  """`reduce` (median, min) of `repeats` timed calls of fn after an untimed warm-up call."""
  jax.block_until_ready(fn())
  return reduce([timed(fn)[0] for _ in range(repeats)])


def flops(compiled: Any) -> float:
  """The FLOPs of XLA's cost analysis of a compiled program (NaN where it gives none)."""
  cost = compiled.cost_analysis()
  return float((cost[0] if isinstance(cost, (list, tuple)) else cost).get("flops", float("nan")))
