"""Training pipeline for SOL and its baselines: batches, the refresh/relabelling schedule, and
validation-based best-checkpoint selection with the decoder chosen on validation.

  trainer = make_trainer("sol", sol_config, train_config)     # once per method and shape
  fitted = fit(trainer, x_train, y_train, x_val, y_val, seed=0)  # per partition / noise draw
  ranks = predict(trainer, fitted, x_test)

Schedule (all in steps): centroids are refreshed every `refresh_every` steps; labels are refined
at refresh steps s ≥ `relabel_start` with (s − relabel_start) % `relabel_every` = 0. Every method
is scored on the validation split (noisy labels) every `select_every` steps and at the end; the
returned params are the best-scoring ones, with the best decoder at that step.
"""

import time
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml import core
from jaxml.sol.api import RankLearner, init_extra, make_learner
from jaxml.sol.pairs import LabelBook, make_pair_batches

__all__ = ["Trainer", "Fitted", "make_trainer", "fit", "predict", "relabel_steps", "plain_batches"]


class Trainer(NamedTuple):
  learner: RankLearner
  optimizer: optax.GradientTransformation
  train_step: Callable
  steps: int
  batch_size: int           # bases per step (SOL) or half the rows per step (baselines)
  select_every: int
  log_every: int


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


def make_trainer(name: str, sol_config: Mapping[str, Any] | None, train_config: Mapping[str, Any]) -> Trainer:
  """train_config (dict or ConfigDict): optim (section), steps, batch_size, select_every, log_every."""
  learner = make_learner(name, sol_config)
  steps = int(train_config["steps"])
  optimizer = core.make_optimizer(train_config["optim"], steps)
  step = core.make_train_step(learner.method.loss_fn, optimizer, uses_extra=learner.batch_kind == "pairs")
  return Trainer(learner, optimizer, step, steps, int(train_config["batch_size"]),
                 int(train_config["select_every"]), int(train_config["log_every"]))


def relabel_steps(settings: Mapping[str, Any], steps: int) -> list[int]:
  """The steps (counted from 1) after which labels are refined."""
  if not settings["relabel"]:
    return []
  every, start = int(settings["refresh_every"]), int(settings["relabel_start"])
  return [s for s in range(every, steps + 1, every)
          if s >= start and (s - start) % int(settings["relabel_every"]) == 0]


def plain_batches(x: np.ndarray, y: np.ndarray, size: int, *, seed: int) -> Callable[[int], dict[str, np.ndarray]]:
  """`batch_at(step)`: `size` rows of a seeded per-epoch permutation (drop last)."""
  n = len(x)
  size = min(size, n)
  per_epoch = n // size

  def batch_at(step: int) -> dict[str, np.ndarray]:
    epoch, i = divmod(int(step), per_epoch)
    rows = np.random.default_rng([seed, epoch]).permutation(n)[i * size:(i + 1) * size]
    return {"x": x[rows], "y": y[rows]}

  return batch_at


def fit(trainer: Trainer, x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray, y_val: np.ndarray, *,
        seed: int, name: str = "train", log: Callable[[str], None] | None = None) -> Fitted:
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
    batches = make_pair_batches(x_train, book, b, seed=seed, tau=int(s["tau"]))
    params = learner.method.init(rng, batches(0))
    extra = init_extra(s, params, x_train, y_train, learner.refresh, x_val, y_val)
    state = core.create_train_state(params, trainer.optimizer, seed, extra=extra)
    x_dev = jnp.asarray(x_train)
    relabel_at = set(relabel_steps(s, trainer.steps))

    def refresh(step: int, st: core.TrainState) -> core.TrainState:
      relabel = step in relabel_at
      new_extra, stats = learner.refresh(st.params, st.extra, x_dev, x_val_d, y_val_d, jnp.asarray(relabel))
      if relabel:
        book.update(np.asarray(jax.device_get(new_extra["labels"])))
        refreshes.append({"step": step, **{k: float(v) for k, v in jax.device_get(stats).items()},
                          "decoder": int(new_extra["decoder"])})
        if log is not None:
          log(f"[{name}] step {step}: relabel flagged {int(stats['flagged'])} changed {int(stats['changed'])}")
      return st.replace(extra=new_extra)

    hooks.append(core.Hook(int(s["refresh_every"]), refresh))
  else:
    batches = plain_batches(x_train, y_train, 2 * b, seed=seed)
    params = learner.method.init(rng, batches(0))
    state = core.create_train_state(params, trainer.optimizer, seed)

  best: dict[str, Any] = {"mae": np.inf}

  def score(st: core.TrainState) -> dict[str, float]:
    pred = np.asarray(learner.decode(st.params, st.extra, x_val_d))
    return {d: float(np.mean(np.abs(p - np.asarray(y_val)))) for d, p in zip(learner.decoders, pred)}

  def select(step: int, st: core.TrainState) -> None:
    maes = score(st)
    dec = min(maes, key=maes.get)
    if maes[dec] < best["mae"]:
      best.update(mae=maes[dec], decoder=dec, step=step, maes=maes,
                  params=jax.device_get(st.params), extra=jax.device_get(st.extra))

  hooks.append(core.Hook(trainer.select_every, select))
  t0 = time.perf_counter()
  result = core.fit(state, trainer.train_step, batches, num_steps=trainer.steps, log_every=trainer.log_every,
                    hooks=hooks, name=name, progress=False)
  wall = time.perf_counter() - t0
  final = score(result.state)
  if trainer.steps % trainer.select_every:
    select(trainer.steps, result.state)
  return Fitted(best["params"], best["extra"], best["decoder"], int(best["step"]), best["maes"], final,
                refreshes, wall, result.steps_per_s)


def predict(trainer: Trainer, fitted: Fitted, x: np.ndarray, decoder: str | None = None, *,
            chunk: int = 4096) -> np.ndarray:
  """Ranks of x from the selected params with the chosen (or the named) decoder."""
  row = trainer.learner.decoders.index(decoder or fitted.decoder)
  out = [np.asarray(trainer.learner.decode(fitted.params, fitted.extra, jnp.asarray(x[i:i + chunk])))[row]
         for i in range(0, len(x), chunk)]
  return np.concatenate(out)
