"""results.json files -> markdown tables (mean ± std over splits and seeds), plus the shared
helpers experiments use for their own tables, paired tests and plots:

  markdown_table(header, lines)            a markdown table from cells
  fmt_mean_std(values)                     "m ± s" (None values skipped)
  pivot_table(rows, metric, ...)           methods x datasets of one metric, best in bold
  paired(rows, a, b, metric)               two methods' values matched on (dataset, split, seed)
  sign_test(a, b) / compare(rows, ...)     paired sign test (exact binomial) and Wilcoxon signed-rank
  best_by(rows, candidates, ...)           per run, the candidate chosen on a validation metric
  paired_summary(rows, ours, baselines)    per dataset, ours minus each baseline, paired over splits
  bar_plot(rows, metric, workdir, name)    mean ± std bars per method, one panel per dataset

  python -m experiments.report --workdirs runs/a,runs/b [--out table.md]
"""

import json
import math
import os
import sys
from collections import defaultdict
from typing import Any, Callable, Iterable, NamedTuple, Sequence

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


def std_err(values: Sequence[float]) -> float:
  """Standard error of the mean: sample std / sqrt(n); NaN below 2 values."""
  return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) >= 2 else math.nan


def fmt_mean_std(values: Iterable[float | None], digits: int | None = None, *, se: bool = False) -> str:
  """Mean ± std of the non-None values ("n/a" if none; the mean alone for one value); `se`: ± the standard
  error of the mean (sample std / sqrt(n)) instead."""
  vals = [float(v) for v in values if v is not None]
  if not vals:
    return "n/a"
  m = float(np.mean(vals))
  d = digits if digits is not None else (4 if abs(m) < 10 else 2)
  spread = std_err(vals) if se and len(vals) > 1 else float(np.std(vals))
  return f"{m:.{d}f}" if len(vals) == 1 else f"{m:.{d}f} ± {spread:.{d}f}"


def pivot_table(rows: list[dict], metric: str, *, higher_is_better: bool | None = None,
                digits: int | None = None, se: bool = False, by_dataset: bool = False,
                methods: Sequence[str] | None = None) -> str:
  """Methods (rows) x datasets (columns) of `metric`, mean ± std (`se`: ± s.e.) over splits and seeds; with
  `higher_is_better` set, the best mean of each dataset is bold. `by_dataset`: a line per dataset, a column per
  method instead. `methods`: which methods, in this order (default: all, in order of appearance)."""
  methods = list(methods) if methods is not None else list(dict.fromkeys(r["method"] for r in rows))
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

  def cell(m, d):
    txt = fmt_mean_std(vals[m, d], digits, se=se) if vals[m, d] else "–"
    return f"**{txt}**" if best.get(d) == m else txt

  if by_dataset:
    return markdown_table(["dataset"] + methods, [[d] + [cell(m, d) for m in methods] for d in datasets])
  return markdown_table(["method"] + datasets, [[m] + [cell(m, d) for d in datasets] for m in methods])


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
  """Paired comparison of method a vs b: n, mean difference (a - b) and its standard error (sample std of the
  differences / sqrt(n), NaN below 2 pairs), sign test, Wilcoxon p."""
  from jaxml.metrics import wilcoxon_paired
  va, vb = paired(rows, a, b, metric, dataset=dataset)
  st = sign_test(va, vb, higher_is_better=higher_is_better)
  d = np.subtract(va, vb)
  return {"n": len(va), "mean_diff": float(np.mean(d)) if va else math.nan,
          "se_diff": std_err(d),
          "wins": st.wins, "losses": st.losses, "ties": st.ties, "sign_p": st.p,
          "wilcoxon_p": wilcoxon_paired(va, vb) if len(va) >= 2 else math.nan}


def best_by(rows: list[dict], candidates: Sequence[str], *, name: str, select: str,
            higher_is_better: bool = True) -> list[dict]:
  """Per (dataset, split, seed): a copy, named `name`, of the candidate method's row whose `select` metric
  (a validation score) is best; metrics['chosen'] is the index of that method in `candidates`."""
  sign = 1.0 if higher_is_better else -1.0
  groups: dict[tuple, list[tuple[float, int, dict]]] = defaultdict(list)
  for r in rows:
    if r["method"] in candidates and r["metrics"].get(select) is not None:
      groups[(r["dataset"], r["split"], r["seed"])].append(
          (sign * r["metrics"][select], -candidates.index(r["method"]), r))
  out = []
  for key in sorted(groups):
    _, neg_idx, r = max(groups[key], key=lambda t: t[:2])    # ties go to the earlier candidate
    out.append(dict(r, method=name, metrics=r["metrics"] | {"chosen": float(-neg_idx)}, cost=dict(r["cost"])))
  return out


def paired_summary(rows: list[dict], ours: str, baselines: Sequence[str], metric: str, *,
                   higher_is_better: bool = True) -> str:
  """Markdown: per dataset and baseline, ours minus baseline (mean over paired splits), sign-test wins /
  losses and Wilcoxon p; then, per baseline, on how many datasets ours is at least as good on average, and
  (several baselines) on how many it is at least as good as every baseline at once."""
  datasets = list(dict.fromkeys(r["dataset"] for r in rows if r["method"] == ours))
  lines, count, every = [], {b: 0 for b in baselines}, 0
  for d in datasets:
    cells, ok = [], True
    for b in baselines:
      c = compare(rows, ours, b, metric, higher_is_better=higher_is_better, dataset=d)
      if not c["n"]:
        cells.append("–")
        ok = False
        continue
      good = c["mean_diff"] >= 0 if higher_is_better else c["mean_diff"] <= 0
      count[b] += int(good)
      ok = ok and good
      cells.append(f"{c['mean_diff']:+.3f} ({c['wins']}/{c['losses']}, p={c['wilcoxon_p']:.2g})")
    every += int(ok)
    lines.append([d] + cells)
  head = markdown_table(["dataset"] + [f"{ours} − {b}: mean {metric} diff (W/L, Wilcoxon p)" for b in baselines],
                        lines)
  tail = "; ".join(f"`{ours}` ≥ `{b}` on {count[b]} of {len(datasets)} datasets" for b in baselines)
  if len(baselines) > 1:
    tail += f"; ≥ every one of them on {every} of {len(datasets)} datasets"
  return head + "\n" + tail + "\n"


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
def primary_table(rows: list[dict], primary: dict[str, str]) -> str:
  """Markdown: one line per method, one column per dataset holding its primary metric
  (`primary[dataset]`), mean over seeds (± std when there are several)."""
  by: dict[tuple[str, str], list[float]] = defaultdict(list)
  for r in rows:
    v = r["metrics"].get(primary[r["dataset"]])
    by[(r["dataset"], r["method"])].append(np.nan if v is None else v)
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  methods = list(dict.fromkeys(r["method"] for r in rows))
  lines = ["| method | " + " | ".join(f"{d} ({primary[d]})" for d in datasets) + " |",
           "|---" * (len(datasets) + 1) + "|"]
  for m in methods:
    cells = []
    for d in datasets:
      v = by.get((d, m))
      cells.append("" if v is None else (f"{np.mean(v):.4g}" + (f" ± {np.std(v):.2g}" if len(v) > 1 else "")))
    lines.append(f"| {m} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def mean_se_table(rows: list[dict], methods: tuple[str, ...], cols: list[tuple[str, str]],
                  se_cols: tuple[str, ...] = ()) -> str:
  """Markdown: one line per (dataset, method) in `methods` order; `cols` = [(metric, header)], mean
  over rows (± standard error for `se_cols`), then total PEG and wall time from the cost."""
  lines = ["| dataset | method | n | " + " | ".join(c[1] for c in cols) + " | PEG (total) | wall s |",
           "|" + "---|" * (len(cols) + 5)]

  def fmt(vals, se=True):
    vals = [v for v in vals if v is not None]
    if not vals:
      return "–"
    m = float(np.mean(vals))
    text = f"{m:.3g}" if (abs(m) < 1e-2 or abs(m) >= 1e3) and m != 0 else f"{m:.3f}"
    if se and len(vals) > 1:
      text += f" ± {std_err(vals):.3f}"
    return text

  for ds in dict.fromkeys(r["dataset"] for r in rows):
    for m in methods:
      sel = [r for r in rows if r["dataset"] == ds and r["method"] == m]
      if not sel:
        continue
      cells = [fmt([r["metrics"].get(k) for r in sel], se=k in se_cols) for k, _ in cols]
      lines.append(f"| {ds} | {m} | {len(sel)} | " + " | ".join(cells) + " | "
                   + fmt([r["cost"].get("peg") for r in sel], se=False) + " | "
                   + fmt([r["cost"].get("wall_s") for r in sel], se=False) + " |")
  return "\n".join(lines) + "\n"


def sample_grid(panels: list[list[tuple[str, np.ndarray | None]]], kind: str):
  """A matplotlib figure of generated samples: `panels[i][j] = (title, samples or None)`.

  kind: 'scatter' (2-D points [n, 2]), 'image' (8x8 images, a 4x4 grid of the first 16),
  'curves' (the first 4 rows of [n, L] as lines), 'clouds' (3 point clouds [n, P, 3] as x-y
  scatters, stacked down the column).
  """
  import matplotlib.pyplot as plt
  depth = 3 if kind == "clouds" else 1
  nrow, ncol = len(panels) * depth, max(len(p) for p in panels)
  size = {"scatter": (2.0, 2.0), "image": (1.9, 2.2), "curves": (1.9, 2.2), "clouds": (1.9, 5.5 / 3)}[kind]
  fig, axes = plt.subplots(nrow, ncol, figsize=(size[0] * ncol, size[1] * nrow), squeeze=False)
  for i, line in enumerate(panels):
    for j, (title, x) in enumerate(line):
      ax = axes[i * depth, j]
      if i == 0:
        ax.set_title(title, fontsize=8 if kind == "scatter" else 7)
      for a in axes[i * depth:(i + 1) * depth, j]:
        a.set_xticks([]), a.set_yticks([])
      if x is None:
        continue
      if kind == "scatter":
        ax.scatter(x[:2000, 0], x[:2000, 1], s=0.5, alpha=0.5)
        ax.set_xlim(-3, 3), ax.set_ylim(-3, 3)
      elif kind == "image":
        grid = np.clip(x[:16].reshape(16, 8, 8), -1, 1).reshape(4, 4, 8, 8).transpose(0, 2, 1, 3).reshape(32, 32)
        ax.imshow(grid, cmap="gray", vmin=-1, vmax=1)
      elif kind == "curves":
        for s in x[:4]:
          ax.plot(s, lw=0.8)
        ax.set_ylim(-4, 4)
      else:
        for k in range(depth):
          axes[i * depth + k, j].scatter(x[k, :, 0], x[k, :, 1], s=1)
          axes[i * depth + k, j].set_xlim(-1.6, 1.6), axes[i * depth + k, j].set_ylim(-1.6, 1.6)
  fig.tight_layout()
  return fig


# ----------------------------------------------------------------------------------- shared summaries
# Tables, sign tests and plots shared by the experiments' summary.md files (rows as common.row builds them).

def mean_std(vals: list[float | None], digits: int = 1, scale: float = 1.0) -> str:
  """'m ± s' over the finite values (just 'm' for one value, 'n/a' for none)."""
  vals = [scale * v for v in vals if v is not None and np.isfinite(v)]
  if not vals:
    return "n/a"
  return f"{np.mean(vals):.{digits}f} ± {np.std(vals):.{digits}f}" if len(vals) > 1 else f"{vals[0]:.{digits}f}"


def wins_losses(ours: list[float | None], theirs: list[float | None]) -> tuple[int, int, float]:
  """Paired two-sided sign test: (wins, losses, p); ties and missing pairs are dropped."""
  from scipy.stats import binomtest
  pairs = [(a, b) for a, b in zip(ours, theirs) if a is not None and b is not None]
  w, l_ = sum(a > b for a, b in pairs), sum(a < b for a, b in pairs)
  return w, l_, (binomtest(w, w + l_).pvalue if w + l_ else float("nan"))


def _values(rows: list[dict], method: str, cell: str, key: str, src: str = "metrics") -> list:
  return [r[src].get(key) for r in rows if r["method"] == method and r["dataset"] == cell]


def ours_vs_best(rows: list[dict], *, ours: str, baselines: tuple[str, ...], settings: tuple[str, ...],
                 metric: str = "ood_auroc", second: str = "misc_auroc",
                 names: tuple[str, str] = ("OOD AUROC", "misclassification AUROC")) -> str:
  """Per setting (cells named 'dataset:setting'): a table of metric (and second) in % per method,
  then per cell the best baseline by mean metric, ours, the relative gain and a sign test over
  paired (split, seed) rows; a pooled sign test over all cells closes the text. `names`: how the
  two metrics are written in the text."""
  cells = sorted({r["dataset"] for r in rows})
  methods = [ours, *baselines] + sorted({r["method"] for r in rows} - {ours, *baselines})
  present = [s for s in settings if any(c.endswith(":" + s) for c in cells)]
  lines, gains, pooled_w, pooled_l = [], [], 0, 0
  for setting in present:
    scells = [c for c in cells if c.endswith(":" + setting)]
    lines += [f"\n### Setting `{setting}` ({names[0]} / {names[1]}, %, mean ± std over splits)\n",
              "| method | " + " | ".join(c.split(":")[0] for c in scells) + " |", "|---|" + "---|" * len(scells)]
    for m in methods:
      vals = []
      for c in scells:
        o = [v for v in _values(rows, m, c, metric) if v is not None]
        mi = [v for v in _values(rows, m, c, second) if v is not None]
        txt = "–" if not o else f"{100 * np.mean(o):.1f} ± {100 * np.std(o):.1f}" + (
            f" / {100 * np.mean(mi):.1f}" if mi else "")
        vals.append(f"**{txt}**" if m == ours and o else txt)
      if any(v != "–" for v in vals):
        lines.append(f"| {m} | " + " | ".join(vals) + " |")
    lines.append("")
    for c in scells:
      means = {m: np.mean([v for v in _values(rows, m, c, metric) if v is not None] or [np.nan]) for m in baselines}
      means = {m: v for m, v in means.items() if np.isfinite(v)}
      if not means:
        continue
      best = max(means, key=means.get)
      mine = _values(rows, ours, c, metric)
      w, l_, p = wins_losses(*paired(rows, ours, best, metric, dataset=c))   # matched on (split, seed), not row order
      pooled_w, pooled_l = pooled_w + w, pooled_l + l_
      rel = (np.mean(mine) - means[best]) / means[best]
      gains.append((c, rel))
      mis = {m: [v for v in _values(rows, m, c, second) if v is not None] for m in (ours, *baselines)}
      mis = {m: float(np.mean(v)) for m, v in mis.items() if v}
      mis_txt = ""
      if ours in mis and len(mis) > 1:
        mb = max((v, m) for m, v in mis.items() if m != ours)
        mis_txt = (f"; {names[1]} ours {100 * mis[ours]:.1f} vs best baseline `{mb[1]}` {100 * mb[0]:.1f} "
                   f"(relative {100 * (mis[ours] - mb[0]) / mb[0]:+.1f}%)")
      lines.append(f"- `{c}`: best baseline by {names[0]} = `{best}` ({100 * means[best]:.1f}); ours "
                   f"{100 * np.mean(mine):.1f}; relative gain {100 * rel:+.1f}%; sign test over splits "
                   f"{w} wins / {l_} losses, p = {p:.3g}{mis_txt}")
  _, _, p_all = wins_losses([1.0] * pooled_w + [0.0] * pooled_l, [0.0] * pooled_w + [1.0] * pooled_l)
  wins_cells = sum(g >= 0 for _, g in gains)
  lines.append(f"\n**Pooled paired sign test (ours vs the per-cell best baseline, all cells x splits):** "
               f"{pooled_w} wins / {pooled_l} losses, two-sided p = {p_all:.3g}. Ours ≥ best baseline (mean) in "
               f"{wins_cells} of {len(gains)} dataset x setting cells.\n")
  return "\n".join(lines)


def mean_table(rows: list[dict], methods: list[str], columns: list[str], cell_of: Callable[[dict], str | None],
               keys: tuple[str, ...], *, src: str = "metrics", digits: int = 3, title: str = "") -> str:
  """A table with a row per method and a column per cell: the means of `keys` joined by ' / '
  over the rows whose cell_of(row) is that column."""
  lines = [title, "| method | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
  for m in methods:
    vals = []
    for col in columns:
      rs = [r[src] for r in rows if r["method"] == m and cell_of(r) == col]
      if not rs or any(x.get(keys[0]) is None for x in rs[:1]):
        vals.append("–")
        continue
      vals.append(" / ".join(f"{np.mean([x[k] for x in rs]):.{digits}f}" for k in keys))
    if any(v != "–" for v in vals):
      lines.append(f"| {m} | " + " | ".join(vals) + " |")
  return "\n".join(lines)


def cost_medians(rows: list[dict], methods: list[str], keys: tuple[str, ...], *,
                 keep: Callable[[dict], bool] = lambda r: True, title: str = "") -> str:
  """Median of each cost key per method ('–' where a method never reports it)."""
  lines = [title, "| method | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
  for m in methods:
    cs = [r["cost"] for r in rows if r["method"] == m and keep(r)]
    if not cs:
      continue
    cells = []
    for k in keys:
      v = [c[k] for c in cs if c.get(k) is not None]
      cells.append(f"{np.median(v):.4f}" if v else "–")
    lines.append(f"| {m} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def method_cell_table(rows: list[dict], cells: list[str], methods: list[str],
                      columns: list[tuple[str, str, int, str, float]], labels: dict[str, str] | None = None) -> str:
  """Per cell a '### cell (n seeds)' table, a row per method, columns (key, header, digits, src, scale)
  formatted as mean ± std over seeds."""
  labels = labels or {}
  out = []
  for cell in cells:
    seeds = sorted({r["seed"] for r in rows if r["dataset"] == cell})
    out += [f"\n### {cell} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})\n",
            "| method | " + " | ".join(c[1] for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for method in methods:
      rs = [r for r in rows if r["dataset"] == cell and r["method"] == method]
      if rs:
        vals = [mean_std([r[src].get(key) for r in rs], dg, scale) for key, _, dg, src, scale in columns]
        out.append(f"| {labels.get(method, method)} | " + " | ".join(vals) + " |")
  return "\n".join(out) + "\n"


def bar_panels(rows: list[dict], *, panels: list[str], methods: list[str], highlight: str,
               metric: str = "ood_auroc"):
  """One horizontal-bar panel per setting (cells 'dataset:setting'): metric in % per method, mean ± std
  over datasets and splits; `highlight` in red. Returns the figure."""
  import matplotlib.pyplot as plt
  fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
  for ax, setting in zip(axes[0], panels):
    names, means, stds = [], [], []
    for m in methods:
      v = [r["metrics"].get(metric) for r in rows if r["method"] == m and r["dataset"].endswith(":" + setting)]
      v = [x for x in v if x is not None]
      if v:
        names.append(m)
        means.append(100 * np.mean(v))
        stds.append(100 * np.std(v))
    colors = ["tab:red" if n == highlight else "tab:gray" for n in names]
    ax.barh(names[::-1], means[::-1], xerr=stds[::-1], color=colors[::-1])
    ax.axvline(50, color="k", lw=0.5, ls="--")
    ax.set_xlim(0, 100)
    ax.set_title(f"{setting} (mean over datasets x splits)", fontsize=9)
    ax.set_xlabel(f"{metric} (%)")
  fig.tight_layout()
  return fig


def scatter_cells(rows: list[dict], *, cells: list[str], x: tuple[str, str, float],
                  y: tuple[str, str, float], style: Callable[[str], dict], labels: dict[str, str] | None = None,
                  skip: tuple[str, ...] = (), xlabel: str = "", ylabel: str = "", log_x: bool = False,
                  vline: float | None = None):
  """One panel per cell: each method's mean (x, y), x / y given as (src, key, scale); returns the figure."""
  import matplotlib.pyplot as plt
  labels = labels or {}
  ncol = min(3, len(cells))
  nrow = int(np.ceil(len(cells) / ncol))
  fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 4.0 * nrow), squeeze=False)
  for ax, cell in zip(axes.ravel(), cells):
    for method in sorted({r["method"] for r in rows if r["dataset"] == cell} - set(skip)):
      rs = [r for r in rows if r["dataset"] == cell and r["method"] == method]
      ys = [y[2] * r[y[0]][y[1]] for r in rs if r[y[0]].get(y[1]) is not None]
      xs = [x[2] * r[x[0]][x[1]] for r in rs if r[x[0]].get(x[1])]
      if not xs or not ys:
        continue
      ax.scatter(np.mean(xs), np.mean(ys), **style(method))
      ax.annotate(labels.get(method, method), (np.mean(xs), np.mean(ys)), fontsize=7, xytext=(3, 3),
                  textcoords="offset points")
    if log_x:
      ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(cell)
    if vline is not None:
      ax.axvline(vline, color="grey", lw=0.6, ls="--")
  for ax in axes.ravel()[len(cells):]:
    ax.axis("off")
  fig.tight_layout()
  return fig


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
