"""train(): config -> optimizer -> params -> state -> compiled step -> fit -> result, once for all.

  result = core.train(method, batches, config, workdir=workdir, name="mlp_seed0", seed=0,
                      eval_batches=[valid], select=core.Selection("accuracy", "max"))

`config` supplies `optim` (`make_optimizer`), `num_steps` and optionally `log_every`, `eval_every`,
`checkpoint_every`, `steps_per_dispatch`, `ema_decay`, `unroll` (`make_multi_step`) and `mesh.num_data`
(0 = all devices); `loop_config` builds it. The learning rate is injected as an array, so one
`TrainSteps` serves a whole learning-rate grid (`train(steps, ..., lr=x)`)."""

import os
import time
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, PartitionSpec

from jaxml.core import checkpoint as ckpt
from jaxml.core import sharding as shd
from jaxml.core.loop import FitResult, Hook, fit
from jaxml.core.metrics import MetricWriter
from jaxml.core.optim import freeze, make_optimizer
from jaxml.core.select import Selection, SelectionState
from jaxml.core.step import make_eval_step, make_multi_step, make_train_step
from jaxml.core.train_state import TrainState, create_train_state
from jaxml.core.types import Batch, Method, Params

__all__ = ["TrainSteps", "TrainContext", "TrainResult", "loop_config", "make_trainer", "train", "mesh_from_config"]


class TrainSteps(NamedTuple):
  """The compiled-once part of training: a method with its optimizer and pure step functions.

  Reuse one TrainSteps across runs that differ only in arrays (learning rate, seed, data of the
  same shapes): jax then traces and compiles its step once.
  """

  method: Method
  optimizer: optax.GradientTransformation   # learning rate injected (an array in the state)
  train_step: Callable[[TrainState, Batch], tuple[TrainState, Any]]
  multi_step: Callable[[TrainState, Batch], tuple[TrainState, Any]]
  eval_step: Callable[[TrainState, Batch], Any] | None
  ema_decay: float | None


class TrainContext(NamedTuple):
  """What a method's `hooks(ctx)` may use to build its host callbacks."""

  config: Any
  mesh: Mesh
  batches: Any
  example_batch: Batch
  eval_batches: Callable[[], Iterable[Batch]] | None
  workdir: str | None
  name: str
  seed: int
  num_steps: int


class TrainResult(NamedTuple):
  state: TrainState                  # final state (its `best` holds the selection record)
  params: Params                     # best params if selection was asked for, else final (EMA if kept)
  train_metrics: dict[str, float]    # mean over the last logging window
  eval_metrics: dict[str, float]     # last evaluation in the loop (empty if none)
  best_step: int | None              # step of the selected params (the latest member's, for ensembles)
  best_metric: float | None          # its metric (mean over members for ensembles)
  steps_per_s: float
  wall_s: float
  resumed_from: int | None = None
  steps_per_dispatch: int = 1
  stopped_early: bool = False
  best: SelectionState | None = None  # host copy of the record without params (per-member arrays)
  extra: Any = None                  # the state's `extra` at the selected step (Selection.keep_extra), else final


def _plain(section: Any) -> dict[str, Any]:
  """A (Config)dict section as a plain dict, nested sections included."""
  return {k: (_plain(v) if hasattr(v, "keys") else v) for k, v in section.items()}


def _int_or_zero(v: Any) -> int:
  return int(v or 0)


# The keys `train` / `make_trainer` read, each with its one conversion.
_LOOP_KEYS: dict[str, Callable[[Any], Any]] = {
    "optim": lambda v: _plain(v or {}), "num_steps": int, "log_every": _int_or_zero, "eval_every": _int_or_zero,
    "checkpoint_every": _int_or_zero, "steps_per_dispatch": _int_or_zero,
    "ema_decay": lambda v: float(v) if v else None, "unroll": bool,
    "mesh": lambda v: _plain(v) if v is not None else None}


def loop_config(config: Mapping[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
  """The settings dict `train` reads: the loop keys of `config` (an experiment config), then `settings`,
  converted once (ints, plain dicts); an unknown key in `settings` is a TypeError."""
  unknown = sorted(set(settings) - set(_LOOP_KEYS))
  if unknown:
    raise TypeError(f"loop_config: unknown keys {unknown}; expected some of {sorted(_LOOP_KEYS)}")
  out = {k: config[k] for k in _LOOP_KEYS if config is not None and k in config} | settings
  return {k: _LOOP_KEYS[k](v) for k, v in out.items()}


def mesh_from_config(mesh_cfg: Mapping[str, Any] | None) -> Mesh:
  """A mesh from a `mesh` config section: num_data (0: all devices) and num_model (default 1)."""
  mesh_cfg = mesh_cfg or {}
  return shd.make_mesh(int(mesh_cfg.get("num_data", 0) or 0) or None, int(mesh_cfg.get("num_model", 1) or 1))


def make_trainer(method: Method, config: Mapping[str, Any], *,
                 optimizer: optax.GradientTransformation | None = None) -> TrainSteps:
  """Optimizer from `config['optim']` (learning rate injected, `method.frozen` frozen) and steps;
  `optimizer` replaces it (then `train(lr=...)` needs an injected `learning_rate` in it)."""
  cfg = loop_config(config)
  if optimizer is None:
    optimizer = make_optimizer(cfg.get("optim", {}), cfg.get("num_steps", 0), inject_lr=True)
  if method.frozen:
    optimizer = freeze(optimizer, list(method.frozen))
  ema = cfg.get("ema_decay")
  train_step = make_train_step(method.loss_fn, optimizer, ema_decay=ema, uses_extra=method.init_extra is not None)
  eval_step = (make_eval_step(method.eval_fn, use_ema=ema is not None, uses_extra=method.eval_uses_extra)
               if method.eval_fn is not None else None)
  multi_step = make_multi_step(train_step, unroll=cfg.get("unroll", False))
  return TrainSteps(method, optimizer, train_step, multi_step, eval_step, ema)


def _reiterable(eval_batches: Any) -> Callable[[], Iterable[Batch]] | None:
  if eval_batches is None or callable(eval_batches):
    return eval_batches
  if isinstance(eval_batches, Mapping):
    eval_batches = [eval_batches]
  batches = list(eval_batches)
  return lambda: batches


def train(method: Method | TrainSteps, batches: Callable[[int], Batch] | Iterable[Batch], config: Mapping[str, Any], *,
          workdir: str | None = None, name: str = "train", seed: int = 0, example_batch: Batch | None = None,
          init_params: Params | None = None, init_rng: jax.Array | None = None, extra: Any = None,
          eval_batches: Any = None, select: Selection | None = None, hooks: Sequence[Hook] = (),
          mesh: Mesh | None = None, lr: float | None = None, writer: MetricWriter | None = None,
          sharding_rules: Sequence[tuple[str, PartitionSpec]] | None = None, shard_batch_rows: bool = True,
          optimizer: optax.GradientTransformation | None = None, progress: bool = True) -> TrainResult:
  """Trains `method` (or a prebuilt `TrainSteps`) through `fit`; resumable under `workdir`.

  Args:
    method: a `Method`, or the `TrainSteps` from `make_trainer` to share one compilation across runs.
    batches: `fn(step) -> numpy batch` (exact resume) or an iterable of batches.
    config: dict/ConfigDict with optim, num_steps and the optional loop keys (module docstring).
    workdir: checkpoints in `<workdir>/checkpoints/<name>` (a rerun resumes), metrics in metrics.jsonl.
    seed: root of the step RNG (`fold_in(key(seed), step)`) and, without `init_rng`, the init key.
    example_batch: batch for `method.init` (default `batches(0)`; required for iterators).
    init_params / extra: start parameters / non-trainable state instead of the method's own.
    eval_batches: batch, list of batches or a callable returning an iterable of them.
    select, hooks: validation selection (`Selection`) and host hooks besides `method.hooks(ctx)`.
    mesh: default from `config['mesh']`. lr: overrides `config['optim']['lr']` without recompiling.
    optimizer: replaces the optimizer built from `config['optim']` (see `make_trainer`).
  """
  trainer = method if isinstance(method, TrainSteps) else make_trainer(method, config, optimizer=optimizer)
  method = trainer.method
  cfg = loop_config(config)
  num_steps = cfg["num_steps"]
  # unrolled dispatches compile one copy of the step per step: one per dispatch unless asked
  steps_per_dispatch = cfg.get("steps_per_dispatch") or (1 if getattr(trainer.multi_step, "unroll", False) else 0)
  mesh = mesh_from_config(cfg.get("mesh")) if mesh is None else mesh
  eval_fn = _reiterable(eval_batches)
  if eval_fn is not None and trainer.eval_step is None:
    raise ValueError(f"[{name}] eval_batches were given but the method has no eval_fn")

  if example_batch is None:
    if not callable(batches):
      raise ValueError(f"[{name}] pass example_batch= when batches is an iterator")
    example_batch = batches(0)
  root = jax.random.key(seed)
  if init_params is None:
    init_params = method.init(root if init_rng is None else init_rng, example_batch)
  if extra is None and method.init_extra is not None:
    extra = method.init_extra(jax.random.split(root)[1], init_params)
  state = create_train_state(init_params, trainer.optimizer, seed, ema=trainer.ema_decay is not None, extra=extra)
  if lr is not None:
    if optax.tree_utils.tree_get(state.opt_state, "learning_rate") is None:
      raise ValueError(f"[{name}] lr= needs an optimizer with an injected learning_rate "
                       "(optax.inject_hyperparams); the one given has none")
    state = state.replace(opt_state=optax.tree_utils.tree_set(state.opt_state,
                                                              learning_rate=jnp.asarray(lr, jnp.float32)))

  ctx = TrainContext(config, mesh, batches, example_batch, eval_fn, workdir, name, seed, num_steps)
  all_hooks = list(method.hooks(ctx) if method.hooks is not None else ()) + list(hooks)
  manager = ckpt.make_manager(os.path.join(workdir, "checkpoints", name)) if workdir else None
  own_writer = MetricWriter(workdir) if writer is None and workdir else None
  t0 = time.perf_counter()
  try:
    result: FitResult = fit(
        state, trainer.train_step, batches, num_steps=num_steps, mesh=mesh, shard_batch_rows=shard_batch_rows,
        sharding_rules=sharding_rules, log_every=cfg.get("log_every") or 100, writer=writer or own_writer,
        eval_step=trainer.eval_step, eval_batches=eval_fn, eval_every=cfg.get("eval_every", 0),
        checkpoint_manager=manager, checkpoint_every=cfg.get("checkpoint_every", 0), hooks=all_hooks, select=select,
        steps_per_dispatch=steps_per_dispatch, multi_step=trainer.multi_step, name=name, progress=progress)
    wall = time.perf_counter() - t0
  finally:
    if own_writer is not None:
      own_writer.close()   # its event writer's thread and file
  return _train_result(result, select, wall)


def _train_result(result: FitResult, select: Selection | None, wall: float) -> TrainResult:
  """The fit's outcome as a TrainResult: the selected params and a host copy of their record."""
  final = result.state
  best_step = best_metric = record = None
  if select is not None and final.best is not None:
    params = final.best.params
    metric, step, bad = (np.asarray(x) for x in jax.device_get((final.best.metric, final.best.step, final.best.bad)))
    best_step, best_metric = int(step.max()), float(metric.mean())
    record = SelectionState(params=None, metric=metric, step=step, bad=bad)
  else:
    params = final.ema_params if final.ema_params is not None else final.params
  extra_out = final.best.extra if select is not None and select.keep_extra and final.best is not None else final.extra
  return TrainResult(final, params, result.train_metrics, result.eval_metrics, best_step, best_metric,
                     result.steps_per_s, wall, result.resumed_from, result.steps_per_dispatch,
                     result.stopped_early, record, extra_out)
