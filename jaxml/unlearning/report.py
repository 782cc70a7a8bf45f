"""Reporting of unlearning runs from results.json rows: labels, columns, cell order, and the paper's class
sweep (forget accuracy per forgotten class next to the head's class at the mean representation).
Cells are 'dataset/regime' or 'dataset/class/<c>'; `synthetic_rows` carry every reported key."""

import numpy as np

from jaxml.metrics.tables import method_cell_table
from jaxml.unlearning import baselines
from jaxml.unlearning import evaluate as ev

__all__ = ["LABELS", "REGIMES", "COLUMNS", "PAPER_COLUMNS", "cells", "sweep_cells", "first_sweep_cells", "mean",
           "sweep_series", "forget_acc_tables", "MASKED", "must_reach", "must_reach_table", "pooled_sweep",
           "regime_cells", "gap_summary", "paper_summary", "sweep_plot", "synthetic_rows", "SWEEP_METHODS", "summary",
           "style", "GAP_PLOT", "fmt_value"]

REGIMES = ("class", "subclass", "random")
LABELS = {"ru": "RU (ours)", "ru_zs": "RU zero-shot (ours)", "ru_uniform": "RU uniform target (ext.)",
          "ru_zs_uniform": "RU zero-shot, uniform target (ext.)",
          "ru_zs_anchor": "RU zero-shot, uniform target + identity anchor, weight from D_f (ext.)",
          "ru_val": "RU, grid value (grids.ru_val) chosen on validation",
          "sisa": "SISA", "unsir": "UNSIR", "gkt": "GKT (zero-shot)", "finetune": "FT", "grad_ascent": "GA",
          "neggrad_plus": "NegGrad+", "random_labels": "RL", "l1_sparse": "l1-sparse", "salun": "SalUn",
          "scrub": "SCRUB", "boundary_shrink": "Boundary shrink", "bad_teacher": "Bad Teacher",
          "head_only": "Head-only (control)", "emmn": "EMMN (zero-shot)", "jit": "JiT (zero-shot)",
          "retrain": "Retrain", "original": "Original",
          "original_masked": "Original, forgotten class masked in the head (diagnostic)"}
# Pseudo-method of `must_reach`: the original with the forgotten classes' logits at -inf (`runner.masked_head_shift`,
# recorded on the original's rows): not an unlearning method, it shows where the bar's TA_r side is reachable at all.
MASKED = "original_masked"
# (key, header, digits, src, scale): our stricter table, then the paper's columns (metrics unscaled).
COLUMNS = [(k, h, d, "metrics", 1.0) for k, h, d in (
    ("UA", "UA", 1), ("RA", "RA", 1), ("TA", "TA", 1), ("TA_f", "TA_f", 1), ("MIA", "MIA", 1),
    ("MIA_AUC", "MIA-AUC", 3), ("avg_gap", "Avg. Gap", 2))]
COLUMNS += [("rte", "RTE steady %", 2, "cost", 100.0), ("rte_wall", "RTE wall %", 1, "cost", 100.0),
            ("probe_f", "probe_f", 1, "metrics", 1.0), ("CKA_r", "CKA_r", 3, "metrics", 1.0),
            ("JS_t", "JS_t", 3, "metrics", 1.0)]
PAPER_COLUMNS = [(k, h, d, "metrics", 1.0) for k, h, d in (
    ("RA", "Retain acc", 1), ("FA", "Forget acc", 1), ("TA_r", "Test acc (retained cl.)", 1),
    ("TA_f", "Test acc (forgotten cl.)", 1), ("MIA_AUC", "MIA AUC", 3), ("KL_t", "KL to Retrain (test)", 3),
    ("JS_t", "JS to Retrain (test)", 3), ("KL_f", "KL (forget)", 3), ("CKA_r", "CKA (retain)", 3))]
PAPER_COLUMNS += [("steady_s", "time s", 3, "cost", 1.0), ("rte", "time / Retrain %", 2, "cost", 100.0)]


def _cell_key(c: str) -> tuple:
  parts = c.split("/")
  return parts[0], REGIMES.index(parts[1]), int(parts[2]) if len(parts) > 2 else -1


def cells(rows: list[dict]) -> list[str]:
  """Cells 'dataset/regime', or 'dataset/class/<c>' in a class sweep, in a stable order."""
  return sorted({r["dataset"] for r in rows}, key=_cell_key)


def sweep_cells(rows: list[dict]) -> list[str]:
  """The class-sweep cells 'dataset/class/<c>'."""
  return [c for c in cells(rows) if len(c.split("/")) == 3]


def _sweep_by_dataset(rows: list[dict]) -> dict[str, list[str]]:
  """{dataset: its class-sweep cells}, datasets sorted."""
  sweep = sweep_cells(rows)
  return {ds: [c for c in sweep if c.split("/")[0] == ds] for ds in sorted({c.split("/")[0] for c in sweep})}


def first_sweep_cells(rows: list[dict]) -> list[str]:
  """Per dataset, the first forgotten class of the sweep (the paper's table: class 0 first)."""
  return [cs[0] for cs in _sweep_by_dataset(rows).values()]


def mean(rows: list[dict], key: str) -> float:
  """Mean of metrics[key] over the rows that have it (nan when none has)."""
  v = [r["metrics"][key] for r in rows if r["metrics"].get(key) is not None]
  return float(np.mean(v)) if v else float("nan")


def _per_cell(rows: list[dict], cs: list[str], method: str, key: str) -> list[float]:
  return [mean([r for r in rows if r["dataset"] == c and r["method"] == method], key) for c in cs]


def pooled_sweep(rows: list[dict]) -> tuple[list[dict], list[str]]:
  """The sweep's rows with every forgotten class of a dataset in one cell (for the paper's columns
  as mean ± std over classes and seeds), and those cells."""
  sweep = set(sweep_cells(rows))
  names = {ds: f"{ds}/class: mean ± std over {len(cs)} forgotten classes x seeds"
           for ds, cs in _sweep_by_dataset(rows).items()}
  pooled = [r | {"dataset": names[r["dataset"].split("/")[0]]} for r in rows if r["dataset"] in sweep]
  return pooled, list(names.values())


def sweep_series(rows: list[dict], dataset: str, methods,
                 key: str = "FA") -> tuple[list[int], list[bool], dict[str, list[float]]]:
  """One dataset's sweep: forgotten classes, whether each is the head's class at the mean z
  (collision, from the original model's rows), and each method's metric `key` (forget accuracy by
  default) per class, mean over seeds (methods with no rows left out)."""
  cs = _sweep_by_dataset(rows).get(dataset, [])
  hit = [h >= 0.5 for h in _per_cell(rows, cs, "original", "mean_is_forget_class")]
  vals = {m: _per_cell(rows, cs, m, key) for m in methods}
  return [int(c.split("/")[2]) for c in cs], hit, {m: v for m, v in vals.items() if not all(np.isnan(v))}


def _argmax_cell(rows: list[dict], cell: str) -> str:
  """The head's class at the mean z over the seeds of a cell: one class, or each seed's ('4/4/1')."""
  a = [int(r["metrics"]["head_mean_argmax"]) for r in sorted(rows, key=lambda r: r["seed"])
       if r["dataset"] == cell and r["method"] == "original" and "head_mean_argmax" in r["metrics"]]
  return "-" if not a else str(a[0]) if len(set(a)) == 1 else "/".join(map(str, a))


def forget_acc_tables(rows: list[dict], methods: list[str]) -> str:
  """Per dataset of the sweep: forget accuracy of every method for every forgotten class (mean over
  seeds), with argmax / max-probability of h(mean z), the forget/retain overlap of z (when recorded)
  and means over colliding and other classes."""
  out = []
  for ds, cs in _sweep_by_dataset(rows).items():
    classes = [c.split("/")[2] for c in cs]
    out += [f"\n### {ds}: forget accuracy (%) per forgotten class, mean over seeds\n",
            "| method | " + " | ".join(classes) + " | mean | colliding cl. | other cl. |",
            "|---" * (len(classes) + 4) + "|"]
    pm = _per_cell(rows, cs, "original", "head_mean_pmax")
    hit = _per_cell(rows, cs, "original", "mean_is_forget_class")
    out.append("| argmax h(mean z) (p) | " + " | ".join(f"{_argmax_cell(rows, c)} ({q:.2f})" for c, q in zip(cs, pm))
               + " | | | |")
    near = _per_cell(rows, cs, "original", "retain_knn_forget")
    if not all(np.isnan(near)):   # runs from before `runner.representation_overlap` lack it
      out.append("| D_r rows with a D_f row among their z-neighbours (%) | " + " | ".join(f"{v:.1f}" for v in near)
                 + f" | {np.nanmean(near):.1f} | | |")
    for m in methods:
      fa = _per_cell(rows, cs, m, "FA")
      if all(np.isnan(fa)):
        continue
      col = [f for f, h in zip(fa, hit) if h >= 0.5]
      oth = [f for f, h in zip(fa, hit) if h < 0.5]
      agg = lambda v: f"{np.mean(v):.1f}" if v else "-"  # noqa: E731
      out.append(f"| {LABELS.get(m, m)} | " + " | ".join(f"{f:.1f}" for f in fa)
                 + f" | {np.nanmean(fa):.1f} | {agg(col)} | {agg(oth)} |")
  return "\n".join(out)


def must_reach(rows: list[dict], dataset: str, method: str, *, fa_tol: float = ev.FA_TOL,
               acc_tol: float = ev.ACC_TOL) -> dict[int, dict[str, float]]:
  """Per forgotten class of `dataset`'s sweep (means over seeds): the method's `evaluate.bar_gaps` and `ok` (1.0
  when the bar is met); classes without rows of the method are left out. MASKED reads the original's rows."""
  out = {}
  for c in _sweep_by_dataset(rows).get(dataset, []):
    of = lambda m, k: mean([r for r in rows if r["dataset"] == c and r["method"] == m], k)  # noqa: E731,B023
    accs = lambda m: {k: of(m, k) for k in ("FA", "RA", "TA", "TA_r")}  # noqa: E731,B023
    orig = accs("original")
    m = accs(method) if method != MASKED else {"FA": of("original", "mask_FA"), "TA": float("nan"),
                                               "RA": orig["RA"] + of("original", "mask_dRA"),
                                               "TA_r": orig["TA_r"] + of("original", "mask_dTA_r")}
    if np.isnan(m["FA"]):
      continue
    means = [m, accs("retrain"), orig]
    ok = float(ev.bar_score(*means, fa_tol=fa_tol, acc_tol=acc_tol) <= 1.0)
    out[int(c.split("/")[2])] = ev.bar_gaps(*means) | {"ok": ok}
  return out


def must_reach_table(rows: list[dict], methods: list[str]) -> str:
  """Per dataset of the sweep and method: classes meeting `must_reach` and per class dFA / dRA / dTA_r (a failing
  class marked *); the masked original (MASKED) last, as a diagnostic, where the rows record it."""
  out = [f"\n### Must reach: |FA - FA(Retrain)| <= {ev.FA_TOL:g}, |RA - RA(orig.)| and |TA_r - TA_r(orig.)| <= "
         f"{ev.ACC_TOL:g} per forgotten class (cells: dFA / dRA / dTA_r)\n"]
  for ds in _sweep_by_dataset(rows):
    res = {m: v for m in [*methods, MASKED] if (v := must_reach(rows, ds, m))}
    classes = sorted({c for v in res.values() for c in v})
    out += ["| " + ds + " | classes met | " + " | ".join(str(c) for c in classes) + " |",
            "|---" * (len(classes) + 2) + "|"]
    for m, v in res.items():
      cells_ = [(f"{v[c]['dFA']:+.1f} / {v[c]['dRA']:+.1f} / {v[c]['dTA_r']:+.1f}" + ("" if v[c]["ok"] else " *"))
                if c in v else "" for c in classes]
      out.append(f"| {LABELS.get(m, m)} | {int(sum(d['ok'] for d in v.values()))}/{len(v)} | " + " | ".join(cells_)
                 + " |")
    out.append("")
  return "\n".join(out)


def regime_cells(rows: list[dict]) -> list[str]:
  """The cells 'dataset/regime' (our stricter table), not the class-sweep ones."""
  return [c for c in cells(rows) if len(c.split("/")) == 2]


def _gap(rows: list[dict], cell: str, method: str, src: str = "metrics", key: str = "avg_gap") -> list[float]:
  return [r[src][key] for r in rows if r["dataset"] == cell and r["method"] == method and r[src].get(key) is not None]


def gap_summary(rows: list[dict], baselines: list[str], zero_shot: list[str]) -> str:
  """Per 'dataset/regime' cell: RU's and the uniform target's Avg. Gap (mean ± std over seeds), the best of
  `baselines` by mean Avg. Gap and whether RU is at or below it, RU's RTE (%), and RU zero-shot against the best
  of `zero_shot`. Methods without rows in a cell are left out of its comparison."""
  def ms(v: list[float], scale: float = 1.0, digits: int = 2) -> str:
    return f"{scale * np.mean(v):.{digits}f} ± {scale * np.std(v):.{digits}f}" if v else "n/a"

  def best(cell: str, methods: list[str]) -> tuple[str, float] | None:
    means = {m: float(np.mean(_gap(rows, cell, m))) for m in methods if _gap(rows, cell, m)}
    return min(means.items(), key=lambda kv: kv[1]) if means else None

  out = ["| cell | RU gap | RU uniform target gap | best baseline (gap) | RU ≤ best? | RU RTE steady % | RU-zs gap "
         "| best other zero-shot (gap) | RU-zs better? |", "|---" * 9 + "|"]
  for c in regime_cells(rows):
    ru, zs = _gap(rows, c, "ru"), _gap(rows, c, "ru_zs")
    b, bz = best(c, baselines), best(c, zero_shot)
    cmp = lambda v, o: "n/a" if not v or o is None else ("yes" if np.mean(v) <= o[1] else "no")  # noqa: E731
    out.append(f"| {c} | {ms(ru)} | {ms(_gap(rows, c, 'ru_uniform'))} | "
               + (f"{LABELS.get(b[0], b[0])} ({b[1]:.2f})" if b else "n/a") + f" | {cmp(ru, b)} | "
               + f"{ms(_gap(rows, c, 'ru', 'cost', 'rte'), 100.0, 1)} | {ms(zs)} | "
               + (f"{LABELS.get(bz[0], bz[0])} ({bz[1]:.2f})" if bz else "n/a") + f" | {cmp(zs, bz)} |")
  return "\n".join(out) + "\n"


def paper_summary(rows: list[dict], methods: list[str]) -> str:
  """paper_summary.md: the paper's columns (mean ± std over seeds) for the sweep's first class and over all its
  classes, `forget_acc_tables` and `must_reach_table`."""
  pooled, pooled_cells = pooled_sweep(rows)
  return "\n".join(["## The paper's table (fixed settings)\n",
                    method_cell_table(rows, first_sweep_cells(rows), methods, PAPER_COLUMNS, LABELS)
                    + method_cell_table(pooled, pooled_cells, methods, PAPER_COLUMNS, LABELS),
                    forget_acc_tables(rows, methods),
                    must_reach_table(rows, [m for m in methods if m != "original"])]) + "\n"


# Retrain, the RU rows and the zero-shot baselines: the methods of `sweep_plot`.
SWEEP_METHODS = ("retrain", "ru", "ru_val", "ru_uniform", "ru_zs", "ru_zs_uniform", "ru_zs_anchor", "emmn", "gkt")


def sweep_plot(rows: list[dict], methods: tuple[str, ...] = SWEEP_METHODS):
  """Figure per forgotten class, the bar's two sides: forget accuracy (top; the head's classes at the mean
  representation shaded) and retained-class test accuracy (bottom; the original dashed)."""
  import matplotlib.pyplot as plt
  datasets = list(_sweep_by_dataset(rows))
  fig, axes = plt.subplots(2, max(len(datasets), 1), figsize=(5.5 * max(len(datasets), 1), 7.6), squeeze=False)
  panels = (("FA", "forget accuracy %", methods),
            ("TA_r", "test accuracy, retained classes %", ("original",) + methods))
  for j, ds in enumerate(datasets):
    for ax, (key, ylabel, ms) in zip(axes[:, j], panels):
      xs, hit, vals = sweep_series(rows, ds, ms, key)
      for x in [x for x, h in zip(xs, hit) if h]:
        ax.axvspan(x - 0.5, x + 0.5, color="0.85", zorder=0)
      for m, v in vals.items():
        style = dict(color="k", linestyle="--") if m == "original" else dict(marker="o")
        ax.plot(xs, v, label=LABELS.get(m, m), **style)
      ax.set(xlabel="forgotten class", ylabel=ylabel, xticks=xs)
      ax.legend(fontsize=6)
    axes[0, j].set_title(f"{ds}: shaded = head's class at the mean z")
  fig.tight_layout()
  return fig


def synthetic_rows(methods: list[str], *, paper_table: bool) -> list[dict]:
  """Rows with every reported metric and cost key (two forgotten classes when `paper_table`)."""
  keys = {c[0] for c in COLUMNS + PAPER_COLUMNS} - {"rte", "rte_wall", "steady_s"}
  rows = []
  for i, c in enumerate((0, 1) if paper_table else (None,)):
    coll = {"head_mean_argmax": 1.0, "head_mean_pmax": 0.5, "forget_class": float(c or 0),
            "mean_is_forget_class": float(c == 1), "retain_knn_forget": 5.0}
    for j, m in enumerate(methods):
      rows.append({"method": m, "dataset": "digits/class" + ("" if c is None else f"/{c}"), "split": 0, "seed": 0,
                   "metrics": {k: float(10 * i + j) for k in keys} | coll,
                   "cost": {k: 1.0 + j for k in ("rte", "rte_wall", "steady_s", "wall_s", "steps")}})
  return rows


def summary(rows: list[dict], methods: list[str]) -> str:
  """summary.md: RU's Avg. Gap against the best trained and zero-shot baseline per 'dataset/regime' cell
  (`gap_summary`, when the rows have such cells), then the COLUMNS per cell (mean ± std over seeds)."""
  text = ""
  if regime_cells(rows):
    trained = [m for m in methods if m in baselines.BASELINES and m != "retrain"]
    text = ("## Avg. Gap: RU against the best baseline per cell\n\n"
            + gap_summary(rows, trained, [m for m in methods if m in baselines.ZERO_SHOT_BASELINES]) + "\n")
  return text + method_cell_table(rows, cells(rows), methods, COLUMNS, LABELS)


def style(method: str) -> dict:
  """Marker of a method in the Avg. Gap vs run time plot: RU rows red stars, zero-shot baselines green."""
  if method.startswith("ru"):
    return dict(color="C3", marker="*", s=140)
  return dict(color="C2" if method in baselines.ZERO_SHOT_BASELINES else "C0", marker="o", s=40)


# The Avg. Gap vs run time plot (avg_gap_vs_rte.png): the keyword arguments of a scatter of cells.
GAP_PLOT = dict(x=("cost", "rte", 100.0), y=("metrics", "avg_gap", 1.0), style=style, labels=LABELS,
                skip=("original", "retrain"), log_x=True, vline=5.0,
                xlabel="run time / Retrain run time (%, steady, log)", ylabel="Avg. Gap to Retrain (lower is better)")


def fmt_value(v) -> str:
  """A chosen grid value for a log line: numbers in %g, anything else (a transform name) as is."""
  return f"{v:g}" if isinstance(v, (int, float)) else str(v)
