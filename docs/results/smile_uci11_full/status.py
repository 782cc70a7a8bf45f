"""Status table of the full-budget uci11 jobs in this folder beside the 2 % table (the README's first table).

  PYTHONPATH=. .venv/bin/python docs/results/smile_uci11_full/status.py      # from the repository root
pSMILE = psmile_naive or psmile_clamp chosen per split on validation LPPD (report.best_by, as the merge does).
A named extension, each baseline's grid extended a decade at a time beyond an edge while its validation choice is the
edge of the grid so far (SGLD 1e-7, 1e-8, … below 1e-6, 1e-3, … above 1e-4; SGHMC 1e-5, … below 1e-4, 1e-1, … above
1e-2; at most MAX_DECADES beyond the authors' grid; extend_edges.sh, runs in <method>_<ε₀>/<job>/), enters through
experiments.smile_uci.extend_grid (validation LPPD over the union grid, as `--extend` does) in its own columns.
`--pending` prints the extension runs now due, one "<job> <method> <ε₀>" per line: extend_edges.sh runs those (and
asks again, since a new run can make the next decade due), so the grids live only in GRIDS here.
"""

import glob
import json
import math
import os
import sys
from collections import defaultdict

from experiments import report
from experiments.smile_uci import extend_grid

HERE = "docs/results/smile_uci11_full"
VARIANTS = ("psmile_naive", "psmile_clamp")
# method -> the authors' ε₀ grid edges (low, high); extensions go a decade at a time beyond them.
GRIDS = {"sgld": (1e-6, 1e-4), "sghmc": (1e-4, 1e-2)}
MAX_DECADES = 3


def _name(eps: float) -> str:
  """Folder-name form of a power of ten, e.g. 1e-07 -> '1e-7'."""
  return f"1e{round(math.log10(eps))}"


def _due(full: dict, grids: dict, k: tuple) -> list[tuple[str, str]]:
  """(method, ε₀) extension runs due on (dataset, split) k: the baseline's choice over the grid so far is that grid's
  lowest (highest) value and the next decade down (up) is within MAX_DECADES of the authors' edge. (A run already
  here is in the grid, so it is never due again.)"""
  due = []
  for m, (low, high) in GRIDS.items():
    chosen, grid = full[k][m + "_ext"]["metrics"]["step_size0"], grids[k, m]
    if math.isclose(chosen, min(grid)) and min(grid) / 10 > low * 10 ** -(MAX_DECADES + 0.5):
      due.append((m, _name(min(grid) / 10)))
    if math.isclose(chosen, max(grid)) and max(grid) * 10 < high * 10 ** (MAX_DECADES + 0.5):
      due.append((m, _name(max(grid) * 10)))
  return due


def main(argv: list[str]) -> None:
  full, wall, job = defaultdict(dict), {}, {}
  for f in sorted(glob.glob(f"{HERE}/*/results.json")):
    res = json.load(open(f))
    rows = [r for r in res["rows"] if r["method"] in VARIANTS + ("sgld", "sghmc")]
    rows += report.best_by(rows, VARIANTS, name="best", select="valid_lppd")
    for r in rows:
      full[r["dataset"], r["split"]][r["method"]] = r
      wall[r["dataset"], r["split"]] = res["wall_s"]
      job[r["dataset"], r["split"]] = os.path.basename(os.path.dirname(f))   # run.sh's name: the config's split index
  grids = {}
  for k, cell in full.items():   # a baseline not extended (interior choice) keeps its row
    for m in GRIDS:
      cell[m + "_ext"] = cell[m]
      grids[k, m] = set(GRIDS[m])   # the edges are all that _due reads
  for m in GRIDS:
    for f in sorted(glob.glob(f"{HERE}/{m}_1e*/*/results.json")):
      (e,) = [r for r in json.load(open(f))["rows"] if r["method"] == m]
      k = e["dataset"], e["split"]
      if k in full:
        (full[k][m + "_ext"],) = extend_grid([full[k][m + "_ext"]], [e])
        grids[k, m].add(e["metrics"]["step_size0"])
  if "--pending" in argv:
    for k in sorted(full):
      for m, eps in _due(full, grids, k):
        print(f"{job[k]} {m} {eps}")
    return
  low = defaultdict(dict)
  for r in json.load(open("docs/results/smile_uci11_results.json"))["rows"]:
    low[r["dataset"], r["split"]][r["method"]] = r["metrics"]["lppd"]
  lppd = lambda k, m: full[k][m]["metrics"]["lppd"]
  wl = lambda d: f"{sum(x >= 0 for x in d)}/{sum(x < 0 for x in d)}"
  mean = lambda d: sum(d) / len(d)
  print("| set | splits done | psmile_best − sgld (W/L) | psmile_best − sghmc (W/L) | chosen (variant, ε₀) | "
        "at 2 %: − sgld, − sghmc | extended grids: − sgld (W/L; ε₀) | − sghmc (W/L; ε₀) | wall s (results.json) |\n"
        "|---|---|---|---|---|---|---|---|---|")
  for s in sorted({k[0] for k in full}):
    ks = sorted(k for k in full if k[0] == s)
    d1, d2 = [lppd(k, "best") - lppd(k, "sgld") for k in ks], [lppd(k, "best") - lppd(k, "sghmc") for k in ks]
    l1 = [low[k]["psmile_best"] - low[k]["sgld"] for k in ks]
    l2 = [low[k]["psmile_best"] - low[k]["sghmc"] for k in ks]
    chosen = "; ".join(f"{VARIANTS[int(full[k]['best']['metrics']['chosen'])].replace('psmile_', '')} "
                       f"{full[k]['best']['metrics']['step_size0']:g}" for k in ks)
    ext = []
    for m in GRIDS:
      d = [lppd(k, "best") - lppd(k, m + "_ext") for k in ks]
      chosen_eps = [full[k][m + "_ext"]["metrics"]["step_size0"] for k in ks]
      pending = any(due_m == m for k in ks for due_m, _ in _due(full, grids, k))
      ext.append(f"{mean(d):+.3f} ({wl(d)}; " + ", ".join(f"{x:g}" for x in chosen_eps) + ")"
                 + (" pending" if pending else ""))
    print(f"| {s} | {','.join(str(k[1]) for k in ks)} | {mean(d1):+.3f} ({wl(d1)}) | {mean(d2):+.3f} ({wl(d2)}) | "
          f"{chosen} | {mean(l1):+.3f}, {mean(l2):+.3f} (same splits) | {' | '.join(ext)} | {' / '.join(f'{wall[k]:.0f}' for k in ks)} |")


if __name__ == "__main__":
  main(sys.argv[1:])
