"""Representation Unlearning vs baselines: class, sub-class and random-10 % forgetting.

Per (dataset, regime) cell: (optionally) pick one hyper-parameter per method by Avg. Gap on a
validation forget split, then for each test seed train the original model on D = D_r + D_f,
Retrain on D_r (gold standard), run every method from the same original model, and evaluate
UA / RA / TA (/ TA_r, TA_f), MIA-efficacy, loss-MIA AUC, Avg. Gap to Retrain, run-time ratio to
Retrain (RTE), KL / JS to Retrain, a linear probe of forget labels and CKA to the original
features. Every run goes through `jaxml.unlearning.run_method` (one signature for RU, RU zero-shot,
every baseline, Retrain and the original model); tuning through `jaxml.unlearning.tune`.

Every row also carries the collision check of RU's forget target: the frozen head's class and
max-probability at the mean training representation (`head_mean_argmax`, `head_mean_pmax`) and
whether that class is the forgotten one (`mean_is_forget_class`); RU rows add where their own target
sits (`ru_target_*`). With `class_sweep` (preset paper_cpu) the class regime forgets every listed
class in turn (cells 'dataset/class/<c>') and `paper_summary.md` gives the paper's columns plus the
forget accuracy of every method per class next to the head's class at the mean.
"""

import os
import time
from typing import Any

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")

from experiments import common, report  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import offline  # noqa: E402
from jaxml.data import unlearning_splits as splits  # noqa: E402
from jaxml.unlearning import api, baselines, runner  # noqa: E402
from jaxml.unlearning import evaluate as ev  # noqa: E402
from jaxml.unlearning import model as model_lib  # noqa: E402
from jaxml.unlearning.task import UnlearningTask  # noqa: E402

DATASETS = ("digits", "mnist1d", "cifar10")
REGIMES = ("class", "subclass", "random")
METHODS = tuple(m for m in runner.METHODS if m not in ("retrain", "original"))
LABELS = {"ru": "RU (ours)", "ru_zs": "RU zero-shot (ours)", "ru_uniform": "RU uniform target (ext.)",
          "sisa": "SISA", "unsir": "UNSIR", "gkt": "GKT (zero-shot)", "finetune": "FT", "grad_ascent": "GA",
          "neggrad_plus": "NegGrad+", "random_labels": "RL", "l1_sparse": "l1-sparse", "salun": "SalUn",
          "scrub": "SCRUB", "boundary_shrink": "Boundary shrink", "bad_teacher": "Bad Teacher",
          "head_only": "Head-only (control)", "emmn": "EMMN (zero-shot)", "jit": "JiT (zero-shot)",
          "retrain": "Retrain", "original": "Original"}


def plan(config) -> dict:
  """Validates names and reads every config key (before anything is written): each method's
  settings are checked against the package's, each grid against its method."""
  for d in config.datasets:
    common.validate_choice(d, DATASETS, "dataset")
  for r in config.regimes:
    common.validate_choice(r, REGIMES, "regime")
  for m in config.methods:
    common.validate_choice(m, METHODS, "method")
  if not config.seeds:
    raise common.ConfigError("need at least one seed")
  common.validate_choice(config.model.arch, ("mlp", "cnn1d"), "model.arch")
  p = {"data": dict(config.data), "model": dict(config.model), "seed": int(config.seed), "data_dir": config.data_dir,
       "tune": bool(config.tune), "representation_checks": bool(config.representation_checks),
       "class_sweep": tuple(int(c) for c in config.class_sweep), "paper_table": bool(config.paper_table),
       "max_wall_s": float(config.max_wall_s),
       "train_config": {"optim": dict(config.optim), "log_every": int(config.log_every),
                        "checkpoint_every": int(config.checkpoint_every), "mesh": dict(config.mesh),
                        "steps_per_dispatch": int(config.steps_per_dispatch)},
       "settings": {m: settings(config, m) for m in ("original", "retrain", *runner.RU_METHODS,
                                                      *config.baselines.keys())}}
  core.make_optimizer(p["train_config"]["optim"])
  for name, hp in p["settings"].items():     # unknown keys fail here, not mid-run
    if name not in runner.RU_METHODS:
      baselines.hyperparameters("retrain" if name == "original" else name, hp)
    elif set(hp) - set(api.DEFAULTS):
      raise common.ConfigError(f"unknown {name} settings {sorted(set(hp) - set(api.DEFAULTS))}")
  p["grids"] = {m: (g["param"], tuple(g["values"])) for m, g in config.grids.items()}
  for m, (param, _) in p["grids"].items():
    if param not in p["settings"].get(m, {}):
      raise common.ConfigError(f"grid of {m!r} varies {param!r}, which is not one of its settings")
  return p


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


def make_task(config, data: dict, regime: str, seed: int, *, validation: bool = False,
              forget_class: int | None = None) -> UnlearningTask:
  """The forget split of a cell; `validation` picks the held-out split used only for tuning;
  `forget_class` (class regime) overrides the class picked by seed."""
  y, yt = np.asarray(data["y_train"]), np.asarray(data["y_test"])
  if regime == "class":
    c = config.data.val_class if validation else config.data.class_forget[seed % len(config.data.class_forget)]
    c = c if forget_class is None else forget_class
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
  if config.model.arch == "cnn1d":
    if dataset != "mnist1d":
      raise common.ConfigError("model.arch=cnn1d is the mnist1d encoder (1-D signals)")
    return model_lib.Conv1DClassifier(num_classes, int(config.model.features[-1]), int(config.model.conv_channels),
                                      int(config.model.conv_layers), int(config.model.conv_kernel))
  return model_lib.MLPClassifier(num_classes, tuple(config.model.features))


# --------------------------------------------------------------------------- runs
def settings(config, name: str) -> dict:
  """A method's settings from the config: config.ru / config.ru_zs, config.baselines.<name>,
  and for the original model and Retrain the shared recipe (config.train at config.optim.lr)."""
  if name in runner.RU_METHODS:
    return dict(config[name])
  if name in ("original", "retrain"):
    return dict(config.train) | {"lr": float(config.optim.lr)}
  return dict(config.baselines[name])


def tune_cell(config, p, data, regime, model, cache) -> tuple[dict[str, dict], dict[str, Any]]:
  """Validation forget split: pick each method's grid value with the smallest Avg. Gap."""
  task = make_task(config, data, regime, 0, validation=True)
  seed, st, tc = p["seed"] + 1000, p["settings"], p["train_config"]
  orig = runner.run_method("original", st["original"], model, None, task, seed=seed, cache=cache, train_config=tc)
  rt = runner.run_method("retrain", st["retrain"], model, orig.params, task, seed=seed, cache=cache, train_config=tc)
  ref = ev.unlearning_metrics(ev.collect_outputs(rt.predict, task), task)
  chosen, log = {}, {}
  for name in config.methods:
    if name not in p["grids"]:
      continue
    param, values = p["grids"][name]
    best, gaps = runner.tune(name, st[name], param, values, model, orig.params, task, ref, seed=seed, cache=cache,
                             train_config=tc)
    if best is not None:
      chosen[name] = {param: best}
      log[name] = {"param": param, "chosen": best,
                   "gaps": {str(k): (v if np.isfinite(v) else None) for k, v in gaps.items()}}
  return chosen, log


def collision(model, params, task: UnlearningTask, cache) -> dict[str, float]:
  """The known failure of the mean target, measured: the frozen head's class and max-probability at
  the mean training representation, and whether that class is a forgotten one (nan when none is)."""
  z_mean = api.batched_apply(api.cached_encoder(model, params, cache), task.x_train).mean(axis=0)
  probs = api.head_probs(model, params, z_mean)
  hit = float(int(np.argmax(probs)) in task.forget_classes) if task.forget_classes else float("nan")
  return {"head_mean_argmax": float(np.argmax(probs)), "head_mean_pmax": float(np.max(probs)),
          "mean_is_forget_class": hit}


def run_cell_seed(config, p, cell, task, model, chosen, seed, cache, orig=None) -> list[dict]:
  """Original, Retrain and every method on one forget split; rows with metrics and costs. `orig`:
  the original model's run when already trained (it does not depend on the forget split)."""
  rows: list[dict] = []
  st, tc = p["settings"], p["train_config"]
  if orig is None:
    orig = runner.run_method("original", st["original"], model, None, task, seed=seed, cache=cache, train_config=tc)
  rt = runner.run_method("retrain", st["retrain"], model, orig.params, task, seed=seed, cache=cache, train_config=tc)
  out_orig, out_rt = ev.collect_outputs(orig.predict, task), ev.collect_outputs(rt.predict, task)
  ref = ev.unlearning_metrics(out_rt, task)
  coll = collision(model, orig.params, task, cache)
  if task.forget_classes:
    coll["forget_class"] = float(task.forget_classes[0])

  def record(method, out, run):
    m = ev.unlearning_metrics(out, task)
    m["FA"] = 100.0 - m["UA"]
    m["avg_gap"] = ev.avg_gap(m, ref)
    m |= coll
    m |= {f"ru_{k}": v for k, v in (run.info or {}).items()}
    m |= ev.divergences(out, out_rt, task)
    if p["representation_checks"]:
      m |= ev.representation_checks(out, out_orig, task, seed=seed)
    cost = {"wall_s": run.wall_s, "steady_s": run.steady_s, "steps": run.num_steps,
            "rte": run.steady_s / rt.steady_s, "rte_wall": run.wall_s / rt.wall_s}
    rows.append(common.row(method=method, dataset=cell, split=int(task.forget_idx.size), seed=seed, metrics=m,
                           cost=cost))
    return m, cost

  record("original", out_orig, orig)
  record("retrain", out_rt, rt)
  print(f"[unlearning] {cell} seed {seed}: |D_f|={task.forget_idx.size} retrain {rt.steady_s:.2f}s "
        f"(wall {rt.wall_s:.2f}s) UA*={ref['UA']:.1f} RA*={ref['RA']:.1f} TA*={ref['TA']:.1f} "
        f"MIA*={ref['MIA']:.1f}", flush=True)
  for method in config.methods:
    try:
      run = runner.run_method(method, st[method] | chosen.get(method, {}), model, orig.params, task, seed=seed,
                              cache=cache, train_config=tc)
    except baselines.NotApplicable as e:
      print(f"[unlearning] {cell} seed {seed} {method}: not applicable ({e})", flush=True)
      continue
    except core.NonFiniteLossError as e:
      print(f"[unlearning] {cell} seed {seed} {method}: DIVERGED ({e})", flush=True)
      rows.append(common.row(method=method, dataset=cell, split=int(task.forget_idx.size), seed=seed,
                             metrics={"diverged": 1.0}, cost={}))
      continue
    m, cost = record(method, ev.collect_outputs(run.predict, task), run)
    print(f"[unlearning] {cell} seed {seed} {method:16s} gap {m['avg_gap']:6.2f} UA {m['UA']:5.1f} "
          f"RA {m['RA']:5.1f} TA {m['TA']:5.1f} MIA {m['MIA']:5.1f} | RTE {100 * cost['rte']:6.2f}% "
          f"steady, {100 * cost['rte_wall']:6.1f}% wall ({run.num_steps} steps)", flush=True)
  return rows


# --------------------------------------------------------------------------- reporting
COLUMNS = [("UA", "UA", 1, "metrics", 1.0), ("RA", "RA", 1, "metrics", 1.0), ("TA", "TA", 1, "metrics", 1.0),
           ("TA_f", "TA_f", 1, "metrics", 1.0), ("MIA", "MIA", 1, "metrics", 1.0),
           ("MIA_AUC", "MIA-AUC", 3, "metrics", 1.0), ("avg_gap", "Avg. Gap", 2, "metrics", 1.0),
           ("rte", "RTE steady %", 2, "cost", 100.0), ("rte_wall", "RTE wall %", 1, "cost", 100.0),
           ("probe_f", "probe_f", 1, "metrics", 1.0), ("CKA_r", "CKA_r", 3, "metrics", 1.0),
           ("JS_t", "JS_t", 3, "metrics", 1.0)]


def _cell_key(c: str) -> tuple:
  parts = c.split("/")
  return parts[0], REGIMES.index(parts[1]), int(parts[2]) if len(parts) > 2 else -1


def _cells(rows: list[dict]) -> list[str]:
  """Cells 'dataset/regime', or 'dataset/class/<c>' in a class sweep, in a stable order."""
  return sorted({r["dataset"] for r in rows}, key=_cell_key)


def _style(method: str) -> dict:
  if method in runner.RU_METHODS:
    return dict(color="C3", marker="*", s=140)
  return dict(color="C0" if method not in runner.ZERO_SHOT else "C2", marker="o", s=40)


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  rows: list[dict] = []
  tuning: dict[str, Any] = {}
  caches: dict[Any, dict] = {}   # compiled steps, shared by every cell and seed with the same model
  t_run = time.perf_counter()
  for dataset in config.datasets:
    data = load_data(config, dataset)
    for regime in config.regimes:
      cell = f"{dataset}/{regime}"
      model = make_model(config, dataset, make_task(config, data, regime, 0).num_classes)
      cache = caches.setdefault(model, {})
      chosen: dict[str, dict] = {}
      if p["tune"]:
        t0 = time.perf_counter()
        chosen, tuning[cell] = tune_cell(config, p, data, regime, model, cache)
        print(f"[unlearning] {cell} tuned in {time.perf_counter() - t0:.1f}s: "
              + ", ".join(f"{k}={list(v.values())[0]:g}" for k, v in chosen.items()), flush=True)
      if regime == "class" and p["class_sweep"]:
        # Every class in turn; the original model depends only on the seed, so it is trained once.
        origs: dict[int, Any] = {}
        for c in p["class_sweep"]:
          if p["max_wall_s"] and time.perf_counter() - t_run > p["max_wall_s"]:
            print(f"[unlearning] {cell}: wall budget {p['max_wall_s']:.0f}s spent; classes from {c} on not run",
                  flush=True)
            break
          for s in config.seeds:
            seed = p["seed"] + s
            task = make_task(config, data, regime, seed, forget_class=c)
            if seed not in origs:
              origs[seed] = runner.run_method("original", p["settings"]["original"], model, None, task, seed=seed,
                                              cache=cache, train_config=p["train_config"])
            rows += run_cell_seed(config, p, f"{cell}/{c}", task, model, chosen, seed, cache, orig=origs[seed])
        continue
      for s in config.seeds:
        seed = p["seed"] + s
        rows += run_cell_seed(config, p, cell, make_task(config, data, regime, seed), model, chosen, seed, cache)
  if jax.process_index() == 0:
    common.write_json(os.path.join(workdir, "tuning.json"), tuning)
    methods = ["original", "retrain", *config.methods]
    with open(os.path.join(workdir, "summary.md"), "w") as f:
      f.write(report.method_cell_table(rows, _cells(rows), methods, COLUMNS, LABELS))
    fig = report.scatter_cells(rows, cells=_cells(rows), x=("cost", "rte", 100.0), y=("metrics", "avg_gap", 1.0),
                               style=_style, labels=LABELS, skip=("original", "retrain"), log_x=True, vline=5.0,
                               xlabel="run time / Retrain run time (%, steady, log)",
                               ylabel="Avg. Gap to Retrain (lower is better)")
    common.save_plot(fig, workdir, "avg_gap_vs_rte.png")
    if p["paper_table"]:
      with open(os.path.join(workdir, "paper_summary.md"), "w") as f:
        f.write(paper_summary(rows, methods))
      common.save_plot(sweep_plot(rows), workdir, "forget_acc_sweep.png")
  return rows


# --------------------------------------------------------------------------- the paper's table and the sweep
PAPER_COLUMNS = [("RA", "Retain acc", 1, "metrics", 1.0), ("FA", "Forget acc", 1, "metrics", 1.0),
                 ("TA_r", "Test acc (retained cl.)", 1, "metrics", 1.0),
                 ("TA_f", "Test acc (forgotten cl.)", 1, "metrics", 1.0), ("MIA_AUC", "MIA AUC", 3, "metrics", 1.0),
                 ("KL_t", "KL to Retrain (test)", 3, "metrics", 1.0), ("JS_t", "JS to Retrain (test)", 3, "metrics", 1.0),
                 ("KL_f", "KL (forget)", 3, "metrics", 1.0), ("CKA_r", "CKA (retain)", 3, "metrics", 1.0),
                 ("steady_s", "time s", 3, "cost", 1.0), ("rte", "time / Retrain %", 2, "cost", 100.0)]


def _mean(rows: list[dict], key: str) -> float:
  v = [r["metrics"].get(key) for r in rows]
  v = [x for x in v if x is not None]
  return float(np.mean(v)) if v else float("nan")


def paper_summary(rows: list[dict], methods: list[str]) -> str:
  """The paper's columns for the first class of the sweep, per dataset; then forget accuracy of
  every method for every forgotten class with the head's class at the mean (the collision)."""
  cells = _cells(rows)
  sweep = [c for c in cells if len(c.split("/")) == 3]
  first = {}
  for c in sweep:
    first.setdefault(c.split("/")[0], c)
  out = ["## The paper's table (fixed settings)\n",
         report.method_cell_table(rows, list(first.values()), methods, PAPER_COLUMNS, LABELS)]
  for ds in sorted({c.split("/")[0] for c in sweep}):
    cs = [c for c in sweep if c.startswith(ds + "/")]
    classes = [c.split("/")[2] for c in cs]
    out += [f"\n### {ds}: forget accuracy (%) per forgotten class, mean over seeds\n",
            "| method | " + " | ".join(classes) + " | mean | colliding cl. | other cl. |",
            "|---" * (len(classes) + 4) + "|"]
    heads = [[r for r in rows if r["dataset"] == c and r["method"] == "original"] for c in cs]
    arg = [_mean(h, "head_mean_argmax") for h in heads]
    pm = [_mean(h, "head_mean_pmax") for h in heads]
    hit = [_mean(h, "mean_is_forget_class") for h in heads]
    out.append("| argmax h(mean z) (p) | " + " | ".join(f"{a:.0f} ({q:.2f})" for a, q in zip(arg, pm)) + " | | | |")
    for m in methods:
      fa = [_mean([r for r in rows if r["dataset"] == c and r["method"] == m], "FA") for c in cs]
      if all(np.isnan(fa)):
        continue
      col = [f for f, h in zip(fa, hit) if h >= 0.5]
      oth = [f for f, h in zip(fa, hit) if h < 0.5]
      agg = lambda v: f"{np.mean(v):.1f}" if v else "-"  # noqa: E731
      out.append(f"| {LABELS.get(m, m)} | " + " | ".join(f"{f:.1f}" for f in fa)
                 + f" | {np.nanmean(fa):.1f} | {agg(col)} | {agg(oth)} |")
  return "\n".join(out) + "\n"


def sweep_plot(rows: list[dict], methods: tuple[str, ...] = ("retrain", "ru", "ru_uniform", "ru_zs")):
  """Forget accuracy per forgotten class for RU, its uniform-target extension and Retrain; the classes
  the head assigns to the mean representation (the collision) are shaded."""
  import matplotlib.pyplot as plt
  sweep = [c for c in _cells(rows) if len(c.split("/")) == 3]
  datasets = sorted({c.split("/")[0] for c in sweep})
  fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(5.5 * max(len(datasets), 1), 3.8), squeeze=False)
  for ax, ds in zip(axes[0], datasets):
    cs = [c for c in sweep if c.startswith(ds + "/")]
    xs = [int(c.split("/")[2]) for c in cs]
    for c, x in zip(cs, xs):
      if _mean([r for r in rows if r["dataset"] == c and r["method"] == "original"], "mean_is_forget_class") >= 0.5:
        ax.axvspan(x - 0.5, x + 0.5, color="0.85", zorder=0)
    for m in methods:
      fa = [_mean([r for r in rows if r["dataset"] == c and r["method"] == m], "FA") for c in cs]
      if not all(np.isnan(fa)):
        ax.plot(xs, fa, marker="o", label=LABELS.get(m, m))
    ax.set(title=f"{ds}: shaded = head's class at the mean z", xlabel="forgotten class", ylabel="forget accuracy %",
           xticks=xs)
    ax.legend(fontsize=7)
  return fig


if __name__ == "__main__":
  common.run_main(run, experiment="unlearning", plan=plan)
