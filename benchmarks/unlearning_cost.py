"""Unlearning cost of Representation Unlearning relative to Retrain (RTE), measured in one run.

  python -m benchmarks.unlearning_cost                          # digits + mnist1d, class and random
  python -m benchmarks.unlearning_cost --datasets=mnist1d --repeats=5

Median warm wall times of Retrain and RU through `core.fit` and their ratio, plus the ratio of compiled
FLOPs (what the wall ratio tends to where compute, not per-step host overhead, dominates)."""

import argparse
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import flops
from jaxml import core
from jaxml.data import offline
from jaxml.data import unlearning_splits as splits
from jaxml.unlearning import api, baselines, targets
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.sampling import with_values
from jaxml.unlearning.task import UnlearningTask

RU = dict(beta=0.01, lr=1e-2, min_steps=25, epochs=5.0, batch_size=128)


def stepflops(loss_fn, optimizer, params, batch, extra=None) -> float:
  step = core.make_train_step(loss_fn, optimizer, uses_extra=True)
  state = core.create_train_state(params, optimizer, 0, extra=extra)
  return flops(jax.jit(step).lower(state, jax.tree.map(jnp.asarray, batch)).compile())


def make_task(dataset: str, regime: str) -> UnlearningTask:
  d = offline.load_digits(seed=0, test_fraction=0.2) if dataset == "digits" else offline.load_mnist1d(seed=0)
  sp = splits.class_split(d["y_train"], 3) if regime == "class" else splits.random_split(d["y_train"], 0.1, seed=0)
  return UnlearningTask(d["x_train"], sp.y, sp.retain_idx, sp.forget_idx, d["x_test"], d["y_test"], 10,
                        sp.forget_classes)


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--datasets", default="digits,mnist1d")
  parser.add_argument("--regimes", default="class,random")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  print("dataset  regime  retrain_s  ru_s  ratio_wall  retrain_steps  ru_steps  ratio_flops")
  for dataset in args.datasets.split(","):
    model = model_lib.MLPClassifier(10)
    cache: dict = {}
    for regime in args.regimes.split(","):
      task = make_task(dataset, regime)
      hp = baselines.hyperparameters("retrain")
      orig = baselines.train_classifier(hp, model, task, np.arange(task.x_train.shape[0]), seed=0, cache=cache)

      def retrain():
        return baselines.train_classifier(hp, model, task, task.retain_idx, seed=0, cache=cache)

      def ru():
        return api.unlearn(RU, model, orig.params, task.x_train, task.y_train, task.retain_idx, task.forget_idx,
                           num_classes=10, forget_classes=task.forget_classes, seed=0, cache=cache)

      rt, un = retrain(), ru()                          # warm-up (compiles)
      t_rt = statistics.median(retrain().wall_s for _ in range(args.repeats))
      t_ru = statistics.median(ru().wall_s for _ in range(args.repeats))
      # FLOPs: one compiled step of each, times the number of steps (+ one encoder pass for RU).
      x, y = task.x_train[:128], task.y_train[:128].astype(np.int32)
      adam, batch = core.make_optimizer({"name": "adam", "lr": 1e-3}, inject_lr=True), {"xr": x, "yr": y}
      f_rt = stepflops(baselines.retain_ce_loss(model), adam, orig.params, batch | {"ir": np.zeros(128, np.int32)})
      z = np.asarray(model_lib.encode(model, orig.params, x))
      stats = targets.class_statistics(task.y_train, 10, task.forget_classes, 1.0)
      ru_batch = {"zr": z, "yr": y, "zf": z, "wf": np.ones(128, np.float32), "zref": z}
      f_ru = stepflops(api.make_loss_fn(RU, model), api.make_optimizer(RU),
                        api.init_params(RU, jax.random.key(0), orig.params, z.shape[-1], stats),
                        with_values(lambda step: ru_batch, 128, **api.batch_values(RU))(0))
      enc = flops(jax.jit(lambda xx: model_lib.encode(model, orig.params, xx)).lower(
          jnp.asarray(task.x_train)).compile())
      ratio_flops = (un.fit.num_steps * f_ru + enc) / (rt.num_steps * f_rt)
      print(f"{dataset:8s} {regime:7s} {t_rt:9.3f} {t_ru:6.3f} {t_ru / t_rt:10.3%} {rt.num_steps:13d} "
            f"{un.fit.num_steps:9d} {ratio_flops:11.3%}", flush=True)


if __name__ == "__main__":
  main()
