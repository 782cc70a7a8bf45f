"""`core.train` hands a method's `hooks(ctx)` the run's context."""

import numpy as np

from jaxml import core
from tests.core.test_train import _least_squares


def test_method_hooks_receive_the_runs_context(tmp_path):
  base, data, _ = _least_squares()
  seen = {}

  def hooks(ctx):
    seen.update(name=ctx.name, seed=ctx.seed, num_steps=ctx.num_steps, workdir=ctx.workdir,
                example=ctx.example_batch, batches=ctx.batches, lr=ctx.config["optim"]["lr"])
    return [core.Hook(2, lambda step, state: seen.setdefault("steps", []).append(step))]

  batches = lambda step: data
  config = {"optim": {"name": "sgd", "lr": 0.1}, "num_steps": 4, "log_every": 2}
  core.train(base._replace(hooks=hooks), batches, config, workdir=str(tmp_path), name="ctx_run", seed=3,
             progress=False)
  assert (seen["name"], seen["seed"], seen["num_steps"], seen["workdir"], seen["lr"]) == ("ctx_run", 3, 4,
                                                                                           str(tmp_path), 0.1)
  assert seen["batches"] is batches and seen["steps"] == [2, 4]
  np.testing.assert_array_equal(seen["example"]["x"], data["x"])
