"""Mutation testing of the math modules with mutmut, one package at a time (`make mutate PKG=...`).

Why a wrapper: mutmut is configured by one `setup.cfg`/`[tool.mutmut]` per directory and writes a
`mutants/` tree where it runs. This script copies `jaxml/`, `tests/` and `pyproject.toml` into a scratch
directory (default `runs/mutate/<pkg>`, ignored by git), writes the package's scope (the math modules
and the fast tests that guard them) as `setup.cfg` there, runs `mutmut run` niced, and prints
killed / survived / timeout / total and the score killed / (total - skipped). With `--check` it fails
when a module's score falls below the score recorded for it in docs/dev/mutation_scores.json (modules never
measured have none); with `--record` it writes the per-module counts and the
surviving mutants into docs/dev/mutation_scores.json (judged equivalence reasons already there are kept).

Sampled mode (`--sample N --seed S`): a full pass costs seconds per mutant (each re-compiles JAX tests) times
hundreds of mutants per module, so this generates every mutant (mutmut's own generation step, no run), lists them
(`mutmut results --all true`), draws N per module uniformly at random (seeded per module), runs `mutmut run` on
the drawn names only, and reports killed / n with the binomial standard error and the exact 95 % interval.

JAX note: workers fork from mutmut's fork server (`process_isolation = forkserver`), which imports the
tests but runs none, so no XLA thread pool or jit cache is shared with a worker; each worker traces the
mutated (trampolined) function afresh. A package in PRELOAD has guarding tests that start XLA at import
(blackjax computes `jnp.log(2.0)` for a default argument; emf, eviprobe, unlearning, causal_reward and the
metrics tests build arrays at module level): its fork server imports only the listed
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
             ["tests/core/test_step.py", "tests/core/test_loop.py", "tests/core/test_train.py",
              "tests/core/test_optim_properties.py", "tests/core/test_train_properties.py",
              "tests/core/test_loop_properties.py", "tests/core/test_select_properties.py"]),
    "eviprobe": (["jaxml/eviprobe/probe.py"],
                 ["tests/eviprobe/test_probe.py", "tests/eviprobe/test_evidence_by_hand.py",
                  "tests/eviprobe/test_probe_properties.py"]),
    "emf": (["jaxml/emf/losses.py", "jaxml/emf/baselines.py", "jaxml/emf/sample.py"],
            ["tests/emf/test_losses_by_hand.py", "tests/emf/test_gradients.py", "tests/emf/test_losses.py",
             "tests/emf/test_samplers_and_nets.py"]),
    "smile": (["jaxml/smile/kernel.py", "jaxml/smile/adaptation.py"],
              ["tests/smile/test_adaptation_by_hand.py", "tests/smile/test_adaptation.py", "tests/smile/test_kernel.py",
               "tests/smile/test_family_and_baselines.py::test_smile_family_equals_the_named_variant_step_by_step",
               "tests/smile/test_virial_tuner.py::test_virial_temperature_is_one_under_the_target_and_detects_a_hot_sampler",
               "tests/smile/test_virial_tuner.py::test_update_rule_grows_when_cold_shrinks_when_hot_and_settles_first",
               "tests/smile/test_virial_tuner.py::test_tuner_reads_the_temperature_at_the_proposal_around_the_start",
               "tests/smile/test_kernel_properties.py"]),
    "sol": (["jaxml/sol/losses.py", "jaxml/sol/decoders.py"],
            ["tests/sol/test_by_hand.py", "tests/sol/test_losses.py", "tests/sol/test_decoders.py",
             "tests/sol/test_pair_samplers_by_hand.py",
             "tests/sol/test_gradients.py::test_profile_gradient_is_analytic",
             "tests/sol/test_gradients.py::test_discriminative_loss_gradient_on_the_profile",
             "tests/sol/test_decoders_properties.py"]),
    "unlearning": (["jaxml/unlearning/transform.py", "jaxml/unlearning/losses.py", "jaxml/unlearning/api.py"],
                   ["tests/unlearning/test_objectives_and_metrics_by_hand.py",
                    "tests/unlearning/test_transform_and_losses.py",
                    "tests/unlearning/test_splits_and_metrics.py::test_avg_gap_definition",
                    "tests/unlearning/test_baselines.py::test_unlearning_metrics_assemble_ua_ra_ta_on_the_right_rows",
                    "tests/unlearning/test_api_properties.py", "tests/unlearning/test_transform_properties.py"]),
    "causal_reward": (["jaxml/causal_reward/model.py", "jaxml/causal_reward/losses.py"],
                      ["tests/causal_reward/test_losses.py", "tests/causal_reward/test_model.py",
                       "tests/causal_reward/test_model_properties.py"]),
    "metrics": (["jaxml/metrics/ood.py", "jaxml/metrics/calibration.py", "jaxml/metrics/ranking.py",
                 "jaxml/metrics/mia.py", "jaxml/metrics/mcmc.py", "jaxml/metrics/generative.py",
                 "jaxml/metrics/representation.py"],
                ["tests/metrics", "tests/emf/test_metrics_and_toys.py"]),
}

# Packages whose tests start the XLA backend at import (blackjax computes `jnp.log(2.0)` for a default
# argument; emf, eviprobe, unlearning, causal_reward and the metrics tests build arrays at module level): a
# worker forked from a process with XLA's thread pool running hangs, so their fork server pre-imports only these
# (third-party, XLA stays unstarted: `_check_preload` verifies it) and each worker imports jaxml and the
# tests after the fork (about 0.3 s more per mutant).
_THIRD_PARTY = ["numpy", "scipy.linalg", "scipy.stats", "jax", "jax.numpy", "jax.scipy.special", "jax.flatten_util",
                "chex", "optax", "flax.linen", "_pytest.python", "_pytest.fixtures"]
PRELOAD: dict[str, list[str]] = {pkg: _THIRD_PARTY for pkg in ("smile", "emf", "eviprobe", "unlearning", "metrics",
                                                               "causal_reward")}

SCORES = ROOT / "docs" / "dev" / "mutation_scores.json"


def _check_preload(modules: list[str]) -> None:
  """Fails if importing the preload modules starts an XLA backend (the fork server would hang its workers)."""
  code = ("import importlib, sys; from jax._src import xla_bridge as xb\n"
          "for m in sys.argv[1:]: importlib.import_module(m)\n"
          "sys.exit(1 if xb._backends else 0)")
  if subprocess.run([sys.executable, "-c", code, *modules]).returncode:
    raise SystemExit(f"preloading {modules} starts XLA: a forked mutmut worker would hang")


_ALSO_COPY = ["configs", "experiments"]


def _setup_cfg(pkg: str, covered_only: bool = True, tests: list[str] | None = None) -> str:
  modules, tests = SCOPES[pkg][0], tests or SCOPES[pkg][1]
  tests = [t for t in tests if (ROOT / t.split("::")[0]).exists()]   # a guarding file not written yet is skipped
  lines = ["[mutmut]", f"source_paths = jaxml/{pkg}/", "only_mutate ="]
  lines += [f"    {m}" for m in modules]
  lines += ["pytest_add_cli_args_test_selection ="] + [f"    {t}" for t in tests]
  # One process per mutant: pyproject's `-n 2` (xdist) would hide which tests call which function.
  lines += ["pytest_add_cli_args =", "    -n", "    0"]
  # Tests read configs/ and experiments/ (run specs, experiment entry points): copied next to the mutants.
  lines += ["also_copy ="] + [f"    {d}/" for d in _ALSO_COPY]
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


def _module_of(name: str, modules: list[str]) -> str | None:
  """The scope module (path) a mutant name belongs to."""
  for module in modules:
    if name.startswith(module.removesuffix(".py").replace("/", ".") + "."):
      return module
  return None


def generate(work: Path, env: dict, nice: list[str]) -> None:
  """Creates the mutants (mutmut's own generation step: source copy, coverage pass, mutated files and their
  meta files) without running any."""
  code = ("import os, mutmut.__main__ as mm\n"
          "from mutmut.mutation.trampoline import set_mutant_under_test\n"
          "from mutmut.utils.file_utils import copy_src_dir, copy_also_copy_files, setup_source_paths\n"
          "set_mutant_under_test('mutant_generation'); os.makedirs('mutants', exist_ok=True)\n"
          "copy_src_dir(); copy_also_copy_files(); setup_source_paths(); mm.store_lines_covered_by_tests()\n"
          "print(mm.create_mutants(2))\n")
  subprocess.run(nice + [sys.executable, "-c", code], cwd=work, env=env, check=True)


def list_mutants(work: Path, env: dict) -> list[str]:
  """Every generated mutant's name, from mutmut's own listing (`mutmut results --all true`)."""
  out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, env=env,
                       check=True, capture_output=True, text=True).stdout
  return sorted(line.strip().rsplit(": ", 1)[0] for line in out.splitlines() if "__mutmut_" in line)


def draw(names: list[str], modules: list[str], n: int, seed: int) -> dict[str, list[str]]:
  """Module -> n of its mutants drawn uniformly without replacement (all of them if it has fewer), seeded:
  one random.Random(seed) per module, fed that module's sorted names, so a draw does not depend on the others."""
  import random
  out = {}
  for module in modules:
    mine = sorted(m for m in names if _module_of(m, [module]))
    out[module] = sorted(random.Random(f"{seed}:{module}").sample(mine, min(n, len(mine))))
  return out


def sampled_estimate(killed: int, n: int) -> dict:
  """killed / n with its binomial standard error and the exact (Clopper-Pearson) 95 % interval."""
  from scipy.stats import binomtest
  p = killed / n
  ci = binomtest(killed, n).proportion_ci(confidence_level=0.95)
  return {"killed": killed, "n": n, "score": round(100 * p, 1),
          "stderr": round(100 * (p * (1 - p) / n) ** 0.5, 1),
          "ci95": [round(100 * ci.low, 1), round(100 * ci.high, 1)]}


# Keys of a module's entry that hold other runs of it (an earlier or a larger sample, a partial full run); a new
# --record of the module keeps them.
SIDE_RECORDS = ("earlier_sample", "larger_sample", "partial_full_run")


def record_sampled(pkg: str, drawn: dict[str, list[str]], statuses: dict[str, str], seed: int, command: str,
                   tests: list[str], path: Path = SCORES) -> dict:
  """Writes `pkg`'s sampled per-module estimates into the scores file. Judged reasons already written for a
  survivor stay; a module whose drawn mutants were not all checked keeps the checked ones as its sample."""
  data = json.loads(path.read_text()) if path.exists() else {}
  entry = data.get(pkg, {})
  old_modules = entry.get("modules", {})
  modules = {}
  for module, names in drawn.items():
    checked = {n: statuses.get(n, "not checked") for n in names}
    checked = {n: s for n, s in checked.items() if s not in ("not checked", "skipped")}
    old = old_modules.get(module, {})
    if not checked:
      modules[module] = old if old.get("score") is not None else {
          "score": None, "run": f"not measured: none of its {len(names)} drawn mutants was checked"}
      continue
    est = sampled_estimate(sum(s == "killed" for s in checked.values()), len(checked))
    survivors = {n: old.get("survivors", {}).get(n, f"not judged ({s})") for n, s in sorted(checked.items())
                 if s != "killed"}
    counts: dict[str, int] = {}
    for s in checked.values():
      counts[s] = counts.get(s, 0) + 1
    new = {"run": "sampled", "sampled": True, "seed": seed, "drawn": len(names), **est, "counts": counts,
           "survivors": survivors, "command": command}
    if old.get("run") != "sampled" and old.get("score") is not None:
      new["full_run"] = {k: old[k] for k in ("run", "killed", "total", "score") if k in old}
    for key in SIDE_RECORDS:   # other runs of the module, written beside this one: kept
      if key in old:
        new[key] = old[key]
    modules[module] = new
  for module, old in old_modules.items():
    modules.setdefault(module, old)
  data[pkg] = {"tests": tests, "modules": modules}
  path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
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
    # a sampled estimate is checked against its 95 % interval's lower end, not its point value
    floor = entry["ci95"][0] if entry.get("sampled") else entry["score"]
    if _score(counts) < floor - 0.05:
      out.append(f"{module}: {_score(counts):.1f} % < recorded {floor} %")
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
  ap.add_argument("--sample", type=int, default=None, metavar="N",
                  help="check N mutants per module drawn uniformly at random (seeded) instead of all; reports "
                       "killed / N with a binomial standard error and a 95 %% interval")
  ap.add_argument("--seed", type=int, default=0, help="the draw's seed (with --sample)")
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
    for d in _ALSO_COPY:
      shutil.copytree(ROOT / d, work / d, ignore=shutil.ignore_patterns("__pycache__"))
  # Resuming: the mutants exist already, so skip the coverage pass that only filters their creation.
  (work / "setup.cfg").write_text(_setup_cfg(args.pkg, covered_only=not resumed, tests=args.tests))
  if args.pkg in PRELOAD:
    _check_preload(PRELOAD[args.pkg])
    (work / "preload_modules.txt").write_text("\n".join(PRELOAD[args.pkg]) + "\n")
  shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
  env = dict(os.environ, PYTHONPATH=str(work))
  env.setdefault("JAX_PLATFORMS", "cpu")   # as tests/conftest.py sets it: a preloaded jax reads it at import
  used_tests = [t for t in (args.tests or SCOPES[args.pkg][1]) if (ROOT / t.split("::")[0]).exists()]
  nice = ["nice", "-n", "19"] if shutil.which("nice") else []
  names = list(args.mutants)
  drawn: dict[str, list[str]] = {}
  if args.sample:
    if not resumed:
      generate(work, env, nice)
      (work / "setup.cfg").write_text(_setup_cfg(args.pkg, covered_only=False, tests=args.tests))
    modules = [m for m in SCOPES[args.pkg][0]
               if not args.mutants or any(fnmatch.fnmatch(m.removesuffix(".py").replace("/", ".") + ".x", g)
                                          for g in args.mutants)]
    drawn = draw(list_mutants(work, env), modules, args.sample, args.seed)
    names = [n for ns in drawn.values() for n in ns]
    print("drawn: " + ", ".join(f"{m} {len(ns)}" for m, ns in drawn.items()))
  if resumed and names and args.unchecked_only:
    names = [n for n, status in _statuses(work, names).items() if status == "not checked"]
    if not names:
      print("nothing left to check")
  cmd = nice + [sys.executable, "-m", "mutmut", "run"] + names
  if args.max_children:
    cmd += ["--max-children", str(args.max_children)]
  if names or not (args.mutants or args.sample):
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
  if args.sample:
    statuses = _statuses(work, [n for ns in drawn.values() for n in ns])
    command = "tools/mutate.py " + " ".join(sys.argv[1:])
    for module, ns in drawn.items():
      done = [n for n in ns if statuses.get(n, "not checked") not in ("not checked", "skipped")]
      if done:
        e = sampled_estimate(sum(statuses[n] == "killed" for n in done), len(done))
        print(f"  {module}: {e['killed']}/{e['n']} killed, {e['score']} % ± {e['stderr']} "
              f"(95 % interval {e['ci95'][0]}–{e['ci95'][1]} %)" + (f", {len(ns) - len(done)} not checked"
                                                                   if len(done) < len(ns) else ""))
      else:
        print(f"  {module}: none of {len(ns)} drawn mutants checked")
      for n in ns:
        if statuses.get(n) != "killed":
          print(f"      {statuses.get(n, 'not checked')}: {n}")
    if args.record:
      record_sampled(args.pkg, drawn, statuses, args.seed, command, used_tests)
    return 0
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
