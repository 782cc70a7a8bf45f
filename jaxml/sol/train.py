"""Training pipeline for SOL and its baselines (usage: the package docstring): batches, the refresh / relabelling
schedule, and validation-based selection of the checkpoint and the decoder.
Centroids refresh every `refresh_every` steps; labels are refined at refresh steps s ≥ `relabel_start`
with (s − relabel_start) % `relabel_every` = 0; selection every `select_every` steps on noisy validation labels."""

from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxml import core
from jaxml.sol.api import RankLearner, host_pair_count, init_extra, make_learner
from jaxml.sol.pairs import LabelBook, make_pair_batches

__all__ = ["RankTrainer", "Fitted", "make_trainer", "fit", "predict", "relabel_steps"]


class RankTrainer(NamedTuple):
  """One method's learner, compiled steps and schedule, reused for every partition and noise draw."""

  learner: RankLearner
  core_trainer: core.TrainSteps   # optimizer and compiled-once steps (core.make_trainer)
  train_config: dict[str, Any]   # what core.train reads: optim, num_steps, log_every, ...
  steps: int
  batch_size: int           # bases per step (SOL) or half the rows per step (baselines)
  select_every: int


class Fitted(NamedTuple):
  params: Any
  extra: Any                # SOL family: `extra` at the selected step; baselines: None
  decoder: str              # decoder chosen on validation
  best_step: int
  val_mae: dict[str, float]        # per decoder at the selected step
  final_val_mae: dict[str, float]  # per decoder after the last step
  refreshes: list[dict[str, float]]
  wall_s: float
  steps_per_s: float


def make_trainer(name: str, sol_config: Mapping[str, Any] | None, train_config: Mapping[str, Any]) -> RankTrainer:
  """train_config (dict or ConfigDict): optim (section), steps, batch_size, select_every, and
  optionally log_every, checkpoint_every, steps_per_dispatch (0: automatic) and mesh for core.train."""
  learner = make_learner(name, sol_config)
  steps, select_every = train_config["steps"], train_config["select_every"]
  cfg = core.loop_config(train_config, num_steps=steps, log_every=train_config.get("log_every") or 10 ** 9,
                         eval_every=0 if learner.batch_kind == "pairs" else select_every)
  if cfg.get("mesh") is None:
    cfg.pop("mesh", None)
  method = learner.method
  if learner.batch_kind == "pairs":   # the loss and the decoders read `extra`; fit() passes it (data-dependent)
    method = method._replace(init_extra=_extra_from_fit, eval_fn=_decoder_maes(learner), eval_uses_extra=True)
  return RankTrainer(learner, core.make_trainer(method, cfg), cfg, steps, train_config["batch_size"], select_every)


def _extra_from_fit(rng: jax.Array, params: Any) -> Any:
  raise ValueError("SOL's extra state depends on the data: train through jaxml.sol.fit")


def _decoder_maes(learner: RankLearner) -> Callable:
  """Validation MAE of every decoder (`mae_<name>`) and the best of them (`mae`, what is selected)."""

  def eval_fn(params: Any, batch: Mapping[str, jax.Array], extra: Any) -> dict[str, jax.Array]:
    pred = learner.decode(params, extra, batch["x"])
    maes = jnp.mean(jnp.abs(pred - batch["y"][None, :]).astype(jnp.float32), axis=1)
    return {"mae": jnp.min(maes), **{f"mae_{d}": maes[i] for i, d in enumerate(learner.decoders)}}

  return eval_fn


def relabel_steps(settings: Mapping[str, Any], steps: int) -> list[int]:
  """The steps (counted from 1) after which labels are refined."""
  if not settings["relabel"]:
    return []
  every, start = settings["refresh_every"], settings["relabel_start"]
  return [s for s in range(every, steps + 1, every)
          if s >= start and (s - start) % settings["relabel_every"] == 0]


def fit(trainer: RankTrainer, x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray, y_val: np.ndarray, *,
        seed: int, name: str = "train") -> Fitted:
  """Trains one method on noisy ranks y_train with the trainer's schedule; selects on (x_val, y_val)."""
  learner, s = trainer.learner, trainer.learner.settings
  rng = jax.random.key(seed)
  y_train = np.asarray(y_train, np.int32)
  x_val_d, y_val_d = jnp.asarray(x_val), jnp.asarray(y_val, jnp.int32)
  hooks: list[core.Hook] = []
  refreshes: list[dict[str, float]] = []
  b = min(trainer.batch_size, len(x_train) // 2)
  if learner.batch_kind == "pairs":
    book = LabelBook(y_train)
    batches = make_pair_batches(x_train, book, b, seed=seed, tau=s["tau"], pairs_per_class=host_pair_count(s),
                                block=s["refresh_every"])
    params = learner.method.init(rng, batches(0))
    extra = init_extra(s, params, x_train, y_train, learner.refresh, x_val, y_val)
    x_dev = jnp.asarray(x_train)
    relabel_at = set(relabel_steps(s, trainer.steps))

    def refresh(step: int, st: core.TrainState) -> core.TrainState:
      relabel = step in relabel_at
      new_extra, stats = learner.refresh(st.params, st.extra, x_dev, x_val_d, y_val_d, jnp.asarray(relabel))
      if relabel:
        book.update(np.asarray(jax.device_get(new_extra["labels"])))
        refreshes.append({"step": step, **{k: float(v) for k, v in jax.device_get(stats).items()},
                          "decoder": int(new_extra["decoder"])})
      return st.replace(extra=new_extra)

    hooks.append(core.Hook(s["refresh_every"], refresh))
  else:
    batches = core.epoch_batches({"x": x_train, "y": y_train}, min(2 * b, len(x_train)), seed=seed)
    params = learner.method.init(rng, batches(0))
    extra = None

  def score(st: core.TrainState) -> dict[str, float]:
    pred = np.asarray(learner.decode(st.params, st.extra, x_val_d))
    return {d: float(np.mean(np.abs(p - np.asarray(y_val)))) for d, p in zip(learner.decoders, pred)}

  # One selection mechanism for all (core.Selection, after the step's refresh hook): the SOL family's
  # decoders read `extra`, so its record keeps `extra` of the best step too; the decoder is the best one there.
  val = {"x": np.asarray(x_val), "y": np.asarray(y_val, np.int32)}
  pairs = learner.batch_kind == "pairs"
  select = core.Selection("mae", "min", every=trainer.select_every, keep_extra=pairs)
  result = core.train(trainer.core_trainer, batches, trainer.train_config, name=name, seed=seed, init_params=params,
                      extra=extra, hooks=hooks, eval_batches=[val], select=select, progress=False)
  best_extra = jax.device_get(result.extra) if pairs else None
  maes = score(result.state.replace(params=result.params, extra=best_extra))
  decoder = min(maes, key=maes.get) if pairs else learner.decoders[0]
  return Fitted(jax.device_get(result.params), best_extra, decoder, int(result.best_step), maes, score(result.state),
                refreshes, result.wall_s, result.steps_per_s)


def predict(trainer: RankTrainer, fitted: Fitted, x: np.ndarray, decoder: str | None = None) -> np.ndarray:
  """Ranks of x from the selected params with the chosen (or the named) decoder, in chunks of 4096 rows."""
  row = trainer.learner.decoders.index(decoder or fitted.decoder)
  return core.batched_apply(lambda xb: trainer.learner.decode(fitted.params, fitted.extra, xb)[row], x, 4096,
                            shrink=True)
