"""Validation-based best-checkpoint selection and early stopping: one mechanism for every method.

The best parameters live in `TrainState.best`, so they are checkpointed and a resumed run selects what an
uninterrupted one would. A metric of shape [members] (a stacked ensemble) is selected per member, each with
its own patience; training stops when every member has stopped."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Selection", "SelectionState", "init_selection", "selection_update", "selection_stopped"]


class Selection(NamedTuple):
  """What to select on: `metric` (an eval output, shape [] or [members]), `mode` "max" or "min", `every`
  (steps between checks; 0: `eval_every`), `patience` (> 0: stop after this many checks without
  improvement; 0: never), `keep_extra` (also keep the best step's `extra`, e.g. SOL's centroids)."""

  metric: str
  mode: str = "max"
  every: int = 0
  patience: int = 0
  keep_extra: bool = False


class SelectionState(NamedTuple):
  """The record kept in `TrainState.best`; metric, step and bad have the metric's shape."""

  params: Any             # best parameters so far (EMA copy when the state keeps one)
  metric: jax.Array       # best metric value (±inf before the first check)
  step: jax.Array         # int32 step of the best parameters (0: the initial ones)
  bad: jax.Array          # int32 checks in a row without improvement
  extra: Any = None       # the state's `extra` at the best step (`Selection.keep_extra`)


def init_selection(select: Selection, params: Any, metric_shape: tuple[int, ...],
                   extra: Any = None) -> SelectionState:
  """A fresh record: the initial parameters at ±inf, so the first finite check improves on it."""
  if select.mode not in ("max", "min"):
    raise ValueError(f"Selection.mode must be 'max' or 'min', got {select.mode!r}")
  if select.every < 0 or select.patience < 0:
    raise ValueError(f"Selection.every and .patience must be >= 0, got {select.every}, {select.patience}")
  if select.keep_extra and metric_shape:
    raise ValueError(f"Selection.keep_extra needs a scalar metric; {select.metric!r} has shape {metric_shape}")
  worst = -np.inf if select.mode == "max" else np.inf
  return SelectionState(params=jax.tree.map(jnp.copy, params),
                        metric=jnp.full(metric_shape, worst, jnp.float32),
                        step=jnp.zeros(metric_shape, jnp.int32), bad=jnp.zeros(metric_shape, jnp.int32),
                        extra=jax.tree.map(jnp.copy, extra) if select.keep_extra else None)


@jax.jit
def _take_where(better: jax.Array, new: Any, old: Any) -> Any:
  def pick(n, o):
    mask = better.reshape(better.shape + (1,) * (n.ndim - better.ndim))
    return jnp.where(mask, n, o)

  return jax.tree.map(pick, new, old)


def selection_update(select: Selection, record: SelectionState, params: Any, value: np.ndarray,
                     step: int, extra: Any = None) -> tuple[SelectionState, bool]:
  """One check: (new record, whether training should stop). `value` is the host metric.

  A NaN metric never counts as an improvement. Members that have stopped keep their record.
  """
  value = np.asarray(value, np.float32)
  best, bad, best_step = (np.asarray(x) for x in jax.device_get((record.metric, record.bad, record.step)))
  if value.shape != best.shape:
    raise ValueError(f"selection metric {select.metric!r} has shape {value.shape}, the record {best.shape}")
  improved = value > best if select.mode == "max" else value < best
  stopped = bad >= select.patience if select.patience else np.zeros(best.shape, bool)
  better = improved & ~stopped
  new_bad = np.where(better, 0, np.where(stopped, bad, bad + 1)).astype(np.int32)
  new_params, new_extra = record.params, record.extra
  if better.any():
    new_params = _take_where(jnp.asarray(better), params, record.params)
    if select.keep_extra:
      new_extra = jax.tree.map(jnp.copy, extra)
  new = SelectionState(params=new_params, metric=jnp.asarray(np.where(better, value, best)),
                       step=jnp.asarray(np.where(better, step, best_step).astype(np.int32)),
                       bad=jnp.asarray(new_bad), extra=new_extra)
  return new, selection_stopped(select, new)


def selection_stopped(select: Selection, record: SelectionState | None) -> bool:
  """Whether early stopping has ended training (every member out of patience)."""
  if record is None or not select.patience:
    return False
  return bool(np.all(np.asarray(jax.device_get(record.bad)) >= select.patience))
