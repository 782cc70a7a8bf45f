"""The emf_generate experiment's choices: validation picks, plan checks, combining seeds (its end-to-end smoke
run is tests/test_configs.py's, with the row checks of `_check_emf_generate`)."""


from configs import emf_generate as cfg_mod
from experiments import common
from experiments import emf_generate


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
