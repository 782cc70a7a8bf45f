"""The changed-code selection of `tests/conftest.py`: which slow tests a changed file brings into the default run."""

import json
import pathlib
import subprocess

from tests import conftest

TESTS = pathlib.Path(conftest.__file__).resolve().parent


def test_each_file_belongs_to_its_method_or_to_the_shared_code():
  area = conftest._area
  assert area("jaxml/sol/losses.py") == "sol" and area("tests/sol/test_train.py") == "sol"
  assert area("experiments/smile_uci.py") == area("configs/smile_uci.py") == area("benchmarks/smile_cost.py") == "smile"
  assert area("experiments/emf_summary.py") == "emf" and area("experiments/causal_reward.py") == "causal_reward"
  assert area("docs/methods/sol.md") == area("README.md") == "docs"        # pages with runnable snippets
  assert area("docs/dev/tests.md") is None and area("docs/dev/last_full_run.json") is None
  for shared in ("jaxml/core/loop.py", "experiments/common.py", "configs/common.py", "tests/conftest.py",
                 "tests/test_configs.py", "pyproject.toml", "data/MANIFEST.sha256", "jaxml/metrics/ood.py"):
    assert area(shared) == "shared", shared


def test_a_method_change_selects_that_methods_slow_tests_and_the_tree_wide_ones():
  guards = conftest._guards
  sol_test, smile_test, tree_test = TESTS / "sol" / "test_x.py", TESTS / "smile" / "test_x.py", TESTS / "test_x.py"
  assert guards(sol_test, {"sol"}) and not guards(smile_test, {"sol"}) and guards(tree_test, {"sol"})
  assert guards(sol_test, {"shared"}) and guards(smile_test, {"shared"})
  docs_test = TESTS / "test_docs.py"
  assert not guards(sol_test, {"docs"}) and not guards(tree_test, {"docs"}) and guards(docs_test, {"docs"})
  assert not any(guards(t, set()) for t in (sol_test, tree_test, docs_test))


def _git(root: pathlib.Path, *args: str) -> str:
  return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_changes_since_the_recorded_commit_tracked_and_untracked_give_the_areas(tmp_path):
  assert conftest.changed_areas(tmp_path) == (None, "not a git checkout of the project")
  for path in ("jaxml/sol/losses.py", "docs/dev/tests.md", "docs/dev/last_full_run.json"):
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text("x\n")
  _git(tmp_path, "init", "-q")
  _git(tmp_path, "add", ".")
  _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
  record = tmp_path / "docs" / "dev" / "last_full_run.json"
  record.write_text(json.dumps({"commit": _git(tmp_path, "rev-parse", "HEAD")}))   # the record itself is no change
  assert conftest.changed_areas(tmp_path)[0] == set()
  (tmp_path / "jaxml" / "sol" / "losses.py").write_text("y\n")                       # tracked, uncommitted
  (tmp_path / "docs" / "dev" / "tests.md").write_text("y\n")                         # a page without snippets
  (tmp_path / "experiments").mkdir()
  (tmp_path / "experiments" / "smile_uci.py").write_text("y\n")                      # untracked
  areas, why = conftest.changed_areas(tmp_path)
  assert areas == {"sol", "smile"} and "smile, sol" in why
  record.write_text(json.dumps({"commit": "0" * 40}))
  assert conftest.changed_areas(tmp_path)[0] is None
