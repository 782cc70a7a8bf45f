"""The eviprobe_graphs experiment: config checks, the validation choices and the per-cell verdict (its end-to-end
run is tests/test_configs.py's smoke run)."""

import os

import numpy as np
import pytest

from configs import eviprobe_graphs as cfg_module
from experiments import common, eviprobe_graphs
from jaxml.eviprobe import pipeline as pl


def test_unknown_names_rejected():
  config = cfg_module.get_config("smoke")
  config.baselines = ("msp", "odin")
  with pytest.raises(ValueError, match="unknown baseline"):
    eviprobe_graphs.plan(config)
  config = cfg_module.get_config("smoke")
  config.settings = ("loc", "halved")
  with pytest.raises(ValueError, match="unknown setting"):
    eviprobe_graphs.plan(config)            # a user shift must be passed to run(shifts=...)
  assert "halved" in eviprobe_graphs.plan(config, shifts={"halved": lambda x, g, r: (x, g, r.random(len(x)) < 0.1)})[
      "settings"]
  config = cfg_module.get_config("smoke:dataset=pubmed")
  with pytest.raises(ValueError, match="unknown dataset"):
    eviprobe_graphs.plan(config)
  config = cfg_module.get_config("smoke")
  config.eviprobe.propagation = "diffusion"
  with pytest.raises(ValueError, match="unknown propagation"):
    eviprobe_graphs.plan(config)
  config = cfg_module.get_config("smoke")
  config.optim.clip_norm = 1.0          # a global norm over the ensemble stack would couple its members
  with pytest.raises(ValueError, match="clip_norm"):
    eviprobe_graphs.plan(config)
  config.baselines = ("msp",)
  assert eviprobe_graphs.plan(config)["num_members"] == 1


def test_validation_choice_ranks_grid_by_mean_ood_auroc():
  def row(m, cell, auc):
    return common.row(method=m, dataset=f"csbm-0:{cell}", split=0, seed=0, metrics={"ood_auroc": auc}, cost={})
  rows = [row("grid_log_a0.1", "loc", 0.9), row("grid_log_a0.1", "normal", 0.5),
          row("grid_none", "loc", 0.7), row("grid_none", "normal", 0.8), row("xeviprobe", "loc", 1.0)]
  best, table = eviprobe_graphs.validation_choice(rows)
  assert best == "grid_none" and "grid_none **(chosen)**" in table and "75.00" in table
  assert eviprobe_graphs.validation_choice([row("xeviprobe", "loc", 1.0)]) == ("", "")


def test_presets_build():
  for preset in cfg_module.PRESETS:
    config = cfg_module.get_config(preset)
    eviprobe_graphs.plan(config)
  config = cfg_module.get_config("small:dataset=cora+citeseer,splits=3,backbone=gat")
  assert config.data.datasets == ("cora", "citeseer") and config.splits == (0, 1, 2)
  assert config.backbone.name == "gat"
  assert np.all([s in eviprobe_graphs.SETTINGS for s in config.settings])


def test_validation_family_and_grid():
  config = cfg_module.get_config("validate")
  plan = eviprobe_graphs.plan(config)
  assert not set(config.data.datasets) & {"cora_ml", "citeseer", "cora"}     # CSBM only, never a test graph
  assert set(config.ablations) == set(pl.GRID) | set(pl.MISC_GRID) | set(pl.GUARD_GRID) and len(pl.GRID) == 10
  assert set(cfg_module.GUARD_GRID) == set(pl.GUARD_GRID) and len(pl.GUARD_GRID) == 24
  assert "gpn" not in config.baselines and plan["settings"] == cfg_module.VALIDATION_SETTINGS
  assert set(plan["settings"]) - {"loc"} <= set(eviprobe_graphs.shift_functions(config, None))
  config.data.csbm.num_nodes = 120
  seed, k, f = config.data.csbm_variants[2]
  g = eviprobe_graphs.load(config, "csbm-2")
  assert g["num_classes"] == k and g["features"].shape == (120, f)
  assert pl.ABLATIONS["linear"] == dict(propagation="strength", teleport=0.1)
  assert "linear" in cfg_module.get_config("small").ablations


def test_misc_choice_ranks_readouts_by_mean_misc_auroc():
  def row(m, cell, auc):
    return common.row(method=m, dataset=f"csbm-0:{cell}", split=0, seed=0, metrics={"misc_auroc": auc}, cost={})
  rows = [row("misc_u_alea", "loc", 0.9), row("misc_u_alea", "normal", 0.6), row("misc_msp", "loc", 0.8),
          row("misc_msp", "normal", 0.8), row("xeviprobe", "loc", 1.0), row("grid_none", "loc", 0.99)]
  best, table = eviprobe_graphs.misc_choice(rows)
  assert best == "misc_msp" and "misc_msp **(chosen)**" in table and "80.00" in table and "grid_none" not in table
  assert eviprobe_graphs.misc_choice([row("xeviprobe", "loc", 1.0)]) == ("", "")
  assert set(cfg_module.MISC_GRID) == set(pl.MISC_GRID) <= set(cfg_module.get_config("validate").ablations)


def test_cell_verdict_pairs_runs_and_counts_cells(tmp_path):
  """cell_verdict: best baseline per cell by mean, paired difference on (split, init) with its s.e., the
  t-test from 5 pairs, GPN compared separately, and the won / met counts; merge refuses a run twice."""
  rng = np.random.default_rng(0)
  rows = []
  for s in range(5):
    for i in range(2):
      noise = rng.normal(0, 0.01)
      for m, ood_v, misc_v in (("xeviprobe", 0.80 + noise, 0.85 + noise / 3), ("gpn", 0.78 + noise / 2, 0.87 + noise),
                               ("msp", 0.70, 0.80), ("maha_q", 0.9 + noise / 2, None)):
        met = {"ood_auroc": ood_v} | ({} if misc_v is None else {"misc_auroc": misc_v})
        rows.append(common.row(method=m, dataset="g:loc", split=s, seed=i, metrics=met, cost={}))
  rows.reverse()                                                      # order must not matter
  text, cells = eviprobe_graphs.cell_verdict(rows, ("msp", "maha_q", "gpn"))
  (c,) = cells
  assert c["ood_auroc"]["other"] == "maha_q" and c["ood_auroc"]["n"] == 10
  assert c["ood_auroc"]["losses"] == 10 and not c["ood_won"]
  assert c["ood_auroc"]["t_p"] < 1e-6
  assert c["ood_auroc_gpn"]["diff"] == pytest.approx(0.02, abs=0.01) and c["ood_auroc_gpn"]["wins"] == 10
  assert c["misc_auroc"]["other"] == "gpn" and c["misc_auroc"]["diff"] == pytest.approx(-0.02, abs=0.01)
  assert c["misc_met"] is False                       # −2 points: outside the 1-point band
  assert eviprobe_graphs.cell_verdict(rows, ("msp",))[1][0]["misc_met"] is True
  assert "OOD AUROC ≥ the best baseline in 0 of 1 cells" in text
  for d in ("a", "b"):
    os.makedirs(tmp_path / d)
    common.write_json(str(tmp_path / d / "results.json"), {"rows": rows})
  with pytest.raises(ValueError, match="more than one"):
    eviprobe_graphs.merge([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"), ("msp", "gpn"))
