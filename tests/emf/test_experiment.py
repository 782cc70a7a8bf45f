"""The emf_generate experiment runs end to end on a tiny override of the smoke preset."""

import json
import os

from configs import emf_generate as cfg_mod
from experiments import common
from experiments import emf_generate


def test_smoke_run_writes_rows(tmp_path):
  config = cfg_mod.get_config("smoke:datasets=checkerboard,methods=emf_u+ct,steps=4")
  config.data.toy_train = 256
  config.data.toy_eval = 128
  config.log_every = 2
  rows = emf_generate.run(config, str(tmp_path))
  assert {r["method"] for r in rows} == {"real", "emf_u@1", "emf_u@2", "emf_u@4", "ct@1", "ct@2"}
  for r in rows:
    assert set(r) == {"method", "dataset", "split", "seed", "metrics", "cost"}
    assert r["dataset"] == "checkerboard"
    assert {"sw", "energy", "mmd"} <= set(r["metrics"])
  assert os.path.exists(tmp_path / "toys_samples.png")
  common.write_json(str(tmp_path / "results.json"), {"rows": rows})
  assert json.load(open(tmp_path / "results.json"))["rows"][1]["metrics"]["nfe"] == 1


def test_unknown_names_are_rejected():
  import pytest
  config = cfg_mod.get_config("smoke:datasets=cifar")
  with pytest.raises(ValueError, match="dataset"):
    emf_generate.plan(config)
