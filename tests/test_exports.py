"""Every jaxml package declares its public API in `__all__`, and every listed name exists."""

import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in (ROOT / "jaxml").glob("*/__init__.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_lists_its_api_and_every_name_resolves(package):
  module = importlib.import_module(f"jaxml.{package}")
  assert isinstance(getattr(module, "__all__", None), list) and module.__all__, f"jaxml.{package} has no __all__"
  missing = [n for n in module.__all__ if not hasattr(module, n)]
  assert not missing, f"jaxml.{package}.__all__ lists names it does not define: {missing}"
  assert len(set(module.__all__)) == len(module.__all__)
