"""Mutation testing of the math modules with mutmut, one package at a time (`make mutate PKG=...`).

Why a wrapper: mutmut is configured by one `setup.cfg`/`[tool.mutmut]` per directory and writes a
`mutants/` tree where it runs. This script copies `jaxml/`, `tests/` and `pyproject.toml` into a scratch
directory (default `runs/mutate/<pkg>`, ignored by git), writes the package's scope (the math modules
and the fast tests that guard them) as `setup.cfg` there, runs `mutmut run` niced, and prints
killed / survived / timeout / total and the score killed / (total - skipped). With `--check` it fails
when the score falls below the ratchet in RATCHET (the numbers recorded in docs/results/tests.md).

JAX note: workers fork from mutmut's fork server (`process_isolation = forkserver`), which imports the
tests but runs none, so no XLA thread pool or jit cache is shared with a worker; each worker traces the
mutated (trampolined) function afresh.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# package -> (modules to mutate, tests that guard them). Fast tests only: each surviving mutant
# costs one run of the tests that cover the mutated function.
SCOPES: dict[str, tuple[list[str], list[str]]] = {
    "metrics": (["jaxml/metrics/ood.py", "jaxml/metrics/calibration.py", "jaxml/metrics/ranking.py"],
                ["tests/metrics"]),
    "emf": (["jaxml/emf/losses.py"], ["tests/emf/test_gradients.py", "tests/emf/test_losses.py"]),
    "sol": (["jaxml/sol/losses.py"], ["tests/sol/test_gradients.py", "tests/sol/test_losses.py"]),
    "causal_reward": (["jaxml/causal_reward/losses.py"], ["tests/causal_reward/test_model.py",
                                                          "tests/causal_reward/test_gradients.py"]),
    "smile": (["jaxml/smile/baselines.py"], ["tests/smile/test_family_and_baselines.py"]),
    "unlearning": (["jaxml/unlearning/losses.py", "jaxml/unlearning/evaluate.py"],
                   ["tests/unlearning/test_transform_and_losses.py", "tests/unlearning/test_splits_and_metrics.py",
                    "tests/unlearning/test_baselines.py::test_unlearning_metrics_assemble_ua_ra_ta_on_the_right_rows"]),
    "eviprobe": (["jaxml/eviprobe/readouts.py"], ["tests/eviprobe/test_probe.py"]),
}

# Minimum scores (%) measured so far (docs/results/tests.md); `--check` fails below them.
RATCHET: dict[str, float] = {"metrics": 85.0}


def _setup_cfg(pkg: str) -> str:
  modules, tests = SCOPES[pkg]
  lines = ["[mutmut]", f"source_paths = jaxml/{pkg}/", "only_mutate ="]
  lines += [f"    {m}" for m in modules]
  lines += ["pytest_add_cli_args_test_selection ="] + [f"    {t}" for t in tests]
  lines += ["process_isolation = forkserver", "forkserver_warmup = collect", "timeout_constant = 60",
            "mutate_only_covered_lines = true", ""]
  return "\n".join(lines)


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("pkg", choices=sorted(SCOPES))
  ap.add_argument("--workdir", default=None, help="scratch directory (default runs/mutate/<pkg>)")
  ap.add_argument("--check", action="store_true", help="fail below the recorded ratchet")
  args = ap.parse_args()
  work = Path(args.workdir or ROOT / "runs" / "mutate" / args.pkg).resolve()
  if work.exists():
    shutil.rmtree(work)
  work.mkdir(parents=True)
  for name in ("jaxml", "tests"):
    shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
  shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
  (work / "setup.cfg").write_text(_setup_cfg(args.pkg))
  env = dict(os.environ, PYTHONPATH=str(work))
  nice = ["nice", "-n", "10"] if shutil.which("nice") else []
  subprocess.run(nice + [sys.executable, "-m", "mutmut", "run"], cwd=work, env=env, check=False)
  subprocess.run([sys.executable, "-m", "mutmut", "export-cicd-stats"], cwd=work, env=env, check=True)
  stats = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
  counted = stats["total"] - stats["skipped"]
  score = 100.0 * stats["killed"] / counted if counted else float("nan")
  print(f"mutmut {args.pkg}: killed {stats['killed']}, survived {stats['survived']}, timeout {stats['timeout']}, "
        f"no_tests {stats['no_tests']}, total {stats['total']}: score {score:.1f} %  (survivors: "
        f"`cd {work} && {sys.executable} -m mutmut results`)")
  if args.check and args.pkg in RATCHET and score < RATCHET[args.pkg]:
    print(f"below the ratchet {RATCHET[args.pkg]:.1f} %", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
