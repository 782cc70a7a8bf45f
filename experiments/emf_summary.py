"""Combines emf_generate workdirs (e.g. one per seed) into one table.

  python -m experiments.emf_summary runs/emf_8g_s0 runs/emf_8g_s1 runs/emf_8g_s2 --out=runs/emf_8g

Picks the headline rows on the validation scores of all seeds together (`jaxml.emf.evaluate.combine`)
and writes results.json and summary.md to --out."""

import argparse
import json
import os

from experiments import common, report
from jaxml.emf import evaluate as ev


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("workdirs", nargs="+")
  ap.add_argument("--out", required=True)
  ap.add_argument("--headline", default="", help="'+'-separated method@NFE rows for a compact table")
  ap.add_argument("--metrics", default="energy+c2st+modes+off_mode")
  ap.add_argument("--select", default="", help="validation metric that chooses (default: the primary)")
  ap.add_argument("--paired", default="", help="'+'-separated a:b pairs of rows compared per seed, e.g. "
                  "emf@1:meanflow@1+emf@1:fm@1 (on each --metrics entry)")
  args = ap.parse_args()
  rows = ev.combine([json.load(open(os.path.join(w, "results.json")))["rows"] for w in args.workdirs],
                    args.select or None)
  os.makedirs(args.out, exist_ok=True)
  common.write_json(os.path.join(args.out, "results.json"), {"rows": rows, "sources": args.workdirs})
  text = ev.summary(rows)
  with open(os.path.join(args.out, "summary.md"), "w") as f:
    f.write(text)
  print(text)
  if args.headline:
    for name in dict.fromkeys(r["dataset"] for r in rows):
      print(f"\n{name}\n" + ev.headline(rows, name, tuple(args.metrics.split("+")), tuple(args.headline.split("+"))))
  for pair in filter(None, args.paired.split("+")):
    a, b = pair.split(":")
    for name in dict.fromkeys(r["dataset"] for r in rows):
      for m in args.metrics.split("+"):
        c = report.compare(rows, a, b, m, higher_is_better=m in ev.HIGHER_BETTER, dataset=name)
        if c["n"]:
          sign = 1.0 if m in ev.HIGHER_BETTER else -1.0
          verdict = ("one seed" if c["n"] < 2 else "within noise" if abs(c["mean_diff"]) <= 2 * c["se_diff"]
                     else "better" if sign * c["mean_diff"] > 0 else "worse")     # within noise: |mean| <= 2 s.e.
          print(f"paired {name} {m}: {a} - {b} = {c['mean_diff']:+.4g} (s.e. {c['se_diff']:.2g}) over {c['n']} "
                f"seeds; {a} better in {c['wins']}, worse in {c['losses']}, ties {c['ties']}: {verdict}")


if __name__ == "__main__":
  main()
