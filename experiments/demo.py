"""The quickstart (`make demo`): every registered experiment's smoke preset, then one markdown report.

  python -m experiments.demo --workdir=runs/demo [--only=mlp_digits,sol_ordinal] [--jobs=2]
"""

import os
import subprocess
import sys
import threading
import time
from concurrent import futures

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", "runs/demo", "Root folder; each experiment writes to <workdir>/<name>.")
flags.DEFINE_list("only", None, "Run only these experiments.")
flags.DEFINE_integer("jobs", None, "Experiments run at once (default: CPU cores, at most 4).")

DEMOS = ("mlp_digits", "smile_uci", "emf_generate", "sol_ordinal", "unlearning", "eviprobe_graphs", "causal_reward")
_PRINT = threading.Lock()


def _say(text: str) -> None:
  with _PRINT:
    print(text, flush=True)


def run_one(name: str, workdir: str, prefix: bool) -> int:
  """Runs one experiment's smoke preset as a subprocess, streaming its output; returns the exit code."""
  cmd = [sys.executable, "-m", f"experiments.{name}", f"--config=configs/{name}.py:smoke", f"--workdir={workdir}"]
  _say(f"\n=== {name}: {' '.join(cmd[1:])}")
  t0 = time.perf_counter()
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                          env=os.environ | {"PYTHONUNBUFFERED": "1"})
  for line in proc.stdout:
    _say(f"[{name}] {line.rstrip()}" if prefix else line.rstrip())
  code = proc.wait()
  _say(f"=== {name}: exit {code} after {time.perf_counter() - t0:.1f}s")
  return code


def main(argv):
  del argv
  names = FLAGS.only or list(DEMOS)
  if unknown := sorted(set(names) - set(DEMOS)):
    print(f"error: unknown demo(s) {unknown}; registered: {', '.join(DEMOS)}", file=sys.stderr)
    sys.exit(2)
  jobs = FLAGS.jobs or min(os.cpu_count() or 1, 4)
  if jobs < 1:
    print(f"error: --jobs must be >= 1, got {jobs}", file=sys.stderr)
    sys.exit(2)
  t0 = time.perf_counter()
  with futures.ThreadPoolExecutor(jobs) as pool:
    codes = dict(zip(names, pool.map(
        lambda n: run_one(n, os.path.join(FLAGS.workdir, n), prefix=jobs > 1), names)))
  _say(f"=== all: {len(names)} experiments, {jobs} at once, {time.perf_counter() - t0:.1f}s")
  done = [os.path.join(FLAGS.workdir, n) for n in names if codes[n] == 0]
  failed = [n for n in names if codes[n] != 0]
  if done:
    subprocess.call([sys.executable, "-m", "experiments.report", f"--workdirs={','.join(done)}",
                     f"--out={os.path.join(FLAGS.workdir, 'report.md')}"])
  if failed:
    print(f"error: failed: {', '.join(failed)}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
