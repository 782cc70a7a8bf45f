"""A workdir belongs to one live run, and `kill -9` at any moment followed by the same command
ends with the same results.json metrics as an uninterrupted run (mlp_digits smoke, 60 steps,
a checkpoint every 10 steps per method)."""

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from experiments import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = ["--config=configs/mlp_digits.py:smoke", "--config.num_steps=60", "--config.log_every=10",
        "--config.eval_every=30", "--config.checkpoint_every=10"]
TIMEOUT = 300


def _env():
  return {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}


def _start(workdir, *extra) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, "-m", "experiments.mlp_digits", f"--workdir={workdir}", *ARGS, *extra],
                          cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(workdir) -> subprocess.CompletedProcess:
  proc = _start(workdir)
  out, err = proc.communicate(timeout=TIMEOUT)
  assert proc.returncode == 0, err[-3000:]
  return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kill_when(proc: subprocess.Popen, pattern: str) -> bool:
  """SIGKILLs `proc` as soon as a path matching `pattern` exists; False if it ended first."""
  deadline = time.monotonic() + TIMEOUT
  while proc.poll() is None and time.monotonic() < deadline:
    if glob.glob(pattern):
      proc.send_signal(signal.SIGKILL)
      break
    time.sleep(0.0005)
  proc.communicate()
  return proc.returncode == -signal.SIGKILL


class Missed(Exception):
  """The run ended before the kill could land (the poller missed every write window)."""


def _kill_inside_checkpoint_write(workdir, name: str, step: int) -> int:
  """Kills while orbax writes a checkpoint of `name` at `step` or, if that kill came too late, at
  a later one: the write's temporary folder must still exist after the kill (not finalised).
  Returns the step whose write was cut."""
  for s in range(step, 61, 10):
    tmp = os.path.join(workdir, "checkpoints", name, f"{s}.orbax-checkpoint-tmp*")
    if not _kill_when(_start(workdir), tmp):
      raise Missed(f"{name} step {s}")
    if glob.glob(tmp):
      return s
  raise Missed(f"{name} steps {step}..60")


def _last_values(workdir) -> dict:
  """{(step, key): value} from metrics.jsonl, later lines winning (timings dropped).

  Every line must parse: a kill never leaves a torn line behind.
  """
  values = {}
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    for line in f:
      row = json.loads(line)
      for k, v in row.items():
        if k != "step" and not k.endswith("steps_per_s"):
          values[(row["step"], k)] = v
  return values


def _outcome(workdir) -> tuple:
  results = json.load(open(os.path.join(workdir, "results.json")))
  config = json.load(open(os.path.join(workdir, "config.json")))
  leftovers = glob.glob(os.path.join(workdir, "**", "*orbax-checkpoint-tmp*"), recursive=True)
  leftovers += glob.glob(os.path.join(workdir, "**", ".tmp_*"), recursive=True)
  assert leftovers == []
  return [r["metrics"] for r in results["rows"]], _last_values(workdir), config


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("reference") / "run"
  _finish(workdir)
  return _outcome(workdir)


@pytest.mark.slow
def test_second_launch_on_a_live_workdir_exits_2_and_touches_nothing(tmp_path):
  workdir = tmp_path / "run"
  first = _start(workdir, "--config.num_steps=1000000", "--config.log_every=100000",
                 "--config.checkpoint_every=0")
  try:
    deadline = time.monotonic() + TIMEOUT
    while not (workdir / "config.json").exists():
      assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()[-2000:]
      time.sleep(0.05)
    # Stopped, the first run is still alive and holds the workdir, without training against the second launch.
    first.send_signal(signal.SIGSTOP)
    config_before = (workdir / "config.json").read_bytes()
    second = subprocess.run([sys.executable, "-m", "experiments.mlp_digits", f"--workdir={workdir}", *ARGS],
                            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert first.poll() is None                          # the first run was alive the whole time
  finally:
    first.kill()
    first.communicate()
  assert second.returncode == 2
  errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and "in use by a live run" in errors[0] and f"pid {first.pid} " in errors[0]
  assert "preset=" not in second.stdout                  # it stopped before writing anything
  assert (workdir / "config.json").read_bytes() == config_before


def test_lock_is_free_after_its_holder_closes_and_busy_while_held(tmp_path):
  fd = common.lock_workdir(str(tmp_path))
  with pytest.raises(common.WorkdirBusyError, match=f"pid {os.getpid()} "):
    common.lock_workdir(str(tmp_path))
  os.close(fd)
  (tmp_path / ".tmp_abc.json").write_text('{"half')    # what a kill inside write_json leaves
  os.close(common.lock_workdir(str(tmp_path)))
  assert not (tmp_path / ".tmp_abc.json").exists()


def test_kill9_at_three_points_then_rerun_gives_the_uninterrupted_results(tmp_path, reference):
  """One workdir killed three times in a row (each launch takes over the dead run's lock):
  during start-up, inside the write of a checkpoint, after the first method finished."""
  workdir = str(tmp_path / "run")
  assert _kill_when(_start(workdir), os.path.join(workdir, "config.json"))
  _kill_inside_checkpoint_write(workdir, "mlp_seed0", 30)
  assert _kill_when(_start(workdir), os.path.join(workdir, "checkpoints", "linear_seed0", "10"))
  assert not os.path.exists(os.path.join(workdir, "results.json"))
  done = _finish(workdir)
  assert "resumed from step" in done.stdout
  assert _outcome(workdir) == reference


SLOW_POINTS = ([("mlp_seed0", s) for s in (10, 40, 60)] + [("linear_seed0", s) for s in (20, 50, 60)])


@pytest.mark.slow
@pytest.mark.parametrize("name, step", SLOW_POINTS)
def test_kill9_inside_each_checkpoint_write(tmp_path, reference, name, step):
  for attempt in range(3):     # a loaded machine can hide a ~50 ms write from the poller
    workdir = str(tmp_path / f"run{attempt}")
    try:
      _kill_inside_checkpoint_write(workdir, name, step)
      break
    except Missed:
      continue
  else:
    pytest.fail(f"no kill landed inside a checkpoint write of {name} in 3 fresh runs")
  _finish(workdir)
  assert _outcome(workdir) == reference


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_kill9_at_random_moments(tmp_path, reference, seed):
  """Three kills at random delays (0-15 s after launch), then a clean finish."""
  workdir = str(tmp_path / "run")
  rng = random.Random(seed)
  for _ in range(3):
    proc = _start(workdir)
    try:
      proc.wait(timeout=rng.uniform(0.0, 15.0))
    except subprocess.TimeoutExpired:
      proc.send_signal(signal.SIGKILL)
    proc.communicate()
  _finish(workdir)
  assert _outcome(workdir) == reference


@pytest.mark.slow
def test_kill9_after_results_are_written(tmp_path, reference):
  workdir = str(tmp_path / "run")
  _kill_when(_start(workdir), os.path.join(workdir, "results.json"))
  _finish(workdir)
  assert _outcome(workdir) == reference
