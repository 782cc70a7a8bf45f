"""`core.train` hands a method's `hooks(ctx)` the run's context, its init the seed's key, keeps the configured EMA,
and sizes a cosine schedule by the run's num_steps."""

import jax
import jax.numpy as jnp
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


def test_without_init_rng_the_methods_init_gets_the_seed_key():
  base, data, _ = _least_squares()
  seen = []

  def init(rng, batch):
    seen.append(np.asarray(jax.random.key_data(rng)))
    return base.init(rng, batch)

  config = {"optim": {"name": "sgd", "lr": 0.1}, "num_steps": 1, "log_every": 1}
  core.train(base._replace(init=init), lambda step: data, config, seed=5, progress=False)
  np.testing.assert_array_equal(seen[0], jax.random.key_data(jax.random.key(5)))


def test_ema_decay_from_the_config_averages_the_params_by_hand():
  # From p0 = 0, one SGD step p1 = -lr grad(0); the EMA 0.5 p0 + 0.5 p1 = p1 / 2.
  base, data, _ = _least_squares()
  config = {"optim": {"name": "sgd", "lr": 0.1}, "num_steps": 1, "log_every": 1, "ema_decay": 0.5}
  result = core.train(base, lambda step: data, config, progress=False)
  x, y = data["x"].astype(np.float64), data["y"].astype(np.float64)
  p1_w, p1_b = 0.1 * 2 * x.T @ y / len(y), 0.1 * 2 * y.mean()
  np.testing.assert_allclose(result.state.params["w"], p1_w, rtol=1e-5)
  np.testing.assert_allclose(result.state.ema_params["w"], p1_w / 2, rtol=1e-5)
  np.testing.assert_allclose(result.state.ema_params["b"], p1_b / 2, rtol=1e-5)


def test_cosine_schedule_without_total_steps_spans_the_runs_num_steps():
  base, _, _ = _least_squares()
  steps = core.make_trainer(base, {"optim": {"name": "sgd", "lr": 1.0, "schedule": "cosine"}, "num_steps": 4})
  params = {"w": jnp.zeros(1)}
  state, rates = steps.optimizer.init(params), []
  for _ in range(4):
    u, state = steps.optimizer.update({"w": jnp.ones(1)}, state, params)
    rates.append(-float(u["w"][0]))
  np.testing.assert_allclose(rates, [(1 + np.cos(np.pi * k / 4)) / 2 for k in range(4)], rtol=1e-5, atol=1e-7)


def test_without_a_name_the_runs_checkpoints_go_to_checkpoints_train(tmp_path):
  base, data, _ = _least_squares()
  config = {"optim": {"name": "sgd", "lr": 0.1}, "num_steps": 2, "log_every": 1}
  core.train(base, lambda step: data, config, workdir=str(tmp_path), progress=False)
  assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["train"]
