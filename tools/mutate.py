"""Mutation testing of the math modules with mutmut, one package at a time (`make mutate PKG=...`).

Why a wrapper: mutmut is configured by one `setup.cfg`/`[tool.mutmut]` per directory and writes a
`mutants/` tree where it runs. This script copies `jaxml/`, `tests/` and `pyproject.toml` into a scratch
directory (default `runs/mutate/<pkg>`, ignored by git), writes the package's scope (the math modules
and the fast tests that guard them) as `setup.cfg` there, runs `mutmut run` niced, and prints
killed / survived / timeout / total and the score killed / (total - skipped). With `--check` it fails
when a module's score falls below the score recorded for it in docs/dev/mutation_scores.json (modules never
measured have none); with `--record` it writes the per-module counts and the
surviving mutants into docs/dev/mutation_scores.json (judged equivalence reasons already there are kept).

JAX note: workers fork from mutmut's fork server (`process_isolation = forkserver`), which imports the
tests but runs none, so no XLA thread pool or jit cache is shared with a worker; each worker traces the
mutated (trampolined) function afresh. A package in PRELOAD has guarding tests that start XLA at import
(blackjax computes `jnp.log(2.0)` for a default argument): its fork server imports only the listed
modules (`forkserver_warmup = import`) and each worker imports the tests itself, after the fork.
"""

import argparse
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# package -> (modules to mutate, tests that guard them). Fast tests only: each surviving mutant
# costs one run of the tests that cover the mutated function.
SCOPES: dict[str, tuple[list[str], list[str]]] = {
    "core": (["jaxml/core/step.py", "jaxml/core/select.py", "jaxml/core/loop.py", "jaxml/core/optim.py",
              "jaxml/core/train.py"],
             ["tests/core/test_step.py", "tests/core/test_loop.py", "tests/core/test_train.py"]),
    "metrics": (["jaxml/metrics/ood.py", "jaxml/metrics/calibration.py", "jaxml/metrics/ranking.py",
                 "jaxml/metrics/mia.py", "jaxml/metrics/mcmc.py", "jaxml/metrics/generative.py",
                 "jaxml/metrics/representation.py"],
                ["tests/metrics", "tests/emf/test_metrics_and_toys.py"]),
    "emf": (["jaxml/emf/losses.py", "jaxml/emf/baselines.py", "jaxml/emf/sample.py"],
            ["tests/emf/test_losses_by_hand.py", "tests/emf/test_gradients.py", "tests/emf/test_losses.py",
             "tests/emf/test_samplers_and_nets.py"]),
    "sol": (["jaxml/sol/losses.py", "jaxml/sol/decoders.py"],
            ["tests/sol/test_by_hand.py", "tests/sol/test_losses.py", "tests/sol/test_decoders.py",
             "tests/sol/test_pair_samplers_by_hand.py",
             "tests/sol/test_gradients.py::test_profile_gradient_is_analytic",
             "tests/sol/test_gradients.py::test_discriminative_loss_gradient_on_the_profile"]),
    "causal_reward": (["jaxml/causal_reward/losses.py"],
                      ["tests/causal_reward/test_losses.py",
                       "tests/causal_reward/test_model.py::test_bt_loss_log2_and_swap_symmetry",
                       "tests/causal_reward/test_model.py::test_pearson_crosscov_and_kl"]),
    "smile": (["jaxml/smile/baselines.py", "jaxml/smile/adaptation.py", "jaxml/smile/kernel.py"],
              ["tests/smile/test_baselines_by_hand.py", "tests/smile/test_adaptation_by_hand.py",
               "tests/smile/test_adaptation.py", "tests/smile/test_kernel.py",
               "tests/smile/test_family_and_baselines.py::test_smile_family_equals_the_named_variant_step_by_step",
               "tests/smile/test_virial_tuner.py::test_virial_temperature_is_one_under_the_target_and_detects_a_hot_sampler",
               "tests/smile/test_virial_tuner.py::test_update_rule_grows_when_cold_shrinks_when_hot_and_settles_first",
               "tests/smile/test_virial_tuner.py::test_tuner_reads_the_temperature_at_the_proposal_around_the_start"]),
    "unlearning": (["jaxml/unlearning/losses.py", "jaxml/unlearning/evaluate.py"],
                   ["tests/unlearning/test_objectives_and_metrics_by_hand.py",
                    "tests/unlearning/test_transform_and_losses.py::test_forget_loss_equals_pairwise_mean",
                    "tests/unlearning/test_transform_and_losses.py::test_beta_zero_gives_retain_objective_and_retain_is_zero_at_identity",
                    "tests/unlearning/test_transform_and_losses.py::test_zero_shot_forget_minimiser_is_prior_weighted_prototype_mean",
                    "tests/unlearning/test_splits_and_metrics.py::test_avg_gap_definition",
                    "tests/unlearning/test_baselines.py::test_unlearning_metrics_assemble_ua_ra_ta_on_the_right_rows"]),
    "eviprobe": (["jaxml/eviprobe/readouts.py"],
                 ["tests/eviprobe/test_readouts.py", "tests/eviprobe/test_probe.py::test_expected_entropy_matches_monte_carlo",
                  "tests/eviprobe/test_probe.py::test_dissonance_cases"]),
}

# Packages whose tests import a library that starts the XLA backend at import (blackjax): a worker forked
# from a process with XLA's thread pool running hangs, so their fork server pre-imports only these
# (third-party, XLA stays unstarted: `_check_preload` verifies it) and each worker imports blackjax, jaxml
# and the tests after the fork (about 0.3 s more per mutant).
PRELOAD: dict[str, list[str]] = {
    "smile": ["numpy", "scipy.linalg", "scipy.stats", "jax", "jax.numpy", "jax.scipy.special", "jax.flatten_util",
              "chex", "optax", "flax.linen", "_pytest.python", "_pytest.fixtures"],
}

SCORES = ROOT / "docs" / "dev" / "mutation_scores.json"


def _check_preload(modules: list[str]) -> None:
  """Fails if importing the preload modules starts an XLA backend (the fork server would hang its workers)."""
  code = ("import importlib, sys; from jax._src import xla_bridge as xb\n"
          "for m in sys.argv[1:]: importlib.import_module(m)\n"
          "sys.exit(1 if xb._backends else 0)")
  if subprocess.run([sys.executable, "-c", code, *modules]).returncode:
    raise SystemExit(f"preloading {modules} starts XLA: a forked mutmut worker would hang")


def _setup_cfg(pkg: str, covered_only: bool = True, tests: list[str] | None = None) -> str:
  modules, tests = SCOPES[pkg][0], tests or SCOPES[pkg][1]
  lines = ["[mutmut]", f"source_paths = jaxml/{pkg}/", "only_mutate ="]
  lines += [f"    {m}" for m in modules]
  lines += ["pytest_add_cli_args_test_selection ="] + [f"    {t}" for t in tests]
  # One process per mutant: pyproject's `-n 2` (xdist) would hide which tests call which function.
  lines += ["pytest_add_cli_args =", "    -n", "    0"]
  lines += ["process_isolation = forkserver"]
  if pkg in PRELOAD:
    lines += ["forkserver_warmup = import", "preload_modules_file = preload_modules.txt"]
  else:
    lines += ["forkserver_warmup = collect"]
  lines += ["timeout_constant = 60",
            f"mutate_only_covered_lines = {str(covered_only).lower()}", ""]
  return "\n".join(lines)


def _statuses(work: Path, globs: list[str]) -> dict[str, str]:
  """Mutant name -> status, read from mutmut's per-module meta files, restricted to the name globs."""
  from mutmut.stats import status_by_exit_code   # only needed here (mutmut is a test extra)
  out = {}
  for meta in sorted((work / "mutants").rglob("*.py.meta")):
    for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
      if not globs or any(fnmatch.fnmatch(name, g) for g in globs):
        out[name] = status_by_exit_code[code]
  return out


def tally(work: Path, globs: list[str]) -> dict[str, int]:
  """How many mutants (restricted to the name globs) have each status."""
  counts: dict[str, int] = {}
  for status in _statuses(work, globs).values():
    counts[status] = counts.get(status, 0) + 1
  return counts


def _score(counts: dict[str, int]) -> float:
  """killed / (total − skipped); timeouts, survivors, unchecked and untested mutants count as not killed."""
  counted = sum(counts.values()) - counts.get("skipped", 0)
  return 100.0 * counts.get("killed", 0) / counted if counted else float("nan")


def record(pkg: str, statuses: dict[str, str], path: Path = SCORES) -> dict:
  """Writes `pkg`'s per-module counts, scores and survivors into the scores file (other packages and the
  reasons already written for a survivor stay); returns the package's entry."""
  data = json.loads(path.read_text()) if path.exists() else {}
  old = {m: e.get("survivors", {}) for m, e in data.get(pkg, {}).get("modules", {}).items()}
  modules = {}
  for module in SCOPES[pkg][0]:
    prefix = module.removesuffix(".py").replace("/", ".") + "."
    mine = {n: s for n, s in statuses.items() if n.startswith(prefix)}
    counts: dict[str, int] = {}
    for status in mine.values():
      counts[status] = counts.get(status, 0) + 1
    counted = sum(counts.values()) - counts.get("skipped", 0)
    survivors = {n: old.get(module, {}).get(n, "not judged") for n, s in sorted(mine.items())
                 if s not in ("killed", "skipped")}
    modules[module] = {"killed": counts.get("killed", 0), "total": counted,
                       "score": round(_score(counts), 1) if counted else None, "counts": counts,
                       "survivors": survivors}
  data[pkg] = {"tests": SCOPES[pkg][1], "modules": modules}
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
  return data[pkg]


def below_recorded(pkg: str, statuses: dict[str, str], path: Path = SCORES) -> list[str]:
  """Modules of `pkg` whose score in this run (all their mutants checked) is below the recorded one."""
  recorded = json.loads(path.read_text()).get(pkg, {}).get("modules", {}) if path.exists() else {}
  out = []
  for module, entry in recorded.items():
    prefix = module.removesuffix(".py").replace("/", ".") + "."
    counts: dict[str, int] = {}
    for name, status in statuses.items():
      if name.startswith(prefix):
        counts[status] = counts.get(status, 0) + 1
    if entry.get("score") is None or not counts or counts.get("not checked"):
      continue
    if _score(counts) < entry["score"] - 0.05:
      out.append(f"{module}: {_score(counts):.1f} % < recorded {entry['score']} %")
  return out


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("pkg", choices=sorted(SCOPES))
  ap.add_argument("mutants", nargs="*", help="mutant-name globs passed to `mutmut run` (default: all in scope)")
  ap.add_argument("--workdir", default=None, help="scratch directory (default runs/mutate/<pkg>)")
  ap.add_argument("--keep", action="store_true",
                  help="reuse the workdir: refresh tests/ only, keep mutants and their results (resume)")
  ap.add_argument("--max-children", type=int, default=None, help="parallel mutmut workers (default: all cores)")
  ap.add_argument("--time-limit", type=float, default=None,
                  help="stop `mutmut run` after this many seconds (SIGINT; results so far are kept)")
  ap.add_argument("--unchecked-only", action="store_true",
                  help="with --keep and globs: run only the mutants without a result yet")
  # One path per flag: a greedy nargs="+" swallowed the mutant globs that followed it.
  ap.add_argument("--tests", action="append", default=None,
                  help="a guarding test instead of the scope's (repeat the flag for more; a narrower run)")
  ap.add_argument("--check", action="store_true", help="fail when a module scores below its recorded score")
  ap.add_argument("--record", action="store_true",
                  help=f"write per-module counts and survivors into {SCORES.relative_to(ROOT)}")
  args = ap.parse_intermixed_args()
  work = Path(args.workdir or ROOT / "runs" / "mutate" / args.pkg).resolve()
  if work.exists() and not args.keep:
    shutil.rmtree(work)
  resumed = (work / "mutants").exists()
  if not resumed:
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "jaxml", work / "jaxml", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
  # Resuming: the mutants exist already, so skip the coverage pass that only filters their creation.
  (work / "setup.cfg").write_text(_setup_cfg(args.pkg, covered_only=not resumed, tests=args.tests))
  if args.pkg in PRELOAD:
    _check_preload(PRELOAD[args.pkg])
    (work / "preload_modules.txt").write_text("\n".join(PRELOAD[args.pkg]) + "\n")
  shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
  env = dict(os.environ, PYTHONPATH=str(work))
  env.setdefault("JAX_PLATFORMS", "cpu")   # as tests/conftest.py sets it: a preloaded jax reads it at import
  nice = ["nice", "-n", "10"] if shutil.which("nice") else []
  names = list(args.mutants)
  if resumed and names and args.unchecked_only:
    names = [n for n, status in _statuses(work, names).items() if status == "not checked"]
    if not names:
      print("nothing left to check")
  cmd = nice + [sys.executable, "-m", "mutmut", "run"] + names
  if args.max_children:
    cmd += ["--max-children", str(args.max_children)]
  if names or not args.mutants:
    # Own process group, SIGINT handled (a background shell starts children with SIGINT ignored).
    proc = subprocess.Popen(cmd, cwd=work, env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
      proc.wait(timeout=args.time_limit)
    except subprocess.TimeoutExpired:
      proc.send_signal(signal.SIGINT)   # mutmut stops its workers; every finished mutant is already saved
      try:
        proc.wait(timeout=20)
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # unfinished mutants stay "not checked"
        proc.wait()
  counts = tally(work, args.mutants)
  if args.record:
    for module, entry in record(args.pkg, _statuses(work, []))["modules"].items():
      print(f"  {module}: {entry['killed']}/{entry['total']} killed, score {entry['score']} %")
  score = _score(counts)
  print(f"mutmut {args.pkg}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + f": score {score:.1f} %  (survivors: `cd {work} && {sys.executable} -m mutmut results`)")
  if args.check and (low := below_recorded(args.pkg, _statuses(work, []))):
    print("below the recorded score: " + "; ".join(low), file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
