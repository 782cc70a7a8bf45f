"""MLP vs linear softmax classifier on sklearn digits, trained by the shared loop.

The shape every experiment copies: validate names, build data (numpy), build each method's
loss, train through core.fit (resumable checkpoints per method and seed), evaluate, return rows.
"""

import os
import time

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax


matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import iterators, offline  # noqa: E402
from jaxml.metrics import calibration  # noqa: E402
from jaxml.nn.mlp import MLP  # noqa: E402

METHODS = ("mlp", "linear")
DATASETS = ("digits",)


def make_method(kind: str, hidden: tuple[int, ...], num_classes: int) -> core.Method:
  """Softmax classifier; 'linear' is the same loss with no hidden layer."""
  model = MLP(tuple(hidden) + (num_classes,) if kind == "mlp" else (num_classes,))

  def init(rng, batch):
    return model.init(rng, batch["x"])["params"]

  def loss_fn(params, batch, rng):
    del rng
    logits = model.apply({"params": params}, batch["x"])
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean()
    return loss, {"accuracy": jnp.mean(logits.argmax(-1) == batch["y"])}

  def eval_fn(params, batch):
    logits = model.apply({"params": params}, batch["x"])
    return {"nll": optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean(),
            "accuracy": jnp.mean(logits.argmax(-1) == batch["y"]), "probs": jax.nn.softmax(logits)}

  return core.Method(init, loss_fn, eval_fn)


def validate(config) -> None:
  common.validate_choice(config.data.name, DATASETS, "dataset")
  for m in config.methods:
    common.validate_choice(m, METHODS, "method")


def train_one(config, workdir: str, kind: str, seed: int, data: dict) -> tuple[dict, dict]:
  """Trains one (method, seed) through core.fit; returns test metrics and cost."""
  method = make_method(kind, config.model.hidden, int(data["y_train"].max()) + 1)
  train = {"x": data["x_train"].reshape(len(data["x_train"]), -1), "y": data["y_train"]}
  test = {"x": data["x_test"].reshape(len(data["x_test"]), -1), "y": data["y_test"]}
  optimizer = core.make_optimizer(config.optim, config.num_steps)
  params = method.init(jax.random.key(seed), train)
  state = core.create_train_state(params, optimizer, seed)
  name = f"{kind}_seed{seed}"
  t0 = time.perf_counter()
  result = core.fit(
      state, core.make_train_step(method.loss_fn, optimizer),
      iterators.epoch_batches(train, config.data.batch_size, seed=seed),
      num_steps=config.num_steps, log_every=config.log_every, name=name,
      writer=core.MetricWriter(workdir),
      eval_step=core.make_eval_step(lambda p, b: {k: v for k, v in method.eval_fn(p, b).items() if k != "probs"}),
      eval_batches=lambda: [test], eval_every=config.eval_every,
      checkpoint_manager=core.make_manager(common.workdir_subdir(workdir, "checkpoints", name)),
      checkpoint_every=config.checkpoint_every)
  wall = time.perf_counter() - t0
  out = jax.device_get(jax.jit(method.eval_fn)(result.state.params, test))
  metrics = {"accuracy": out["accuracy"], "nll": out["nll"],
             "ece": calibration.ece(np.asarray(out["probs"]), test["y"])}
  return metrics, {"wall_s": wall, "steps": config.num_steps, "steps_per_s": result.steps_per_s}


def run(config, workdir: str) -> list[dict]:
  validate(config)
  data = offline.load_digits(seed=0, test_fraction=config.data.test_fraction)
  rows = []
  for kind in config.methods:
    for seed in config.seeds:
      metrics, cost = train_one(config, workdir, kind, seed, data)
      print(f"[mlp_digits] {kind} seed {seed}: acc {metrics['accuracy']:.4f} nll {metrics['nll']:.4f}", flush=True)
      rows.append(common.row(method=kind, dataset=config.data.name, split=0, seed=seed, metrics=metrics, cost=cost))
  fig, ax = plt.subplots(figsize=(4, 3))
  for kind in config.methods:
    accs = [r["metrics"]["accuracy"] for r in rows if r["method"] == kind]
    ax.bar(kind, np.mean(accs), yerr=np.std(accs))
  ax.set_ylabel("test accuracy")
  ax.set_title("sklearn digits")
  common.save_plot(fig, workdir, "accuracy.png")
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="mlp_digits", validate=validate)
