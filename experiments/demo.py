"""The quickstart (`make demo`): every registered experiment's smoke preset on the shipped data,
each as its own command-line run, then one markdown report of all results.

  python -m experiments.demo --workdir=runs/demo [--only=mlp_digits,sol_ordinal]
"""

import os
import subprocess
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", "runs/demo", "Root folder; each experiment writes to <workdir>/<name>.")
flags.DEFINE_list("only", None, "Run only these experiments.")

# Each method's smoke preset is registered here as it lands.
DEMOS = ("mlp_digits", "smile_uci", "emf_generate", "sol_ordinal", "unlearning", "eviprobe_graphs", "causal_reward")


def main(argv):
  del argv
  names = FLAGS.only or list(DEMOS)
  unknown = sorted(set(names) - set(DEMOS))
  if unknown:
    print(f"error: unknown demo(s) {unknown}; registered: {', '.join(DEMOS)}", file=sys.stderr)
    sys.exit(2)
  done, failed = [], []
  for name in names:
    workdir = os.path.join(FLAGS.workdir, name)
    cmd = [sys.executable, "-m", f"experiments.{name}", f"--config=configs/{name}.py:smoke", f"--workdir={workdir}"]
    print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    code = subprocess.call(cmd)
    print(f"=== {name}: exit {code} after {time.perf_counter() - t0:.1f}s", flush=True)
    (done if code == 0 else failed).append(workdir if code == 0 else name)
  if done:
    subprocess.call([sys.executable, "-m", "experiments.report", f"--workdirs={','.join(done)}",
                     f"--out={os.path.join(FLAGS.workdir, 'report.md')}"])
  if failed:
    print(f"error: failed: {', '.join(failed)}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
