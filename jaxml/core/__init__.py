"""The only training machinery in jaxml: state, steps, loop, optimizers, sharding, checkpoints."""

from jaxml.core.checkpoint import latest_step, make_manager, restore, restore_or_init, save
from jaxml.core.distributed import is_main_process, maybe_initialize, per_process_batch_size
from jaxml.core.loop import FitResult, Hook, NonFiniteLossError, StopTraining, evaluate, fit, param_count
from jaxml.core.metrics import MetricWriter, mean_metrics, to_python
from jaxml.core.optim import freeze, label_by_path, make_optimizer, make_schedule, multi_group
from jaxml.core.rng import named_split, numpy_rng, process_seed, root_key
from jaxml.core.sharding import (DATA, MODEL, batch_sharding, compile_train_step, make_mesh, replicate,
                                 replicated, shard_batch, state_shardings)
from jaxml.core.step import make_eval_step, make_train_step, step_rng
from jaxml.core.train_state import TrainState, create_train_state
from jaxml.core.types import Batch, EvalFn, LossFn, Method, Metrics, Params, PRNGKey

__all__ = [
    "Batch", "DATA", "EvalFn", "FitResult", "Hook", "LossFn", "MODEL", "Method", "MetricWriter", "Metrics",
    "NonFiniteLossError", "PRNGKey", "Params", "StopTraining", "TrainState", "batch_sharding", "compile_train_step",
    "create_train_state", "evaluate", "fit", "freeze", "is_main_process", "label_by_path", "latest_step",
    "make_eval_step", "make_manager", "make_mesh", "make_optimizer", "make_schedule", "make_train_step",
    "maybe_initialize", "mean_metrics", "multi_group", "named_split", "numpy_rng", "param_count",
    "per_process_batch_size", "process_seed", "replicate", "replicated", "restore", "restore_or_init",
    "root_key", "save", "shard_batch", "state_shardings", "step_rng", "to_python",
]
