"""X-EviProbe and its guarded extension on frozen GNNs: OOD and misclassification detection under shifts.

Per dataset x split x init: train the backbone (and ensemble members) through core.train with validation
selection (resumable checkpoints), fit every post-hoc method on the clean graph (`jaxml.eviprobe.pipeline`),
then score every shift setting (and any `graph_shift.ShiftFn` passed as run(shifts={name: fn})).
Rows: method x "<dataset>:<setting>" x split x init; summary.md holds the verdicts (`jaxml.eviprobe.summary`)."""

import os
import time
from typing import Any, Mapping

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")

from experiments import common, report  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import csbm, graph_shift, offline  # noqa: E402
from jaxml.eviprobe import backbone as bb  # noqa: E402
from jaxml.eviprobe import pipeline as pl  # noqa: E402
from jaxml.eviprobe import summary  # noqa: E402
from jaxml.eviprobe.summary import cell_verdict, guard_choice, misc_choice, validation_choice  # noqa: E402

DATASETS = ("cora_ml", "citeseer", "cora", "csbm", "npz")
# node-level shifts beyond the GPN protocol (graph_shift.SHIFT_BUILDERS), used by the validation family
MORE_SHIFTS = ("scale_up", "scale_down", "mix", "zero", "rewire")
SETTINGS = ("loc", "normal", "bernoulli", "normal_isolated", "bernoulli_isolated") + MORE_SHIFTS
BASELINES, ABLATIONS, OURS, EXT = pl.BASELINES, pl.ABLATIONS, pl.OURS, pl.EXTENSION


def plan(config, shifts: Mapping[str, graph_shift.ShiftFn] | None = None) -> dict:
  """Validates names and reads every config key (before anything is written); returns the
  sections the package reads as plain dicts."""
  data = dict(config.data) | {"csbm": dict(config.data.csbm),
                              "csbm_variants": tuple(tuple(v) for v in config.data.csbm_variants)}
  for d in data["datasets"]:
    common.validate_choice(d, DATASETS + tuple(f"csbm-{i}" for i in range(len(data["csbm_variants"]))), "dataset")
  if "npz" in data["datasets"] and not data["path"]:
    raise common.ConfigError("dataset 'npz' needs data.path (a gnn-benchmark npz file)")
  common.validate_choice(data["features"], ("dense", "sparse"), "feature format")
  for names, allowed, what in ((config.settings, SETTINGS + tuple(shifts or {}), "setting"),
                               (config.baselines, BASELINES, "baseline"), (config.ablations, ABLATIONS, "ablation")):
    for name in names:
      common.validate_choice(name, allowed, what)
  backbone = dict(config.backbone)
  common.validate_choice(backbone["name"], bb.BACKBONES, "backbone")
  posthoc = {k: dict(config[k]) for k in ("eviprobe", "extension", "gnnsafe", "gkde", "epn", "gpn")}
  posthoc.update(baselines=tuple(config.baselines), ablations=tuple(config.ablations),
                 mc_samples=int(config.mc_samples))
  pl.probe_configs(posthoc)
  train = dict(config.train)
  core.make_optimizer(dict(config.optim))
  num_members = int(config.ensemble_size) if {"ensemble", "ensemble_var"} & set(config.baselines) else 1
  if num_members > 1 and float(config.optim.clip_norm) > 0:
    # one global norm over the stack would couple the members: member 0 would no longer be the backbone trained alone
    raise common.ConfigError("optim.clip_norm > 0 clips the whole ensemble stack at once; run the ensemble baselines "
                             "with clip_norm = 0 (or without them)")
  return dict(data=data, backbone=backbone, posthoc=posthoc, train=train, shift=dict(config.shift),
              data_dir=config.data_dir, seed=int(config.seed), ensemble_size=int(config.ensemble_size),
              num_members=num_members, settings=tuple(config.settings), isolated_datasets=tuple(config.isolated_datasets),
              splits=tuple(config.splits), inits=tuple(config.inits), progress=bool(config.progress),
              core_train=train_config(config))


def load(config, name: str) -> dict:
  if name == "csbm":
    return csbm.make_csbm(**dict(config.data.csbm))
  if name.startswith("csbm-"):      # a validation-family graph: data.csbm with one variant's seed, K, F
    seed, k, f = config.data.csbm_variants[int(name.split("-")[1])]
    return csbm.make_csbm(**(dict(config.data.csbm) | dict(seed=seed, num_classes=k, num_features=f)))
  if name == "npz":
    return offline.load_graph(path=config.data.path, root=config.data_dir)
  fmt = "npz" if name == "cora_ml" else "planetoid"   # GPN's CiteSeer is planetoid CiteSeer
  return offline.load_graph(name, root=config.data_dir, fmt=fmt)


def _features(config, x: np.ndarray) -> dict:
  return bb.sparse_features(x) if config.data.features == "sparse" else {"x": x}


def train_config(config) -> dict:
  """What core.train reads: the optimizer (config.optim), one full-batch step per epoch."""
  return dict(optim=dict(config.optim), num_steps=int(config.train.max_epochs), eval_every=int(config.train.eval_every),
              log_every=int(config.log_every), checkpoint_every=int(config.checkpoint_every), mesh=dict(config.mesh),
              steps_per_dispatch=int(config.steps_per_dispatch))


def train_backbone(config, model, batch: Mapping[str, np.ndarray],
                   **kwargs: Any) -> tuple[core.TrainResult, Any, Any, float]:
  """bb.train_backbone with the config's optimizer, loop, weight decay, patience and progress."""
  return bb.train_backbone(model, batch, train_config(config), l2=float(config.train.l2),
                           patience=int(config.train.patience), progress=bool(config.progress), **kwargs)


def shift_functions(config, shifts: Mapping[str, graph_shift.ShiftFn] | None) -> dict[str, graph_shift.ShiftFn]:
  """The built-in feature shifts with the config's budget / scale / p, plus the user's."""
  s = config.shift
  builtin = {k: graph_shift.feature_shift(k, budget=float(s.budget), scale=float(s.normal_scale),
                                          p=float(s.bernoulli_p)) for k in graph_shift.SHIFT_KINDS}
  kwargs = {"scale_up": dict(factor=float(s.scale_up)), "scale_down": dict(factor=float(s.scale_down))}
  more = {name: graph_shift.SHIFT_BUILDERS[name.split("_")[0]](budget=float(s.budget), **kwargs.get(name, {}))
          for name in MORE_SHIFTS}
  return builtin | more | dict(shifts or {})


def merge(workdirs: list[str], out: str, baselines: tuple[str, ...]) -> list[dict]:
  """Concatenates the rows of several runs' results.json (each (method, cell, split, init) at most once),
  writes <out>/results.json and <out>/summary.md (`summarise`); returns the rows."""
  rows, _, _ = common.read_runs(workdirs, lambda r: (r["method"], r["dataset"], r["split"], r["seed"]))
  os.makedirs(out, exist_ok=True)
  common.write_json(os.path.join(out, "results.json"), {"experiment": "eviprobe_graphs", "merged_from": list(workdirs),
                                                        "rows": rows})
  summarise(rows, out, baselines)
  return rows


def summarise(rows: list[dict], workdir: str, baselines: tuple[str, ...]) -> str:
  """Per-cell verdicts of X-EviProbe and the extension, tables per setting, sign tests, calibration, cost, the
  validation choices: returned and written to <workdir>/summary.md, with the bar plot."""
  methods = [OURS, EXT, *baselines] + sorted({r["method"] for r in rows} - {OURS, EXT, *baselines})
  settings = tuple(dict.fromkeys(SETTINGS + tuple(sorted({r["dataset"].split(":")[1] for r in rows}))))
  present = [s for s in settings if any(r["dataset"].endswith(":" + s) for r in rows)]
  cal = [s for s in present if not s.endswith("_isolated")]
  text = [cell_verdict(rows, baselines, ours=m)[0] for m in (OURS, EXT) if any(r["method"] == m for r in rows)]
  text += [report.ours_vs_best(rows, ours=OURS, baselines=baselines, settings=settings),
           report.mean_table(rows, methods, cal, lambda r: r["dataset"].split(":")[1], ("acc", "ece", "brier"),
                             title="\n### Accuracy / ECE (10 bins) / Brier on ID test nodes, mean over datasets x "
                                   "splits\n"),
           report.cost_medians(rows, [OURS, EXT, *baselines], ("fit_s", "score_s", "train_s"),
                               keep=lambda r: not r["dataset"].endswith("_isolated"),
                               title="\n### Cost per method (median over runs; warm jitted calls, seconds)\n")]
  for choose, grid in ((validation_choice, pl.GRID), (misc_choice, pl.MISC_GRID), (guard_choice, pl.GUARD_GRID)):
    best, table = choose(rows)
    if best:
      text.append(table + f"\n\nchosen: {best} = {grid[best]}\n")
  common.save_plot(report.bar_panels(rows, panels=present, methods=[OURS, EXT, *baselines], highlight=OURS),
                   workdir, "ood_auroc.png")
  markdown = "\n".join(text)
  with open(os.path.join(workdir, "summary.md"), "w") as f:
    f.write(markdown + "\n")
  return markdown


def _poisoned(config, labels_all, k_all, masks, poison):
  """(labels, K, ID test mask, train mask, val mask, LOC info or None) of one poisoning."""
  if poison == "loc":
    info = graph_shift.leave_out_classes(labels_all, k_all, masks, fraction=float(config.shift.loc_fraction))
    return info["labels"], info["num_classes"], info["test_mask"], info["train_mask"], info["val_mask"], info
  return labels_all, k_all, masks["test_mask"], masks["train_mask"], masks["val_mask"], None


def _setting_rows(config, posthoc, shift_fns, fitted, model, params, stacked, batch, g, masks, info, id_test, setting,
                  split, rng, train_s) -> list[tuple[str, dict, dict]]:
  """(method, metrics, cost) of every method in one setting of one trained backbone."""
  if setting.endswith("_isolated"):
    if config.data.features != "dense":
      raise common.ConfigError("isolated settings need data.features='dense'")
    nodes = graph_shift.isolated_nodes(masks["test_mask"], int(config.shift.isolated_nodes), split)
    sh = config.shift
    rows = graph_shift.perturb_features(g["features"], nodes, setting.split("_")[0], split,
                                        scale=float(sh.normal_scale), p=float(sh.bernoulli_p))[nodes]
    iso = pl.isolated_scores(posthoc, fitted, model, params, batch, nodes, rows)
    clean = pl.score_all(posthoc, fitted, model, params, batch, rng=rng, stacked=stacked)
    return summary.isolated_rows(iso, clean, np.flatnonzero(id_test))
  if setting == "loc":
    b, ood_nodes, id_nodes = batch, np.flatnonzero(info["ood_test_mask"]), np.flatnonzero(id_test)
  else:
    shifted = graph_shift.apply_shift(shift_fns[setting], g["features"],
                                      dict(masks, edges=g["edges"], labels=batch["labels"]), split)
    b = dict(batch, **_features(config, shifted["features"]), edges=shifted["graph"]["edges"])
    ood_nodes = np.flatnonzero(masks["test_mask"] & shifted["mask"])
    id_nodes = np.flatnonzero(masks["test_mask"] & ~shifted["mask"])
  scores = pl.score_all(posthoc, fitted, model, params, b, rng=rng, stacked=stacked)
  return summary.scored_rows(fitted.cost, scores, ood_nodes, id_nodes, batch["labels"], train_s)


def run(config, workdir: str, shifts: Mapping[str, graph_shift.ShiftFn] | None = None) -> list[dict]:
  """The whole benchmark; `shifts` adds user-defined evasion settings (names listed in config.settings)."""
  p = plan(config, shifts)
  posthoc, shift_fns, rows, writer = p["posthoc"], shift_functions(config, shifts), [], core.MetricWriter(workdir)
  for dname in config.data.datasets:
    g = load(config, dname)
    settings = [s for s in config.settings if not s.endswith("_isolated") or dname in config.isolated_datasets]
    for split in config.splits:
      masks = graph_shift.gpn_split(g["labels"], split, train=float(config.shift.train), val=float(config.shift.val))
      for init, poison in [(i, q) for i in config.inits for q in sorted({"loc" if s == "loc" else "clean"
                                                                          for s in settings})]:
        labels, k, id_test, tr_mask, va_mask, info = _poisoned(config, g["labels"], int(g["num_classes"]), masks, poison)
        model = bb.make_backbone(dict(config.backbone), g["features"].shape[1], k)
        batch = dict(_features(config, g["features"]), edges=g["edges"], labels=labels,
                     train_mask=tr_mask.astype(np.float32), val_mask=va_mask.astype(np.float32))
        seed = p["seed"] + 1000 * split + init
        res, stacked, params, train_s = train_backbone(config, model, batch, seed=seed, num_members=p["num_members"],
                                                       workdir=workdir, name=f"{dname}/{poison}/split{split}_init{init}",
                                                       writer=writer)
        fitted = pl.fit_posthoc(posthoc, model, params, batch, np.flatnonzero(tr_mask), np.flatnonzero(va_mask), k,
                                seed=seed)
        print(f"[eviprobe_graphs] {dname} split {split} init {init} {poison}: backbone {int(res.state.step)} epochs "
              f"(best {np.mean(res.best.step):.0f}, {train_s:.1f}s)", flush=True)
        for setting in [s for s in settings if ("loc" if s == "loc" else "clean") == poison]:
          t1, rng = time.perf_counter(), jax.random.key(p["seed"] + 7919 * split + init)
          new = _setting_rows(config, posthoc, shift_fns, fitted, model, params, stacked, batch, g, masks, info,
                              id_test, setting, split, rng, train_s)
          cell = f"{dname}:{setting}"
          rows += [common.row(method=m, dataset=cell, split=split, seed=init, metrics=met, cost=cost)
                   for m, met, cost in new]
          auc = {m: met["ood_auroc"] or 0.0 for m, met, _ in new}
          best = max((auc[m], m) for m in config.baselines if m in auc)
          print(f"[eviprobe_graphs] {cell} split {split}: ours {auc.get(OURS, float('nan')):.3f}, extension "
                f"{auc.get(EXT, float('nan')):.3f}, best baseline {best[1]} {best[0]:.3f} "
                f"({time.perf_counter() - t1:.1f}s)", flush=True)
  print(summarise(rows, workdir, tuple(config.baselines)), flush=True)
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="eviprobe_graphs", plan=plan)
