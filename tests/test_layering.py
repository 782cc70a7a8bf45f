"""Import rules of STYLE.md §2.2, checked by parsing every module's imports."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
METHODS = ("smile", "emf", "sol", "unlearning", "eviprobe", "causal_reward", "classifier")


def _imports(path: pathlib.Path) -> set[str]:
  names = set()
  for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
    if isinstance(node, ast.Import):
      names.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names.add(node.module)
  return names


def _modules(folder: str):
  return sorted((ROOT / folder).rglob("*.py"))


def _violations(folder: str, forbidden) -> list[str]:
  bad = []
  for path in _modules(folder):
    for name in _imports(path):
      if forbidden(name):
        bad.append(f"{path.relative_to(ROOT)} imports {name}")
  return bad


def _under(name: str, package: str) -> bool:
  return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("method", METHODS)
def test_methods_never_import_each_other_or_data(method):
  others = [m for m in METHODS if m != method]
  assert not _violations(f"jaxml/{method}", lambda n: any(_under(n, f"jaxml.{o}") for o in others)
                         or _under(n, "jaxml.data") or _under(n, "experiments"))


def test_data_never_imports_models_or_jax():
  banned = ("jax", "flax", "optax", "blackjax", "jaxml.core", "jaxml.nn", "jaxml.metrics") + tuple(
      f"jaxml.{m}" for m in METHODS)
  assert not _violations("jaxml/data", lambda n: any(_under(n, b) for b in banned))


def test_core_imports_no_other_jaxml_package():
  assert not _violations("jaxml/core", lambda n: _under(n, "jaxml") and not _under(n, "jaxml.core"))


def test_nn_and_metrics_hold_no_training_or_method_code():
  banned = ("jaxml.core", "jaxml.data", "optax", "orbax") + tuple(f"jaxml.{m}" for m in METHODS)
  assert not _violations("jaxml/nn", lambda n: any(_under(n, b) for b in banned))
  assert not _violations("jaxml/metrics", lambda n: any(_under(n, f"jaxml.{m}") for m in METHODS + ("data", "core")))


def test_configs_import_only_ml_collections_and_common():
  # A method's `defaults` module (plain data) is the one source of its hyper-parameters; a config may read it.
  ok = ("ml_collections", "configs.common", "configs") + tuple(f"jaxml.{m}.defaults" for m in METHODS)
  assert not _violations("configs", lambda n: not any(_under(n, o) for o in ok))


def test_defaults_modules_hold_plain_data():
  for path in ROOT.glob("jaxml/*/defaults.py"):
    assert _imports(path) <= {"typing"}, f"{path.relative_to(ROOT)} imports {_imports(path) - {'typing'}}"


def test_the_checker_catches_a_violation(tmp_path):
  bad = tmp_path / "m.py"
  bad.write_text("from jaxml.sol import losses\nimport jaxml.data.offline\n")
  assert _imports(bad) == {"jaxml.sol", "jaxml.data.offline"}
