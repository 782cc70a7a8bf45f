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


def combine(row_sets: list[list[dict]]) -> list[dict]:
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
    out += choose(out, name, methods, weightings)[0]
  mark_not_learned(out)
  return out


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("workdirs", nargs="+")
  ap.add_argument("--out", required=True)
  args = ap.parse_args()
  rows = combine([json.load(open(os.path.join(w, "results.json")))["rows"] for w in args.workdirs])
  os.makedirs(args.out, exist_ok=True)
  common.write_json(os.path.join(args.out, "results.json"), {"rows": rows, "sources": args.workdirs})
  text = summary(rows)
  with open(os.path.join(args.out, "summary.md"), "w") as f:
    f.write(text)
  print(text)


if __name__ == "__main__":
  main()
