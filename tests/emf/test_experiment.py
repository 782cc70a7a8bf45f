"""The emf_generate experiment runs end to end on a tiny override of the smoke preset."""

import json
import os

from configs import emf_generate as cfg_mod
from experiments import common
from experiments import emf_generate


def test_smoke_run_writes_rows(tmp_path, monkeypatch):
  config = cfg_mod.get_config("smoke:datasets=checkerboard,methods=emf_u+ct,steps=4")
  config.data.toy_train = 256
  config.data.toy_eval = 128
  config.log_every = 2
  picks = []
  pick = emf_generate.ev.pick
  monkeypatch.setattr(emf_generate.ev, "pick", lambda vals, metric: picks.append((vals, metric, pick(vals, metric)))
                      or picks[-1][2])
  rows = emf_generate.run(config, str(tmp_path))
  variants = {f"{m}/p{p}@{k}" for m, ks in (("emf_u", (1, 2, 4)), ("ct", (1, 2))) for p in (0, 1) for k in ks}
  heads = {"emf_u@1", "emf_u@2", "emf_u@4", "ct@1", "ct@2", "emf@1", "emf@2", "emf@4"}
  assert {r["method"] for r in rows} == {"floor_real", "floor_mean", "floor_noise"} | variants | heads
  for r in rows:
    assert set(r) == {"method", "dataset", "split", "seed", "metrics", "cost"}
    assert r["dataset"] == "checkerboard"
    assert {"sw", "energy", "mmd", "c2st", "modes", "off_mode"} <= set(r["metrics"])
  by = {r["method"]: r["metrics"] for r in rows}
  # Noise puts half its mass off the board's black cells; a real set puts none there.
  assert by["floor_real"]["off_mode"] == 0.0 < 0.3 < by["floor_noise"]["off_mode"]
  assert by["floor_real"]["energy"] < 0.2 < by["floor_mean"]["energy"]
  # The headline copies the variant whose validation score is best (never the test score).
  for head in ("emf_u", "ct"):
    chosen = by[f"{head}@1"]["chosen_p"]
    val = {p: by[f"{head}/p{p}@1"]["val_energy"] for p in (0, 1)}
    assert val[int(chosen)] == min(val.values())
    assert by[f"{head}@1"]["energy"] == by[f"{head}/p{int(chosen)}@1"]["energy"]
  # CT@2's re-noise time: one pick per trained variant among the config's candidates, on validation scores,
  # whose validation scores the row keeps; the headline copies its variant's choice.
  assert len(picks) == 2 and all(tuple(v) == tuple(config.ct_t_mid) and m == "energy" for v, m, _ in picks)
  for p, (vals, _, tm) in zip((0, 1), picks):
    row = by[f"ct/p{p}@2"]
    assert row["chosen_t_mid"] == tm and vals[tm]["energy"] == min(v["energy"] for v in vals.values())
    assert row["val_energy"] == vals[tm]["energy"] != row["energy"]
  assert by["ct@2"]["chosen_t_mid"] == by[f"ct/p{int(by['ct@2']['chosen_p'])}@2"]["chosen_t_mid"]
  assert "chosen_t_mid" not in by["ct@1"] and "chosen_t_mid" not in by["emf_u@2"]
  for m, r in by.items():
    if not m.startswith("floor"):
      assert r["not_learned"] == float(r["energy"] >= by["floor_noise"]["energy"])
  assert os.path.exists(tmp_path / "toys_samples.png")
  assert "floor_noise" in open(tmp_path / "summary.md").read()
  common.write_json(str(tmp_path / "results.json"), {"rows": rows})
  assert json.load(open(tmp_path / "results.json"))["rows"][3]["metrics"]["nfe"] == 1


def test_pick_takes_the_best_validation_option():
  from jaxml.emf import evaluate
  vals = {0.1: {"energy": 0.3, "modes": 0.5}, 0.5: {"energy": 0.1, "modes": 0.9}, 0.9: {"energy": float("nan")},
          0.7: {"energy": 0.2, "modes": 1.0}}
  assert evaluate.pick(vals, "energy") == 0.5          # lower is better; NaN never wins
  assert evaluate.pick(vals, "modes") == 0.7           # coverage: higher is better
  # The same for the weighting choice: a variant without a (finite) validation score never wins.
  row = lambda m, modes: common.row(method=m, dataset="8gaussians", seed=0, metrics={"nfe": 1, "val_modes": modes})
  rows = [row("emf_u/p0@1", 0.5), row("emf_u/p1@1", float("nan"))]
  assert evaluate.choose(rows, "8gaussians", ("emf_u",), {"emf_u": (0.0, 1.0)}, "modes")[1]["emf_u"] == "emf_u/p0"


def test_unknown_names_are_rejected():
  import pytest
  config = cfg_mod.get_config("smoke:datasets=cifar")
  with pytest.raises(ValueError, match="dataset"):
    emf_generate.plan(config)


def test_combine_picks_on_validation_over_all_seeds_and_marks_noise_floor():
  from jaxml.emf import evaluate
  row = lambda method, seed, energy, val=None: common.row(
      method=method, dataset="8gaussians", seed=seed,
      metrics={"nfe": 1, "energy": energy, **({} if val is None else {"val_energy": val})})
  floors = [row("floor_real", 0, 0.001), row("floor_noise", 0, 0.07)]
  # p0 wins seed 0 on validation by a little, p1 wins seed 1 by a lot: the mean over seeds picks p1,
  # although p0 has the better test score (the test score must not decide).
  seed0 = floors + [row("emf_u/p0@1", 0, 0.01, 0.030), row("emf_u/p1@1", 0, 0.08, 0.031)]
  seed1 = floors + [row("emf_u/p0@1", 1, 0.01, 0.090), row("emf_u/p1@1", 1, 0.08, 0.040)]
  seed1[-1]["cost"] = {"steps_per_s": None}          # a resumed run has no rate (cleaned to None)
  rows = evaluate.combine([seed0, seed1])
  heads = [r for r in rows if r["method"] in ("emf_u@1", "emf@1")]
  assert len(heads) == 4 and all(r["metrics"]["chosen_p"] == 1.0 for r in heads)
  assert all(r["metrics"]["not_learned"] == 1.0 for r in heads)            # 0.08 >= noise floor 0.07
  assert sum(r["method"].startswith("floor") for r in rows) == 2
  assert "(nl)" in evaluate.summary(rows)
  # Choosing on another validation metric (here c2st, which prefers p0 on both seeds) changes the pick.
  for rs, c2st in ((seed0, (0.6, 0.8)), (seed1, (0.62, 0.7))):
    rs[-2]["metrics"]["val_c2st"], rs[-1]["metrics"]["val_c2st"] = c2st
  heads = [r for r in evaluate.combine([seed0, seed1], "c2st") if r["method"] == "emf_u@1"]
  assert all(r["metrics"]["chosen_p"] == 0.0 for r in heads)
