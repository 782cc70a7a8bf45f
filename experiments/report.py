"""results.json files -> markdown tables (mean ± std over splits and seeds).

  python -m experiments.report --workdirs runs/a,runs/b [--out table.md]
"""

import json
import os
import sys
from collections import defaultdict

import numpy as np
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("workdirs", None, "Comma-separated run folders holding results.json.")
flags.DEFINE_string("out", None, "Also write the markdown here.")
flags.DEFINE_list("metrics", None, "Metric columns to show (default: all).")


def _fmt(values: list[float | None]) -> str:
  vals = [v for v in values if v is not None]
  if not vals:
    return "n/a"
  m = float(np.mean(vals))
  digits = 4 if abs(m) < 10 else 2
  return f"{m:.{digits}f}" if len(vals) == 1 else f"{m:.{digits}f} ± {float(np.std(vals)):.{digits}f}"


def table(results: dict, metrics: list[str] | None = None) -> str:
  """One markdown table: a row per (dataset, method), a column per metric and cost."""
  groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
  for r in results["rows"]:
    groups[(r["dataset"], r["method"])].append(r)
  metric_names = metrics or sorted({k for r in results["rows"] for k in r["metrics"]})
  cost_names = sorted({k for r in results["rows"] for k in r["cost"]})
  head = ["dataset", "method", "n"] + metric_names + [f"cost:{c}" for c in cost_names]
  lines = [f"### {results['experiment']} ({results['preset']}), {results['wall_s']:.0f}s, "
           f"jax {results['env'].get('jax')} on {results['env'].get('devices')} {results['env'].get('platform')}",
           "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for (dataset, method), rows in groups.items():
    cells = [dataset, method, str(len(rows))]
    cells += [_fmt([r["metrics"].get(m) for r in rows]) for m in metric_names]
    cells += [_fmt([r["cost"].get(c) for r in rows]) for c in cost_names]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def main(argv):
  del argv
  if not FLAGS.workdirs:
    print("error: --workdirs is required", file=sys.stderr)
    sys.exit(2)
  out = []
  for w in FLAGS.workdirs:
    path = os.path.join(w, "results.json")
    if not os.path.exists(path):
      print(f"error: {path} does not exist", file=sys.stderr)
      sys.exit(2)
    with open(path) as f:
      out.append(table(json.load(f), FLAGS.metrics))
  text = "\n".join(out)
  print(text)
  if FLAGS.out:
    with open(FLAGS.out, "w") as f:
      f.write(text)


if __name__ == "__main__":
  app.run(main)
