"""The smile_uci tables and figure: validation-chosen rows, summary.md, lppd_vs_peg.png, and the merge of several
runs (or an ε₀-grid extension) into one table, as a single run writes it (`--merge`, see experiments/smile_uci.py)."""

import argparse
import itertools
import json
import os
import sys
from typing import Sequence

import matplotlib
import matplotlib.ticker
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common, report  # noqa: E402
from jaxml import smile  # noqa: E402
from jaxml.data import offline  # noqa: E402
from jaxml.smile import pipeline  # noqa: E402

__all__ = ["ANCHORS", "CHOSEN", "data_protocol", "summarize", "merge", "merge_main", "make_plot"]

ANCHORS = {"energy": 2.018, "airfoil": 0.28, "bikesharing": 0.132}   # SMILE paper, standardised targets
_ALL_SMILE = set(smile.SMILE_VARIANTS) | set(smile.TUNED_PSMILE)     # the `smile_family` group and tuned pSMILE
_PSMILE = {m for m, (precondition, _) in smile.SMILE_VARIANTS.items() if precondition} | set(smile.TUNED_PSMILE)
# Rows chosen per split by validation LPPD among the SMILE variants that ran (all of them / the pSMILE ones);
# derived from the other rows, so a merge recomputes them.
CHOSEN = (("smile_best", _ALL_SMILE), ("psmile_best", _PSMILE))
_OURS = ("smile_best", "psmile_best", "psmile_naive", "psmile_clamp", "psmile", "psmile_auto")   # compared with the SG-MCMC baselines
_BASELINES = ("sgld", "sghmc", "csgld")                            # equal per-example gradients
_COLS = [("lppd", "LPPD"), ("rmse", "RMSE"), ("coverage_90", "cov90"), ("cal_error", "cal.err"),
         ("lppd_chain_mean", "LPPD/chain"), ("rhat_median", "R-hat"), ("ess_median", "ESS"), ("resets", "resets"),
         ("final_step_size", "final eps"), ("step_size0", "eps0"), ("eps_drift", "eps drift"), ("eps_spread", "eps spread"),
         ("nonfinite", "non-finite"), ("chains_kept", "kept chains"), ("lppd_kept", "LPPD kept")]


def data_protocol(protocol: str, dataset: str) -> str:
  """A set's data protocol; "auto": the 20-split protocol where the set has it, else the 70/10/20 splits."""
  return protocol if protocol != "auto" else "smile" if dataset in offline.UCI_SMILE_ONLY else "standard"


def summarize(rows: list[dict], workdir: str, anchored: set[str]) -> list[dict]:
  """Adds the validation-chosen rows (`CHOSEN`, recomputed if present), writes summary.md (mean ± s.e. table, then
  each of `_OURS` against the SG-MCMC baselines paired over splits) and lppd_vs_peg.png; returns the rows."""
  rows = [r for r in rows if r["method"] not in dict(CHOSEN)]
  ran = {r["method"] for r in rows}
  picked = set()
  for name, family in CHOSEN:
    variants = [m for m in smile.METHODS if m in family and m in ran]
    # A choice needs two candidates; the pSMILE choice is left out when it would copy the SMILE one.
    if len(variants) > 1 and set(variants) != picked:
      rows += report.best_by(rows, variants, name=name, select="valid_lppd")
      picked = set(variants)
  make_plot(rows, workdir, anchored)
  ran = {r["method"] for r in rows}
  baselines = [m for m in _BASELINES if m in ran]
  order = [m for m in smile.METHODS + tuple(dict(CHOSEN)) if m in ran]
  with open(f"{workdir}/summary.md", "w") as f:
    f.write(report.mean_se_table(rows, tuple(order), _COLS, se_cols=("lppd", "rmse")))
    f.write("\n### Test LPPD by data set, mean ± s.e. over splits\n\n"
            + report.pivot_table(rows, "lppd", digits=3, se=True, by_dataset=True, methods=order))
    for ours in (m for m in _OURS if m in ran and baselines):
      what = {"smile_best": "SMILE variant", "psmile_best": "pSMILE variant"}.get(ours)
      f.write(f"\n### {ours}{f' ({what} chosen per split by validation LPPD)' if what else ''} vs SG-MCMC "
              "baselines at equal gradients, test LPPD\n\n" + report.paired_summary(rows, ours, baselines, "lppd"))
  return rows


def merge(workdirs: list[str], workdir: str, extend: Sequence[str] = ()) -> list[dict]:
  """Several runs' results.json as one run's outputs (`sources` added, wall_s summed; a row in two runs is an
  error); `extend`: runs of the same protocol on extra ε₀ values only, combined by `extend_grid`."""
  rows, results, _ = common.read_runs(workdirs, pipeline.row_key, skip=lambda r: r["method"] in dict(CHOSEN))
  extra, extra_results, _ = common.read_runs(extend, pipeline.row_key, skip=lambda r: r["method"] in dict(CHOSEN))
  anchored, configs = set(), []
  for w, res in zip([*workdirs, *extend], results + extra_results):
    with open(os.path.join(w, "config.json")) as f:
      s = json.load(f)["smile"]
    if res.get("experiment") != "smile_uci" or s["protocol"] == "tfds":
      raise ValueError(f"{w}: not a smile_uci regression run")
    anchored |= {d for d in s["datasets"] if data_protocol(s["protocol"], d) == "smile"}
    configs.append(s)
  for e, b in itertools.product(configs[len(workdirs):], configs[:len(workdirs)]):
    pipeline.check_extension(b, e)
  if extend:
    rows = pipeline.extend_grid(rows, extra)
  results += extra_results
  wall, env = sum(float(res["wall_s"]) for res in results), next((res["env"] for res in results if "env" in res), None)
  os.makedirs(workdir, exist_ok=True)
  rows = summarize(rows, workdir, anchored)
  common.write_json(os.path.join(workdir, "results.json"), {"experiment": "smile_uci", "preset": "merge",
                                                            "rows": rows, "wall_s": wall, "env": env,
                                                            "sources": [*workdirs, *extend]})
  return rows


def merge_main(argv: list[str]) -> None:
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


def make_plot(rows: list[dict], workdir: str, anchored: set[str], *, ncols: int = 4) -> None:
  """LPPD (mean ± s.e. over splits) against total PEG per method, a panel per data set (`ncols` per line);
  dashed line: published SMILE LPPD (only for `anchored` data sets, the ones run on the authors' 70/10/20 splits)."""
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  order = smile.METHODS + tuple(dict(CHOSEN))
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
