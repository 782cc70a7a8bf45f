"""The metric writer's TensorBoard events read back to the values written (and its off switches), and
`core.loop_config` builds the settings `core.train` reads."""

import json

import ml_collections
import pytest

from jaxml import core
from jaxml.core import metrics


def test_events_read_back_to_the_logged_scalars(tmp_path, monkeypatch):
  monkeypatch.delenv(metrics.TENSORBOARD_ENV, raising=False)
  writer = core.MetricWriter(str(tmp_path))
  writer.write(10, {"train/loss": 0.5, "train/acc": 1})
  writer.write(20, {"train/loss": float("nan"), "eval/acc": 0.25})    # NaN: null in jsonl, no event
  writer.close()
  events = sorted(metrics.read_events(str(tmp_path)))
  assert events == [("eval/acc", 20, 0.25), ("train/acc", 10, 1.0), ("train/loss", 10, 0.5)]
  lines = [json.loads(x) for x in open(tmp_path / "metrics.jsonl")]
  assert lines[1] == {"step": 20, "train/loss": None, "eval/acc": 0.25}


def test_two_writers_in_one_folder_keep_separate_files(tmp_path, monkeypatch):
  monkeypatch.delenv(metrics.TENSORBOARD_ENV, raising=False)
  for name in ("a", "b"):
    w = core.MetricWriter(str(tmp_path))
    w.write(1, {f"{name}/loss": 2.0})
    w.close()
  assert sorted(metrics.read_events(str(tmp_path))) == [("a/loss", 1, 2.0), ("b/loss", 1, 2.0)]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_tensorboard_off_writes_only_jsonl(tmp_path, monkeypatch, how):
  monkeypatch.setenv(metrics.TENSORBOARD_ENV, "0" if how == "environment" else "1")
  writer = core.MetricWriter(str(tmp_path), tensorboard=how != "argument")
  writer.write(1, {"loss": 1.0})
  assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]


def test_loop_config_converts_once_and_rejects_unknown_keys():
  cfg = ml_collections.ConfigDict(dict(optim=dict(name="adam", lr=1e-3), log_every=5, checkpoint_every=0,
                                       steps_per_dispatch=0, mesh=dict(num_data=0), data=dict(name="x")))
  out = core.loop_config(cfg, num_steps="12", eval_every=None)
  assert out == {"optim": {"name": "adam", "lr": 1e-3}, "log_every": 5, "checkpoint_every": 0,
                 "steps_per_dispatch": 0, "mesh": {"num_data": 0}, "num_steps": 12, "eval_every": 0}
  assert type(out["optim"]) is dict and type(out["mesh"]) is dict     # plain dicts, not ConfigDicts
  assert core.loop_config(ema_decay=0.0) == {"ema_decay": None}       # 0 means no EMA, as in make_trainer
  with pytest.raises(TypeError, match="unknown keys"):
    core.loop_config(cfg, num_step=3)
