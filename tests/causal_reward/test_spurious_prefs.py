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
  for cue in ("length", "sycophancy"):
    assert abs(np.corrcoef(r, resp[cue])[0, 1]) < 0.03
  # and structurally: intervening on the cues (or the nuisance style) leaves r* unchanged
  np.testing.assert_array_equal(sp.gold_reward(world, sp.intervene(world, resp, length=2.0, sycophancy=1.0)), r)
  np.testing.assert_array_equal(sp.gold_reward(world, dict(resp, nz=resp["nz"] + 1.0)), r)


def test_interventions_change_only_the_target(world):
  resp = sp.sample_responses(world, np.random.default_rng(1), 50)
  moved = sp.intervene(world, resp, length=1.0)
  for k in resp:
    if k == "length":
      np.testing.assert_allclose(moved[k], resp[k] + 1.0)
    else:
      np.testing.assert_array_equal(moved[k], resp[k])
  syc = sp.intervene(world, resp, sycophancy=1.0)
  assert np.all(syc["sycophancy"] == 1.0)
  np.testing.assert_array_equal(syc["length"], resp["length"])
  with pytest.raises(ValueError, match="unknown cue"):
    sp.intervene(world, resp, emoji=1.0)
  h0, h1 = sp.render(world, resp), sp.render(world, moved)
  assert np.all(np.abs(h1 - h0).max(axis=1) > 0)
  # the same latents render identically (the noise is part of the response)
  np.testing.assert_array_equal(sp.render(world, resp), h0)
  # with a linear renderer the length effect is exactly the length column times the shift
  lin = sp.make_world(3, dim=16, renderer="linear")
  d = sp.render(lin, moved) - sp.render(lin, resp)
  expected = (2.0 * lin.w1[sp.DIM_U + sp.DIM_C]) @ lin.w2      # length renders as 2 l
  np.testing.assert_allclose(d, np.broadcast_to(expected, d.shape), atol=1e-5)


def test_policy_pool_hack_component(world):
  pool = sp.sample_policy_pool(world, 0, 20, 64, hack_frac=0.1)
  assert pool["h"].shape == (20, 64, 16)
  hack = pool["hack"]
  assert 0.05 < hack.mean() < 0.15
  assert np.all(pool["sycophancy"][hack] == 1.0) and np.all(pool["length"][hack] >= 1.5)
  assert pool["gold"][hack].mean() < pool["gold"][~hack].mean() - 0.5


def test_user_defined_cue_without_editing_the_package():
  """A third cue (an 'emoji' flag, rendered with its own scale) defined here, in the test."""
  emoji = sp.Cue("emoji", sample=lambda rng, n: (rng.random(n) < 0.2).astype(float), render=lambda x: 3.0 * x,
                 intervene=sp.set_value, hack=lambda rng, n: np.ones(n))
  cues = sp.DEFAULT_CUES + (emoji,)
  world = sp.make_world(4, dim=16, cues=cues, renderer="linear")
  assert sp.cue_names(world) == ("length", "sycophancy", "emoji")
  d = sp.make_pairs(world, 1, 3000, rho=0.8)
  assert d["t_w"].shape == (3000, 3)
  differ = d["t_w"][:, 2] != d["t_l"][:, 2]
  assert abs(np.mean(d["t_w"][differ, 2] > d["t_l"][differ, 2]) - 0.8) < 0.02      # selected like the others
  assert abs(baselines.cue_rule_accuracy(d["t_w"][:, 0], d["t_l"][:, 0]) - 0.8) < 1e-3
  gold = sp.make_pairs(world, 2, 3000, labels="gold")
  assert abs(baselines.cue_rule_accuracy(gold["t_w"][:, 2], gold["t_l"][:, 2]) - 0.5) < 0.03
  resp = sp.sample_responses(world, np.random.default_rng(0), 40)
  on, off = sp.intervene(world, resp, emoji=1.0), sp.intervene(world, resp, emoji=0.0)
  assert np.all(on["emoji"] == 1.0) and np.all(off["emoji"] == 0.0)
  np.testing.assert_array_equal(sp.gold_reward(world, on), sp.gold_reward(world, resp))
  expected = (3.0 * world.w1[sp.DIM_U + sp.DIM_C + 2]) @ world.w2   # linear renderer: the emoji column x 3
  np.testing.assert_allclose(sp.render(world, on) - sp.render(world, off), np.broadcast_to(expected, (40, 16)),
                             atol=1e-5)
  pool = sp.sample_policy_pool(world, 0, 10, 32)
  assert np.all(pool["emoji"][pool["hack"]] == 1.0)
  with pytest.raises(ValueError, match="unique"):
    sp.make_world(0, cues=(emoji, emoji))


def test_default_cues_reproduce_the_original_generator():
  """Cue functions replaced hard-coded length / sycophancy without changing the random stream."""
  world = sp.make_world(0, dim=8)
  resp = sp.sample_responses(world, np.random.default_rng(3), 4)
  rng = np.random.default_rng(3)
  u, c, ell = rng.normal(size=(4, sp.DIM_U)), rng.normal(size=(4, sp.DIM_C)), rng.normal(size=4)
  s = (rng.random(4) < 0.3).astype(float)
  for key, ref in (("u", u), ("c", c), ("length", ell), ("sycophancy", s)):
    np.testing.assert_array_equal(resp[key], ref)
