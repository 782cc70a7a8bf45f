"""fit(): the one host training loop every gradient-trained method runs on.

It owns placement on the mesh, logging, evaluation, validation-based selection with early stopping
(`core.Selection`), orbax checkpoints with resume, host hooks, and a stop on non-finite loss. It runs
K steps per dispatch (a `lax.scan`), K dividing every cadence. Methods only supply a loss."""

import contextlib
import math
import time
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh, PartitionSpec

from jaxml.core import checkpoint as ckpt
from jaxml.core import select as sel
from jaxml.core import sharding as shd
from jaxml.core.batching import tree_all_finite
from jaxml.core.metrics import MetricWriter
from jaxml.core.step import make_multi_step
from jaxml.core.train_state import TrainState
from jaxml.core.types import Batch, Metrics

__all__ = ["Hook", "FitResult", "NonFiniteLossError", "StopTraining", "fit", "param_count",
           "auto_steps_per_dispatch", "MAX_STEPS_PER_DISPATCH"]

# Upper bound of the automatic K: beyond a few dozen steps per dispatch the host overhead is
# already negligible, while the stacked batches (and the latency of a progress line) grow.
MAX_STEPS_PER_DISPATCH = 50
# Stacked batches of one dispatch stay under this many bytes (full-batch graphs are large).
MAX_DISPATCH_BYTES = 64 << 20


class NonFiniteLossError(FloatingPointError):
  """Raised when the loss or parameters stop being finite; the last good checkpoint is kept."""


class StopTraining(Exception):
  """Raised by a hook to end training early (e.g. early stopping); fit() checkpoints and returns.

  `state`, if given, replaces the loop's state first (a hook that changed it and stops).
  """

  def __init__(self, state: TrainState | None = None):
    super().__init__()
    self.state = state


class Hook(NamedTuple):
  """Calls `fn(step, state)` on the host after every `every` steps (step counts from 1).

  `fn` may return a new state (e.g. refreshed SOL centroids in `state.extra`) or None,
  or raise `StopTraining` to end the run after this step.
  """

  every: int
  fn: Callable[[int, TrainState], TrainState | None]


class FitResult(NamedTuple):
  state: TrainState
  train_metrics: dict[str, float]     # mean over the last logging window
  eval_metrics: dict[str, float]      # last evaluation (empty if none)
  steps_per_s: float
  resumed_from: int | None
  steps_per_dispatch: int = 1         # K used by this run
  stopped_early: bool = False         # a hook or early stopping ended the run before num_steps


def param_count(params: Any) -> int:
  return int(sum(np.prod(np.shape(x)) for x in jax.tree.leaves(params)))


def _fmt_eta(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  m, s = divmod(int(seconds), 60)
  h, m = divmod(m, 60)
  return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


_tree_finite = jax.jit(tree_all_finite)


def _save_if_finite(manager: ocp.CheckpointManager, step: int, state: TrainState, name: str) -> None:
  """Saves only finite parameters, so the latest checkpoint is always a good one."""
  if not bool(jax.device_get(_tree_finite(state.params))):
    raise NonFiniteLossError(
        f"[{name}] parameters are non-finite at step {step}; not saved. The last good checkpoint "
        f"(step {ckpt.latest_step(manager)}) is kept.")
  ckpt.save(manager, step, state)


def _eval_arrays(eval_step: Callable[[TrainState, Batch], Metrics], state: TrainState,
                 eval_batches: Iterable[Batch], mesh: Mesh) -> tuple[dict[str, float], list[dict[str, Any]]]:
  """(mean of each metric over batches and elements, the per-batch host metrics)."""
  history = jax.device_get([eval_step(state, shd.shard_batch(b, mesh, shard=False)) for b in eval_batches])
  return _mean_stacked(history), history


def _batch_mean(history: list[dict[str, Any]], key: str) -> np.ndarray:
  """Mean over eval batches of one metric, keeping its shape (e.g. one value per member)."""
  return np.mean(np.stack([np.asarray(h[key], np.float64) for h in history]), axis=0)


def _mean_stacked(history: list[Metrics]) -> dict[str, float]:
  """Fetches metric dicts (per dispatch, leaves [K, ...]; or per eval batch) once and averages each key over
  all their elements."""
  if not history:
    return {}
  host = jax.device_get(history)
  return {k: float(np.mean(np.concatenate([np.asarray(h[k], np.float64).reshape(-1) for h in host])))
          for k in host[0]}


def auto_steps_per_dispatch(cadences: Sequence[int], *, batch_bytes: int = 0,
                            cap: int = MAX_STEPS_PER_DISPATCH, max_bytes: int = MAX_DISPATCH_BYTES) -> int:
  """The largest K <= cap dividing every positive cadence (log, eval, checkpoint, hooks,
  selection), with K stacked batches under `max_bytes`."""
  g = math.gcd(*(int(c) for c in cadences if c and c > 0))
  limit = cap if not batch_bytes else max(1, min(cap, max_bytes // max(batch_bytes, 1)))
  if g == 0:
    return limit
  return max(d for d in range(1, min(limit, g) + 1) if g % d == 0)


def _batch_bytes(batch: Any) -> int:
  return int(sum(getattr(x, "nbytes", None) or np.asarray(x).nbytes for x in jax.tree.leaves(batch)))


def _stack(batches: list[Batch]) -> Batch:
  """K batches -> one batch with a leading K axis (on the host, or on device for jax arrays)."""
  return jax.tree.map(lambda *xs: jnp.stack(xs) if isinstance(xs[0], jax.Array) else np.stack(xs), *batches)


def _batch_getter(batches: Callable[[int], Batch] | Iterable[Batch], start: int) -> Callable[[int], Batch]:
  """Random-access batches (`fn(step)`) make resume exact; an iterator is skipped to `start`."""
  if callable(batches):
    return batches
  it = iter(batches)
  for _ in range(start):
    next(it)
  return lambda _step: next(it)


# One readable loop on purpose (placement, periodic work, selection, checkpoints in their order): over 80 lines.
def fit(state: TrainState,
        train_step: Callable[[TrainState, Batch], tuple[TrainState, Metrics]],
        batches: Callable[[int], Batch] | Iterable[Batch], *,
        num_steps: int,
        mesh: Mesh | None = None,
        shard_batch_rows: bool = True,
        sharding_rules: Sequence[tuple[str, PartitionSpec]] | None = None,
        log_every: int = 100,
        writer: MetricWriter | None = None,
        eval_step: Callable[[TrainState, Batch], Metrics] | None = None,
        eval_batches: Callable[[], Iterable[Batch]] | None = None,
        eval_every: int = 0,
        checkpoint_manager: ocp.CheckpointManager | None = None,
        checkpoint_every: int = 0,
        hooks: Sequence[Hook] = (),
        select: sel.Selection | None = None,
        steps_per_dispatch: int = 0,
        multi_step: Callable[[TrainState, Batch], tuple[TrainState, Metrics]] | None = None,
        name: str = "train",
        progress: bool = True,
        transfer_guard: bool = True) -> FitResult:
  """Runs `train_step` from the state's step (or the latest checkpoint) to `num_steps`.

  Args:
    state: a fresh TrainState; replaced by the latest checkpoint if the manager has one.
    train_step: pure `(state, batch) -> (state, metrics)` from `make_train_step`.
    batches: `fn(step) -> numpy batch` (preferred: exact resume) or an iterable.
    num_steps: total steps, counted from 0 (not additional steps).
    shard_batch_rows: split batch rows over 'data'; False replicates (full-batch graphs).
    eval_batches: a callable returning an iterable of eval batches (re-iterated each eval).
    hooks: host callbacks run every `hook.every` steps, after logging and eval, before the checkpoint.
    select: keep the best parameters by an eval metric in `state.best`, checked every `select.every`
      (default `eval_every`) steps and at the end; with `select.patience` it also stops early.
    steps_per_dispatch: K; 0 picks the largest K <= 50 dividing every cadence.
    multi_step: a prebuilt `make_multi_step(train_step)`, so repeated fits compile once.
  """
  mesh = mesh or shd.make_mesh()
  main = jax.process_index() == 0
  eval_fn = jax.jit(eval_step) if eval_step is not None else None
  sel_every = 0
  if select is not None:
    if eval_fn is None or eval_batches is None:
      raise ValueError("fit(select=...) needs eval_step and eval_batches")
    sel_every = select.every or eval_every
    if sel_every <= 0:
      raise ValueError("Selection.every is 0 and eval_every is 0: set one of them")
    if state.best is None:
      like = jax.eval_shape(eval_step, state, next(iter(eval_batches())))
      if select.metric not in like:
        raise ValueError(f"selection metric {select.metric!r} is not an eval output; have {sorted(like)}")
      chosen = state.ema_params if state.ema_params is not None else state.params
      state = state.replace(best=sel.init_selection(select, chosen, like[select.metric].shape, state.extra))
  state, resumed = ckpt.restore_or_init(checkpoint_manager, state)
  start = int(jax.device_get(state.step))
  resumed_from = start if resumed else None
  shardings = shd.state_shardings(state, mesh, list(sharding_rules or []))
  state = shd.replicate(state, mesh, shardings)
  if multi_step is None:
    # Kept on the step function itself, so later fits of the same train_step find the same
    # scan (and jax's compiled program) instead of compiling a new one.
    multi_step = getattr(train_step, "multi_step", None)
    if multi_step is None:
      multi_step = make_multi_step(train_step)
      try:
        train_step.multi_step = multi_step
      except AttributeError:
        pass
  step_fn = shd.compile_train_step(multi_step, shardings, mesh,
                                   shard_batch_rows=shard_batch_rows, stacked=True)
  get_batch = _batch_getter(batches, start)
  cadences = [c for c in [log_every, eval_every if eval_fn is not None else 0,
                          checkpoint_every if checkpoint_manager is not None else 0, sel_every]
              + [h.every for h in hooks] if c > 0]  # 0 turns a cadence off
  first = get_batch(start) if start < num_steps else None
  k = steps_per_dispatch or auto_steps_per_dispatch(cadences, batch_bytes=_batch_bytes(first) if first is not None else 0)
  if main and progress:
    note = f", resumed from step {start}" if resumed else ""
    print(f"[{name}] {param_count(state.params):,} params, {mesh.devices.size} devices, "
          f"{jax.process_count()} processes, steps {start}->{num_steps}, {k} steps/dispatch{note}", flush=True)

  def next_stop(step: int) -> int:
    """The first step after `step` where periodic work happens (or the end)."""
    stops = [num_steps, step + k] + [(step // c + 1) * c for c in cadences]
    return min(stops)

  history: list[Metrics] = []
  train_metrics: dict[str, float] = {}
  eval_metrics: dict[str, float] = {}
  stopped = select is not None and sel.selection_stopped(select, state.best)
  if stopped and main and progress:
    print(f"[{name}] early stopping had already ended this run at step {start}", flush=True)
  t0, steps_done, step = time.perf_counter(), 0, start
  # The guard makes an accidental implicit host<->device copy in the step path fail loudly;
  # periodic host work (logging, eval, hooks, checkpoints) runs outside it.
  guard = (lambda: jax.transfer_guard("disallow")) if transfer_guard else contextlib.nullcontext
  while step < num_steps and not stopped:
    n = next_stop(step) - step
    with guard():
      chunk = [first] if step == start else []
      chunk += [get_batch(i) for i in range(step + len(chunk), step + n)]
      placed = shd.shard_batch(_stack(chunk), mesh, shard=shard_batch_rows, stacked=True)
      state, metrics = step_fn(state, placed)
    history.append(metrics)
    steps_done += n
    step = done = step + n
    last = done == num_steps
    if not (last or any(done % c == 0 for c in cadences)):
      continue
    if done % log_every == 0 or last:
      train_metrics = _mean_stacked(history)
      history = []
      if not math.isfinite(train_metrics.get("loss", 0.0)):
        raise NonFiniteLossError(
            f"[{name}] loss became {train_metrics.get('loss')} by step {done}; stopped. "
            f"The last good checkpoint (step {ckpt.latest_step(checkpoint_manager) if checkpoint_manager else None}) "
            "is kept. Lower the learning rate or enable gradient clipping (optim.clip_norm).")
      now = time.perf_counter()
      rate = steps_done / max(now - t0, 1e-9)
      if writer is not None:
        writer.write(done, {f"{name}/{k_}": v for k_, v in train_metrics.items()} | {f"{name}/steps_per_s": rate})
      if main and progress:
        eta = (num_steps - done) / rate if rate > 0 else float("inf")
        print(f"[{name}] step {done}/{num_steps} loss {train_metrics.get('loss', float('nan')):.4f} "
              f"{rate:.1f} steps/s ETA {_fmt_eta(eta)}", flush=True)

    eval_history = None
    if eval_fn is not None and eval_batches is not None and ((eval_every and done % eval_every == 0) or last):
      eval_metrics, eval_history = _eval_arrays(eval_fn, state, eval_batches(), mesh)
      if writer is not None:
        writer.write(done, {f"eval/{k_}": v for k_, v in eval_metrics.items()})

    # Hooks run before selection and the checkpoint of the same step, so a state they change
    # (e.g. SOL centroids refreshed every epoch) is what is selected and saved; resume stays exact.
    for hook in hooks if not stopped else ():
      if done % hook.every == 0:
        try:
          new_state = hook.fn(done, state)
        except StopTraining as e:
          stopped = True
          new_state = e.state
        if new_state is not None:
          state = shd.replicate(new_state, mesh, shardings)
          eval_history = None           # the evaluated state changed
        if stopped:
          break

    if select is not None and (done % sel_every == 0 or last):
      if eval_history is None:
        _, eval_history = _eval_arrays(eval_fn, state, eval_batches(), mesh)
      value = _batch_mean(eval_history, select.metric)
      chosen = state.ema_params if state.ema_params is not None else state.params
      record, out_of_patience = sel.selection_update(select, state.best, chosen, value, done, state.extra)
      stopped = stopped or out_of_patience
      state = state.replace(best=shd.replicate(record, mesh, shardings.best))
      if writer is not None:
        writer.write(done, {f"select/{select.metric}": float(np.mean(value)),
                            "select/best": float(np.mean(np.asarray(jax.device_get(record.metric))))})
    if stopped:
      if main and progress:
        print(f"[{name}] stopped early at step {done}", flush=True)
      if history:
        train_metrics = _mean_stacked(history)
      if checkpoint_manager is not None and ckpt.latest_step(checkpoint_manager) != done:
        _save_if_finite(checkpoint_manager, done, state, name)
      break

    if checkpoint_manager is not None and ((checkpoint_every and done % checkpoint_every == 0) or last):
      _save_if_finite(checkpoint_manager, done, state, name)

  elapsed = time.perf_counter() - t0
  return FitResult(state, train_metrics, eval_metrics, steps_done / max(elapsed, 1e-9), resumed_from, k,
                   bool(stopped))
