"""Markdown tables of results.json rows (method, dataset, split, seed, metrics, cost): the one formatter the
method packages' summaries and experiments/report.py share."""

import math
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import stats

__all__ = ["finite_values", "std_err", "fmt_mean_std", "markdown_table", "method_cell_table"]


def finite_values(values: Iterable[Any]) -> list[float]:
  """The finite values as floats (None, NaN and inf dropped)."""
  return [float(v) for v in values if v is not None and np.isfinite(v)]


def std_err(values: Sequence[float]) -> float:
  """Standard error of the mean: sample std / sqrt(n); NaN below 2 values."""
  return float(stats.sem(values)) if len(values) >= 2 else math.nan


def fmt_mean_std(values: Iterable[float | None], digits: int | None = None, *, se: bool = False,
                 scale: float = 1.0) -> str:
  """Mean ± std (population) of the finite values times `scale`; "n/a" if none, the mean alone for one;
  `se`: ± the standard error of the mean instead; digits default: 4 below 10, else 2."""
  vals = [scale * v for v in finite_values(values)]
  if not vals:
    return "n/a"
  m = float(np.mean(vals))
  d = digits if digits is not None else (4 if abs(m) < 10 else 2)
  spread = std_err(vals) if se else float(np.std(vals))
  return f"{m:.{d}f}" if len(vals) == 1 else f"{m:.{d}f} ± {spread:.{d}f}"


def markdown_table(header: Sequence[str], lines: Iterable[Sequence[Any]]) -> str:
  """A markdown table; cells are formatted with str()."""
  out = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
  out += ["| " + " | ".join(map(str, cells)) + " |" for cells in lines]
  return "\n".join(out) + "\n"


def method_cell_table(rows: list[dict], cells: list[str], methods: list[str],
                      columns: list[tuple[str, str, int, str, float]], labels: dict[str, str] | None = None) -> str:
  """Per cell a '### cell (n seeds)' table, a row per method, columns (key, header, digits, src, scale)
  formatted as mean ± std over seeds."""
  labels = labels or {}
  out = []
  for cell in cells:
    seeds = sorted({r["seed"] for r in rows if r["dataset"] == cell})
    lines = []
    for method in methods:
      rs = [r for r in rows if r["dataset"] == cell and r["method"] == method]
      if rs:
        lines.append([labels.get(method, method)] + [fmt_mean_std([r[src].get(key) for r in rs], dg, scale=scale)
                                                     for key, _, dg, src, scale in columns])
    out += [f"\n### {cell} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})\n",
            markdown_table(["method"] + [c[1] for c in columns], lines).rstrip("\n")]
  return "\n".join(out) + "\n"
