"""Combines emf_generate workdirs (e.g. one per seed, run as separate jobs) into one table.

  python -m experiments.emf_summary runs/emf_8g_s0 runs/emf_8g_s1 runs/emf_8g_s2 --out=runs/emf_8g

Reads each workdir's results.json, keeps the floors once and every trained variant row, then picks the
headline weighting / EMF variant on the validation scores of all seeds together (as one run over those
seeds would), marks rows at or beyond the noise floor, and writes results.json and summary.md to --out.
"""

import argparse
import json
import os

from experiments import common
from experiments.emf_generate import FLOORS, choose, mark_not_learned, summary


def combine(row_sets: list[list[dict]], select: str | None = None) -> list[dict]:
  """Floors from the first set that has them; variant rows ('method/pP@k') from all; new headline rows."""
  floors, variants = {}, []
  for rows in row_sets:
    for r in rows:
      if r["method"] in FLOORS:
        floors.setdefault((r["dataset"], r["method"]), r)
      elif "/p" in r["method"]:
        variants.append(r)
  out = list(floors.values()) + variants
  for name in dict.fromkeys(r["dataset"] for r in variants):
    methods = tuple(dict.fromkeys(r["method"].split("/p")[0] for r in variants if r["dataset"] == name))
    weightings = {m: tuple(sorted({float(r["method"].split("/p")[1].split("@")[0]) for r in variants
                                   if r["dataset"] == name and r["method"].startswith(m + "/p")})) for m in methods}
    out += choose(out, name, methods, weightings, select)[0]
  mark_not_learned(out)
  return out


def headline(rows: list[dict], name: str, metrics: tuple[str, ...], methods: tuple[str, ...]) -> str:
  """Compact markdown for the docs: floors, then the chosen rows `methods` (mean ± std over seeds, the
  chosen p, and the median training wall time); '(nl)' marks a cell at or beyond the noise floor."""
  import numpy as np
  from experiments.emf_generate import HIGHER_BETTER
  rs = [r for r in rows if r["dataset"] == name]
  noise = next(r["metrics"] for r in rs if r["method"] == "floor_noise")
  lines = ["| method@NFE | seeds | " + " | ".join(metrics) + " | chosen | train s |", "|---" * (len(metrics) + 4) + "|"]
  for m in [f for f in FLOORS if any(r["method"] == f for r in rs)] + list(methods):
    mr = [r for r in rs if r["method"] == m]
    if not mr:
      continue
    cells = []
    for k in metrics:
      vals = np.array([np.nan if r["metrics"].get(k) is None else r["metrics"][k] for r in mr], float)
      cell = f"{vals.mean():.4g}" + (f" ± {vals.std():.2g}" if len(vals) > 1 else "")
      if m not in FLOORS and (vals.mean() <= noise[k] if k in HIGHER_BETTER else vals.mean() >= noise[k]):
        cell += " (nl)"
      cells.append(cell)
    met = mr[0]["metrics"]
    chosen = "" if "chosen_p" not in met else (
        ("vc" if met.get("chosen_vc") else "model") + ("/x1" if met.get("chosen_x1") else "/u") + ", "
        if "chosen_vc" in met else "") + f"p={met['chosen_p']:g}"
    wall = np.median([r["cost"].get("train_wall_s", np.nan) for r in mr]) if m not in FLOORS else np.nan
    lines.append(f"| {m} | {len(mr) if m not in FLOORS else ''} | " + " | ".join(cells) +
                 f" | {chosen} | {'' if np.isnan(wall) else f'{wall:.0f}'} |")
  return "\n".join(lines) + "\n"


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("workdirs", nargs="+")
  ap.add_argument("--out", required=True)
  ap.add_argument("--headline", default="", help="'+'-separated method@NFE rows for a compact table")
  ap.add_argument("--metrics", default="energy+c2st+modes+off_mode")
  ap.add_argument("--select", default="", help="validation metric that chooses (default: the primary)")
  args = ap.parse_args()
  rows = combine([json.load(open(os.path.join(w, "results.json")))["rows"] for w in args.workdirs],
                 args.select or None)
  os.makedirs(args.out, exist_ok=True)
  common.write_json(os.path.join(args.out, "results.json"), {"rows": rows, "sources": args.workdirs})
  text = summary(rows)
  with open(os.path.join(args.out, "summary.md"), "w") as f:
    f.write(text)
  print(text)
  if args.headline:
    for name in dict.fromkeys(r["dataset"] for r in rows):
      print(f"\n{name}\n" + headline(rows, name, tuple(args.metrics.split("+")), tuple(args.headline.split("+"))))


if __name__ == "__main__":
  main()
