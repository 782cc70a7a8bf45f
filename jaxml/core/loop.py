"""fit(): the one host training loop every gradient-trained method runs on.

The loop owns placement (batches sharded on the mesh's 'data' axis, state replicated or
placed by rules), periodic logging with a progress line, evaluation, orbax checkpoints with
automatic resume, host hooks, and a stop on non-finite loss that keeps the last good
checkpoint. Methods only supply a loss (via `make_train_step`) and batches.
"""

import contextlib
import math
import sys
import time
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh, PartitionSpec

from jaxml.core import checkpoint as ckpt
from jaxml.core import sharding as shd
from jaxml.core.metrics import MetricWriter, mean_metrics
from jaxml.core.train_state import TrainState
from jaxml.core.types import Batch, Metrics

__all__ = ["Hook", "FitResult", "NonFiniteLossError", "StopTraining", "fit", "evaluate", "param_count"]


class NonFiniteLossError(FloatingPointError):
  """Raised when the loss or parameters stop being finite; the last good checkpoint is kept."""


class StopTraining(Exception):
  """Raised by a hook to end training early (e.g. early stopping); fit() checkpoints and returns."""


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


def param_count(params: Any) -> int:
  return int(sum(np.prod(np.shape(x)) for x in jax.tree.leaves(params)))


def _fmt_eta(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  m, s = divmod(int(seconds), 60)
  h, m = divmod(m, 60)
  return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@jax.jit
def _tree_finite(tree: Any) -> jax.Array:
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
            if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def _save_if_finite(manager: ocp.CheckpointManager, step: int, state: TrainState, name: str) -> None:
  """Saves only finite parameters, so the latest checkpoint is always a good one."""
  if not bool(jax.device_get(_tree_finite(state.params))):
    raise NonFiniteLossError(
        f"[{name}] parameters are non-finite at step {step}; not saved. The last good checkpoint "
        f"(step {ckpt.latest_step(manager)}) is kept.")
  ckpt.save(manager, step, state)


def evaluate(eval_step: Callable[[TrainState, Batch], Metrics], state: TrainState,
             eval_batches: Iterable[Batch], mesh: Mesh) -> dict[str, float]:
  """Mean of each metric over the batches (batches replicated; each batch counts once)."""
  history = [eval_step(state, shd.shard_batch(b, mesh, shard=False)) for b in eval_batches]
  return mean_metrics(history)


def _batch_getter(batches: Callable[[int], Batch] | Iterable[Batch], start: int) -> Callable[[int], Batch]:
  """Random-access batches (`fn(step)`) make resume exact; an iterator is skipped to `start`."""
  if callable(batches):
    return batches
  it = iter(batches)
  for _ in range(start):
    next(it)
  return lambda _step: next(it)


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
  """
  mesh = mesh or shd.make_mesh()
  main = jax.process_index() == 0
  state, resumed = ckpt.restore_or_init(checkpoint_manager, state)
  start = int(jax.device_get(state.step))
  resumed_from = start if resumed else None
  shardings = shd.state_shardings(state, mesh, list(sharding_rules or []))
  state = shd.replicate(state, mesh, shardings)
  step_fn = shd.compile_train_step(train_step, shardings, mesh, shard_batch_rows=shard_batch_rows)
  eval_fn = jax.jit(eval_step) if eval_step is not None else None
  get_batch = _batch_getter(batches, start)
  if main and progress:
    note = f", resumed from step {start}" if resumed else ""
    print(f"[{name}] {param_count(state.params):,} params, {mesh.devices.size} devices, "
          f"{jax.process_count()} processes, steps {start}->{num_steps}{note}", flush=True)

  history: list[Metrics] = []
  train_metrics: dict[str, float] = {}
  eval_metrics: dict[str, float] = {}
  t0, steps_done = time.perf_counter(), 0
  # The guard makes an accidental implicit host<->device copy in the step path fail loudly;
  # periodic host work (logging, eval, hooks, checkpoints) runs with transfers allowed.
  guard = jax.transfer_guard("disallow") if transfer_guard else contextlib.nullcontext()
  with guard:
    for step in range(start, num_steps):
      batch = shd.shard_batch(get_batch(step), mesh, shard=shard_batch_rows)
      state, metrics = step_fn(state, batch)
      history.append(metrics)
      steps_done += 1
      done = step + 1
      last = done == num_steps
      periodic = (done % log_every == 0 or last or (eval_every and done % eval_every == 0)
                  or (checkpoint_every and done % checkpoint_every == 0)
                  or any(done % hook.every == 0 for hook in hooks))
      if not periodic:
        continue
      with jax.transfer_guard("allow"):
        if done % log_every == 0 or last:
          train_metrics = mean_metrics(history)
          history = []
          if not math.isfinite(train_metrics.get("loss", 0.0)):
            raise NonFiniteLossError(
                f"[{name}] loss became {train_metrics.get('loss')} by step {done}; stopped. "
                f"The last good checkpoint (step {ckpt.latest_step(checkpoint_manager) if checkpoint_manager else None}) "
                "is kept. Lower the learning rate or enable gradient clipping (optim.clip_norm).")
          now = time.perf_counter()
          rate = steps_done / max(now - t0, 1e-9)
          if writer is not None:
            writer.write(done, {f"{name}/{k}": v for k, v in train_metrics.items()} | {f"{name}/steps_per_s": rate})
          if main and progress:
            eta = (num_steps - done) / rate if rate > 0 else float("inf")
            print(f"[{name}] step {done}/{num_steps} loss {train_metrics.get('loss', float('nan')):.4f} "
                  f"{rate:.1f} steps/s ETA {_fmt_eta(eta)}", flush=True)

        if eval_fn is not None and eval_batches is not None and ((eval_every and done % eval_every == 0) or last):
          eval_metrics = evaluate(eval_fn, state, eval_batches(), mesh)
          if writer is not None:
            writer.write(done, {f"eval/{k}": v for k, v in eval_metrics.items()})

        # Hooks run before the checkpoint of the same step, so a state they change (e.g. SOL
        # centroids refreshed every epoch) is what gets saved and resume stays exact.
        stop = False
        for hook in hooks:
          if done % hook.every == 0:
            try:
              new_state = hook.fn(done, state)
            except StopTraining:
              stop = True
              break
            if new_state is not None:
              state = shd.replicate(new_state, mesh, shardings)
        if stop:
          if main and progress:
            print(f"[{name}] stopped early by a hook at step {done}", flush=True)
          if history:
            train_metrics = mean_metrics(history)
          if checkpoint_manager is not None and ckpt.latest_step(checkpoint_manager) != done:
            _save_if_finite(checkpoint_manager, done, state, name)
          break

        if checkpoint_manager is not None and ((checkpoint_every and done % checkpoint_every == 0) or last):
          _save_if_finite(checkpoint_manager, done, state, name)

  elapsed = time.perf_counter() - t0
  return FitResult(state, train_metrics, eval_metrics, steps_done / max(elapsed, 1e-9), resumed_from)
