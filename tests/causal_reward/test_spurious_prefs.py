"""The synthetic spurious-preference generator (numpy only)."""

import numpy as np
import pytest

from jaxml.causal_reward import baselines
from jaxml.data import spurious_prefs as sp


@pytest.fixture(scope="module")
def world():
  return sp.make_world(3, dim=16)


def test_seeded_determinism(world):
  a = sp.make_pairs(world, 7, 300, rho=0.8)
  b = sp.make_pairs(sp.make_world(3, dim=16), 7, 300, rho=0.8)
  for k in ("h_w", "h_l", "t_w", "t_l", "r_w"):
    np.testing.assert_array_equal(a[k], b[k])
  c = sp.make_pairs(world, 8, 300, rho=0.8)
  assert not np.array_equal(a["h_w"], c["h_w"])


@pytest.mark.parametrize("rho", [0.6, 0.9])
def test_train_cue_rule_accuracy_equals_rho(world, rho):
  d = sp.make_pairs(world, 1, 4000, rho=rho)
  assert abs(baselines.cue_rule_accuracy(d["t_w"][:, 0], d["t_l"][:, 0]) - rho) < 1e-3
  differ = d["t_w"][:, 1] != d["t_l"][:, 1]
  frac_syc = np.mean(d["t_w"][differ, 1] > d["t_l"][differ, 1])
  assert abs(frac_syc - rho) < 0.01
  # length and sycophancy are selected independently
  longer = d["t_w"][differ, 0] > d["t_l"][differ, 0]
  syc = d["t_w"][differ, 1] > d["t_l"][differ, 1]
  assert abs(np.mean(longer & syc) - rho * rho) < 0.02


def test_gold_and_anti_splits(world):
  gold = sp.make_pairs(world, 2, 5000, labels="gold")
  assert np.all(gold["r_w"] > gold["r_l"])
  assert abs(baselines.cue_rule_accuracy(gold["t_w"][:, 0], gold["t_l"][:, 0]) - 0.5) < 0.02
  assert abs(baselines.cue_rule_accuracy(gold["t_w"][:, 1], gold["t_l"][:, 1]) - 0.5) < 0.02
  anti = sp.make_pairs(world, 3, 2000, rho=0.2, labels="gold")
  assert abs(baselines.cue_rule_accuracy(anti["t_w"][:, 0], anti["t_l"][:, 0]) - 0.2) < 1e-3
  assert np.all(anti["r_w"] > anti["r_l"])


def test_gold_reward_independent_of_cues(world):
  resp = sp.sample_responses(world, np.random.default_rng(0), 20000)
  r = sp.gold_reward(world, resp)
  for cue in ("ell", "s"):
    assert abs(np.corrcoef(r, resp[cue])[0, 1]) < 0.03
  # and structurally: intervening on the cues (or the nuisance style) leaves r* unchanged
  np.testing.assert_array_equal(sp.gold_reward(world, sp.intervene(resp, ell_shift=2.0, s=1.0)), r)
  np.testing.assert_array_equal(sp.gold_reward(world, dict(resp, nz=resp["nz"] + 1.0)), r)


def test_interventions_change_only_the_target(world):
  resp = sp.sample_responses(world, np.random.default_rng(1), 50)
  moved = sp.intervene(resp, ell_shift=1.0)
  for k in resp:
    if k == "ell":
      np.testing.assert_allclose(moved[k], resp[k] + 1.0)
    else:
      np.testing.assert_array_equal(moved[k], resp[k])
  syc = sp.intervene(resp, s=1.0)
  assert np.all(syc["s"] == 1.0)
  np.testing.assert_array_equal(syc["ell"], resp["ell"])
  h0, h1 = sp.render(world, resp), sp.render(world, moved)
  assert np.all(np.abs(h1 - h0).max(axis=1) > 0)
  # the same latents render identically (the noise is part of the response)
  np.testing.assert_array_equal(sp.render(world, resp), h0)
  # with a linear renderer the length effect is exactly the length column times the shift
  lin = sp.make_world(3, dim=16, renderer="linear")
  d = sp.render(lin, moved) - sp.render(lin, resp)
  expected = (lin.spur_scale * lin.w1[sp.DIM_U + sp.DIM_C]) @ lin.w2
  np.testing.assert_allclose(d, np.broadcast_to(expected, d.shape), atol=1e-5)


def test_policy_pool_hack_component(world):
  pool = sp.sample_policy_pool(world, 0, 20, 64, hack_frac=0.1)
  assert pool["h"].shape == (20, 64, 16)
  hack = pool["hack"]
  assert 0.05 < hack.mean() < 0.15
  assert np.all(pool["s"][hack] == 1.0) and np.all(pool["ell"][hack] >= 1.5)
  assert pool["gold"][hack].mean() < pool["gold"][~hack].mean() - 0.5
