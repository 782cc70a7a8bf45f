"""The unlearning experiment end to end: a shrunken smoke run and the paper preset on mock CIFAR-10."""

import json
import os

import numpy as np
import pytest

from configs import unlearning as unlearning_config
from experiments import common
from experiments import unlearning as exp
from jaxml.unlearning import fitting
from jaxml.unlearning import report as ul_report

ROW_KEYS = {"method", "dataset", "split", "seed", "metrics", "cost"}


def _check_results(rows, workdir, methods):
  common.write_json(os.path.join(workdir, "results.json"), {"experiment": "unlearning", "rows": rows})
  with open(os.path.join(workdir, "results.json")) as f:
    loaded = json.load(f)["rows"]
  assert loaded and all(set(r) == ROW_KEYS for r in loaded)
  got = {r["method"] for r in loaded}
  assert {"original", "retrain"} <= got and set(methods) <= got | {"emmn"}
  for r in loaded:
    if r["method"] in methods:
      assert {"UA", "RA", "TA", "MIA", "MIA_AUC", "avg_gap"} <= set(r["metrics"])
      assert r["cost"]["rte"] > 0 and r["cost"]["steps"] >= 1
  assert os.path.exists(os.path.join(workdir, "avg_gap_vs_rte.png"))
  assert "| RU (ours) |" in open(os.path.join(workdir, "summary.md")).read()


@pytest.mark.slow
def test_smoke_run_writes_schema(tmp_path):
  """Both regimes in one run (the demo's smoke in tests/test_configs.py runs the class regime only)."""
  methods = ("ru", "emmn")
  config = unlearning_config.get_config("smoke:methods=" + "+".join(methods) + ",regimes=class+random")
  config.data.limit_train = 320
  config.train.epochs = 2.0
  config.baselines.emmn.noise_steps = 3
  config.representation_checks = False
  rows = exp.run(config, str(tmp_path))
  _check_results(rows, str(tmp_path), methods)
  # EMMN is class-level only: it runs in the class regime and is skipped for random forgetting.
  assert {r["dataset"] for r in rows if r["method"] == "emmn"} == {"digits/class"}
  ru = [r for r in rows if r["method"] == "ru" and r["dataset"] == "digits/class"][0]
  assert ru["cost"]["steps"] == 25


def test_unknown_names_rejected_before_running():
  config = unlearning_config.get_config("smoke:datasets=cifar100")
  with pytest.raises(ValueError, match="unknown dataset"):
    exp.run(config, "/nonexistent/should_not_be_written")
  config = unlearning_config.get_config("smoke")
  config.eval_chunk = 0
  with pytest.raises(ValueError, match="eval_chunk"):
    exp.run(config, "/nonexistent/should_not_be_written")


@pytest.mark.slow
def test_paper_preset_two_steps_on_mock_cifar10(tmp_path, monkeypatch):
  tfds = pytest.importorskip("tensorflow_datasets")
  # 64 training rows: encode them in 64-row passes of the ResNet, not 1 024-row padded ones.
  monkeypatch.setattr(fitting, "CHUNK", 64)
  config = unlearning_config.get_config("paper:methods=ru,regimes=class")
  # Two steps of every fit, and a narrower ResNet so that the CPU test stays fast.
  config.data.limit_train, config.data.limit_test = 64, 32
  config.train.update(epochs=1.0, batch_size=32)
  config.ru.update(min_steps=2, epochs=0.0, batch_size=32)
  config.model.update(resnet_stage_sizes=(1, 1), resnet_width=8)
  config.representation_checks = False
  config.eval_chunk = 64          # 64 + 32 rows: no passes padded to 2 048
  with tfds.testing.mock_data(num_examples=64, policy=tfds.testing.MockPolicy.USE_CODE):
    rows = exp.run(config, str(tmp_path))
  by = {r["method"]: r for r in rows}
  assert by["original"]["cost"]["steps"] == 2 and by["retrain"]["cost"]["steps"] == 2
  assert by["ru"]["cost"]["steps"] == 2
  assert np.isfinite(by["ru"]["metrics"]["TA"])


@pytest.mark.slow
def test_paper_cpu_sweep_names_the_collision(tmp_path):
  config = unlearning_config.get_config("paper_cpu:datasets=digits,methods=ru+ru_uniform")
  config.class_sweep = (0, 1)
  config.data.limit_train = 320
  config.train.epochs = 2.0
  config.ru.update(min_steps=3)
  config.ru_uniform.update(min_steps=3)
  config.representation_checks = False
  rows = exp.run(config, str(tmp_path))
  assert {r["dataset"] for r in rows} == {"digits/class/0", "digits/class/1"}
  for r in rows:
    m = r["metrics"]
    # Every row carries the head's class at the mean and whether it is the forgotten class.
    assert m["mean_is_forget_class"] == float(m["head_mean_argmax"] == m["forget_class"])
    assert 0.0 < m["head_mean_pmax"] <= 1.0
  uni = [r["metrics"] for r in rows if r["method"] == "ru_uniform"]
  assert all(m["ru_target_collides"] == 0.0 and m["ru_target_shift"] > 0 for m in uni)
  summary = open(os.path.join(str(tmp_path), "paper_summary.md")).read()
  assert "argmax h(mean z)" in summary and "| RU uniform target (ext.) |" in summary
  assert os.path.exists(os.path.join(str(tmp_path), "forget_acc_sweep.png"))


def test_cnn1d_encoder_feeds_the_linear_head():
  import jax
  from jaxml.unlearning import model as model_lib
  config = unlearning_config.get_config("paper_cpu:datasets=mnist1d")
  config.model.arch = "cnn1d"
  model = exp.make_model(config, "mnist1d", 10)
  assert isinstance(model.encoder, model_lib.Conv1DEncoder)
  x = np.zeros((2, 40), np.float32)
  params = model.init(jax.random.key(0), x)["params"]
  assert model_lib.encode(model, params, x).shape == (2, config.model.features[-1])
  assert model_lib.head_kernel(params).shape == (10, config.model.features[-1])
  with pytest.raises(ValueError, match="mnist1d"):
    exp.make_model(config, "digits", 10)


def _tiny_cnn_config(methods: str = "ru+ru_uniform"):
  config = unlearning_config.get_config(f"paper_cpu:datasets=mnist1d,methods={methods}")
  config.model.arch = "cnn1d"
  config.class_sweep = (0, 4)
  config.max_wall_s = 0.0
  config.data.limit_train = 320
  config.train.epochs = 1.0
  config.ru.update(min_steps=3)
  config.ru_uniform.update(min_steps=3)
  config.representation_checks = False
  return config


@pytest.mark.slow
def test_cnn1d_sweep_writes_every_report_and_its_rows(tmp_path):
  # The deeper-encoder sweep end to end at toy size: the run that once crashed in its reports after
  # every split had finished, losing results.json. Rows round-trip through JSON, the partial rows
  # file holds them all, and the paper summary carries the must-reach table.
  rows = exp.run(_tiny_cnn_config(), str(tmp_path))
  _check_results(rows, str(tmp_path), ("ru", "ru_uniform"))
  assert {r["dataset"] for r in rows} == {"mnist1d/class/0", "mnist1d/class/4"}
  with open(os.path.join(str(tmp_path), exp.PARTIAL_ROWS)) as f:
    assert json.load(f)["rows"] == json.loads(json.dumps(rows))
  summary = open(os.path.join(str(tmp_path), "paper_summary.md")).read()
  assert "### Must reach" in summary and "| mnist1d | classes met | 0 | 4 |" in summary
  # The original model and Retrain of a CNN train unrolled, one step per dispatch (core.train option `unroll`).
  assert all(r["cost"]["steps"] == 3 for r in rows if r["method"] in ("ru", "ru_uniform"))


def test_a_broken_report_fails_before_training(tmp_path, monkeypatch):
  # A report that cannot be rendered (here: a missing function, as when the package and the
  # experiment came from different checkouts) must fail in the plan, before any model is trained.
  monkeypatch.delattr(ul_report, "must_reach_table")
  trained = []
  monkeypatch.setattr(exp.runner, "run_method", lambda *a, **k: trained.append(a) or 1 / 0)
  with pytest.raises((AttributeError, NameError), match="must_reach_table"):
    exp.run(_tiny_cnn_config(), str(tmp_path))
  assert not trained and not os.path.exists(os.path.join(str(tmp_path), exp.PARTIAL_ROWS))


@pytest.mark.slow
def test_a_crash_after_the_runs_keeps_their_rows(tmp_path, monkeypatch):
  config = unlearning_config.get_config("paper_cpu:datasets=digits,methods=ru")
  config.class_sweep = (0, 1)
  config.data.limit_train = 320
  config.train.epochs = 1.0
  config.ru.update(min_steps=3)
  config.representation_checks = False

  def boom(*a, **k):
    raise RuntimeError("disk full")
  monkeypatch.setattr(exp, "write_reports", boom)
  with pytest.raises(RuntimeError, match="disk full"):
    exp.run(config, str(tmp_path))
  with open(os.path.join(str(tmp_path), exp.PARTIAL_ROWS)) as f:
    rows = json.load(f)["rows"]
  assert {(r["dataset"], r["method"]) for r in rows} == {
      (f"digits/class/{c}", m) for c in (0, 1) for m in ("original", "retrain", "ru")}


def test_merge_runs_joins_class_subsets(tmp_path):
  rows = ul_report.synthetic_rows(["original", "retrain", "ru"], paper_table=True)
  a, b, out = (str(tmp_path / n) for n in ("a", "b", "out"))
  common.write_json(os.path.join(a, "results.json"), {"rows": [r for r in rows if r["dataset"].endswith("/0")],
                                                      "wall_s": 2.0})
  os.makedirs(b)   # an unfinished run: only its partial rows
  common.write_json(os.path.join(b, exp.PARTIAL_ROWS), {"rows": [r for r in rows if r["dataset"].endswith("/1")]})
  merged = exp.merge_runs([a, b], out)
  assert sorted(map(json.dumps, merged)) == sorted(map(json.dumps, json.loads(json.dumps(rows))))
  assert "| digits | classes met | 0 | 1 |" in open(os.path.join(out, "paper_summary.md")).read()
  with pytest.raises(ValueError, match="more than one"):
    exp.merge_runs([a, a], out)


def test_check_reports_renders_the_gap_summary_before_training(monkeypatch):
  # The stricter table's summary (RU against the best baseline per cell) is rendered from synthetic
  # rows in the plan too: breaking it fails there, not after the runs.

  methods = ["original", "retrain", "ru", "ru_zs", "finetune", "jit"]
  exp.check_reports(methods, paper_table=False)
  monkeypatch.delattr(ul_report, "gap_summary")
  with pytest.raises((AttributeError, NameError), match="gap_summary"):
    exp.check_reports(methods, paper_table=False)
