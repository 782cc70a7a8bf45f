"""The only training machinery in jaxml: contract, trainer, state, steps, loop, optimizers, sharding,
checkpoints. Start with `Method` and `train` (see docs/adding_a_method.md); the submodules
(`core.checkpoint`, `core.sharding`, `core.step`, ...) hold the pieces the loop is built from."""

from jaxml.core import batches, checkpoint, distributed, metrics, optim, rng, select, sharding, step, types
from jaxml.core.batches import epoch_batches
from jaxml.core.batching import batched_apply, tree_all_finite
from jaxml.core.config import cache_dir, reject_unknown
from jaxml.core.distributed import is_main_process, maybe_initialize
from jaxml.core.loop import Hook, NonFiniteLossError, StopTraining, auto_steps_per_dispatch, fit, param_count
from jaxml.core.metrics import MetricWriter
from jaxml.core.optim import freeze, label_by_path, make_optimizer, multi_group
from jaxml.core.rng import fold_in_each, numpy_rng
from jaxml.core.select import Selection
from jaxml.core.sharding import make_mesh
from jaxml.core.step import make_multi_step, make_train_step
from jaxml.core.train import TrainContext, TrainResult, TrainSteps, loop_config, make_trainer, train
from jaxml.core.train_state import TrainState, create_train_state
from jaxml.core.types import Batch, Method, Params

__all__ = [
    "Batch", "Hook", "Method", "MetricWriter", "NonFiniteLossError", "Params", "Selection", "StopTraining",
    "TrainContext", "TrainResult", "TrainState", "TrainSteps", "auto_steps_per_dispatch", "batched_apply",
    "cache_dir", "create_train_state", "epoch_batches", "fit", "fold_in_each", "freeze", "is_main_process",
    "label_by_path", "loop_config", "make_mesh", "make_multi_step", "make_optimizer", "make_train_step",
    "make_trainer", "maybe_initialize", "multi_group", "numpy_rng", "param_count", "reject_unknown", "train",
    "tree_all_finite",
]
