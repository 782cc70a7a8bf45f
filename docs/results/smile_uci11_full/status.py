"""Status table of the full-budget uci11 jobs in this folder beside the 2 % table (the README's first table).

  PYTHONPATH=. .venv/bin/python docs/results/smile_uci11_full/status.py      # from the repository root
pSMILE = psmile_naive or psmile_clamp chosen per split on validation LPPD (report.best_by, as the merge does).
"""

import glob
import json
from collections import defaultdict

from experiments import report

HERE = "docs/results/smile_uci11_full"
VARIANTS = ("psmile_naive", "psmile_clamp")


def main() -> None:
  full, wall = defaultdict(dict), {}
  for f in sorted(glob.glob(f"{HERE}/*/results.json")):
    res = json.load(open(f))
    rows = [r for r in res["rows"] if r["method"] in VARIANTS + ("sgld", "sghmc")]
    rows += report.best_by(rows, VARIANTS, name="best", select="valid_lppd")
    for r in rows:
      full[r["dataset"], r["split"]][r["method"]] = r
      wall[r["dataset"], r["split"]] = res["wall_s"]
  low = defaultdict(dict)
  for r in json.load(open("docs/results/smile_uci11_results.json"))["rows"]:
    low[r["dataset"], r["split"]][r["method"]] = r["metrics"]["lppd"]
  lppd = lambda k, m: full[k][m]["metrics"]["lppd"]
  wl = lambda d: f"{sum(x >= 0 for x in d)}/{sum(x < 0 for x in d)}"
  mean = lambda d: sum(d) / len(d)
  print("| set | splits done | psmile_best − sgld (W/L) | psmile_best − sghmc (W/L) | chosen (variant, ε₀) | "
        "at 2 %: − sgld, − sghmc | wall s (results.json) |\n|---|---|---|---|---|---|---|")
  for s in sorted({k[0] for k in full}):
    ks = sorted(k for k in full if k[0] == s)
    d1, d2 = [lppd(k, "best") - lppd(k, "sgld") for k in ks], [lppd(k, "best") - lppd(k, "sghmc") for k in ks]
    l1 = [low[k]["psmile_best"] - low[k]["sgld"] for k in ks]
    l2 = [low[k]["psmile_best"] - low[k]["sghmc"] for k in ks]
    chosen = "; ".join(f"{VARIANTS[int(full[k]['best']['metrics']['chosen'])].replace('psmile_', '')} "
                       f"{full[k]['best']['metrics']['step_size0']:g}" for k in ks)
    print(f"| {s} | {','.join(str(k[1]) for k in ks)} | {mean(d1):+.3f} ({wl(d1)}) | {mean(d2):+.3f} ({wl(d2)}) | "
          f"{chosen} | {mean(l1):+.3f}, {mean(l2):+.3f} (same splits) | {' / '.join(f'{wall[k]:.0f}' for k in ks)} |")


if __name__ == "__main__":
  main()
