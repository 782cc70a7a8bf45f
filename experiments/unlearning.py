"""Representation Unlearning vs baselines: class, sub-class and random-10 % forgetting.

Per cell, settings are chosen on a validation forget split (`runner.choose_settings`), then per test seed
the original model is trained and Retrain and every method run from it (`runner.compare`)."""

import os
import time
from typing import Any

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")

from experiments import common, report  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import offline, unlearning_splits as splits  # noqa: E402
from jaxml.unlearning import runner  # noqa: E402
from jaxml.unlearning import model as model_lib  # noqa: E402
from jaxml.unlearning import report as ul_report  # noqa: E402
from jaxml.unlearning.task import UnlearningTask  # noqa: E402

DATASETS = ("digits", "mnist1d", "cifar10")
METHODS = tuple(m for m in runner.METHODS if m not in ("retrain", "original"))
VALIDATION_TUNED = ("ru_val",)   # tuned on the validation split even when `tune` is off (their row is defined so)
HOLDOUT_SEED = 7   # of the stratified holdout of training rows that serves as the validation test rows
# Every finished forget split's rows, rewritten after each (results.json holds them once the run returns).
PARTIAL_ROWS = "rows.partial.json"


def plan(config) -> dict:
  """Validates names and reads every config key (before anything is written): each method's
  settings are checked against the package's, each grid against its method."""
  names = ((config.datasets, DATASETS, "dataset"), (config.regimes, ul_report.REGIMES, "regime"),
           (config.methods, METHODS, "method"), ((config.model.arch,), ("mlp", "cnn1d"), "model.arch"))
  for values, allowed, what in names:
    for v in values:
      common.validate_choice(v, allowed, what)
  if not config.seeds:
    raise common.ConfigError("need at least one seed")
  p = {"data": dict(config.data), "model": dict(config.model), "data_dir": config.data_dir, "seed": config.seed,
       "tune": config.tune, "class_sweep": tuple(config.class_sweep),
       "representation_checks": config.representation_checks, "paper_table": config.paper_table,
       "max_wall_s": config.max_wall_s, "eval_chunk": config.eval_chunk,
       # XLA:CPU runs convolutions inside a rolled scan ~20x slower: unroll (core.train option `unroll`)
       "train_config": core.loop_config(config, unroll=config.model.arch == "cnn1d"),
       "settings": {m: settings(config, m) for m in ("original", "retrain", *runner.RU_METHODS, *config.baselines)}}
  core.make_optimizer(p["train_config"]["optim"])
  for name, hp in p["settings"].items():     # unknown keys fail here, not mid-run
    runner.check_settings(name, hp)
  p["grids"] = {m: (g["param"], tuple(g["values"])) for m, g in config.grids.items()}
  p["grid_scores"] = {m: g.get("score", "avg_gap") for m, g in config.grids.items()}   # evaluate.SCORES
  for m, (param, _) in p["grids"].items():
    runner.check_grid(m, param, p["grid_scores"][m], p["settings"].get(m, {}))
  p["tuned"] = tuple(m for m in config.methods if m in p["grids"] and (p["tune"] or m in VALIDATION_TUNED))
  for m in sorted(set(VALIDATION_TUNED) & set(config.methods) - set(p["grids"])):
    raise common.ConfigError(f"{m} is chosen on validation: it needs a grid (config.grids.{m})")
  if p["eval_chunk"] < 1:
    raise common.ConfigError("eval_chunk is a number of rows (>= 1)")
  if not 0.0 <= p["data"]["val_holdout"] < 1.0:
    raise common.ConfigError("data.val_holdout is a fraction in [0, 1)")
  return p


def load_data(config, dataset: str) -> dict[str, Any]:
  """{x_train, y_train, x_test, y_test} numpy, the first `data.limit_train` / `limit_test` rows (0: all)."""
  dc = config.data
  if dataset == "cifar10":
    from jaxml.data.tfds import load_tfds_arrays
    d = {f"{k}_{part}": v for part, split, limit in (("train", dc.tfds_split_train, dc.limit_train),
                                                      ("test", dc.tfds_split_test, dc.limit_test))
         for k, v in load_tfds_arrays("cifar10", split=split, batch_size=32, limit=limit,
                                      data_dir=config.data_dir).items()}
  elif dataset == "digits":
    d = offline.load_digits(seed=0, test_fraction=dc.digits_test_fraction)
  else:
    d = offline.load_mnist1d(seed=0)
  lt, le = dc.limit_train or None, dc.limit_test or None
  return {k: v[:lt] if k.endswith("_train") else v[:le] for k, v in d.items()}


def validation_data(data: dict, holdout: float) -> dict:
  """The validation split's data: with `holdout` > 0 the training rows only, a stratified `holdout` fraction
  of them as its test rows (the test rows are never read); with 0, `data` itself."""
  if not holdout:
    return data
  x, y = np.asarray(data["x_train"]), np.asarray(data["y_train"])
  fit, held = offline._stratified_split(y, holdout, HOLDOUT_SEED)
  return dict(x_train=x[fit], y_train=y[fit], x_test=x[held], y_test=y[held])


def make_task(config, data: dict, regime: str, seed: int, *, validation: bool = False,
              forget_class: int | None = None) -> UnlearningTask:
  """The forget split of a cell; `validation` picks the held-out split used only for tuning;
  `forget_class` (class regime) overrides the class picked by seed."""
  y, yt, dc = np.asarray(data["y_train"]), np.asarray(data["y_test"]), config.data
  y_test, classes = yt, 10
  if regime == "class":
    c = dc.val_class if validation else dc.class_forget[seed % len(dc.class_forget)]
    sp = splits.class_split(y, c if forget_class is None else forget_class)
    test_mask = np.isin(yt, sp.forget_classes)
  elif regime == "subclass":
    sub = dc.val_subclass if validation else dc.subclass_forget
    sp, y_test = splits.subclass_split(y, sub, dc.subclass_groups), splits.super_labels(yt, dc.subclass_groups)
    classes, test_mask = len(dc.subclass_groups), yt == sub
  else:
    sp = splits.random_split(y, dc.random_fraction, seed=10_000 + seed if validation else seed)
    test_mask = np.zeros(len(yt), bool)
  return UnlearningTask(data["x_train"], sp.y, sp.retain_idx, sp.forget_idx, data["x_test"], y_test, classes,
                        sp.forget_classes, test_mask, y)


def make_model(config, dataset: str, num_classes: int):
  if config.model.arch == "cnn1d" and dataset != "mnist1d":
    raise common.ConfigError("model.arch=cnn1d is the mnist1d encoder (1-D signals)")
  return model_lib.make_classifier("resnet" if dataset == "cifar10" else config.model.arch, num_classes,
                                   **{k: v for k, v in config.model.items() if k != "arch"})


def settings(config, name: str) -> dict:
  """A method's settings from the config: config.<ru method>, config.baselines.<name>, and for the
  original model and Retrain the shared recipe (config.train at config.optim.lr)."""
  if name in runner.RU_METHODS:
    return dict(config[name])
  if name in ("original", "retrain"):
    return dict(config.train) | {"lr": config.optim.lr}
  return dict(config.baselines[name])


def tune_cell(config, p, data, regime, model, cache, *, forget_class: int | None = None,
              orig=None) -> tuple[dict[str, dict], dict[str, Any], Any]:
  """`runner.choose_settings` on the validation forget split (`validation_data`; in a sweep the test split's
  class); `orig`: the validation original when already trained. Returns (chosen, log, its original)."""
  task = make_task(config, validation_data(data, p["data"]["val_holdout"]), regime, 0, validation=True,
                   forget_class=forget_class)
  return runner.choose_settings({m: p["grids"][m] for m in p["tuned"]}, p["grid_scores"], p["settings"], model, task,
                                seed=p["seed"] + 1000, cache=cache, train_config=p["train_config"],
                                eval_chunk=p["eval_chunk"], orig=orig)


def _run_cell(config, p, data, dataset: str, regime: str, caches: dict, rows: list, tuning: dict, t_run: float,
              workdir: str) -> None:
  """One 'dataset/regime' cell, or each class of a class sweep in turn (tuned per class): rows appended to
  `rows`, all written to PARTIAL_ROWS after every split, so a crash or kill later keeps them."""
  cell = f"{dataset}/{regime}"
  model = make_model(config, dataset, make_task(config, data, regime, 0).num_classes)
  cache = caches.setdefault(model, {})   # compiled steps, shared by every cell and seed with the same model
  st, tc = p["settings"], p["train_config"]
  val_orig, origs = None, {}
  for c in (p["class_sweep"] if regime == "class" else ()) or (None,):
    if c is not None and p["max_wall_s"] and time.perf_counter() - t_run > p["max_wall_s"]:
      print(f"[unlearning] {cell}: wall budget {p['max_wall_s']:.0f}s spent; classes from {c} on not run", flush=True)
      break
    name, chosen = cell if c is None else f"{cell}/{c}", {}
    if p["tuned"]:
      t0 = time.perf_counter()
      chosen, tuning[name], val_orig = tune_cell(config, p, data, regime, model, cache, forget_class=c, orig=val_orig)
      tuning[name]["wall_s"] = time.perf_counter() - t0   # the choice's cost (not in the rows' costs)
      print(f"[unlearning] {name} tuned in {tuning[name]['wall_s']:.1f}s: "
            + ", ".join(f"{k}={ul_report.fmt_value(list(v.values())[0])}" for k, v in chosen.items()), flush=True)
    for s in config.seeds:
      seed = p["seed"] + s
      task = make_task(config, data, regime, seed, forget_class=c)
      if seed not in origs:   # the original depends only on the seed (trained once per sweep)
        origs[seed] = runner.run_method("original", st["original"], model, None, task, seed=seed, cache=cache,
                                        train_config=tc)
      sts = {"retrain": st["retrain"]} | {m: st[m] | chosen.get(m, {}) for m in config.methods}
      log = lambda s, n=name, sd=seed: print(f"[unlearning] {n} seed {sd}: {s}", flush=True)  # noqa: E731
      out = runner.compare(config.methods, sts, model, origs[seed], task, seed=seed, cache=cache, train_config=tc,
                           log=log, representation_checks=p["representation_checks"], eval_chunk=p["eval_chunk"])
      rows += [common.row(method=m, dataset=name, split=task.forget_idx.size, seed=seed, metrics=metrics, cost=cost)
               for m, metrics, cost in out]
      if jax.process_index() == 0:
        common.write_json(os.path.join(workdir, PARTIAL_ROWS), {"experiment": "unlearning", "rows": rows})


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  methods = ["original", "retrain", *config.methods]
  check_reports(methods, paper_table=p["paper_table"])
  rows, tuning, caches, t_run = [], {}, {}, time.perf_counter()
  for dataset in config.datasets:
    data = load_data(config, dataset)
    for regime in config.regimes:
      _run_cell(config, p, data, dataset, regime, caches, rows, tuning, t_run, workdir)
  if jax.process_index() == 0:
    common.write_json(os.path.join(workdir, "tuning.json"), tuning)
    write_reports(rows, workdir, methods, paper_table=p["paper_table"])
  return rows


def merge_runs(workdirs: list[str], out: str, *, paper_table: bool = True) -> list[dict]:
  """One report over several runs (e.g. a class sweep split into jobs): their rows (PARTIAL_ROWS for an
  unfinished run) in `out`/results.json with every report; a (cell, method, seed) in two runs is an error."""
  rows, results, unfinished = common.read_runs(workdirs, lambda r: (r["dataset"], r["method"], r["seed"]),
                                               fallback=PARTIAL_ROWS)
  methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m not in ("original", "retrain")]
  os.makedirs(out, exist_ok=True)
  common.write_json(os.path.join(out, "results.json"), {
      "experiment": "unlearning", "rows": rows, "wall_s": sum(float(res.get("wall_s", 0.0)) for res in results),
      "merged_from": list(workdirs), "unfinished": unfinished})
  write_reports(rows, out, ["original", "retrain", *methods], paper_table=paper_table)
  return rows


def reports(rows: list[dict], methods: list[str], *, paper_table: bool) -> dict[str, Any]:
  """Every report of a run, {file name: markdown text or matplotlib figure}: summary.md, avg_gap_vs_rte.png
  and, with `paper_table`, paper_summary.md and forget_acc_sweep.png (`jaxml.unlearning.report`)."""
  out = {"summary.md": ul_report.summary(rows, methods),
         "avg_gap_vs_rte.png": report.scatter_cells(rows, cells=ul_report.cells(rows), **ul_report.GAP_PLOT)}
  if paper_table:
    out["paper_summary.md"] = ul_report.paper_summary(rows, methods)
    out["forget_acc_sweep.png"] = ul_report.sweep_plot(rows)
  return out


def write_reports(rows: list[dict], workdir: str, methods: list[str], *, paper_table: bool) -> None:
  for name, value in reports(rows, methods, paper_table=paper_table).items():
    if isinstance(value, str):
      with open(os.path.join(workdir, name), "w") as f:
        f.write(value)
    else:
      common.save_plot(value, workdir, name)


def check_reports(methods: list[str], *, paper_table: bool) -> None:
  """Renders every report from `report.synthetic_rows`, so a broken report fails in seconds, before
  training, not after it (a run that crashed there lost its results.json)."""
  import matplotlib.pyplot as plt
  for value in reports(ul_report.synthetic_rows(methods, paper_table=paper_table), methods,
                       paper_table=paper_table).values():
    if not isinstance(value, str):
      plt.close(value)


if __name__ == "__main__":
  common.run_main(run, experiment="unlearning", plan=plan)
