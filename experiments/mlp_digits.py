"""MLP vs linear softmax classifier on sklearn digits, the template experiment: config -> plan (every key read
before anything is written) -> data -> `jaxml.classifier` -> `core.train` (resumable) -> rows, plot."""

from typing import Any, NamedTuple

import jax
import numpy as np

from experiments import common, report
from jaxml import classifier, core
from jaxml.data import offline
from jaxml.metrics import calibration

DATASETS = ("digits",)


class Plan(NamedTuple):
  """Everything the run uses, read from the config in one place."""

  dataset: str
  split_seed: int
  test_fraction: float
  batch_size: int
  seeds: tuple[int, ...]
  models: dict[str, dict[str, Any]]   # method -> classifier.make_method config (less num_classes)
  train: dict[str, Any]               # core.train config


def plan(config) -> Plan:
  """Validates names and reads every key the run needs (the strict-config check runs on this)."""
  common.validate_choice(config.data.name, DATASETS, "dataset")
  models = {}
  for kind in config.methods:
    common.validate_choice(kind, classifier.KINDS, "method")
    models[kind] = {"kind": kind}
  if "mlp" in models:   # the linear model has no hidden layers, so these are read only for the MLP
    models["mlp"].update(hidden=tuple(config.model.hidden), dropout=config.model.dropout)
  train = core.loop_config(config)
  core.make_optimizer(train["optim"])   # a bad optimizer name fails here, before anything is written
  return Plan(config.data.name, config.seed, config.data.test_fraction, config.data.batch_size,
              tuple(config.seeds), models, train)


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  data = offline.load_digits(seed=p.split_seed, test_fraction=p.test_fraction)
  train, test = ({"x": data[f"x_{s}"].reshape(len(data[f"x_{s}"]), -1), "y": data[f"y_{s}"]} for s in ("train", "test"))
  num_classes = int(data["y_train"].max()) + 1
  rows = []
  for kind, model_cfg in p.models.items():
    method = classifier.make_method(dict(model_cfg, num_classes=num_classes))
    for seed in p.seeds:
      result = core.train(method, core.epoch_batches(train, p.batch_size, seed=seed), p.train,
                          workdir=workdir, name=f"{kind}_seed{seed}", seed=seed, eval_batches=[test])
      out = jax.device_get(jax.jit(method.eval_fn)(result.params, test))
      probs = np.asarray(jax.jit(method.predict_fn)(result.params, test))
      metrics = {"accuracy": out["accuracy"], "nll": out["nll"], "ece": calibration.ece(probs, test["y"])}
      cost = {"wall_s": result.wall_s, "steps": p.train["num_steps"], "steps_per_s": result.steps_per_s}
      print(f"[mlp_digits] {kind} seed {seed}: acc {metrics['accuracy']:.4f} nll {metrics['nll']:.4f}", flush=True)
      rows.append(common.row(method=kind, dataset=p.dataset, split=0, seed=seed, metrics=metrics, cost=cost))
  report.bar_plot(rows, "accuracy", workdir, "accuracy.png", title="test accuracy")
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="mlp_digits", plan=plan)
