"""SMILE ensembles and their baselines on UCI regression, at an equal per-chain PEG budget.

For each (dataset, split): `jaxml.smile.run_split` trains K MAP members through core.train (best
validation epoch per member), then starts one chain per member for every sampler (SMILE-naive,
SMILE, pSMILE-naive, pSMILE, SGLD, cyclical SGLD, SGHMC, full-batch MCLMC at equal PEG and at its
own budget) and evaluates the posterior predictive on the test rows; one row per method.
The `paper` preset runs `jaxml.smile.run_classification` on CIFAR-10 through TFDS.

Runs split into several jobs (e.g. one per group of data sets) are merged into one table, one paired
comparison and one LPPD-vs-PEG figure (a panel per data set) with the same `summarize` a single run uses:

  python -m experiments.smile_uci --merge=runs/a,runs/b --workdir=runs/merged
  python -m experiments.smile_uci --merge=runs/a,runs/b --extend=runs/c --workdir=runs/ext   # c: extra ε₀ values
"""

import argparse
import json
import os
import sys
from typing import NamedTuple, Sequence

import jax
import matplotlib
import matplotlib.ticker
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common, report  # noqa: E402
from jaxml import core, smile  # noqa: E402
from jaxml.data import offline  # noqa: E402

PROTOCOLS = ("smile", "standard", "auto", "tfds")
SPLIT_SOURCES = ("files", "authors")    # rows of the 70/10/20 sets: our index files, or the authors' seeds
ANCHORS = {"energy": 2.018, "airfoil": 0.28, "bikesharing": 0.132}   # SMILE paper, standardised targets


class Plan(NamedTuple):
  """Everything the run reads from the config, as plain values (built before anything is written)."""

  seed: int
  data_dir: str | None
  datasets: tuple[str, ...]
  protocols: dict             # dataset -> data protocol ("smile" or "standard"; "auto" resolved per set)
  splits: dict                # dataset -> split indices of its protocol
  pipeline: dict              # the `jaxml.smile` pipeline settings (a plain dict)
  budget_epochs: dict         # dataset -> per-chain PEG budget in epochs
  mclmc_native: dict          # dataset -> overrides of the native MCLMC budget
  train: dict                 # core.train settings of the ensemble (num_steps set per data set)
  num_data: int


_SMILE = set(smile.SMILE_VARIANTS)                     # the `smile_family` group
_ALL_SMILE = _SMILE | set(smile.TUNED_PSMILE)
_PSMILE = {m for m, (precondition, _) in smile.SMILE_VARIANTS.items() if precondition} | set(smile.TUNED_PSMILE)
# Rows chosen per split by validation LPPD among the SMILE variants that ran (all of them / the pSMILE ones);
# derived from the other rows, so a merge recomputes them.
_CHOSEN = (("smile_best", _ALL_SMILE), ("psmile_best", _PSMILE))
_OURS = ("smile_best", "psmile_best", "psmile_naive", "psmile_clamp", "psmile")   # compared with the SG-MCMC baselines
_BASELINES = ("sgld", "sghmc", "csgld")                            # equal per-example gradients
_COLS = [("lppd", "LPPD"), ("rmse", "RMSE"), ("coverage_90", "cov90"), ("cal_error", "cal.err"),
         ("lppd_chain_mean", "LPPD/chain"), ("rhat_median", "R-hat"), ("ess_median", "ESS"), ("resets", "resets"),
         ("final_step_size", "final eps"), ("step_size0", "eps0"), ("eps_drift", "eps drift"), ("eps_spread", "eps spread"),
         ("nonfinite", "non-finite"), ("chains_kept", "kept chains"), ("lppd_kept", "LPPD kept")]
# Pipeline keys by what runs: (condition on (methods, regression protocol), keys).
_KEYS = ((lambda m, reg: True, ("protocol", "methods", "prior_scale", "num_members", "member_max_steps",
                                "budget_epochs", "warmup_frac", "num_samples")),
         (lambda m, reg: reg, ("hidden", "noise", "member_batch", "member_epochs", "batch_size", "coverage_draws",
                               "rhat_points", "chain_filter_nats", "member_fixed_sigma", "budget_steps", "epoch_wise_sampling",
                               "likelihood_scale", "precond_clamp", "nonfinite_halving", "split_source")),
         (lambda m, reg: bool(m & _SMILE), ("smile_step_size", "p_reset", "alpha", "delta", "beta")),
         (lambda m, reg: reg and bool(m & _ALL_SMILE), ("L", "same_batch_energy")),
         (lambda m, reg: "psmile_vt" in m, ("vt_step_size", "vt_target", "vt_gain", "vt_settle_frac")),
         (lambda m, reg: "sgld" in m, ("sgld_step_size",)),
         (lambda m, reg: "csgld" in m, ("csgld_step_size", "csgld_cycles", "csgld_explore")),
         (lambda m, reg: "sghmc" in m, ("sghmc_step_size", "sghmc_momentum_decay")),
         (lambda m, reg: bool(m & {"mclmc", "mclmc_native"}), ("mclmc_energy_var",)),
         (lambda m, reg: "mclmc_native" in m, ("mclmc_native_tune", "mclmc_native_samples", "mclmc_native_chains")),
         (lambda m, reg: not reg, ("num_classes", "resnet_stage_sizes", "resnet_width", "paper_dataset",
                                   "paper_batch", "paper_load_batch", "paper_train_limit", "paper_test_limit")))


def data_protocol(protocol: str, dataset: str) -> str:
  """A set's data protocol; "auto": the 20-split protocol where the set has it, else the 70/10/20 splits."""
  return protocol if protocol != "auto" else "smile" if dataset in offline.UCI_SMILE_ONLY else "standard"


def plan(config) -> Plan:
  """Validates names and reads every config key the run uses (strict configs)."""
  s = config.smile
  common.validate_choice(s.protocol, PROTOCOLS, "protocol")
  methods = set(s.methods)
  for m in s.methods:
    common.validate_choice(m, smile.METHODS, "method")
  reg = s.protocol != "tfds"
  pipeline = {k: s[k] for cond, keys in _KEYS if cond(methods, reg) for k in keys}
  train = {"optim": {k: config.optim[k] for k in config.optim.keys()}, "log_every": int(config.log_every),
           "checkpoint_every": int(config.checkpoint_every), "steps_per_dispatch": int(config.steps_per_dispatch)}
  core.make_optimizer(train["optim"])      # a bad optimizer fails here, before anything is written
  datasets, protocols, splits, budget, native = (), {}, {}, {}, {}
  if reg:
    common.validate_choice(s.noise, ("global", "heteroscedastic"), "noise model")
    common.validate_choice(s.likelihood_scale, ("ratio", "floor"), "likelihood scale")
    common.validate_choice(s.split_source, SPLIT_SOURCES, "split source")
    datasets, given = tuple(s.datasets), tuple(int(i) for i in s.splits)
    for d in datasets:
      # auto: the 20-split protocol where a set has it; the smile-only sets use their splits 1-3 for 0-2.
      protocols[d] = data_protocol(s.protocol, d)
      allowed = offline.UCI_SMILE_DATASETS if protocols[d] == "smile" else tuple(
          x for x in offline.UCI_DATASETS if x not in offline.UCI_SMILE_ONLY)
      common.validate_dataset(d, allowed, f"dataset for protocol {protocols[d]!r}")
      splits[d] = tuple(i + 1 for i in given) if s.protocol == "auto" and protocols[d] == "smile" else given
      budget[d] = float(s.budget_epochs_override.get(d, s.budget_epochs))
      over = s.mclmc_native_override.get(d, {}) if "mclmc_native" in methods else {}
      native[d] = {k: int(over[k]) for k in over.keys()}
  return Plan(int(config.seed), config.data_dir, datasets, protocols, splits, pipeline, budget, native, train,
              int(config.mesh.num_data))


def member_batches(train: dict, batch_size: int, seed: int, k: int) -> list:
  """Member m walks its own seeded permutation of the training rows."""
  return [core.epoch_batches(train, batch_size, seed=seed * 1000 + m) for m in range(k)]


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  s = p.pipeline
  mesh = core.make_mesh(p.num_data or None)
  if s["protocol"] == "tfds":
    return run_paper(p, workdir, mesh)
  rows: list[dict] = []
  for dataset in p.datasets:
    samplers = None       # one set of compiled runners serves every split of the same shapes
    s = p.pipeline | {"protocol": p.protocols[dataset]}
    for split in p.splits[dataset]:
      smile_rows = s["protocol"] == "smile"
      authors = smile_rows and s["split_source"] == "authors"
      data = offline.load_uci(dataset, split, protocol=s["protocol"], root=p.data_dir,
                              row_order=(lambda n, seed=split: smile.authors_row_order(seed, n)) if authors else None,
                              test_batch=int(s["batch_size"]) if authors else 0)
      n = len(data["y_train"])
      if samplers is None or samplers.data_size != n:
        samplers = smile.make_samplers(s, data_size=n, budget_epochs=p.budget_epochs[dataset],
                                       mclmc_native=p.mclmc_native[dataset])
      b, per_epoch, steps = smile.member_plan(s, n)
      log_every = per_epoch * max(p.train["log_every"] // per_epoch, 1)   # epoch-aligned: K steps per dispatch
      member_seed = p.seed * 100 + split
      train = {"x": data["x_train"], "y": data["y_train"]}
      results = smile.run_split(s, p.train | {"num_steps": steps, "log_every": log_every}, samplers, data,
                                member_batches(train, b, member_seed, int(s["num_members"])), seed=member_seed,
                                chain_key=jax.random.key(p.seed * 7919 + split),
                                rng=np.random.default_rng([p.seed, split]), steps_per_epoch=per_epoch,
                                workdir=workdir, name=f"members_{dataset}_{split}", mesh=mesh, progress=True)
      for method, (metrics, cost) in results.items():
        extra = "".join(f" {k} {metrics[k]:.4g}" for k in ("valid_lppd", "step_size0", "final_step_size", "eps_spread", "eps_drift",
                                                              "nonfinite", "chains_kept", "lppd_kept") if k in metrics)
        print(f"[smile_uci] {dataset}/split{split} {method:13s} lppd {metrics['lppd']:+.3f} rmse {metrics['rmse']:.3f} "
              f"peg {cost.get('peg', 0):.3g} wall {cost.get('wall_s', 0):.1f}s{extra}", flush=True)
        rows.append(common.row(method=method, dataset=dataset, split=split, seed=p.seed, metrics=metrics, cost=cost))
  return summarize(rows, workdir, {d for d, pr in p.protocols.items() if pr == "smile"})


def summarize(rows: list[dict], workdir: str, anchored: set[str]) -> list[dict]:
  """Adds the validation-chosen rows (`_CHOSEN`), writes summary.md (mean ± s.e. table, then each of `_OURS`
  against the SG-MCMC baselines paired over splits) and lppd_vs_peg.png; returns the rows with the chosen ones.
  One run and a merge of several runs (`merge`) share it; chosen rows already in `rows` are recomputed."""
  rows = [r for r in rows if r["method"] not in dict(_CHOSEN)]
  ran = {r["method"] for r in rows}
  picked = set()
  for name, family in _CHOSEN:
    variants = [m for m in smile.METHODS if m in family and m in ran]
    # A choice needs two candidates; the pSMILE choice is left out when it would copy the SMILE one.
    if len(variants) > 1 and set(variants) != picked:
      rows += report.best_by(rows, variants, name=name, select="valid_lppd")
      picked = set(variants)
  make_plot(rows, workdir, anchored)
  ran = {r["method"] for r in rows}
  baselines = [m for m in _BASELINES if m in ran]
  order = [m for m in smile.METHODS + tuple(dict(_CHOSEN)) if m in ran]
  with open(f"{workdir}/summary.md", "w") as f:
    f.write(report.mean_se_table(rows, tuple(order), _COLS, se_cols=("lppd", "rmse")))
    f.write("\n### Test LPPD by data set, mean ± s.e. over splits\n\n"
            + report.pivot_table(rows, "lppd", digits=3, se=True, by_dataset=True, methods=order))
    for ours in (m for m in _OURS if m in ran and baselines):
      what = {"smile_best": "SMILE variant", "psmile_best": "pSMILE variant"}.get(ours)
      f.write(f"\n### {ours}{f' ({what} chosen per split by validation LPPD)' if what else ''} vs SG-MCMC "
              "baselines at equal gradients, test LPPD\n\n" + report.paired_summary(rows, ours, baselines, "lppd"))
  return rows


def _row_key(r: dict) -> tuple:
  return r["method"], r["dataset"], r["split"], r["seed"]


def check_extension(base: dict, extra: dict) -> None:
  """ValueError unless the `smile` config `extra` is `base`'s protocol on other ε₀ values: every key both have is
  equal, except the run's data sets / splits / methods and the ε₀ grids, which must be disjoint."""
  for k in sorted(base.keys() & extra.keys()):
    if k.endswith("step_size"):
      if set(base[k]) & set(extra[k]):
        raise ValueError(f"{k}: the extension repeats ε₀ values {sorted(set(base[k]) & set(extra[k]))}")
    elif k not in ("datasets", "splits", "methods") and base[k] != extra[k]:
      raise ValueError(f"{k}: {extra[k]!r} in the extension, {base[k]!r} in the base run")


def _valid(r: dict) -> float:
  """A row's validation LPPD; null (non-finite: every chain diverged) is -inf, as in `pipeline`'s ε₀ choice."""
  v = r["metrics"]["valid_lppd"]
  return -float("inf") if v is None else float(v)


def extend_grid(base: list[dict], extra: list[dict]) -> list[dict]:
  """The rows of an ε₀ grid extended by runs of the same protocol on other ε₀ values only (`extra`).

  A method's row (one with `step_size0`) becomes whichever of its base and extra rows has the higher validation
  LPPD: the validation choice over the union grid, since a chain's draws do not depend on the other ε₀ of its run
  (`pipeline.combo_chain_ids`); a tie keeps the base row. grid_peg and wall_s add up. Only what the extension
  covers is kept: base rows of grid methods without an extra row (grid not extended) are dropped, rows without a
  grid (map, de) are kept on the (dataset, split, seed) cells of `extra`. An extra row without a base row, or
  without a grid, is an error."""
  more = {}
  for r in extra:
    if "step_size0" not in r["metrics"]:
      raise ValueError(f"extension row {_row_key(r)} has no ε₀ grid")
    more[_row_key(r)] = r
  cells = {k[1:] for k in more}
  out, used = [], set()
  for r in base:
    if "step_size0" not in r["metrics"]:
      if _row_key(r)[1:] in cells:
        out.append(r)
      continue
    e = more.get(_row_key(r))
    if e is None:
      continue
    used.add(_row_key(r))
    best = e if _valid(e) > _valid(r) else r
    out.append(dict(best, metrics=dict(best["metrics"]),
                    cost=best["cost"] | {k: r["cost"][k] + e["cost"][k] for k in ("grid_peg", "wall_s")}))
  if set(more) - used:
    raise ValueError(f"extension rows without a base row: {sorted(set(more) - used)}")
  return out


def merge(workdirs: list[str], workdir: str, extend: Sequence[str] = ()) -> list[dict]:
  """Rows of several runs' results.json as one run: the same summary.md and lppd_vs_peg.png as `run` (a panel per
  data set), and results.json (same schema; `sources` added; wall_s summed). A (method, dataset, split, seed) in
  two runs is an error. `extend`: runs of the same protocol on extra ε₀ values only, combined by `extend_grid`."""
  rows, results, _ = common.read_runs(workdirs, _row_key, skip=lambda r: r["method"] in dict(_CHOSEN))
  extra, extra_results, _ = common.read_runs(extend, _row_key, skip=lambda r: r["method"] in dict(_CHOSEN))
  anchored, configs = set(), []
  for w, res in zip([*workdirs, *extend], results + extra_results):
    with open(os.path.join(w, "config.json")) as f:
      s = json.load(f)["smile"]
    if res.get("experiment") != "smile_uci" or s["protocol"] == "tfds":
      raise ValueError(f"{w}: not a smile_uci regression run")
    anchored |= {d for d in s["datasets"] if data_protocol(s["protocol"], d) == "smile"}
    configs.append(s)
  for e in configs[len(workdirs):]:
    for b in configs[:len(workdirs)]:
      check_extension(b, e)
  if extend:
    rows = extend_grid(rows, extra)
  results += extra_results
  wall, env = sum(float(res["wall_s"]) for res in results), next((res["env"] for res in results if "env" in res), None)
  os.makedirs(workdir, exist_ok=True)
  rows = summarize(rows, workdir, anchored)
  common.write_json(os.path.join(workdir, "results.json"), {"experiment": "smile_uci", "preset": "merge",
                                                            "rows": rows, "wall_s": wall, "env": env,
                                                            "sources": [*workdirs, *extend]})
  return rows


def _merge_main(argv: list[str]) -> None:
  ap = argparse.ArgumentParser(prog="python -m experiments.smile_uci")
  ap.add_argument("--merge", required=True, help="comma-separated workdirs holding results.json and config.json")
  ap.add_argument("--workdir", required=True, help="output folder (summary.md, lppd_vs_peg.png, results.json)")
  ap.add_argument("--extend", default="", help="comma-separated runs of the same protocol on extra ε₀ values only: "
                  "each method's row is chosen by validation LPPD over the union grid (extend_grid)")
  args = ap.parse_args(argv)
  try:
    rows = merge([w for w in args.merge.split(",") if w], args.workdir, [w for w in args.extend.split(",") if w])
  except (ValueError, FileNotFoundError, KeyError) as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  print(f"[smile_uci] merged {len(rows)} rows into {args.workdir}/results.json, summary.md, lppd_vs_peg.png")


def _load_tfds(split: str, p: Plan, limit: int) -> dict:
  """Materialises a TFDS split as numpy arrays (chains index the whole training set on device)."""
  from jaxml.data import tfds as tfds_data
  s = p.pipeline
  it = tfds_data.make_tfds_batches(s["paper_dataset"], split=split, batch_size=int(s["paper_load_batch"]), seed=0,
                                   data_dir=p.data_dir, shuffle=False, num_epochs=1)
  xs, ys = [], []
  for batch in it:
    xs.append(batch["x"])
    ys.append(batch["y"])
    if limit and sum(len(y) for y in ys) >= limit:
      break
  x, y = np.concatenate(xs), np.concatenate(ys)
  return {"x": x[:limit] if limit else x, "y": y[:limit] if limit else y}


def run_paper(p: Plan, workdir: str, mesh) -> list[dict]:
  """Accelerator preset: K ResNet members (core.train), then pSMILE and SGLD chains on CIFAR-10."""
  from jaxml.nn.resnet import ResNet
  s = p.pipeline
  train = _load_tfds("train", p, int(s["paper_train_limit"]))
  test = _load_tfds("test", p, int(s["paper_test_limit"]))
  net = ResNet(num_classes=int(s["num_classes"]), stage_sizes=tuple(s["resnet_stage_sizes"]),
               width=int(s["resnet_width"]))
  b = min(int(s["paper_batch"]), len(train["y"]))
  results = smile.run_classification(
      s, p.train | {"num_steps": int(s["member_max_steps"])}, lambda prm, x: net.apply({"params": prm}, x),
      lambda r, x: net.init(r, x)["params"], train, test, member_batches(train, b, p.seed, int(s["num_members"])),
      seed=p.seed, batch_size=b, workdir=workdir, mesh=mesh)
  for method, (metrics, _) in results.items():
    print(f"[smile_uci] {s['paper_dataset']} {method}: {metrics}", flush=True)
  return [common.row(method=m, dataset=s["paper_dataset"], split=0, seed=p.seed, metrics=met, cost=cost)
          for m, (met, cost) in results.items()]


def make_plot(rows: list[dict], workdir: str, anchored: set[str], *, ncols: int = 4) -> None:
  """LPPD (mean ± s.e. over splits) against total PEG per method, a panel per data set (`ncols` per line);
  dashed line: published SMILE LPPD (only for `anchored` data sets, the ones run on the authors' 70/10/20 splits)."""
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  order = smile.METHODS + tuple(dict(_CHOSEN))
  methods = [m for m in order if any(r["method"] == m for r in rows)]     # one marker / colour per method
  ncols = min(ncols, len(datasets))
  nrows = -(-len(datasets) // ncols)
  fig, axes = plt.subplots(nrows, ncols, figsize=(4.0 * ncols + 1.6, 3.4 * nrows), squeeze=False)
  legend = {}
  for ax, ds in zip(axes.flat, datasets):
    points = []   # (method, peg, mean LPPD, colour), for the marks of the points below the panel's y-range
    for i, m in enumerate(methods):
      sel = [r for r in rows if r["method"] == m and r["dataset"] == ds and r["metrics"]["lppd"] is not None]
      if not sel:
        continue
      # Small horizontal offsets keep equal-PEG methods apart; the x-axis is logarithmic.
      peg = np.mean([r["cost"]["peg"] for r in sel]) * 1.04 ** (i - len(methods) / 2)
      lppd = np.array([r["metrics"]["lppd"] for r in sel])
      colour = plt.cm.tab20(i / max(len(methods), 1))
      legend[m] = ax.errorbar(peg, lppd.mean(), yerr=lppd.std(ddof=1) / np.sqrt(len(lppd)) if len(lppd) > 1 else 0,
                              fmt="o^sDv<>ph*X"[i % 11], color=colour, capsize=2)
      points.append((m, peg, float(lppd.mean()), colour))
    if ds in ANCHORS and ds in anchored:
      legend["published SMILE"] = ax.axhline(ANCHORS[ds], ls="--", color="k", lw=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())    # narrow PEG ranges: labels would overlap
    ax.set_xlabel("PEG (total, incl. ensemble training)")
    ax.set_title(ds)
    vals = [r["metrics"]["lppd"] for r in rows if r["dataset"] == ds and r["metrics"]["lppd"] is not None]
    if vals:   # none: every row of the panel diverged (lppd null); the rows are still written, the panel stays empty
      hi = max(max(vals), ANCHORS.get(ds, -np.inf) if ds in anchored else -np.inf)
      lo = np.nanpercentile(vals, 15) - 0.05
      ax.set_ylim(lo, hi + 0.05)
      for m, peg, mean, colour in points:   # the range cuts off outliers (e.g. DE's σ = 1 members): mark them at the edge
        if mean < lo:
          ax.annotate(f"{m} {mean:.2f}", (peg, lo), xytext=(0, 10), textcoords="offset points", ha="left", fontsize=7,
                      color=colour, arrowprops={"arrowstyle": "->", "color": colour, "lw": 0.8})
  for ax in axes.flat[len(datasets):]:
    ax.set_axis_off()
  for ax in axes[:, 0]:
    ax.set_ylabel("test LPPD")
  fig.legend(list(legend.values()), list(legend), loc="center right", fontsize=7)
  fig.subplots_adjust(right=1 - 1.5 / (4.0 * ncols + 1.6), wspace=0.3, hspace=0.45)
  common.save_plot(fig, workdir, "lppd_vs_peg.png")


if __name__ == "__main__":
  if any(a.startswith("--merge") for a in sys.argv[1:]):
    _merge_main(sys.argv[1:])
  else:
    common.run_main(run, experiment="smile_uci", plan=plan)
