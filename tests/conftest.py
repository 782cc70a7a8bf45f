"""Test set-up: 8 simulated CPU devices and fast compiles, before anything imports jax."""

import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests (and the experiments they launch as subprocesses) never touch the user's compilation cache.
os.environ.setdefault("JAXML_COMPILATION_CACHE", "0")

# Fast, unoptimised XLA compiles: the suite is compile-bound. In the environment too, so that the
# experiments the tests launch as subprocesses (the smoke runs of tests/test_configs.py, the launcher,
# workdir and causal_reward smoke tests) compile the same way.
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"

# One persistent compilation cache per `pytest` run, shared by the xdist workers and the subprocesses they
# launch, in a fresh temporary folder (never the user's cache): the suite is compile-bound and many tests
# compile the same programs (the same model and step built again by another test). Removed when the run ends.
if "JAXML_TEST_JAX_CACHE" not in os.environ:          # the first process (pytest's controller) creates it
  os.environ["JAXML_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="jaxml-test-jax-cache-")
  os.environ["JAXML_TEST_JAX_CACHE_CREATOR"] = str(os.getpid())
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["JAXML_TEST_JAX_CACHE"]
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

import jax  # noqa: E402  (must come after the flags)
import pytest  # noqa: E402

jax.config.update("jax_disable_most_optimizations", True)


def pytest_sessionfinish(exitstatus):
  """The process that created the run's compilation cache removes it (not its workers, subprocesses or
  forks: mutmut's forked workers inherit the folder and must not delete it under each other)."""
  del exitstatus
  if os.environ.get("JAXML_TEST_JAX_CACHE_CREATOR") == str(os.getpid()):
    shutil.rmtree(os.environ["JAXML_TEST_JAX_CACHE"], ignore_errors=True)


# Changed-code selection. A slow test also runs in the default suite (`-m 'not slow or changed'`) when the code
# it guards differs from the last full run's commit (`docs/dev/last_full_run.json`, rewritten after `make test-all`
# passes): a method package's slow tests guard that package, its experiments, configs and benchmarks (file names
# starting with the package's name); `tests/test_docs.py` (the snippet runs) guards all the code and the pages with
# runnable snippets; every other slow test guards all the code. A change outside the method packages (core, data,
# metrics, nn, the launcher, the build files) selects every slow test.
METHOD_PACKAGES = ("smile", "emf", "sol", "unlearning", "eviprobe", "causal_reward")
_ROOT = pathlib.Path(__file__).resolve().parents[1]
_LAST_FULL_RUN = _ROOT / "docs" / "dev" / "last_full_run.json"
_STARTED = time.monotonic()


def _area(path: str, root: pathlib.Path = _ROOT) -> str | None:
  """'docs' (a page with runnable snippets), the method package a changed file belongs to, 'shared', or None for a
  file that no slow test reads (a page without snippets, the full-run record)."""
  p = pathlib.PurePosixPath(path)
  if p == _LAST_FULL_RUN.relative_to(_ROOT):
    return None
  if p.parts[0] == "docs" or p.suffix == ".md":
    page = root / path
    return "docs" if not page.exists() or "<!-- runnable -->" in page.read_text() else None
  if p.parts[0] in ("jaxml", "tests") and len(p.parts) > 2 and p.parts[1] in METHOD_PACKAGES:
    return p.parts[1]
  if p.parts[0] in ("experiments", "configs", "benchmarks"):
    return next((m for m in METHOD_PACKAGES if p.stem.startswith(m)), "shared")
  return "shared"


def _git(*args: str, root: pathlib.Path = _ROOT) -> str | None:
  proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
  return proc.stdout if proc.returncode == 0 else None


def changed_areas(root: pathlib.Path = _ROOT) -> tuple[set[str] | None, str]:
  """The areas of `root` changed since its last full run (None when unknown: no checkout or no record), and why."""
  root = root.resolve()
  top = _git("rev-parse", "--show-toplevel", root=root)
  if top is None or pathlib.Path(top.strip()).resolve() != root:
    return None, "not a git checkout of the project"
  record = root / _LAST_FULL_RUN.relative_to(_ROOT)
  if not record.exists():
    return None, f"no record of a full run ({record.relative_to(root)})"
  commit = json.loads(record.read_text())["commit"]
  diff = _git("diff", "--name-only", commit, root=root)
  if diff is None:
    return None, f"last full run's commit {commit[:7]} is not in this clone's history"
  paths = diff.split() + (_git("ls-files", "--others", "--exclude-standard", root=root) or "").split()
  areas = {_area(p, root) for p in paths} - {None}
  changed = f"changed: {', '.join(sorted(areas))}" if areas else "nothing changed"
  return areas, f"since the last full run ({commit[:7]}) {changed}"


def _guards(test_path: pathlib.Path, areas: set[str]) -> bool:
  """Whether a slow test in `test_path` guards one of the changed areas."""
  package = test_path.relative_to(_ROOT / "tests").parts[0]
  if package in METHOD_PACKAGES:
    return bool(areas & {package, "shared"})
  return bool(areas if package == "test_docs.py" else areas - {"docs"})


_CHANGED = pytest.StashKey[tuple[set[str] | None, str]]()


def pytest_configure(config):
  """Works out once per process what changed, for the header, the selection and the summary line."""
  config.stash[_CHANGED] = changed_areas()


def _selection_line(config) -> str:
  areas, why = config.stash[_CHANGED]
  slow = "the slow tests that guard it join the default run" if areas else "slow tests run only with -m ''"
  return f"jaxml: {why}; {slow}"


def pytest_report_header(config):
  return _selection_line(config)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
  terminalreporter.write_line(_selection_line(config))
  _record_full_run(terminalreporter, exitstatus, config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  """Marks `changed` the slow tests that guard changed code, before `-m` deselects by marker."""
  areas, _ = config.stash[_CHANGED]
  for item in items:
    if areas and item.get_closest_marker("slow") and _guards(item.path, areas):
      item.add_marker(pytest.mark.changed)


def _record_full_run(reporter, exitstatus: int, config) -> None:
  """After a passing run of every test on a clean checkout (`make test-all` sets JAXML_RECORD_FULL_RUN), writes its
  commit, pass count and seconds to `docs/dev/last_full_run.json`, the reference of the changed-code selection."""
  if (os.environ.get("JAXML_RECORD_FULL_RUN") != "1" or hasattr(config, "workerinput") or exitstatus != 0
      or config.option.collectonly or config.option.markexpr or config.option.keyword
      or config.args_source != pytest.Config.ArgsSource.TESTPATHS):
    return
  if _git("status", "--porcelain", "--untracked-files=no") != "":
    reporter.write_line("jaxml: the full run is not recorded: the checkout has uncommitted changes")
    return
  record = {"commit": _git("rev-parse", "HEAD").strip(), "command": "make test-all",
            "passed": len(reporter.stats.get("passed", [])), "seconds": round(time.monotonic() - _STARTED)}
  _LAST_FULL_RUN.write_text(json.dumps(record) + "\n")
  reporter.write_line(f"jaxml: full run recorded in {_LAST_FULL_RUN.relative_to(_ROOT)}: {record}")
