"""results.json files -> markdown tables (mean ± std over splits and seeds), plus the shared
helpers experiments use for their own tables, paired tests and plots:

  markdown_table(header, lines)            a markdown table from cells
  fmt_mean_std(values)                     "m ± s" (None values skipped)
  pivot_table(rows, metric, ...)           methods x datasets of one metric, best in bold
  paired(rows, a, b, metric)               two methods' values matched on (dataset, split, seed)
  sign_test(a, b) / compare(rows, ...)     paired sign test (exact binomial) and Wilcoxon signed-rank
  bar_plot(rows, metric, workdir, name)    mean ± std bars per method, one panel per dataset

  python -m experiments.report --workdirs runs/a,runs/b [--out table.md]
"""

import json
import math
import os
import sys
from collections import defaultdict
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("workdirs", None, "Comma-separated run folders holding results.json.")
flags.DEFINE_string("out", None, "Also write the markdown here.")
flags.DEFINE_list("metrics", None, "Metric columns to show (default: all).")


def _fmt(values: list[float | None]) -> str:
  vals = [v for v in values if v is not None]
  if not vals:
    return "n/a"
  m = float(np.mean(vals))
  digits = 4 if abs(m) < 10 else 2
  return f"{m:.{digits}f}" if len(vals) == 1 else f"{m:.{digits}f} ± {float(np.std(vals)):.{digits}f}"


def table(results: dict, metrics: list[str] | None = None) -> str:
  """One markdown table: a row per (dataset, method), a column per metric and cost."""
  groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
  for r in results["rows"]:
    groups[(r["dataset"], r["method"])].append(r)
  metric_names = metrics or sorted({k for r in results["rows"] for k in r["metrics"]})
  cost_names = sorted({k for r in results["rows"] for k in r["cost"]})
  head = ["dataset", "method", "n"] + metric_names + [f"cost:{c}" for c in cost_names]
  lines = [f"### {results['experiment']} ({results['preset']}), {results['wall_s']:.0f}s, "
           f"jax {results['env'].get('jax')} on {results['env'].get('devices')} {results['env'].get('platform')}",
           "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for (dataset, method), rows in groups.items():
    cells = [dataset, method, str(len(rows))]
    cells += [_fmt([r["metrics"].get(m) for r in rows]) for m in metric_names]
    cells += [_fmt([r["cost"].get(c) for r in rows]) for c in cost_names]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def markdown_table(header: Sequence[str], lines: Iterable[Sequence[Any]]) -> str:
  """A markdown table; cells are formatted with str()."""
  out = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
  out += ["| " + " | ".join(map(str, cells)) + " |" for cells in lines]
  return "\n".join(out) + "\n"


def fmt_mean_std(values: Iterable[float | None], digits: int | None = None) -> str:
  """Mean ± std of the non-None values ("n/a" if none; the mean alone for one value)."""
  vals = [float(v) for v in values if v is not None]
  if not vals:
    return "n/a"
  m = float(np.mean(vals))
  d = digits if digits is not None else (4 if abs(m) < 10 else 2)
  return f"{m:.{d}f}" if len(vals) == 1 else f"{m:.{d}f} ± {float(np.std(vals)):.{d}f}"


def pivot_table(rows: list[dict], metric: str, *, higher_is_better: bool | None = None,
                digits: int | None = None) -> str:
  """Methods (rows) x datasets (columns) of `metric`, mean ± std over splits and seeds; with
  `higher_is_better` set, the best mean of each column is bold."""
  methods = list(dict.fromkeys(r["method"] for r in rows))
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  vals = {(m, d): [r["metrics"].get(metric) for r in rows if r["method"] == m and r["dataset"] == d]
          for m in methods for d in datasets}
  best = {}
  if higher_is_better is not None:
    for d in datasets:
      means = {m: np.mean([v for v in vals[m, d] if v is not None]) for m in methods
               if any(v is not None for v in vals[m, d])}
      if means:
        best[d] = (max if higher_is_better else min)(means, key=means.get)
  lines = []
  for m in methods:
    cells = []
    for d in datasets:
      txt = fmt_mean_std(vals[m, d], digits) if vals[m, d] else "–"
      cells.append(f"**{txt}**" if best.get(d) == m else txt)
    lines.append([m] + cells)
  return markdown_table(["method"] + datasets, lines)


def paired(rows: list[dict], a: str, b: str, metric: str, *, dataset: str | None = None
           ) -> tuple[list[float], list[float]]:
  """Values of methods `a` and `b` on the runs both have, matched on (dataset, split, seed)."""
  def by_key(method):
    return {(r["dataset"], r["split"], r["seed"]): r["metrics"].get(metric) for r in rows
            if r["method"] == method and (dataset is None or r["dataset"] == dataset)}
  va, vb = by_key(a), by_key(b)
  keys = sorted(k for k in set(va) & set(vb) if va[k] is not None and vb[k] is not None)
  return [float(va[k]) for k in keys], [float(vb[k]) for k in keys]


class SignTest(NamedTuple):
  wins: int        # pairs where a is better
  losses: int
  ties: int
  p: float         # two-sided exact binomial p over the non-tied pairs (NaN if none)


def sign_test(a: Sequence[float], b: Sequence[float], *, higher_is_better: bool = True) -> SignTest:
  """Paired sign test of a against b (ties dropped, exact two-sided binomial p-value)."""
  from scipy.stats import binomtest
  d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
  d = d if higher_is_better else -d
  wins, losses = int(np.sum(d > 0)), int(np.sum(d < 0))
  p = float(binomtest(wins, wins + losses).pvalue) if wins + losses else float("nan")
  return SignTest(wins, losses, int(d.size - wins - losses), p)


def compare(rows: list[dict], a: str, b: str, metric: str, *, higher_is_better: bool = True,
            dataset: str | None = None) -> dict[str, float]:
  """Paired comparison of method a vs b: n, mean difference (a - b), sign test, Wilcoxon p."""
  from jaxml.metrics import wilcoxon_paired
  va, vb = paired(rows, a, b, metric, dataset=dataset)
  st = sign_test(va, vb, higher_is_better=higher_is_better)
  return {"n": len(va), "mean_diff": float(np.mean(np.subtract(va, vb))) if va else math.nan,
          "wins": st.wins, "losses": st.losses, "ties": st.ties, "sign_p": st.p,
          "wilcoxon_p": wilcoxon_paired(va, vb) if len(va) >= 2 else math.nan}


def bar_plot(rows: list[dict], metric: str, workdir: str, name: str, *, title: str | None = None) -> str:
  """Mean ± std of `metric` per method, one panel per dataset; saved as <workdir>/<name>."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  methods = list(dict.fromkeys(r["method"] for r in rows))
  fig, axes = plt.subplots(1, len(datasets), figsize=(max(3.0, 0.6 * len(methods) + 1.5) * len(datasets), 3.2),
                           squeeze=False)
  for ax, d in zip(axes[0], datasets):
    for i, m in enumerate(methods):
      v = [r["metrics"].get(metric) for r in rows if r["method"] == m and r["dataset"] == d]
      v = [x for x in v if x is not None]
      if v:
        ax.bar(i, np.mean(v), yerr=np.std(v) if len(v) > 1 else None, color=f"C{i % 10}")
    ax.set_xticks(range(len(methods)), methods, rotation=30, ha="right")
    ax.set_title(d if title is None else f"{title}: {d}")
    ax.set_ylabel(metric)
  path = os.path.join(workdir, name)
  fig.savefig(path, dpi=120, bbox_inches="tight")
  plt.close(fig)
  return path


def main(argv):
  del argv
  if not FLAGS.workdirs:
    print("error: --workdirs is required", file=sys.stderr)
    sys.exit(2)
  out = []
  for w in FLAGS.workdirs:
    path = os.path.join(w, "results.json")
    if not os.path.exists(path):
      print(f"error: {path} does not exist", file=sys.stderr)
      sys.exit(2)
    with open(path) as f:
      out.append(table(json.load(f), FLAGS.metrics))
  text = "\n".join(out)
  print(text)
  if FLAGS.out:
    with open(FLAGS.out, "w") as f:
      f.write(text)


if __name__ == "__main__":
  app.run(main)
