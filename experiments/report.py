"""`common.row` rows -> markdown tables, paired tests and plots, on pandas and scipy.stats; the formatters come
from `jaxml.metrics.tables` (shared with the method packages' summaries), the figures from `experiments.plots`.

  python -m experiments.report --workdirs runs/a,runs/b [--out table.md] [--metrics acc,nll]
"""

import json
import math
import os
import sys
from typing import Callable, NamedTuple, Sequence

import numpy as np
import pandas as pd
from absl import app, flags
from scipy import stats

from jaxml.metrics import paired_values, wilcoxon_paired
from jaxml.metrics.tables import finite_values, fmt_mean_std, markdown_table, method_cell_table, std_err
from experiments.plots import bar_panels, bar_plot, sample_grid, scatter_cells

__all__ = ["frame", "fmt_mean_std", "std_err", "markdown_table", "table", "pivot_table", "paired", "SignTest",
           "sign_test", "compare", "best_by", "paired_summary", "mean_se_table", "ours_vs_best", "mean_table",
           "cost_medians", "method_cell_table", "bar_plot", "bar_panels", "scatter_cells", "sample_grid"]

KEY = ["dataset", "split", "seed"]   # what pairs two methods' runs


def frame(rows: Sequence[dict], src: str = "metrics") -> pd.DataFrame:
  """One line per row: method, dataset, split, seed and a float column per key of `row[src]` (None -> NaN)."""
  records = [{"method": r["method"], "dataset": r["dataset"], "split": r["split"], "seed": r["seed"], **r[src]}
             for r in rows]
  df = pd.DataFrame.from_records(records, columns=None if records else ["method"] + KEY)
  values = [c for c in df.columns if c not in ("method", *KEY)]
  df[values] = df[values].apply(pd.to_numeric, errors="coerce").astype(float)
  return df


def _col(df: pd.DataFrame, key: str) -> pd.Series:
  return df[key] if key in df else pd.Series(np.nan, index=df.index)


def table(results: dict, metrics: list[str] | None = None) -> str:
  """One markdown table: a row per (dataset, method), a column per metric and cost."""
  rows = results["rows"]
  df, cost = frame(rows), frame(rows, "cost")
  metric_names = metrics or sorted({k for r in rows for k in r["metrics"]})
  cost_names = sorted({k for r in rows for k in r["cost"]})
  lines = [[dataset, method, len(idx)] + [fmt_mean_std(_col(df.loc[idx], m)) for m in metric_names]
           + [fmt_mean_std(_col(cost.loc[idx], c)) for c in cost_names]
           for (dataset, method), idx in df.groupby(["dataset", "method"], sort=False).groups.items()]
  env = results["env"]
  return (f"### {results['experiment']} ({results['preset']}), {results['wall_s']:.0f}s, jax {env.get('jax')} "
          f"on {env.get('devices')} {env.get('platform')}\n\n"
          + markdown_table(["dataset", "method", "n"] + metric_names + [f"cost:{c}" for c in cost_names], lines))


def pivot_table(rows: list[dict], metric: str, *, higher_is_better: bool | None = None,
                digits: int | None = None, se: bool = False, by_dataset: bool = False,
                methods: Sequence[str] | None = None) -> str:
  """Methods (rows) x datasets (columns) of `metric`, mean ± std (`se`: ± s.e.) over splits and seeds; with
  `higher_is_better` set, the best mean of each dataset is bold. `by_dataset`: a line per dataset, a column per
  method instead. `methods`: which methods, in this order (default: all, in order of appearance)."""
  df = frame(rows)
  methods = list(methods) if methods is not None else list(dict.fromkeys(df["method"]))
  datasets = list(dict.fromkeys(df["dataset"]))
  cells = df.assign(v=_col(df, metric)).groupby(["method", "dataset"], sort=False)["v"].agg(list)
  best = {}
  for d in datasets if higher_is_better is not None else ():
    means = {m: np.mean(v) for m in methods if (m, d) in cells.index and (v := finite_values(cells[m, d]))}
    if means:   # ties go to the earlier method
      best[d] = (max if higher_is_better else min)(means, key=means.get)

  def cell(m, d):
    txt = fmt_mean_std(cells[m, d], digits, se=se) if (m, d) in cells.index else "–"
    return f"**{txt}**" if best.get(d) == m else txt

  if by_dataset:
    return markdown_table(["dataset"] + methods, [[d] + [cell(m, d) for m in methods] for d in datasets])
  return markdown_table(["method"] + datasets, [[m] + [cell(m, d) for d in datasets] for m in methods])


def paired(rows: list[dict], a: str, b: str, metric: str, *, dataset: str | None = None
           ) -> tuple[list[float], list[float]]:
  """Values of methods `a` and `b` on the runs both have, matched on (dataset, split, seed); NaN pairs dropped."""
  va, vb = paired_values([r for r in rows if dataset is None or r["dataset"] == dataset], a, b, metric)
  keep = ~(np.isnan(va) | np.isnan(vb))
  return va[keep].tolist(), vb[keep].tolist()


class SignTest(NamedTuple):
  wins: int        # pairs where a is better
  losses: int
  ties: int
  p: float         # two-sided exact binomial p over the non-tied pairs (NaN if none)


def _binom_p(wins: int, losses: int) -> float:
  return float(stats.binomtest(wins, wins + losses).pvalue) if wins + losses else float("nan")


def sign_test(a: Sequence[float], b: Sequence[float], *, higher_is_better: bool = True) -> SignTest:
  """Paired sign test of a against b (ties dropped, exact two-sided binomial p-value)."""
  d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
  d = d if higher_is_better else -d
  wins, losses = int(np.sum(d > 0)), int(np.sum(d < 0))
  return SignTest(wins, losses, int(d.size - wins - losses), _binom_p(wins, losses))


def compare(rows: list[dict], a: str, b: str, metric: str, *, higher_is_better: bool = True,
            dataset: str | None = None) -> dict[str, float]:
  """Paired comparison of method a vs b: n, mean difference (a - b) and its standard error (sample std of the
  differences / sqrt(n), NaN below 2 pairs), sign test, Wilcoxon p."""
  va, vb = paired(rows, a, b, metric, dataset=dataset)
  st = sign_test(va, vb, higher_is_better=higher_is_better)
  d = np.subtract(va, vb)
  return {"n": len(va), "mean_diff": float(np.mean(d)) if va else math.nan, "se_diff": std_err(d),
          "wins": st.wins, "losses": st.losses, "ties": st.ties, "sign_p": st.p,
          "wilcoxon_p": wilcoxon_paired(va, vb) if len(va) >= 2 else math.nan}


def best_by(rows: list[dict], candidates: Sequence[str], *, name: str, select: str,
            higher_is_better: bool = True) -> list[dict]:
  """Per (dataset, split, seed): a copy, named `name`, of the candidate method's row whose `select` metric
  (a validation score) is best; metrics['chosen'] is the index of that method in `candidates`."""
  idx = [i for i, r in enumerate(rows) if r["method"] in candidates and r["metrics"].get(select) is not None]
  df = frame([rows[i] for i in idx]).assign(row=idx)
  if df.empty:
    return []
  df["chosen"] = [candidates.index(m) for m in df["method"]]
  df["score"] = (1.0 if higher_is_better else -1.0) * df[select]
  # best score first, ties to the earlier candidate
  picked = df.sort_values(["score", "chosen"], ascending=[False, True]).groupby(KEY).head(1).sort_values(KEY)
  return [dict(rows[i], method=name, metrics=rows[i]["metrics"] | {"chosen": float(c)}, cost=dict(rows[i]["cost"]))
          for i, c in zip(picked["row"], picked["chosen"])]


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
      good = bool(c["n"]) and (c["mean_diff"] >= 0 if higher_is_better else c["mean_diff"] <= 0)
      count[b] += int(good)
      ok = ok and good
      cells.append(f"{c['mean_diff']:+.3f} ({c['wins']}/{c['losses']}, p={c['wilcoxon_p']:.2g})" if c["n"] else "–")
    every += int(ok)
    lines.append([d] + cells)
  head = markdown_table(["dataset"] + [f"{ours} − {b}: mean {metric} diff (W/L, Wilcoxon p)" for b in baselines],
                        lines)
  tail = "; ".join(f"`{ours}` ≥ `{b}` on {count[b]} of {len(datasets)} datasets" for b in baselines)
  if len(baselines) > 1:
    tail += f"; ≥ every one of them on {every} of {len(datasets)} datasets"
  return head + "\n" + tail + "\n"


def mean_se_table(rows: list[dict], methods: tuple[str, ...], cols: list[tuple[str, str]],
                  se_cols: tuple[str, ...] = ()) -> str:
  """Markdown: one line per (dataset, method) in `methods` order; `cols` = [(metric, header)], mean
  over rows (± standard error for `se_cols`), then total PEG and wall time from the cost."""
  def fmt(vals, se=True):
    vals = finite_values(vals)
    if not vals:
      return "–"
    m = float(np.mean(vals))
    text = f"{m:.3g}" if (abs(m) < 1e-2 or abs(m) >= 1e3) and m != 0 else f"{m:.3f}"
    return text + (f" ± {std_err(vals):.3f}" if se and len(vals) > 1 else "")

  df, cost = frame(rows), frame(rows, "cost")
  lines = []
  for ds in dict.fromkeys(df["dataset"]):
    for m in methods:
      sel = (df["dataset"] == ds) & (df["method"] == m)
      if sel.any():
        lines.append([ds, m, int(sel.sum())] + [fmt(_col(df, k)[sel], se=k in se_cols) for k, _ in cols]
                     + [fmt(_col(cost, c)[sel], se=False) for c in ("peg", "wall_s")])
  return markdown_table(["dataset", "method", "n"] + [c[1] for c in cols] + ["PEG (total)", "wall s"], lines)


def _values(rows: list[dict], method: str, cell: str, key: str, src: str = "metrics") -> list:
  return [r[src].get(key) for r in rows if r["method"] == method and r["dataset"] == cell]


def _cell_means(rows: list[dict], methods: Sequence[str], cell: str, metric: str) -> dict[str, float]:
  """Mean of `metric` per method in `cell` (methods without a value left out)."""
  df = frame([r for r in rows if r["dataset"] == cell and r["method"] in methods])
  means = df.assign(v=_col(df, metric)).groupby("method")["v"].mean().dropna()
  return {m: float(means[m]) for m in methods if m in means.index}


def ours_vs_best(rows: list[dict], *, ours: str, baselines: tuple[str, ...], settings: tuple[str, ...],
                 metric: str = "ood_auroc", second: str = "misc_auroc",
                 names: tuple[str, str] = ("OOD AUROC", "misclassification AUROC")) -> str:
  """Per setting (cells 'dataset:setting'): a table of metric / second (`names` in the text) in % per method, then
  per cell the best baseline, ours, the relative gain and a paired sign test; then a pooled sign test."""
  cells = sorted({r["dataset"] for r in rows})
  methods = [ours, *baselines] + sorted({r["method"] for r in rows} - {ours, *baselines})
  lines, gains, pooled_w, pooled_l = [], [], 0, 0
  for setting in [s for s in settings if any(c.endswith(":" + s) for c in cells)]:
    scells, table_rows = [c for c in cells if c.endswith(":" + setting)], []
    for m in methods:
      vals = []
      for c in scells:
        o, mi = finite_values(_values(rows, m, c, metric)), finite_values(_values(rows, m, c, second))
        txt = "–" if not o else fmt_mean_std(o, 1, scale=100.0) + (f" / {100 * np.mean(mi):.1f}" if mi else "")
        vals.append(f"**{txt}**" if m == ours and o else txt)
      if any(v != "–" for v in vals):
        table_rows.append([m] + vals)
    lines += [f"\n### Setting `{setting}` ({names[0]} / {names[1]}, %, mean ± std over splits)\n",
              markdown_table(["method"] + [c.split(":")[0] for c in scells], table_rows)]
    for c in scells:
      means = _cell_means(rows, baselines, c, metric)
      if not means:
        continue
      best = max(means, key=means.get)
      mine = np.mean(_values(rows, ours, c, metric))
      st = sign_test(*paired(rows, ours, best, metric, dataset=c))   # matched on (split, seed), not row order
      pooled_w, pooled_l = pooled_w + st.wins, pooled_l + st.losses
      rel = (mine - means[best]) / means[best]
      gains.append((c, rel))
      mis = _cell_means(rows, (ours, *baselines), c, second)
      mis_txt = ""
      if ours in mis and len(mis) > 1:
        mb = max((v, m) for m, v in mis.items() if m != ours)
        mis_txt = (f"; {names[1]} ours {100 * mis[ours]:.1f} vs best baseline `{mb[1]}` {100 * mb[0]:.1f} "
                   f"(relative {100 * (mis[ours] - mb[0]) / mb[0]:+.1f}%)")
      lines.append(f"- `{c}`: best baseline by {names[0]} = `{best}` ({100 * means[best]:.1f}); ours "
                   f"{100 * mine:.1f}; relative gain {100 * rel:+.1f}%; sign test over splits "
                   f"{st.wins} wins / {st.losses} losses, p = {st.p:.3g}{mis_txt}")
  lines.append(f"\n**Pooled paired sign test (ours vs the per-cell best baseline, all cells x splits):** "
               f"{pooled_w} wins / {pooled_l} losses, two-sided p = {_binom_p(pooled_w, pooled_l):.3g}. Ours ≥ "
               f"best baseline (mean) in {sum(g >= 0 for _, g in gains)} of {len(gains)} dataset x setting cells.\n")
  return "\n".join(lines)


def mean_table(rows: list[dict], methods: list[str], columns: list[str], cell_of: Callable[[dict], str | None],
               keys: tuple[str, ...], *, src: str = "metrics", digits: int = 3, title: str = "") -> str:
  """A table with a row per method and a column per cell: the means of `keys` joined by ' / '
  over the rows whose cell_of(row) is that column."""
  df = frame(rows, src).assign(cell=[cell_of(r) for r in rows])
  groups = df.groupby(["method", "cell"])
  lines = []
  for m in methods:
    vals = []
    for col in columns:
      g = groups.get_group((m, col)) if (m, col) in groups.groups else None
      ok = g is not None and keys[0] in g and not pd.isna(g[keys[0]].iloc[0])
      vals.append(" / ".join(f"{np.mean(g[k]):.{digits}f}" for k in keys) if ok else "–")
    if any(v != "–" for v in vals):
      lines.append([m] + vals)
  return title + "\n" + markdown_table(["method"] + columns, lines).rstrip("\n")


def cost_medians(rows: list[dict], methods: list[str], keys: tuple[str, ...], *,
                 keep: Callable[[dict], bool] = lambda r: True, title: str = "") -> str:
  """Median of each cost key per method ('–' where a method never reports it)."""
  df = frame([r for r in rows if keep(r)], "cost")
  med = df.groupby("method")[[k for k in keys if k in df]].median()
  lines = [[m] + [f"{med.at[m, k]:.4f}" if k in med and not pd.isna(med.at[m, k]) else "–" for k in keys]
           for m in methods if m in med.index]
  return title + "\n" + markdown_table(["method", *keys], lines).rstrip("\n")


def _main(argv: list[str]) -> None:
  """The CLI: one table per run folder's results.json, printed (and written to --out)."""
  del argv
  FLAGS = flags.FLAGS
  if not FLAGS.workdirs:
    sys.exit("error: --workdirs is required")
  out = []
  for path in (os.path.join(w, "results.json") for w in FLAGS.workdirs):
    if not os.path.exists(path):
      sys.exit(f"error: {path} does not exist")
    with open(path) as f:
      out.append(table(json.load(f), FLAGS.metrics))
  text = "\n".join(out)
  print(text)
  if FLAGS.out:
    with open(FLAGS.out, "w") as f:
      f.write(text)


if __name__ == "__main__":
  flags.DEFINE_list("workdirs", None, "Comma-separated run folders holding results.json.")
  flags.DEFINE_string("out", None, "Also write the markdown here.")
  flags.DEFINE_list("metrics", None, "Metric columns to show (default: all).")
  app.run(_main)
