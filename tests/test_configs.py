"""Every config file builds for every preset it declares, with a launch command in its docstring."""

import importlib
import pathlib

import ml_collections
import pytest

CONFIGS = sorted(p.stem for p in (pathlib.Path(__file__).resolve().parents[1] / "configs").glob("*.py")
                 if p.stem not in ("__init__", "common"))


@pytest.mark.parametrize("name", CONFIGS)
def test_config_builds_for_every_preset(name):
  module = importlib.import_module(f"configs.{name}")
  assert f"experiments.{name}" in (module.__doc__ or ""), "docstring must hold the launch command"
  for preset in module.PRESETS:
    config = module.get_config(preset)
    assert isinstance(config, ml_collections.ConfigDict)
    assert config.preset == preset
    assert "seed" in config and "optim" in config


def test_parse_arg_rejects_unknown_presets_and_keys():
  from configs import common
  preset, arg = common.parse_arg("small:dataset=x,steps=5", ("smoke", "small"), dataset="a", steps=1)
  assert preset == "small" and arg.dataset == "x" and arg.steps == 5
  with pytest.raises(ValueError, match="unknown preset"):
    common.parse_arg("big", ("smoke", "small"))
  with pytest.raises(ValueError, match="unknown config argument"):
    common.parse_arg("smoke:colour=red", ("smoke",), dataset="a")
