"""Representation Unlearning vs baselines: class, sub-class and random-10 % forgetting.

Config -> data -> forget splits -> `jaxml.unlearning` -> rows. Per cell (dataset/regime, or each
forgotten class of a class sweep): optionally pick one hyper-parameter per method on a validation
forget split (`runner.tune_methods`, by each grid's `score`: Avg. Gap to Retrain or the forgetting bar),
then per test seed train the original model and run Retrain and every method from it
(`runner.compare`: metrics, costs and the collision check of RU's mean target). `tune` tunes every
method with a grid; `ru_val` (RU, its grid value chosen on validation) is tuned always. With
`data.val_holdout` > 0 the validation split lives inside the training rows (its test rows are a
stratified holdout of them), so the choice never reads the test rows. With `class_sweep` (preset
paper_cpu) every listed class is forgotten in turn (cells 'dataset/class/<c>'); `paper_summary.md`
gives the paper's columns and the forget accuracy per class next to the head's class at the mean
(`jaxml.unlearning.report`).
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
from jaxml.unlearning import report as ul_report  # noqa: E402
from jaxml.unlearning.task import UnlearningTask  # noqa: E402

DATASETS = ("digits", "mnist1d", "cifar10")
REGIMES = ul_report.REGIMES
METHODS = tuple(m for m in runner.METHODS if m not in ("retrain", "original"))
# Methods tuned on the validation split even when `tune` is off (their row is defined by it).
VALIDATION_TUNED = ("ru_val",)
# Seed of the stratified holdout of the training rows that serves as the validation test rows.
HOLDOUT_SEED = 7
# The rows of every finished forget split, rewritten after each one (results.json, written by the
# launcher once the run returns, holds the same rows plus wall time and environment).
PARTIAL_ROWS = "rows.partial.json"


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
       "max_wall_s": float(config.max_wall_s), "eval_chunk": int(config.eval_chunk),
       "train_config": {"optim": dict(config.optim), "log_every": int(config.log_every),
                        "checkpoint_every": int(config.checkpoint_every), "mesh": dict(config.mesh),
                        "steps_per_dispatch": int(config.steps_per_dispatch),
                        # XLA:CPU runs convolutions inside a rolled scan ~20x slower: unroll (core.train option `unroll`)
                        "unroll": config.model.arch == "cnn1d"},
       "settings": {m: settings(config, m) for m in ("original", "retrain", *runner.RU_METHODS,
                                                      *config.baselines.keys())}}
  core.make_optimizer(p["train_config"]["optim"])
  for name, hp in p["settings"].items():     # unknown keys fail here, not mid-run
    if name not in runner.RU_METHODS:
      baselines.hyperparameters("retrain" if name == "original" else name, hp)
    elif set(hp) - runner.setting_keys(name):
      raise common.ConfigError(f"unknown {name} settings {sorted(set(hp) - runner.setting_keys(name))}")
  p["grids"] = {m: (g["param"], tuple(g["values"])) for m, g in config.grids.items()}
  # Selection score per grid (evaluate.SCORES); a grid without `score` is chosen by Avg. Gap.
  p["grid_scores"] = {m: g.get("score", "avg_gap") for m, g in config.grids.items()}
  for m, (param, _) in p["grids"].items():
    if param not in p["settings"].get(m, {}):
      raise common.ConfigError(f"grid of {m!r} varies {param!r}, which is not one of its settings")
    common.validate_choice(p["grid_scores"][m], ev.SCORES, f"grid score of {m}")
  p["tuned"] = tuple(m for m in config.methods if m in p["grids"] and (p["tune"] or m in VALIDATION_TUNED))
  for m in VALIDATION_TUNED:
    if m in config.methods and m not in p["grids"]:
      raise common.ConfigError(f"{m} is chosen on validation: it needs a grid (config.grids.{m})")
  if p["eval_chunk"] < 1:
    raise common.ConfigError("eval_chunk is a number of rows (>= 1)")
  if not 0.0 <= p["data"]["val_holdout"] < 1.0:
    raise common.ConfigError("data.val_holdout is a fraction in [0, 1)")
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


def validation_data(data: dict, holdout: float) -> dict:
  """The data of the validation split: with `holdout` > 0 the training rows only, a stratified
  `holdout` fraction of them standing in for the test rows (the test rows are never read); with 0,
  `data` itself (the validation split then reads the test rows, as the `small` preset did)."""
  if not holdout:
    return data
  x, y = np.asarray(data["x_train"]), np.asarray(data["y_train"])
  fit, held = offline._stratified_split(y, holdout, HOLDOUT_SEED)
  return dict(x_train=x[fit], y_train=y[fit], x_test=x[held], y_test=y[held])


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


def _fmt_value(v: Any) -> str:
  """A chosen grid value for the log: numbers in %g, anything else (a transform name) as is."""
  return f"{v:g}" if isinstance(v, (int, float)) else str(v)


def tune_cell(config, p, data, regime, model, cache, *, forget_class: int | None = None,
              orig=None) -> tuple[dict[str, dict], dict[str, Any], Any]:
  """Validation forget split (`validation_data`; in a class sweep the same class as the test split,
  `forget_class`): pick each tuned method's grid value with the smallest score (`p["grid_scores"]`:
  Avg. Gap to Retrain, or the bar score against Retrain and the original model, all on the
  validation split). `orig`: the validation original model when already trained (it does not
  depend on the forget split). Returns (chosen, log, the validation original model's run)."""
  task = make_task(config, validation_data(data, p["data"]["val_holdout"]), regime, 0, validation=True,
                   forget_class=forget_class)
  seed, st, tc = p["seed"] + 1000, p["settings"], p["train_config"]
  if orig is None:
    orig = runner.run_method("original", st["original"], model, None, task, seed=seed, cache=cache, train_config=tc)
  rt = runner.run_method("retrain", st["retrain"], model, orig.params, task, seed=seed, cache=cache, train_config=tc)
  ref = ev.unlearning_metrics(ev.collect_outputs(rt.predict, task, p["eval_chunk"]), task)
  ref_orig = ev.unlearning_metrics(ev.collect_outputs(orig.predict, task, p["eval_chunk"]), task)
  grids = {m: p["grids"][m] for m in p["tuned"]}
  scores = {m: ev.scorer(p["grid_scores"][m], ref, ref_orig) for m in grids}
  chosen, log = runner.tune_methods(grids, st, model, orig.params, task, ref, seed=seed, cache=cache,
                                    train_config=tc, scores=scores, eval_chunk=p["eval_chunk"])
  for m in log:
    log[m]["score"] = p["grid_scores"][m]
  return chosen, log, orig


def run_cell_seed(config, p, cell, task, model, chosen, seed, cache, orig=None) -> list[dict]:
  """Original, Retrain and every method on one forget split (`runner.compare`); rows with metrics and
  costs. `orig`: the original model's run when already trained (it does not depend on the split)."""
  st, tc = p["settings"], p["train_config"]
  if orig is None:
    orig = runner.run_method("original", st["original"], model, None, task, seed=seed, cache=cache, train_config=tc)
  sts = {"retrain": st["retrain"]} | {m: st[m] | chosen.get(m, {}) for m in config.methods}
  log = lambda s: print(f"[unlearning] {cell} seed {seed}: {s}", flush=True)  # noqa: E731
  out = runner.compare(config.methods, sts, model, orig, task, seed=seed,
                       representation_checks=p["representation_checks"], cache=cache, train_config=tc, log=log,
                       eval_chunk=p["eval_chunk"])
  return [common.row(method=m, dataset=cell, split=int(task.forget_idx.size), seed=seed, metrics=metrics, cost=cost)
          for m, metrics, cost in out]


def _style(method: str) -> dict:
  if method in runner.RU_METHODS:
    return dict(color="C3", marker="*", s=140)
  return dict(color="C0" if method not in runner.ZERO_SHOT else "C2", marker="o", s=40)


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  methods = ["original", "retrain", *config.methods]
  check_reports(methods, paper_table=p["paper_table"])
  partial = os.path.join(workdir, PARTIAL_ROWS)
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
      val_orig: list = [None]   # the validation original model, trained once per cell

      def tune(name: str, forget_class: int | None) -> dict[str, dict]:
        if not p["tuned"]:
          return {}
        t0 = time.perf_counter()
        chosen, tuning[name], val_orig[0] = tune_cell(config, p, data, regime, model, cache,
                                                      forget_class=forget_class, orig=val_orig[0])
        tuning[name]["wall_s"] = time.perf_counter() - t0   # the choice's cost (not in the rows' costs)
        print(f"[unlearning] {name} tuned in {tuning[name]['wall_s']:.1f}s: "
              + ", ".join(f"{k}={_fmt_value(list(v.values())[0])}" for k, v in chosen.items()), flush=True)
        return chosen

      sweep = p["class_sweep"] if regime == "class" else ()
      chosen = {} if sweep else tune(cell, None)
      # Class sweep: every listed class in turn (tuned per class); the original model depends only on
      # the seed (trained once).
      origs: dict[int, Any] = {}
      for c in sweep or (None,):
        if c is not None and p["max_wall_s"] and time.perf_counter() - t_run > p["max_wall_s"]:
          print(f"[unlearning] {cell}: wall budget {p['max_wall_s']:.0f}s spent; classes from {c} on not run",
                flush=True)
          break
        if c is not None:
          chosen = tune(f"{cell}/{c}", c)
        for s in config.seeds:
          seed = p["seed"] + s
          task = make_task(config, data, regime, seed, forget_class=c)
          if c is not None and seed not in origs:
            origs[seed] = runner.run_method("original", p["settings"]["original"], model, None, task, seed=seed,
                                            cache=cache, train_config=p["train_config"])
          rows += run_cell_seed(config, p, cell if c is None else f"{cell}/{c}", task, model, chosen, seed, cache,
                                orig=origs.get(seed))
          if jax.process_index() == 0:   # every finished split on disk: a crash or kill later keeps them
            common.write_json(partial, {"experiment": "unlearning", "rows": rows})
  if jax.process_index() == 0:
    common.write_json(os.path.join(workdir, "tuning.json"), tuning)
    write_reports(rows, workdir, methods, paper_table=p["paper_table"])
  return rows


def merge_runs(workdirs: list[str], out: str, *, paper_table: bool = True) -> list[dict]:
  """One report over several runs (e.g. a class sweep split into jobs by class): the rows of each
  workdir's results.json (or rows.partial.json when the run did not finish), concatenated, written
  to `out`/results.json (wall_s = the sum over finished runs; `unfinished` lists the others) with
  every report. A (cell, method, seed) in two runs is an error.

    python -c "from experiments import unlearning as u; u.merge_runs(['runs/a', 'runs/b'], 'runs/ab')"
  """
  rows, results, unfinished = common.read_runs(workdirs, lambda r: (r["dataset"], r["method"], r["seed"]),
                                               fallback=PARTIAL_ROWS)
  wall = sum(float(res.get("wall_s", 0.0)) for res in results)
  methods = list(dict.fromkeys(r["method"] for r in rows))
  methods = ["original", "retrain"] + [m for m in methods if m not in ("original", "retrain")]
  os.makedirs(out, exist_ok=True)
  common.write_json(os.path.join(out, "results.json"), {"experiment": "unlearning", "rows": rows, "wall_s": wall,
                                                        "merged_from": list(workdirs), "unfinished": unfinished})
  write_reports(rows, out, methods, paper_table=paper_table)
  return rows


def write_reports(rows: list[dict], workdir: str, methods: list[str], *, paper_table: bool) -> None:
  """summary.md and avg_gap_vs_rte.png; with `paper_table` also paper_summary.md and forget_acc_sweep.png."""
  with open(os.path.join(workdir, "summary.md"), "w") as f:
    if ul_report.regime_cells(rows):   # our stricter table: RU against the best baseline per cell first
      f.write("## Avg. Gap: RU against the best baseline per cell\n\n" + gap_summary(rows, methods) + "\n")
    f.write(report.method_cell_table(rows, ul_report.cells(rows), methods, ul_report.COLUMNS, ul_report.LABELS))
  common.save_plot(_gap_plot(rows), workdir, "avg_gap_vs_rte.png")
  if paper_table:
    with open(os.path.join(workdir, "paper_summary.md"), "w") as f:
      f.write(paper_summary(rows, methods))
    common.save_plot(sweep_plot(rows), workdir, "forget_acc_sweep.png")


def gap_summary(rows: list[dict], methods: list[str]) -> str:
  """`report.gap_summary` with the run's methods split into trained baselines and zero-shot ones."""
  return ul_report.gap_summary(rows, [m for m in methods if m in baselines.BASELINES and m != "retrain"],
                               [m for m in methods if m in baselines.ZERO_SHOT_BASELINES])


def _gap_plot(rows: list[dict]):
  return report.scatter_cells(rows, cells=ul_report.cells(rows), x=("cost", "rte", 100.0),
                              y=("metrics", "avg_gap", 1.0), style=_style, labels=ul_report.LABELS,
                              skip=("original", "retrain"), log_x=True, vline=5.0,
                              xlabel="run time / Retrain run time (%, steady, log)",
                              ylabel="Avg. Gap to Retrain (lower is better)")


def synthetic_rows(methods: list[str], *, paper_table: bool) -> list[dict]:
  """Rows with every reported metric and cost key (two forgotten classes when `paper_table`), for
  rendering the reports before any training (`check_reports`)."""
  keys = {c[0] for c in ul_report.COLUMNS + ul_report.PAPER_COLUMNS}
  rows = []
  for i, c in enumerate((0, 1) if paper_table else (None,)):
    coll = {"head_mean_argmax": 1.0, "head_mean_pmax": 0.5, "forget_class": float(c or 0),
            "mean_is_forget_class": float(c == 1), "retain_knn_forget": 5.0}
    for j, m in enumerate(methods):
      metrics = {k: float(10 * i + j) for k in keys} | coll
      cost = {k: 1.0 + j for k in ("rte", "rte_wall", "steady_s", "wall_s", "steps")}
      rows.append(common.row(method=m, dataset="digits/class" + ("" if c is None else f"/{c}"), seed=0,
                             metrics={k: v for k, v in metrics.items() if k not in ("rte", "rte_wall", "steady_s")},
                             cost=cost))
  return rows


def check_reports(methods: list[str], *, paper_table: bool) -> None:
  """Renders every report of a run from synthetic rows, so a broken report fails in seconds, before
  training, not after it (a run that crashed there lost its results.json)."""
  import matplotlib.pyplot as plt
  rows = synthetic_rows(methods, paper_table=paper_table)
  report.method_cell_table(rows, ul_report.cells(rows), methods, ul_report.COLUMNS, ul_report.LABELS)
  gap_summary(rows, methods)
  figs = [_gap_plot(rows)]
  if paper_table:
    paper_summary(rows, methods)
    figs.append(sweep_plot(rows))
  for fig in figs:
    plt.close(fig)


# --------------------------------------------------------------------------- the paper's table and the sweep
def paper_summary(rows: list[dict], methods: list[str]) -> str:
  """The paper's columns for the first class of the sweep and over all its classes, per dataset; the
  forget accuracy of every method per forgotten class next to the head's class at the mean (the
  collision); which classes meet the forgetting bar (`report.must_reach`)."""
  table = report.method_cell_table(rows, ul_report.first_sweep_cells(rows), methods, ul_report.PAPER_COLUMNS,
                                   ul_report.LABELS)
  head = "## The paper's table (fixed settings)\n"
  pooled, cells = ul_report.pooled_sweep(rows)
  table += report.method_cell_table(pooled, cells, methods, ul_report.PAPER_COLUMNS, ul_report.LABELS)
  return "\n".join([head, table, ul_report.forget_acc_tables(rows, methods),
                    ul_report.must_reach_table(rows, [m for m in methods if m != "original"])]) + "\n"


def sweep_plot(rows: list[dict], methods: tuple[str, ...] = ("retrain", "ru", "ru_val", "ru_uniform", "ru_zs",
                                                          "ru_zs_uniform", "ru_zs_anchor", "emmn", "gkt")):
  """Per forgotten class, for Retrain, the RU rows and the zero-shot baselines: forget accuracy (top; the
  classes the head assigns to the mean representation, the collision, shaded) and test accuracy on the
  retained classes (bottom, the original's dashed), the two sides of the forgetting bar."""
  import matplotlib.pyplot as plt
  datasets = sorted({c.split("/")[0] for c in ul_report.sweep_cells(rows)})
  n = max(len(datasets), 1)
  fig, axes = plt.subplots(2, n, figsize=(5.5 * n, 7.6), squeeze=False)
  panels = (("FA", "forget accuracy %", methods), ("TA_r", "test accuracy, retained classes %", ("original",) + methods))
  for j, ds in enumerate(datasets):
    for ax, (key, ylabel, ms) in zip(axes[:, j], panels):
      xs, hit, vals = ul_report.sweep_series(rows, ds, ms, key)
      for x in [x for x, h in zip(xs, hit) if h]:
        ax.axvspan(x - 0.5, x + 0.5, color="0.85", zorder=0)
      for m, v in vals.items():
        style = dict(color="k", linestyle="--") if m == "original" else dict(marker="o")
        ax.plot(xs, v, label=ul_report.LABELS.get(m, m), **style)
      ax.set(xlabel="forgotten class", ylabel=ylabel, xticks=xs)
      ax.legend(fontsize=6)
    axes[0, j].set_title(f"{ds}: shaded = head's class at the mean z")
  fig.tight_layout()
  return fig


if __name__ == "__main__":
  common.run_main(run, experiment="unlearning", plan=plan)
