"""Representation Unlearning vs baselines: class, sub-class and random-10 % forgetting.

Per (dataset, regime) cell: (optionally) pick one hyper-parameter per method by Avg. Gap on a
validation forget split, then for each test seed train the original model on D = D_r + D_f,
Retrain on D_r (gold standard), run every method from the same original model, and evaluate
UA / RA / TA (/ TA_r, TA_f), MIA-efficacy, loss-MIA AUC, Avg. Gap to Retrain, run-time ratio to
Retrain (RTE), KL / JS to Retrain, a linear probe of forget labels and CKA to the original
features. Every model (original, Retrain, baselines, the transform) trains through core.fit.
"""

import os
import time
from typing import Any

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import offline  # noqa: E402
from jaxml.data import unlearning_splits as splits  # noqa: E402
from jaxml.unlearning import api, baselines  # noqa: E402
from jaxml.unlearning import evaluate as ev  # noqa: E402
from jaxml.unlearning import model as model_lib  # noqa: E402
from jaxml.unlearning.task import UnlearningTask  # noqa: E402

DATASETS = ("digits", "mnist1d", "cifar10")
REGIMES = ("class", "subclass", "random")
RU_METHODS = ("ru", "ru_zs")
METHODS = RU_METHODS + tuple(m for m in baselines.BASELINES if m != "retrain") + baselines.ZERO_SHOT_BASELINES
ZERO_SHOT = ("ru_zs",) + baselines.ZERO_SHOT_BASELINES
LABELS = {"ru": "RU (ours)", "ru_zs": "RU zero-shot (ours)", "finetune": "FT", "grad_ascent": "GA",
          "neggrad_plus": "NegGrad+", "random_labels": "RL", "l1_sparse": "l1-sparse", "salun": "SalUn",
          "scrub": "SCRUB", "boundary_shrink": "Boundary shrink", "bad_teacher": "Bad Teacher",
          "head_only": "Head-only (control)", "emmn": "EMMN (zero-shot)", "jit": "JiT (zero-shot)",
          "retrain": "Retrain", "original": "Original"}


def validate(config) -> None:
  for d in config.datasets:
    common.validate_choice(d, DATASETS, "dataset")
  for r in config.regimes:
    common.validate_choice(r, REGIMES, "regime")
  for m in config.methods:
    common.validate_choice(m, METHODS, "method")
  if not config.seeds:
    raise common.ConfigError("need at least one seed")


# --------------------------------------------------------------------------- data
def _tfds_arrays(config, split: str, limit: int) -> tuple[np.ndarray, np.ndarray]:
  from jaxml.data.tfds import make_tfds_batches
  it = make_tfds_batches("cifar10", split=split, batch_size=32, seed=0, data_dir=config.data_dir,
                         shuffle=False, num_epochs=1)
  xs, ys, n = [], [], 0
  for b in it:
    xs.append(b["x"])
    ys.append(b["y"])
    n += len(b["y"])
    if limit and n >= limit:
      break
  x, y = np.concatenate(xs), np.concatenate(ys)
  return (x[:limit], y[:limit]) if limit else (x, y)


def load_data(config, dataset: str) -> dict[str, Any]:
  if dataset == "digits":
    d = offline.load_digits(seed=0, test_fraction=config.data.digits_test_fraction)
  elif dataset == "mnist1d":
    d = offline.load_mnist1d(seed=0)
  else:
    xtr, ytr = _tfds_arrays(config, config.data.tfds_split_train, config.data.limit_train)
    xte, yte = _tfds_arrays(config, config.data.tfds_split_test, config.data.limit_test)
    d = dict(x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
  lt, le = config.data.limit_train, config.data.limit_test
  if lt:
    d["x_train"], d["y_train"] = d["x_train"][:lt], d["y_train"][:lt]
  if le:
    d["x_test"], d["y_test"] = d["x_test"][:le], d["y_test"][:le]
  return d


def make_task(config, data: dict, regime: str, seed: int, *, validation: bool = False) -> UnlearningTask:
  """The forget split of a cell; `validation` picks the held-out split used only for tuning."""
  y, yt = np.asarray(data["y_train"]), np.asarray(data["y_test"])
  if regime == "class":
    c = config.data.val_class if validation else config.data.class_forget[seed % len(config.data.class_forget)]
    sp = splits.class_split(y, c)
    return UnlearningTask(data["x_train"], sp.y, sp.retain_idx, sp.forget_idx, data["x_test"], yt, 10,
                          sp.forget_classes, np.isin(yt, sp.forget_classes), y)
  if regime == "subclass":
    sub = config.data.val_subclass if validation else config.data.subclass_forget
    sp = splits.subclass_split(y, sub, config.data.subclass_groups)
    y_test = splits.super_labels(yt, config.data.subclass_groups)
    return UnlearningTask(data["x_train"], sp.y, sp.retain_idx, sp.forget_idx, data["x_test"], y_test,
                          len(config.data.subclass_groups), (), yt == sub, y)
  sp = splits.random_split(y, config.data.random_fraction, seed=10_000 + seed if validation else seed)
  return UnlearningTask(data["x_train"], sp.y, sp.retain_idx, sp.forget_idx, data["x_test"], yt, 10, (),
                        np.zeros(len(yt), bool), y)


def make_model(config, dataset: str, num_classes: int):
  if dataset == "cifar10":
    from jaxml.nn.resnet import ResNet
    return ResNet(num_classes, tuple(config.model.resnet_stage_sizes), config.model.resnet_width)
  return model_lib.MLPClassifier(num_classes, tuple(config.model.features))


# --------------------------------------------------------------------------- running one method
def _cached(cache: dict, key, build):
  if key not in cache:
    cache[key] = build()
  return cache[key]


def _plain_predict(model, cache):
  return _cached(cache, ("predict", model), lambda: jax.jit(
      lambda p, x: (model.apply({"params": p}, x), model_lib.encode(model, p, x))))


def _ru_config(config, name: str, override: dict) -> dict:
  cfg = dict(config[name].to_dict())
  cfg["hidden"] = tuple(cfg["hidden"])
  cfg.update(override)
  return cfg


def run_method(config, name: str, override: dict, model, params0, task: UnlearningTask, seed: int, cache: dict):
  """-> (predict(x) -> (logits, feats), wall_s, steady_s, steps). Raises NotApplicable."""
  if name in RU_METHODS:
    cfg = _ru_config(config, name, override)
    out = api.unlearn(cfg, model, params0, task.x_train, task.y_train, task.retain_idx, task.forget_idx,
                      num_classes=task.num_classes, forget_classes=task.forget_classes, seed=seed, cache=cache)
    key = tuple(sorted((k, str(v)) for k, v in cfg.items() if k in ("transform", "hidden")))
    pred = _cached(cache, ("ru_predict", model, key), lambda: api.make_predict_fn(cfg, model))
    return (lambda x: pred(out.params, x)), out.wall_s, out.steady_s, out.fit.num_steps
  hp = dict(config.baselines[name].to_dict()) | dict(override)
  out = baselines.run_baseline(name, model, params0, task, seed=seed, overrides=hp, cache=cache)
  pred = _plain_predict(model, cache)
  return (lambda x: pred(out.params, x)), out.wall_s, out.steady_s, out.num_steps


def _train(config, model, task, rows, seed, cache, name):
  hp = baselines.hyperparameters("retrain", config.train.to_dict())
  return baselines.train_classifier(hp, model, task, rows, seed=seed, cache=cache, name=name)


# --------------------------------------------------------------------------- tuning
def tune_cell(config, data, regime, model, cache) -> tuple[dict[str, dict], dict[str, Any]]:
  """Validation forget split: pick each method's grid value with the smallest Avg. Gap."""
  task = make_task(config, data, regime, 0, validation=True)
  seed = 1000
  orig = _train(config, model, task, np.arange(task.x_train.shape[0]), seed, cache, "original_val")
  rt = _train(config, model, task, task.retain_idx, seed, cache, "retrain_val")
  pred = _plain_predict(model, cache)
  ref = ev.unlearning_metrics(ev.collect_outputs(lambda x: pred(rt.params, x), task), task)
  chosen, log = {}, {}
  for name in config.methods:
    grid = config.grids.get(name)
    if grid is None:
      continue
    scores = {}
    for value in grid["values"]:
      try:
        predict, *_ = run_method(config, name, {grid["param"]: value}, model, orig.params, task, seed, cache)
      except baselines.NotApplicable:
        break
      except core.NonFiniteLossError:
        scores[value] = float("inf")        # diverged: never chosen
        continue
      m = ev.unlearning_metrics(ev.collect_outputs(predict, task), task)
      scores[value] = ev.avg_gap(m, ref)
    if scores:
      best = min(scores, key=scores.get)
      chosen[name] = {grid["param"]: best}
      log[name] = {"param": grid["param"], "chosen": best,
                   "gaps": {str(k): (v if np.isfinite(v) else None) for k, v in scores.items()}}
  return chosen, log


# --------------------------------------------------------------------------- reporting
def _fmt(vals: list[float], digits: int = 1) -> str:
  vals = [v for v in vals if v is not None and np.isfinite(v)]
  if not vals:
    return "n/a"
  return f"{np.mean(vals):.{digits}f} ± {np.std(vals):.{digits}f}" if len(vals) > 1 else f"{vals[0]:.{digits}f}"


def summary_tables(rows: list[dict], config) -> str:
  cols = [("UA", "UA", 1), ("RA", "RA", 1), ("TA", "TA", 1), ("TA_f", "TA_f", 1), ("MIA", "MIA", 1),
          ("MIA_AUC", "MIA-AUC", 3), ("avg_gap", "Avg. Gap", 2), ("rte", "RTE steady %", 2),
          ("rte_wall", "RTE wall %", 1), ("probe_f", "probe_f", 1), ("CKA_r", "CKA_r", 3), ("JS_t", "JS_t", 3)]
  out = []
  cells = sorted({r["dataset"] for r in rows}, key=lambda c: (c.split("/")[0], REGIMES.index(c.split("/")[1])))
  for cell in cells:
    seeds = sorted({r["seed"] for r in rows if r["dataset"] == cell})
    out.append(f"\n### {cell} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})\n")
    out.append("| method | " + " | ".join(c[1] for c in cols) + " |")
    out.append("|---" * (len(cols) + 1) + "|")
    for method in ("original", "retrain") + tuple(config.methods):
      rs = [r for r in rows if r["dataset"] == cell and r["method"] == method]
      if not rs:
        continue
      vals = []
      for key, _, dg in cols:
        src = "cost" if key in ("rte", "rte_wall") else "metrics"
        scale = 100.0 if key in ("rte", "rte_wall") else 1.0
        vals.append(_fmt([None if r[src].get(key) is None else scale * r[src][key] for r in rs], dg))
      out.append(f"| {LABELS.get(method, method)} | " + " | ".join(vals) + " |")
  return "\n".join(out) + "\n"


def plot_gap_vs_rte(rows: list[dict], workdir: str) -> None:
  cells = sorted({r["dataset"] for r in rows}, key=lambda c: (c.split("/")[0], REGIMES.index(c.split("/")[1])))
  ncol = min(3, len(cells))
  nrow = int(np.ceil(len(cells) / ncol))
  fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 4.0 * nrow), squeeze=False)
  for ax, cell in zip(axes.ravel(), cells):
    for method in sorted({r["method"] for r in rows if r["dataset"] == cell} - {"original", "retrain"}):
      rs = [r for r in rows if r["dataset"] == cell and r["method"] == method]
      gaps = [r["metrics"]["avg_gap"] for r in rs if r["metrics"].get("avg_gap") is not None]
      rtes = [100 * r["cost"]["rte"] for r in rs if r["cost"].get("rte")]
      if not gaps or not rtes:
        continue
      style = dict(color="C3", marker="*", s=140) if method in RU_METHODS else \
          dict(color="C0" if method not in ZERO_SHOT else "C2", marker="o", s=40)
      ax.scatter(np.mean(rtes), np.mean(gaps), **style)
      ax.annotate(LABELS.get(method, method), (np.mean(rtes), np.mean(gaps)), fontsize=7,
                  xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("run time / Retrain run time (%, steady, log)")
    ax.set_ylabel("Avg. Gap to Retrain (lower is better)")
    ax.set_title(cell)
    ax.axvline(5.0, color="grey", lw=0.6, ls="--")
  for ax in axes.ravel()[len(cells):]:
    ax.axis("off")
  fig.tight_layout()
  common.save_plot(fig, workdir, "avg_gap_vs_rte.png")


# --------------------------------------------------------------------------- main loop
def run(config, workdir: str) -> list[dict]:
  validate(config)
  rows: list[dict] = []
  tuning: dict[str, Any] = {}
  caches: dict[Any, dict] = {}   # compiled steps, shared by every cell and seed with the same model
  for dataset in config.datasets:
    data = load_data(config, dataset)
    for regime in config.regimes:
      cell = f"{dataset}/{regime}"
      probe_task = make_task(config, data, regime, 0)
      model = make_model(config, dataset, probe_task.num_classes)
      cache = caches.setdefault(model, {})
      chosen: dict[str, dict] = {}
      if config.tune:
        t0 = time.perf_counter()
        chosen, tuning[cell] = tune_cell(config, data, regime, model, cache)
        print(f"[unlearning] {cell} tuned in {time.perf_counter() - t0:.1f}s: "
              + ", ".join(f"{k}={list(v.values())[0]:g}" for k, v in chosen.items()), flush=True)
      for seed in config.seeds:
        task = make_task(config, data, regime, seed)
        orig = _train(config, model, task, np.arange(task.x_train.shape[0]), seed, cache, "original")
        rt = baselines.run_baseline("retrain", model, orig.params, task, seed=seed,
                                    overrides=config.train.to_dict(), cache=cache)
        pred = _plain_predict(model, cache)
        out_orig = ev.collect_outputs(lambda x: pred(orig.params, x), task)
        out_rt = ev.collect_outputs(lambda x: pred(rt.params, x), task)
        ref = ev.unlearning_metrics(out_rt, task)

        def record(method, out, wall, steady, steps):
          m = ev.unlearning_metrics(out, task)
          m["avg_gap"] = ev.avg_gap(m, ref)
          m |= ev.divergences(out, out_rt, task)
          if config.representation_checks:
            m |= ev.representation_checks(out, out_orig, task, seed=seed)
          cost = {"wall_s": wall, "steady_s": steady, "steps": steps,
                  "rte": steady / rt.steady_s, "rte_wall": wall / rt.wall_s}
          rows.append(common.row(method=method, dataset=cell, split=int(task.forget_idx.size), seed=seed,
                                 metrics=m, cost=cost))
          return m, cost

        record("original", out_orig, orig.wall_s, orig.steady_s, orig.num_steps)
        record("retrain", out_rt, rt.wall_s, rt.steady_s, rt.num_steps)
        print(f"[unlearning] {cell} seed {seed}: |D_f|={task.forget_idx.size} retrain {rt.steady_s:.2f}s "
              f"(wall {rt.wall_s:.2f}s) UA*={ref['UA']:.1f} RA*={ref['RA']:.1f} TA*={ref['TA']:.1f} "
              f"MIA*={ref['MIA']:.1f}", flush=True)
        for method in config.methods:
          try:
            predict, wall, steady, steps = run_method(config, method, chosen.get(method, {}), model, orig.params,
                                                      task, seed, cache)
          except baselines.NotApplicable as e:
            print(f"[unlearning] {cell} seed {seed} {method}: not applicable ({e})", flush=True)
            continue
          except core.NonFiniteLossError as e:
            print(f"[unlearning] {cell} seed {seed} {method}: DIVERGED ({e})", flush=True)
            rows.append(common.row(method=method, dataset=cell, split=int(task.forget_idx.size), seed=seed,
                                   metrics={"diverged": 1.0}, cost={}))
            continue
          m, cost = record(method, ev.collect_outputs(predict, task), wall, steady, steps)
          print(f"[unlearning] {cell} seed {seed} {method:16s} gap {m['avg_gap']:6.2f} UA {m['UA']:5.1f} "
                f"RA {m['RA']:5.1f} TA {m['TA']:5.1f} MIA {m['MIA']:5.1f} | RTE {100 * cost['rte']:6.2f}% "
                f"steady, {100 * cost['rte_wall']:6.1f}% wall ({steps} steps)", flush=True)
  if jax.process_index() == 0:
    common.write_json(os.path.join(workdir, "tuning.json"), tuning)
    with open(os.path.join(workdir, "summary.md"), "w") as f:
      f.write(summary_tables(rows, config))
    plot_gap_vs_rte(rows, workdir)
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="unlearning", validate=validate)
