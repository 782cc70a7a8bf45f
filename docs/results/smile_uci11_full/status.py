"""Status table of the full-budget uci11 jobs in this folder beside the 2 % table (the README's first table).

  PYTHONPATH=. .venv/bin/python docs/results/smile_uci11_full/status.py      # from the repository root
pSMILE = psmile_naive or psmile_clamp chosen per split on validation LPPD (report.best_by, as the merge does).
A named extension, each baseline's grid one decade beyond an edge where its choice was that edge (SGLD 1e-7 / 1e-3,
SGHMC 1e-5 / 1e-1; extend_edges.sh, runs in <method>_<ε₀>/<job>/), enters through experiments.smile_uci.extend_grid (validation LPPD over
the union grid, as `--extend` does) in its own columns. `--pending` prints the extension runs still due, one
"<job> <method> <ε₀>" per line: extend_edges.sh runs those, so the edges and ε₀ values live only in EXTS.
"""

import glob
import json
import os
import sys
from collections import defaultdict

from experiments import report
from experiments.smile_uci import extend_grid

HERE = "docs/results/smile_uci11_full"
VARIANTS = ("psmile_naive", "psmile_clamp")
# method -> (the authors' grid edge, the extension's ε₀ beyond it)
EXTS = {"sgld": ((1e-6, "1e-7"), (1e-4, "1e-3")), "sghmc": ((1e-4, "1e-5"), (1e-2, "1e-1"))}


def _due(full: dict, k: tuple) -> list[tuple[str, str]]:
  """(method, ε₀) extension runs due on (dataset, split) k: the baseline chose an edge and its run is not here."""
  return [(m, eps) for m, edges in EXTS.items() for edge, eps in edges
          if full[k][m]["metrics"]["step_size0"] == edge
          and not os.path.exists(f"{HERE}/{m}_{eps}/{k[0]}_{k[1]}/results.json")]


def main(argv: list[str]) -> None:
  full, wall = defaultdict(dict), {}
  for f in sorted(glob.glob(f"{HERE}/*/results.json")):
    res = json.load(open(f))
    rows = [r for r in res["rows"] if r["method"] in VARIANTS + ("sgld", "sghmc")]
    rows += report.best_by(rows, VARIANTS, name="best", select="valid_lppd")
    for r in rows:
      full[r["dataset"], r["split"]][r["method"]] = r
      wall[r["dataset"], r["split"]] = res["wall_s"]
  for k, cell in full.items():   # a baseline not extended (interior choice) keeps its row
    for m in EXTS:
      cell[m + "_ext"] = cell[m]
  for m, edges in EXTS.items():
    for f in sorted(f for _, eps in edges for f in glob.glob(f"{HERE}/{m}_{eps}/*/results.json")):
      (e,) = [r for r in json.load(open(f))["rows"] if r["method"] == m]
      k = e["dataset"], e["split"]
      if k in full:
        (full[k][m + "_ext"],) = extend_grid([full[k][m + "_ext"]], [e])
  if "--pending" in argv:
    for k in sorted(full):
      for m, eps in _due(full, k):
        print(f"{k[0]}_{k[1]} {m} {eps}")
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
    for m in EXTS:
      d = [lppd(k, "best") - lppd(k, m + "_ext") for k in ks]
      chosen_eps = [full[k][m + "_ext"]["metrics"]["step_size0"] for k in ks]
      pending = any(due_m == m for k in ks for due_m, _ in _due(full, k))
      ext.append(f"{mean(d):+.3f} ({wl(d)}; " + ", ".join(f"{x:g}" for x in chosen_eps) + ")"
                 + (" pending" if pending else ""))
    print(f"| {s} | {','.join(str(k[1]) for k in ks)} | {mean(d1):+.3f} ({wl(d1)}) | {mean(d2):+.3f} ({wl(d2)}) | "
          f"{chosen} | {mean(l1):+.3f}, {mean(l2):+.3f} (same splits) | {' | '.join(ext)} | {' / '.join(f'{wall[k]:.0f}' for k in ks)} |")


if __name__ == "__main__":
  main(sys.argv[1:])
