"""RU with beta chosen on validation (`ru_val`): the bar score, its argmin, and a choice that never
reads the test rows."""

import json
import os

import numpy as np
import pytest

from configs import unlearning as unlearning_config
from experiments import unlearning as exp
from jaxml.unlearning import evaluate as ev
from jaxml.unlearning import report as ul_report
from jaxml.unlearning import runner
from tests.unlearning import fixtures


def test_bar_score_by_hand():
  rt = {"UA": 100.0, "RA": 99.0, "TA": 90.0, "TA_r": 95.0, "MIA": 100.0}
  orig = {"UA": 0.0, "RA": 100.0, "TA": 96.0, "TA_r": 96.0, "MIA": 10.0}
  # FA 3 vs Retrain's 0 (1.5 tolerances), RA -0.5, TA_r -2 (2 tolerances): the largest, 2.
  m = {"UA": 97.0, "RA": 99.5, "TA": 80.0, "TA_r": 94.0, "MIA": 90.0}
  assert ev.bar_gaps(m, rt, orig) == {"dFA": 3.0, "dRA": -0.5, "dTA_r": -2.0}
  assert ev.scorer("bar", rt, orig)(m) == ev.bar_score(m, rt, orig)
  assert ev.bar_score(m, rt, orig) == pytest.approx(2.0)
  assert ev.bar_score(m | {"TA_r": 95.5}, rt, orig) == pytest.approx(1.5)
  assert ev.bar_score(m | {"TA_r": 95.5, "UA": 98.5}, rt, orig) == pytest.approx(0.75)   # meets the bar
  assert ev.bar_score(m | {"TA_r": float("nan")}, rt, orig) == float("inf")
  # without TA_r (random forgetting) the test criterion is on TA
  no_r = {k: v for k, v in m.items() if k != "TA_r"}
  assert ev.bar_gaps(no_r, rt, {k: v for k, v in orig.items() if k != "TA_r"})["dTA_r"] == -16.0
  assert ev.scorer("avg_gap", rt, orig)(m) == ev.avg_gap(m, rt) == pytest.approx((3 + 0.5 + 10 + 10) / 4)
  with pytest.raises(ValueError, match="selection score"):
    ev.scorer("accuracy", rt, orig)


@pytest.mark.slow
def test_tune_by_bar_picks_the_beta_that_forgets_on_a_toy():
  task, params = fixtures.trained_original()
  orig = runner.predictor(fixtures.MODEL)
  ref_orig = ev.unlearning_metrics(ev.collect_outputs(lambda x: orig(params, x), task), task)
  rt = runner.run_method("retrain", fixtures.TRAIN, fixtures.MODEL, params, task, seed=0)
  ref = ev.unlearning_metrics(ev.collect_outputs(rt.predict, task), task)
  ru = {"transform": "linear", "lr": 1e-2, "batch_size": 16, "min_steps": 60}
  best, scores = runner.tune("ru_val", ru, "beta", (1e-6, 1.0), fixtures.MODEL, params, task, ref, seed=0,
                             score=ev.scorer("bar", ref, ref_orig))
  # beta ~ 0 leaves T the identity: the forgotten class stays recognised (dFA ~ 100, score ~ 50).
  assert scores[1e-6] > 10.0 and scores[1.0] < scores[1e-6]
  assert best == min(scores, key=scores.get) == 1.0


@pytest.mark.slow
def test_a_grid_over_the_transform_is_chosen_like_a_numeric_one():
  # ru_val's grid may vary a non-numeric setting (the transform architecture): every value runs, the
  # chosen one is the argmin of its scores, and the log prints it as is (numbers in %g).
  task, params = fixtures.trained_original()
  orig = runner.predictor(fixtures.MODEL)
  ref_orig = ev.unlearning_metrics(ev.collect_outputs(lambda x: orig(params, x), task), task)
  rt = runner.run_method("retrain", fixtures.TRAIN, fixtures.MODEL, params, task, seed=0)
  ref = ev.unlearning_metrics(ev.collect_outputs(rt.predict, task), task)
  ru = {"transform": "linear", "beta": 1.0, "hidden": (8,), "lr": 1e-2, "batch_size": 16, "min_steps": 60}
  best, scores = runner.tune("ru_val", ru, "transform", ("linear", "residual"), fixtures.MODEL, params, task, ref,
                             seed=0, score=ev.scorer("bar", ref, ref_orig))
  assert set(scores) == {"linear", "residual"} and np.isfinite(list(scores.values())).all()
  assert best == min(scores, key=scores.get)
  assert ul_report.fmt_value("residual") == "residual" and ul_report.fmt_value(0.001) == "0.001"
  assert ul_report.fmt_value(200) == "200"


class _NoTestRows(dict):
  def __getitem__(self, key):
    if key in ("x_test", "y_test"):
      raise AssertionError(f"the validation choice read the test rows ({key})")
    return super().__getitem__(key)


def _tiny_config():
  config = unlearning_config.get_config("paper_cpu:datasets=digits,methods=ru+ru_val")
  config.class_sweep = (8,)
  config.data.limit_train = 320
  config.train.epochs = 2.0
  config.ru.update(min_steps=10)
  config.ru_val.update(min_steps=10)
  config.grids.ru_val.values = (1e-4, 0.1)
  config.representation_checks = False
  return config


@pytest.mark.slow
def test_ru_val_is_chosen_on_training_rows_only(tmp_path):
  config = _tiny_config()
  p = exp.plan(config)
  assert p["tuned"] == ("ru_val",) and p["grid_scores"]["ru_val"] == "bar"
  data = exp.load_data(config, "digits")
  guarded = _NoTestRows(data)
  model = exp.make_model(config, "digits", 10)
  chosen, log, _ = exp.tune_cell(config, p, guarded, "class", model, {}, forget_class=8)
  scores = {float(k): v for k, v in log["ru_val"]["gaps"].items()}
  assert chosen == {"ru_val": {"beta": min(scores, key=scores.get)}} and log["ru_val"]["score"] == "bar"
  # The validation split: 80 % of the training rows fit, a stratified 20 % stands in for the test rows.
  v = exp.validation_data(data, p["data"]["val_holdout"])
  assert len(v["y_train"]) + len(v["y_test"]) == 320 and abs(len(v["y_test"]) - 64) <= 10
  assert not set(map(bytes, v["x_test"])) & set(map(bytes, v["x_train"]))

  # End to end: the ru_val row next to ru, its choice per forgotten class in tuning.json.
  rows = exp.run(config, str(tmp_path))
  assert {r["method"] for r in rows} == {"original", "retrain", "ru", "ru_val"}
  with open(os.path.join(str(tmp_path), "tuning.json")) as f:
    assert set(json.load(f)) == {"digits/class/8"}
  summary = open(os.path.join(str(tmp_path), "paper_summary.md")).read()
  assert f"| {ul_report.LABELS['ru_val']} |" in summary
  assert np.isfinite([r["metrics"]["FA"] for r in rows if r["method"] == "ru_val"]).all()


def test_ru_val_without_a_grid_is_a_config_error():
  config = _tiny_config()
  del config.grids["ru_val"]
  with pytest.raises(ValueError, match="needs a grid"):
    exp.plan(config)
