"""Training of every causal reward model (GRL-lambda schedule included) through `core.train` (usage: the package
docstring). One `RewardTrainer` compiles once for every seed and loss-weight variant: the GRL strength and the
weights (`api.WEIGHTS`, passed as `hp`) travel in the batch as arrays."""

from typing import Any, Callable, Mapping, NamedTuple

import jax
import numpy as np
import optax

from jaxml import core
from jaxml.causal_reward import api
from jaxml.causal_reward.model import grl_schedule

__all__ = ["RewardTrainer", "TrainOutput", "make_trainer", "train", "predict", "epoch_batches", "TRAIN_KEYS"]

TRAIN_KEYS = ("h_w", "h_l", "t_w", "t_l", "label")


class RewardTrainer(NamedTuple):
  """One reward model's resolved config, method, optimiser, compiled step and inference reward."""

  config: dict[str, Any]                     # resolved model config
  method: core.Method
  optimizer: optax.GradientTransformation
  core: core.TrainSteps                         # compiled-once step (the same object for every call)
  reward: Callable                           # inference reward fn(params, h [N, D]) -> [N]; one object


class TrainOutput(NamedTuple):
  params: Any
  train_metrics: dict[str, float]
  eval_metrics: dict[str, float]
  steps_per_s: float
  wall_s: float
  num_steps: int


def make_trainer(config: Mapping[str, Any], optim: Mapping[str, Any]) -> RewardTrainer:
  """Model config (plain dict or ConfigDict, see `api.default_config`) and optimiser section
  (`core.make_optimizer` keys: name, lr, weight_decay, clip_norm, schedule, warmup_steps)."""
  cfg = api.resolve(config)
  method = api.make_method(cfg)
  optimizer = api.make_optimizer(cfg, optim)
  return RewardTrainer(cfg, method, optimizer, core.make_trainer(method, {}, optimizer=optimizer), api.make_reward_fn(cfg))


def epoch_batches(arrays: Mapping[str, np.ndarray], batch_size: int, seed: int) -> Callable[[int], dict]:
  """`fn(step) -> batch`: a fresh seeded permutation per epoch, fixed batch shape (last partial
  batch of an epoch dropped), so any step can be recomputed for exact resume."""
  n = len(next(iter(arrays.values())))
  per_epoch = max(n // batch_size, 1)

  def get(step: int) -> dict[str, np.ndarray]:
    epoch, i = divmod(int(step), per_epoch)
    perm = np.random.default_rng([seed, epoch, 11]).permutation(n)
    idx = perm[i * batch_size:(i + 1) * batch_size]
    return {k: v[idx] for k, v in arrays.items()}

  return get


def train(trainer: RewardTrainer, data: Mapping[str, np.ndarray], *, seed: int, epochs: int, batch_size: int,
          hp: Mapping[str, float] | None = None, val: Mapping[str, np.ndarray] | None = None,
          writer: core.MetricWriter | None = None, name: str = "causal_reward", log_every: int = 100000,
          mesh=None, workdir: str | None = None, checkpoint_every: int = 0, steps_per_dispatch: int = 0) -> TrainOutput:
  """Trains `trainer`'s model on `data` (present keys of `TRAIN_KEYS`) for `epochs`; `hp` overrides loss
  weights for this run; with `workdir` and checkpoint_every > 0 a rerun resumes from orbax checkpoints."""
  cfg = trainer.config
  core.reject_unknown(hp or {}, api.WEIGHTS, "loss-weight (hp)")
  weights = {k: float((hp or {}).get(k, cfg[k])) for k in api.WEIGHTS}
  arrays = {k: np.asarray(data[k]) for k in TRAIN_KEYS if k in data}
  n = len(arrays["h_w"])
  batch_size = min(int(batch_size), n)
  total = int(epochs) * max(n // batch_size, 1)
  base = epoch_batches(arrays, batch_size, seed)
  factored = cfg["kind"] in api.FACTORED_KINDS
  const = {k: np.full(batch_size, v, np.float32) for k, v in weights.items()}

  def batches(step: int) -> dict[str, Any]:
    b = base(step)
    b["hp"] = const
    if factored:
      lam = grl_schedule(step, total, lam_max=float(cfg["lam_max"]), gamma=float(cfg["gamma"]), kind=cfg["schedule"])
      b["grl_lambda"] = np.full(batch_size, lam, np.float32)
    return b

  ckpt_root = workdir if checkpoint_every > 0 else None    # core.train checkpoints only under a workdir
  loop = {"num_steps": total, "log_every": min(log_every, total), "eval_every": 0,
          "checkpoint_every": checkpoint_every if ckpt_root else 0, "steps_per_dispatch": steps_per_dispatch}
  val_batch = None if val is None else {k: np.asarray(val[k]) for k in ("h_w", "h_l")}
  result = core.train(trainer.core, batches, loop, workdir=ckpt_root, name=name, seed=seed, eval_batches=val_batch,
                      mesh=mesh, writer=writer, progress=False)
  return TrainOutput(result.params, result.train_metrics, result.eval_metrics, result.steps_per_s,
                     result.wall_s, total)


def predict(fn: Callable, params: Any, x: np.ndarray, chunk: int = 16384) -> Any:
  """`fn(params, x)` over padded row chunks of one shape (`core.batched_apply`), as numpy; `fn` is jitted
  here (pass the same `fn` object to reuse its compilation)."""
  jfn = jax.jit(fn)
  return core.batched_apply(lambda xb: jfn(params, xb), x, chunk, shrink=True)
