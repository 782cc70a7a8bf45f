"""The command-line contract: results.json schema, resume on rerun, clear errors on bad input."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = ["--config.num_steps=30", "--config.log_every=10", "--config.eval_every=30", "--config.checkpoint_every=15"]


def _run(*args, env=None):
  e = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  e.update(env or {})
  return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, env=e,
                        timeout=240)


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("runs") / "digits"
  proc = _run("experiments.mlp_digits", "--config=configs/mlp_digits.py:smoke", f"--workdir={workdir}", *FAST)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return workdir


@pytest.mark.slow
def test_results_json_schema(digits_run):
  results = json.load(open(digits_run / "results.json"))
  assert set(results) == {"experiment", "preset", "rows", "wall_s", "env"}
  assert results["experiment"] == "mlp_digits" and results["preset"] == "smoke"
  assert {"jax", "devices", "platform"} <= set(results["env"])
  methods = {r["method"] for r in results["rows"]}
  assert methods == {"mlp", "linear"}
  for r in results["rows"]:
    assert set(r) == {"method", "dataset", "split", "seed", "metrics", "cost"}
    assert all(isinstance(v, float) for v in r["metrics"].values())
  mlp = next(r for r in results["rows"] if r["method"] == "mlp")
  assert mlp["metrics"]["accuracy"] > 0.5     # 30 steps already beat chance (0.1) by far
  for name in ("config.json", "metrics.jsonl", "accuracy.png"):
    assert (digits_run / name).exists()


@pytest.mark.slow
def test_rerun_resumes_and_gives_the_same_metrics(digits_run):
  before = json.load(open(digits_run / "results.json"))
  proc = _run("experiments.mlp_digits", "--config=configs/mlp_digits.py:smoke", f"--workdir={digits_run}", *FAST)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "resumed from step 30" in proc.stdout
  after = json.load(open(digits_run / "results.json"))
  assert [r["metrics"] for r in after["rows"]] == [r["metrics"] for r in before["rows"]]


@pytest.mark.parametrize("args, message", [
    (["--config=configs/mlp_digits.py:smoke:dataset=mnistt"], "unknown dataset 'mnistt'"),
    (["--config=configs/mlp_digits.py:tiny"], "unknown preset 'tiny'"),
])
@pytest.mark.slow
def test_bad_input_exits_nonzero_and_writes_nothing(tmp_path, args, message):
  """(An unknown or unread --config override: tests/test_configs.py::test_unread_override_fails_before_writing_like_an_unknown_key.)"""
  workdir = tmp_path / "out"
  proc = _run("experiments.mlp_digits", *args, f"--workdir={workdir}")
  assert proc.returncode != 0
  assert message in proc.stderr
  assert not workdir.exists()


def test_missing_data_root_in_run_leaves_nothing(tmp_path):
  """A run() that reads shared data under a missing root exits 2 with the path, no files left."""
  from jaxml.data import offline
  from experiments import common
  from absl import flags

  common.define_flags()
  workdir = tmp_path / "w"
  flags.FLAGS(["prog", "--config=configs/mlp_digits.py:smoke", f"--workdir={workdir}"])
  try:
    with pytest.raises(SystemExit) as exit_info:
      common.launch(lambda config, wd: offline.load_uci("energy", 0, root=str(tmp_path / "missing")),
                    experiment="probe")
  finally:
    flags.FLAGS.unparse_flags()
  assert exit_info.value.code == 2
  assert not workdir.exists()


@pytest.mark.slow
def test_report_turns_results_into_markdown(digits_run):
  proc = _run("experiments.report", f"--workdirs={digits_run}")
  assert proc.returncode == 0, proc.stderr
  assert "| digits | mlp | 1 |" in proc.stdout
