"""One entry point for every unlearning run: Representation Unlearning (standard and zero-shot),
each baseline, Retrain and the original model, all with the same signature and output.

  out = run_method("ru", {"beta": 0.1, "lr": 1e-2}, model, params0, task, seed=0)
  logits, feats = out.predict(x)

`config` holds the method's settings as a plain dict or ConfigDict (unknown keys are errors):
the `api.DEFAULTS` keys for "ru" / "ru_zs" / "ru_uniform" (zero_shot and target follow the name), the method's
`baselines.DEFAULTS` keys otherwise. `cache` (optional, one per model) keeps compiled steps
and predictors; float settings travel as arrays, so a grid over them compiles once.
`tune` picks one setting per method by Avg. Gap to a reference (Retrain) on a validation task.
"""

from typing import Any, Callable, Hashable, Mapping, MutableMapping, NamedTuple, Sequence

import jax
import numpy as np

from jaxml import core
from jaxml.unlearning import api, baselines
from jaxml.unlearning import evaluate as ev
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.task import UnlearningTask

__all__ = ["RU_METHODS", "METHODS", "ZERO_SHOT", "RunOutput", "run_method", "predictor", "tune"]

# ru_uniform (our extension): RU with the forget target moved from the mean representation to the
# nearest point where the frozen head is uniform over the retained classes (`api.uniform_target`).
RU_METHODS = ("ru", "ru_zs", "ru_uniform")
METHODS = RU_METHODS + baselines.BASELINES + baselines.ZERO_SHOT_BASELINES + ("original",)
ZERO_SHOT = ("ru_zs",) + baselines.ZERO_SHOT_BASELINES


class RunOutput(NamedTuple):
  params: Any
  predict: Callable[[np.ndarray], tuple[jax.Array, jax.Array]]   # x -> (logits, features)
  wall_s: float          # the whole run incl. compile and pre-computation
  steady_s: float        # the same without the compiling first steps
  num_steps: int
  info: dict | None = None   # RU runs: the forget target's collision check (`api.target_info`)


def _cached(cache: MutableMapping[Hashable, Any] | None, key: Hashable, build: Callable[[], Any]) -> Any:
  if cache is None:
    return build()
  if key not in cache:
    cache[key] = build()
  return cache[key]


def predictor(model, cache: MutableMapping[Hashable, Any] | None = None) -> Callable:
  """predict(params, x) -> (logits, g(x)) of a plain classifier (jitted once per model)."""
  return _cached(cache, ("predict", model), lambda: jax.jit(
      lambda p, x: (model.apply({"params": p}, x), model_lib.encode(model, p, x))))


def _ru_settings(name: str, config: Mapping[str, Any] | None) -> dict[str, Any]:
  cfg = dict(config or {})
  if "hidden" in cfg:
    cfg["hidden"] = tuple(cfg["hidden"])
  return cfg | {"zero_shot": name == "ru_zs", "target": "uniform" if name == "ru_uniform" else "mean"}


def run_method(name: str, config: Mapping[str, Any] | None, model, params0: Any, task: UnlearningTask, *,
               seed: int, cache: MutableMapping[Hashable, Any] | None = None,
               train_config: Mapping[str, Any] | None = None) -> RunOutput:
  """Runs method `name` from the trained classifier `params0` ("original" trains it on all rows and
  ignores params0; "retrain" trains on the retained rows). Raises baselines.NotApplicable when a
  method does not apply to the task (e.g. a class-level method on random forgetting).
  `train_config`: what core.train reads besides the learning rate (optim, log_every, mesh)."""
  if name not in METHODS:
    raise ValueError(f"unknown unlearning method {name!r}; expected one of {', '.join(METHODS)}")
  if name in RU_METHODS:
    cfg = _ru_settings(name, config)
    out = api.unlearn(cfg, model, params0, task.x_train, task.y_train, task.retain_idx, task.forget_idx,
                      num_classes=task.num_classes, forget_classes=task.forget_classes, seed=seed, cache=cache,
                      train_config=train_config)
    s = api._cfg(cfg)
    pred = _cached(cache, ("ru_predict", model, s["transform"], tuple(s["hidden"])),
                   lambda: api.make_predict_fn(cfg, model))
    return RunOutput(out.params, lambda x: pred(out.params, x), out.wall_s, out.steady_s, out.fit.num_steps,
                     out.target_info)
  plain = predictor(model, cache)
  if name == "original":
    fit = baselines.train_classifier(baselines.hyperparameters("retrain", config), model, task,
                                     np.arange(task.x_train.shape[0]), seed=seed, cache=cache, name="original",
                                     train_config=train_config)
    return RunOutput(fit.params, lambda x: plain(fit.params, x), fit.wall_s, fit.steady_s, fit.num_steps)
  out = baselines.run_baseline(name, model, params0, task, seed=seed, overrides=config, cache=cache,
                               train_config=train_config)
  if name in baselines.ENSEMBLES:
    plain = baselines.ensemble_predictor(model, cache)
  return RunOutput(out.params, lambda x: plain(out.params, x), out.wall_s, out.steady_s, out.num_steps)


def tune(name: str, config: Mapping[str, Any] | None, param: str, values: Sequence[Any], model, params0: Any,
         task: UnlearningTask, reference: Mapping[str, float], *, seed: int,
         cache: MutableMapping[Hashable, Any] | None = None,
         train_config: Mapping[str, Any] | None = None) -> tuple[Any, dict[Any, float]]:
  """The value of `param` among `values` with the smallest Avg. Gap to `reference` (Retrain's
  metrics on `task`); a diverged run scores inf. Returns (best or None if not applicable, gaps)."""
  gaps: dict[Any, float] = {}
  for v in values:
    try:
      out = run_method(name, dict(config or {}) | {param: v}, model, params0, task, seed=seed, cache=cache,
                       train_config=train_config)
    except baselines.NotApplicable:
      return None, {}
    except core.NonFiniteLossError:
      gaps[v] = float("inf")        # diverged: never chosen
      continue
    gaps[v] = ev.avg_gap(ev.unlearning_metrics(ev.collect_outputs(out.predict, task), task), reference)
  return (min(gaps, key=gaps.get) if gaps else None), gaps
