"""Result rows of the benchmark and their read-outs: per-run rows, validation choices, per-cell verdicts.

  rows = scored_rows(cost, scores, ood_nodes, id_nodes, labels, train_s)     # one (method, metrics, cost) per scorer
  best, table = rank(rows, grid_names, "ood_auroc", "guard grid, OOD AUROC")  # a validation choice
  text, cells = cell_verdict(rows, baselines, ours="xeviprobe")               # ours vs the best baseline per cell
"""

from typing import Mapping

import numpy as np

from jaxml.eviprobe import pipeline as pl
from jaxml.metrics import finite_values, markdown_table, ood, paired_values, std_err, wilcoxon_paired

__all__ = ["scored_rows", "isolated_rows", "rank", "validation_choice", "misc_choice", "guard_choice", "paired",
           "cell_verdict"]


def scored_rows(cost: Mapping[str, dict], scores: Mapping[str, tuple[dict, float]], ood_nodes: np.ndarray,
                id_nodes: np.ndarray, labels: np.ndarray, train_s: float) -> list[tuple[str, dict, dict]]:
  """(method, metrics, cost) per scorer. Misclassification is also ranked against two common error sets: the
  frozen backbone's (every post-hoc row predicts with it) and GPN's own (`misc_auroc_backbone` / `_gpn`)."""
  refs = {name: scores[m][0]["pred"] for name, m in (("backbone", pl.OURS), ("gpn", "gpn")) if m in scores}
  out = []
  for m, (sc, secs) in scores.items():
    met = pl.metrics_for(sc, ood_nodes, id_nodes, labels, ref_preds=refs)
    if "n_clamped" in sc:
      met["n_clamped"] = sc["n_clamped"]
    c = {"score_s": secs} | dict(cost.get(m, {}))
    if m in ("ensemble", "ensemble_var"):
      c["train_s"] = train_s          # the stacked run trains all members at once
    out.append((m, met, c))
  return out


def isolated_rows(iso: Mapping[str, dict], clean: Mapping[str, tuple[dict, float]],
                  id_nodes: np.ndarray) -> list[tuple[str, dict, dict]]:
  """OOD metrics of one-node-at-a-time scores (`pipeline.isolated_scores`) against the clean ID test nodes."""
  out = []
  for m, sc in iso["scores"].items():
    s_all = np.r_[sc, clean[m][0]["ood"][id_nodes]]
    lab = np.r_[np.ones(sc.size), np.zeros(id_nodes.size)]
    out.append((m, {"ood_auroc": ood.auroc(s_all, lab), "ood_aupr": ood.aupr(s_all, lab),
                    "ood_fpr95": ood.fpr_at_tpr(s_all, lab, 0.95)},
                {"isolated_wall_s": iso["wall_s"], "nodes": sc.size}))
  return out


def _mean(rows, method, metric, cell_suffix=None) -> float:
  v = finite_values(r["metrics"].get(metric) for r in rows
                    if r["method"] == method and (cell_suffix is None or r["dataset"].endswith(":" + cell_suffix)))
  return float(np.mean(v)) if v else float("nan")


def rank(rows: list[dict], grid: list[str], metric: str, title: str, digits: int = 1) -> tuple[str, str]:
  """(best row of `grid` by mean `metric` over every cell x split present, markdown table); ties keep the order."""
  grid = [m for m in grid if any(r["method"] == m for r in rows)]
  if not grid:
    return "", ""
  cells = sorted({r["dataset"].split(":")[1] for r in rows if r["method"] in grid})
  means = {m: _mean(rows, m, metric) for m in grid}
  best = max(grid, key=lambda m: (means[m], -grid.index(m)))
  lines = [[m + (" **(chosen)**" if m == best else "")] + [f"{100 * _mean(rows, m, metric, c):.{digits}f}"
                                                            for c in cells] + [f"{100 * means[m]:.2f}"] for m in grid]
  return best, (f"\n### Validation benchmark: {title} (%) mean over graphs x splits\n\n"
                + markdown_table(["row", *cells, "mean"], lines).rstrip("\n"))


def validation_choice(rows: list[dict]) -> tuple[str, str]:
  """(chosen propagation row, markdown table): the grid by mean OOD AUROC over every cell x split (spec §9.2)."""
  return rank(rows, list(pl.GRID), "ood_auroc", "propagation grid, OOD AUROC", 1)


def misc_choice(rows: list[dict]) -> tuple[str, str]:
  """(chosen misclassification read-out row, table): `misc_<read-out>` rows by mean misclassification AUROC."""
  return rank(rows, list(pl.MISC_GRID), "misc_auroc", "misclassification read-out, misclassification AUROC", 2)


def guard_choice(rows: list[dict]) -> tuple[str, str]:
  """(chosen guard row, table): the extension's guards by mean OOD AUROC (ties: smaller γ_o, then γ_c)."""
  return rank(rows, list(pl.GUARD_GRID), "ood_auroc", "own-evidence guard grid, OOD AUROC", 1)


def paired(rows: list[dict], a: str, b: str, metric: str, cell: str) -> tuple[np.ndarray, np.ndarray]:
  """Finite values of methods a and b in `cell` on the runs both have, matched on (split, seed), in key order."""
  va, vb = paired_values([r for r in rows if r["dataset"] == cell], a, b, metric)
  keep = np.isfinite(va) & np.isfinite(vb)
  return va[keep], vb[keep]


def _versus(rows, ours, other, metric, cell) -> dict:
  """Paired comparison: means ± s.e., difference ± s.e., wins / losses, t-test and Wilcoxon p (≥ 5 pairs)."""
  from scipy.stats import ttest_rel
  a, b = paired(rows, ours, other, metric, cell)
  d = a - b
  wins, losses = int((d > 0).sum()), int((d < 0).sum())
  big = a.size >= 5 and wins + losses > 0
  return dict(other=other, n=int(a.size), ours=float(a.mean()), ours_se=std_err(a), other_mean=float(b.mean()),
              other_se=std_err(b), diff=float(d.mean()), diff_se=std_err(d), wins=wins, losses=losses,
              t_p=float(ttest_rel(a, b).pvalue) if big else float("nan"),
              wilcoxon_p=float(wilcoxon_paired(list(a), list(b))) if big else float("nan"))


def _best(rows, baselines, metric, cell):
  means = {m: np.mean(v) for m in baselines
           if (v := [r["metrics"][metric] for r in rows if r["method"] == m and r["dataset"] == cell
                     and r["metrics"].get(metric) is not None])}
  return max(means, key=means.get) if means else None


def cell_verdict(rows: list[dict], baselines: tuple[str, ...], *, ours: str = pl.OURS,
                 misc_band: float = 0.01) -> tuple[str, list[dict]]:
  """Per dataset x setting cell: `ours` against the best baseline (by mean over the cell's runs; GPN included when
  listed) on OOD AUROC and misclassification AUROC (each model on its own errors), and against GPN; paired on
  split and init. Returns (markdown, one dict per cell). A cell is won on OOD when the mean is ≥ the best
  baseline's, and met on misclassification when within `misc_band` of it."""
  pct = lambda v: f"{100 * v['ours']:.2f} ± {100 * v['ours_se']:.2f}"  # noqa: E731
  out, lines = [], [f"| cell | runs | metric | {ours} | best baseline | diff ± s.e. (W/L) | t-test p | Wilcoxon p "
                    "| vs GPN: diff ± s.e. (W/L), t p |", "|---" * 9 + "|"]
  for c in sorted({r["dataset"] for r in rows if r["method"] == ours}):
    res = {"cell": c}
    for metric, name in (("ood_auroc", "OOD"), ("misc_auroc", "misc")):
      b = _best(rows, baselines, metric, c)
      if b is None or not paired(rows, ours, b, metric, c)[0].size:
        continue
      v = _versus(rows, ours, b, metric, c)
      g = _versus(rows, ours, "gpn", metric, c) if "gpn" in baselines and paired(
          rows, ours, "gpn", metric, c)[0].size else None
      res[metric], res[metric + "_gpn"] = v, g
      gtxt = "–" if g is None else f"{100 * g['diff']:+.2f} ± {100 * g['diff_se']:.2f} ({g['wins']}/{g['losses']}), {g['t_p']:.2g}"
      lines.append(f"| {c} | {v['n']} | {name} | {pct(v)} | {b} {100 * v['other_mean']:.2f} ± {100 * v['other_se']:.2f} "
                   f"| {100 * v['diff']:+.2f} ± {100 * v['diff_se']:.2f} ({v['wins']}/{v['losses']}) | {v['t_p']:.2g} "
                   f"| {v['wilcoxon_p']:.2g} | {gtxt} |")
    res["ood_won"] = "ood_auroc" in res and res["ood_auroc"]["diff"] >= 0
    res["misc_met"] = "misc_auroc" in res and res["misc_auroc"]["diff"] >= -misc_band
    out.append(res)
  won = sum(r["ood_won"] for r in out)
  met, with_misc = sum(r["misc_met"] for r in out), sum("misc_auroc" in r for r in out)
  text = (f"\n### {ours} vs the best baseline per cell (mean ± s.e. over runs; paired on split and init)\n\n"
          + "\n".join(lines) + f"\n\nOOD AUROC ≥ the best baseline in {won} of {len(out)} cells; misclassification "
          f"AUROC within {100 * misc_band:g} point of the best baseline in {met} of the {with_misc} cells that have it.\n")
  return text, out
