"""The smile_uci experiment: name checks, presets, and short runs of the paper and uci11 presets (the smoke
preset's end-to-end run and its row checks are in tests/test_configs.py)."""

import math

import pytest

from configs import smile_uci as cfg_module
from experiments import smile_uci


def test_unknown_names_rejected():
  config = cfg_module.get_config("smoke")
  config.smile.methods = ("psmile", "nuts")
  with pytest.raises(ValueError, match="unknown method"):
    smile_uci.plan(config)
  config = cfg_module.get_config("ref")
  config.smile.datasets = ("boston",)
  with pytest.raises(ValueError, match="dataset"):
    smile_uci.plan(config)


def test_presets_build():
  for preset in cfg_module.PRESETS:
    config = cfg_module.get_config(preset)
    assert config.smile.methods
  config = cfg_module.get_config("ref:datasets=energy+airfoil,splits=2,budget_epochs=10")
  assert config.smile.datasets == ("energy", "airfoil") and config.smile.splits == (2,)
  assert config.smile.budget_epochs == 10


@pytest.mark.slow
def test_paper_preset_two_steps_on_mock_cifar(tmp_path):
  import tensorflow_datasets as tfds
  config = cfg_module.get_config("paper")
  s = config.smile
  s.resnet_stage_sizes, s.resnet_width = (1,), 4
  s.num_members, s.paper_batch, s.paper_load_batch = 2, 8, 8
  s.paper_train_limit, s.paper_test_limit = 32, 16
  s.member_max_steps = 2
  s.budget_epochs, s.warmup_frac, s.num_samples = 1, 0.0, 1   # 2 pSMILE steps (2 x 2b PEG = 32 rows)
  config.checkpoint_every = 0
  s.methods = ("psmile",)
  with tfds.testing.mock_data(num_examples=32, policy=tfds.testing.MockPolicy.USE_CODE):
    rows = smile_uci.run(config, str(tmp_path))
  assert [r["method"] for r in rows] == ["de", "psmile"]
  for r in rows:
    assert r["metrics"]["lppd"] is not None and 0.0 <= r["metrics"]["accuracy"] <= 1.0


@pytest.mark.slow
def test_uci11_auto_protocol_and_validation_choice(tmp_path):
  """uci11 resolves each set's protocol (standard splits where a set has them, else the 70/10/20 splits 1-3),
  runs both kinds in one run, and smile_best copies, per split, the variant with the best validation LPPD (the r-clamp
  ablation `psmile_clamp` among them)."""
  config = cfg_module.get_config("uci11:datasets=yacht+airfoil,splits=0,methods=map+de+psmile_naive+psmile+psmile_clamp+sgld")
  plan = smile_uci.plan(config)
  assert plan.protocols == {"yacht": "standard", "airfoil": "smile"} and plan.splits == {"yacht": (0,), "airfoil": (1,)}
  s = config.smile
  s.num_members, s.member_epochs, s.member_max_steps, s.hidden = 2, 2, 8, (8,)
  s.budget_steps, s.num_samples, s.smile_step_size, s.sgld_step_size = 20, 2, (1e-3, 1e-4), (1e-5,)
  s.rhat_points, s.coverage_draws = 10, 50
  rows = smile_uci.run(config, str(tmp_path))
  assert {(r["dataset"], r["split"]) for r in rows} == {("yacht", 0), ("airfoil", 1)}
  for d in ("yacht", "airfoil"):
    by = {r["method"]: r["metrics"] for r in rows if r["dataset"] == d}
    variants = ("psmile_naive", "psmile", "psmile_clamp")      # smile.METHODS order
    best = max(variants, key=lambda m: (by[m]["valid_lppd"], -variants.index(m)))
    assert by["smile_best"]["chosen"] == variants.index(best)
    assert by["smile_best"]["lppd"] == by[best]["lppd"]
    for m in ("psmile_naive", "psmile", "psmile_clamp", "sgld"):     # the validation chain filter's diagnostic columns
      assert 1 <= by[m]["chains_kept"] <= 2 and math.isfinite(by[m]["lppd_kept"])
      if by[m]["chains_kept"] == 2:
        assert by[m]["lppd_kept"] == by[m]["lppd"]
  assert "smile_best − sgld" in (tmp_path / "summary.md").read_text()
