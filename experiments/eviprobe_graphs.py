"""X-EviProbe on frozen GNNs: OOD and misclassification detection under GPN-style shifts.

For every dataset x split x init: train the backbone (stacked with the deep-ensemble members;
member 0 is "the" backbone, the same model a run without ensemble baselines trains) through
core.train with validation selection and early stopping (checkpointed under
checkpoints/<dataset>/<poison>/<split_init>; a rerun resumes), fit every post-hoc method on the
clean graph (`jaxml.eviprobe.pipeline`), then score every shift setting:
  loc                 leave-out-classes (poisoning; the backbone never saw those labels)
  normal, bernoulli   feature perturbation of 10% of non-train nodes (evasion)
  *_isolated          one node perturbed at a time (one forward pass each); ID = clean test nodes
  <user name>         any `graph_shift.ShiftFn` passed as run(..., shifts={name: fn})
Datasets: cora_ml, citeseer, cora, csbm, npz (config.data.path) and csbm-<i> (the validation family,
data.csbm_variants); with the propagation grid among the rows, summary.md ends with the validation
choice (`validation_choice`: grid row with the best mean OOD AUROC) and, with the `misc_<read-out>` rows, the
misclassification read-out choice (`misc_choice`: best mean misclassification AUROC).
Rows: method x "<dataset>:<setting>" x split x init, metrics OOD AUROC/AUPR/FPR95, misclassification
AUROC/AUPR, accuracy, ECE, Brier, and cost (fit/score wall seconds, warm). Writes summary.md
(tables per setting, sign tests, relative gains) and ood_auroc.png.
"""

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
from jaxml.metrics import ood  # noqa: E402

DATASETS = ("cora_ml", "citeseer", "cora", "csbm", "npz")
SETTINGS = ("loc", "normal", "bernoulli", "normal_isolated", "bernoulli_isolated")
BASELINES, ABLATIONS, OURS = pl.BASELINES, pl.ABLATIONS, pl.OURS


def plan(config, shifts: Mapping[str, graph_shift.ShiftFn] | None = None) -> dict:
  """Validates names and reads every config key (before anything is written); returns the
  sections the package reads as plain dicts."""
  data = dict(config.data) | {"csbm": dict(config.data.csbm)}
  variants = tuple(tuple(v) for v in config.data.csbm_variants)
  data["csbm_variants"] = variants
  for d in data["datasets"]:
    common.validate_choice(d, DATASETS + tuple(f"csbm-{i}" for i in range(len(variants))), "dataset")
  if "npz" in data["datasets"] and not data["path"]:
    raise common.ConfigError("dataset 'npz' needs data.path (a gnn-benchmark npz file)")
  common.validate_choice(data["features"], ("dense", "sparse"), "feature format")
  for s in config.settings:
    common.validate_choice(s, SETTINGS + tuple(shifts or {}), "setting")
  for b in config.baselines:
    common.validate_choice(b, BASELINES, "baseline")
  for a in config.ablations:
    common.validate_choice(a, tuple(ABLATIONS), "ablation")
  backbone = dict(config.backbone)
  common.validate_choice(backbone["name"], bb.BACKBONES, "backbone")
  posthoc = {k: dict(config[k]) for k in ("eviprobe", "gnnsafe", "gkde", "epn", "gpn")}
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
              num_members=num_members,
              settings=tuple(config.settings), isolated_datasets=tuple(config.isolated_datasets),
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


def train_backbone(config, model, batch: Mapping[str, np.ndarray], *, seed: int, num_members: int = 1,
                   workdir: str | None = None, name: str = "backbone",
                   writer: core.MetricWriter | None = None) -> tuple[core.TrainResult, Any, Any, float]:
  """Trains the backbone (stacked with `num_members` - 1 deep-ensemble members) through core.train with
  validation selection; returns (result, stacked params, member-0 params, wall seconds). Member 0 is the
  model a single run (`num_members` = 1) trains, so X-EviProbe's backbone does not depend on the ensemble."""
  t0 = time.perf_counter()
  res = core.train(bb.make_backbone_method(model, l2=float(config.train.l2), num_members=num_members),
                   lambda _step: batch, train_config(config), workdir=workdir, seed=seed, name=name, writer=writer,
                   init_rng=jax.random.split(jax.random.key(seed))[0], eval_batches=[batch],
                   select=bb.selection(int(config.train.patience), int(config.train.eval_every)),
                   shard_batch_rows=False, progress=bool(config.progress))
  params = bb.member(res.params, 0) if num_members > 1 else res.params
  return res, res.params, params, time.perf_counter() - t0


def shift_functions(config, shifts: Mapping[str, graph_shift.ShiftFn] | None) -> dict[str, graph_shift.ShiftFn]:
  """The built-in feature shifts with the config's budget / scale / p, plus the user's."""
  s = config.shift
  builtin = {k: graph_shift.feature_shift(k, budget=float(s.budget), scale=float(s.normal_scale),
                                          p=float(s.bernoulli_p)) for k in graph_shift.SHIFT_KINDS}
  return builtin | dict(shifts or {})


def _isolated_rows(config, posthoc, fitted, model, params, stacked, batch, x_clean, masks, id_test, labels, setting, split,
                   rng) -> list[tuple[str, dict, dict]]:
  nodes = graph_shift.isolated_nodes(masks["test_mask"], int(config.shift.isolated_nodes), split)
  rows = graph_shift.perturb_features(x_clean, nodes, setting.split("_")[0], split,
                                      scale=float(config.shift.normal_scale), p=float(config.shift.bernoulli_p))[nodes]
  iso = pl.isolated_scores(posthoc, fitted, model, params, batch, nodes, rows)
  clean = pl.score_all(posthoc, fitted, model, params, batch, rng=rng, stacked=stacked)
  id_nodes = np.flatnonzero(id_test)
  out = []
  for m, sc in iso["scores"].items():
    s_all = np.r_[sc, clean[m][0]["ood"][id_nodes]]
    lab = np.r_[np.ones(sc.size), np.zeros(id_nodes.size)]
    out.append((m, {"ood_auroc": ood.auroc(s_all, lab), "ood_aupr": ood.aupr(s_all, lab),
                    "ood_fpr95": ood.fpr_at_tpr(s_all, lab, 0.95)},
                {"isolated_wall_s": iso["wall_s"], "nodes": nodes.size}))
  return out


def _scored_rows(fitted, scores, ood_nodes, id_nodes, labels, train_s) -> list[tuple[str, dict, dict]]:
  # common error sets for misclassification: the frozen backbone's (every post-hoc row predicts with it) and
  # GPN's own (it retrains and predicts otherwise); rows get misc_auroc_backbone / misc_auroc_gpn
  refs = {name: scores[m][0]["pred"] for name, m in (("backbone", OURS), ("gpn", "gpn")) if m in scores}
  out = []
  for m, (sc, secs) in scores.items():
    met = pl.metrics_for(sc, ood_nodes, id_nodes, labels, ref_preds=refs)
    if "n_clamped" in sc:
      met["n_clamped"] = sc["n_clamped"]
    cost = {"score_s": secs} | fitted.cost.get(m, {})
    if m in ("ensemble", "ensemble_var"):
      cost["train_s"] = train_s          # the stacked run trains all members at once
    out.append((m, met, cost))
  return out


def _rank(rows: list[dict], grid: list[str], metric: str, title: str, digits: int) -> tuple[str, str]:
  """(best row of `grid` by mean `metric` over every cell x split present, markdown table); ties keep the order."""
  grid = [m for m in grid if any(r["method"] == m for r in rows)]
  if not grid:
    return "", ""
  cells = sorted({r["dataset"].split(":")[1] for r in rows if r["method"] in grid})
  def mean(m, cell=None):
    v = [r["metrics"].get(metric) for r in rows if r["method"] == m and (cell is None or r["dataset"].endswith(":" + cell))]
    v = [x for x in v if x is not None and np.isfinite(x)]
    return float(np.mean(v)) if v else float("nan")
  means = {m: mean(m) for m in grid}
  best = max(grid, key=lambda m: (means[m], -grid.index(m)))
  lines = [f"\n### Validation benchmark: {title} (%) mean over graphs x splits\n",
           "| row | " + " | ".join(cells) + " | mean |", "|---" * (len(cells) + 2) + "|"]
  for m in grid:
    mark = " **(chosen)**" if m == best else ""
    lines.append(f"| {m}{mark} | " + " | ".join(f"{100 * mean(m, c):.{digits}f}" for c in cells)
                 + f" | {100 * means[m]:.2f} |")
  return best, "\n".join(lines)


def validation_choice(rows: list[dict]) -> tuple[str, str]:
  """(chosen grid row, markdown table): the propagation grid ranked by mean OOD AUROC over every
  cell x split present (the validation benchmark's rule, spec §9.2); ties keep the grid order."""
  return _rank(rows, list(pl.GRID), "ood_auroc", "propagation grid, OOD AUROC", 1)


def misc_choice(rows: list[dict]) -> tuple[str, str]:
  """(chosen misclassification read-out row, markdown table): the `misc_<read-out>` rows ranked by mean
  misclassification AUROC over every cell x split present (the validation benchmark's rule); ties keep the order."""
  return _rank(rows, list(pl.MISC_GRID), "misc_auroc", "misclassification read-out, misclassification AUROC", 2)


def cell_verdict(rows: list[dict], baselines: tuple[str, ...], *, misc_band: float = 0.01) -> tuple[str, list[dict]]:
  """Per dataset x setting cell: X-EviProbe against the best baseline (by mean over the cell's runs; GPN
  included when listed) on OOD AUROC and on misclassification AUROC (each model on its own errors, spec §4),
  and against GPN; mean ± s.e. over runs, the paired difference (matched on split and init) ± s.e., paired
  t-test and Wilcoxon p where ≥ 5 pairs. Returns (markdown, one dict per cell). A cell is won on OOD when
  the mean is ≥ the best baseline's, and met on misclassification when within `misc_band` of it."""
  from scipy.stats import ttest_rel
  def vs(c, other, metric):
    a, b = report.paired(rows, OURS, other, metric, dataset=c)
    cmp = report.compare(rows, OURS, other, metric, dataset=c)
    big = len(a) >= 5 and cmp["wins"] + cmp["losses"] > 0
    return dict(other=other, n=cmp["n"], ours=float(np.mean(a)), ours_se=report.std_err(a), other_mean=float(np.mean(b)),
                other_se=report.std_err(b), diff=cmp["mean_diff"], diff_se=cmp["se_diff"], wins=cmp["wins"],
                losses=cmp["losses"], t_p=float(ttest_rel(a, b).pvalue) if big else float("nan"),
                wilcoxon_p=float(cmp["wilcoxon_p"]) if big else float("nan"))
  def best(c, metric):
    means = {m: np.mean(v) for m in baselines
             if (v := [x for x in report._values(rows, m, c, metric) if x is not None])}
    return max(means, key=means.get) if means else None
  out, lines = [], ["| cell | runs | metric | X-EviProbe | best baseline | diff ± s.e. (W/L) | t-test p | Wilcoxon p "
                    "| vs GPN: diff ± s.e. (W/L), t p |", "|---" * 9 + "|"]
  cells = sorted({r["dataset"] for r in rows if r["method"] == OURS})
  for c in cells:
    res = {"cell": c}
    for metric, name in (("ood_auroc", "OOD"), ("misc_auroc", "misc")):
      b = best(c, metric)
      if b is None or not report.paired(rows, OURS, b, metric, dataset=c)[0]:
        continue
      v = vs(c, b, metric)
      g = vs(c, "gpn", metric) if "gpn" in baselines and report.paired(rows, OURS, "gpn", metric, dataset=c)[0] else None
      res[metric], res[metric + "_gpn"] = v, g
      gtxt = "–" if g is None else (f"{100 * g['diff']:+.2f} ± {100 * g['diff_se']:.2f} ({g['wins']}/{g['losses']}), "
                                     f"{g['t_p']:.2g}")
      lines.append(f"| {c} | {v['n']} | {name} | {100 * v['ours']:.2f} ± {100 * v['ours_se']:.2f} | {b} "
                   f"{100 * v['other_mean']:.2f} ± {100 * v['other_se']:.2f} | {100 * v['diff']:+.2f} ± "
                   f"{100 * v['diff_se']:.2f} ({v['wins']}/{v['losses']}) | {v['t_p']:.2g} | {v['wilcoxon_p']:.2g} | {gtxt} |")
    res["ood_won"] = "ood_auroc" in res and res["ood_auroc"]["diff"] >= 0
    res["misc_met"] = "misc_auroc" in res and res["misc_auroc"]["diff"] >= -misc_band
    out.append(res)
  won = sum(r["ood_won"] for r in out)
  met, with_misc = sum(r["misc_met"] for r in out), sum("misc_auroc" in r for r in out)
  text = ("\n### X-EviProbe vs the best baseline per cell (mean ± s.e. over runs; paired on split and init)\n\n"
          + "\n".join(lines) + f"\n\nOOD AUROC ≥ the best baseline in {won} of {len(out)} cells; misclassification "
          f"AUROC within {100 * misc_band:g} point of the best baseline in {met} of the {with_misc} cells that have it.\n")
  return text, out


def merge(workdirs: list[str], out: str, baselines: tuple[str, ...]) -> list[dict]:
  """Concatenates the rows of several runs' results.json (each (method, cell, split, init) at most once),
  writes <out>/results.json and <out>/summary.md (`summarise` + `cell_verdict`); returns the rows."""
  rows, _, _ = common.read_runs(workdirs, lambda r: (r["method"], r["dataset"], r["split"], r["seed"]))
  os.makedirs(out, exist_ok=True)
  common.write_json(os.path.join(out, "results.json"), {"experiment": "eviprobe_graphs", "merged_from": list(workdirs),
                                                        "rows": rows})
  with open(os.path.join(out, "summary.md"), "w") as f:
    f.write(cell_verdict(rows, baselines)[0] + summarise(rows, out, baselines) + "\n")
  return rows


def summarise(rows: list[dict], workdir: str, baselines: tuple[str, ...]) -> str:
  """Markdown tables per setting, paired sign tests, calibration, cost; also the bar plot."""
  methods = [OURS, *baselines] + sorted({r["method"] for r in rows} - {OURS, *baselines})
  settings = tuple(dict.fromkeys(SETTINGS + tuple(sorted({r["dataset"].split(":")[1] for r in rows}))))
  present = [s for s in settings if any(r["dataset"].endswith(":" + s) for r in rows)]
  cal = [s for s in present if not s.endswith("_isolated")]
  text = [report.ours_vs_best(rows, ours=OURS, baselines=baselines, settings=settings),
          report.mean_table(rows, methods, cal, lambda r: r["dataset"].split(":")[1], ("acc", "ece", "brier"),
                            title="\n### Accuracy / ECE (10 bins) / Brier on ID test nodes, mean over datasets x "
                                  "splits\n"),
          report.cost_medians(rows, [OURS, *baselines], ("fit_s", "score_s", "train_s"),
                              keep=lambda r: not r["dataset"].endswith("_isolated"),
                              title="\n### Cost per method (median over runs; warm jitted calls, seconds)\n")]
  best, table = validation_choice(rows)
  if best:
    text.append(table + f"\n\nchosen: {best} = {pl.GRID[best]}\n")
  best, table = misc_choice(rows)
  if best:
    text.append(table + f"\n\nchosen: {best} = {pl.MISC_GRID[best]}\n")
  common.save_plot(report.bar_panels(rows, panels=present, methods=[OURS, *baselines], highlight=OURS),
                   workdir, "ood_auroc.png")
  return "\n".join(text)


def run(config, workdir: str, shifts: Mapping[str, graph_shift.ShiftFn] | None = None) -> list[dict]:
  """The whole benchmark; `shifts` adds user-defined evasion settings (names listed in config.settings)."""
  p = plan(config, shifts)
  posthoc = p["posthoc"]
  shift_fns = shift_functions(config, shifts)
  rows: list[dict] = []
  writer = core.MetricWriter(workdir)
  num_members = p["num_members"]    # the backbone is trained stacked with the ensemble members when they run
  for dname in config.data.datasets:
    g = load(config, dname)
    x_clean, edges, labels_all, k_all = g["features"], g["edges"], g["labels"], int(g["num_classes"])
    for split in config.splits:
      masks = graph_shift.gpn_split(labels_all, split, train=float(config.shift.train), val=float(config.shift.val))
      poisonings = sorted({"loc" if s == "loc" else "clean" for s in config.settings
                           if not s.endswith("_isolated") or dname in config.isolated_datasets})
      for init, poison in [(i, p) for i in config.inits for p in poisonings]:
        if poison == "loc":
          info = graph_shift.leave_out_classes(labels_all, k_all, masks, fraction=float(config.shift.loc_fraction))
          labels, k, id_test = info["labels"], info["num_classes"], info["test_mask"]
          tr_mask, va_mask = info["train_mask"], info["val_mask"]
        else:
          labels, k, id_test = labels_all, k_all, masks["test_mask"]
          tr_mask, va_mask = masks["train_mask"], masks["val_mask"]
        model = bb.make_backbone(dict(config.backbone), x_clean.shape[1], k)
        batch = dict(_features(config, x_clean), edges=edges, labels=labels,
                     train_mask=tr_mask.astype(np.float32), val_mask=va_mask.astype(np.float32))
        seed = p["seed"] + 1000 * split + init
        res, stacked, params, train_s = train_backbone(config, model, batch, seed=seed, num_members=num_members,
                                                       workdir=workdir, name=f"{dname}/{poison}/split{split}_init{init}",
                                                       writer=writer)
        fitted = pl.fit_posthoc(posthoc, model, params, batch, np.flatnonzero(tr_mask), np.flatnonzero(va_mask), k,
                                seed=seed)
        print(f"[eviprobe_graphs] {dname} split {split} init {init} {poison}: backbone {int(res.state.step)} epochs "
              f"(best {np.mean(res.best.step):.0f}, {train_s:.1f}s)", flush=True)
        for setting in [s for s in config.settings if ("loc" if s == "loc" else "clean") == poison]:
          t1, rng = time.perf_counter(), jax.random.key(p["seed"] + 7919 * split + init)
          if setting.endswith("_isolated"):
            if dname not in config.isolated_datasets:
              continue
            if config.data.features != "dense":
              raise common.ConfigError("isolated settings need data.features='dense'")
            new = _isolated_rows(config, posthoc, fitted, model, params, stacked, batch, x_clean, masks, id_test, labels,
                                 setting, split, rng)
          else:
            if setting == "loc":
              b, ood_nodes, id_nodes = batch, np.flatnonzero(info["ood_test_mask"]), np.flatnonzero(id_test)
            else:
              shifted = graph_shift.apply_shift(shift_fns[setting], x_clean, dict(masks, edges=edges, labels=labels),
                                                split)
              b = dict(batch, **_features(config, shifted["features"]), edges=shifted["graph"]["edges"])
              ood_nodes = np.flatnonzero(masks["test_mask"] & shifted["mask"])
              id_nodes = np.flatnonzero(masks["test_mask"] & ~shifted["mask"])
            scores = pl.score_all(posthoc, fitted, model, params, b, rng=rng, stacked=stacked)
            new = _scored_rows(fitted, scores, ood_nodes, id_nodes, labels, train_s)
          cell = f"{dname}:{setting}"
          rows += [common.row(method=m, dataset=cell, split=split, seed=init, metrics=met, cost=cost)
                   for m, met, cost in new]
          best = max((met["ood_auroc"] or 0.0, m) for m, met, _ in new if m in config.baselines)
          ours = [met for m, met, _ in new if m == OURS]
          if ours:
            print(f"[eviprobe_graphs] {cell} split {split}: ours OOD AUROC {ours[0]['ood_auroc']:.3f}, best baseline "
                  f"{best[1]} {best[0]:.3f} ({time.perf_counter() - t1:.1f}s)", flush=True)
  summary = summarise(rows, workdir, tuple(config.baselines))
  with open(os.path.join(workdir, "summary.md"), "w") as f:
    f.write(summary + "\n")
  print(summary, flush=True)
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="eviprobe_graphs", plan=plan)
