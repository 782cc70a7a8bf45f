"""The only training machinery in jaxml: contract, trainer, state, steps, loop, optimizers, sharding,
checkpoints. Start with `Method` and `train` (see docs/adding_a_method.md)."""

from jaxml.core.batching import batched_apply, tree_all_finite
from jaxml.core.checkpoint import latest_step, make_manager, restore, restore_or_init, save
from jaxml.core.config import reject_unknown
from jaxml.core.distributed import is_main_process, maybe_initialize, per_process_batch_size
from jaxml.core.loop import (MAX_STEPS_PER_DISPATCH, FitResult, Hook, NonFiniteLossError, StopTraining,
                             auto_steps_per_dispatch, evaluate, fit, param_count)
from jaxml.core.metrics import MetricWriter, mean_metrics, to_python
from jaxml.core.optim import freeze, label_by_path, learning_rate, make_optimizer, make_schedule, multi_group
from jaxml.core.rng import fold_in_each, named_split, numpy_rng, process_seed, root_key
from jaxml.core.select import Selection, SelectionState, init_selection, selection_stopped, selection_update
from jaxml.core.sharding import (DATA, MODEL, batch_sharding, compile_train_step, make_mesh, replicate,
                                 replicated, shard_batch, state_shardings)
from jaxml.core.step import make_eval_step, make_multi_step, make_train_step, step_rng
from jaxml.core.train import TrainContext, Trainer, TrainResult, make_trainer, mesh_from_config, train
from jaxml.core.train_state import TrainState, create_train_state
from jaxml.core.types import Batch, EvalFn, LossFn, Method, Metrics, Params, PredictFn, PRNGKey

__all__ = [
    "Batch", "DATA", "EvalFn", "FitResult", "Hook", "LossFn", "MAX_STEPS_PER_DISPATCH", "MODEL", "Method",
    "MetricWriter", "Metrics", "NonFiniteLossError", "PRNGKey", "Params", "PredictFn", "Selection",
    "SelectionState", "StopTraining", "TrainContext", "TrainResult", "TrainState", "Trainer",
    "auto_steps_per_dispatch", "batch_sharding", "batched_apply", "compile_train_step", "create_train_state", "evaluate", "fit",
    "freeze", "init_selection", "is_main_process", "label_by_path", "latest_step", "learning_rate",
    "make_eval_step", "make_manager", "make_mesh", "make_multi_step", "make_optimizer", "make_schedule",
    "make_train_step", "make_trainer", "maybe_initialize", "mean_metrics", "mesh_from_config", "multi_group",
    "fold_in_each", "named_split", "numpy_rng", "param_count", "per_process_batch_size", "process_seed", "reject_unknown", "replicate",
    "replicated", "restore", "restore_or_init", "root_key", "save", "selection_stopped", "selection_update",
    "shard_batch", "state_shardings", "step_rng", "to_python", "train", "tree_all_finite",
]
