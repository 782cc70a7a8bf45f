"""core.train: closed form, selection of a known best step, early stopping, one trace for an
lr grid, exact resume, K steps per dispatch equal to one, plain dicts as configs."""

import json

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxml import core
from jaxml.core.train import mesh_from_config
from tests.core import toy


def _least_squares():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(128, 3)).astype(np.float32)
  y = (x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.05 * rng.normal(size=128)).astype(np.float32)
  exact = np.linalg.lstsq(np.c_[x, np.ones(128)], y, rcond=None)[0]

  def init(rng, batch):
    del rng
    return {"w": jnp.zeros(batch["x"].shape[1]), "b": jnp.zeros(())}

  def loss_fn(params, batch, rng):
    del rng
    return jnp.mean((batch["x"] @ params["w"] + params["b"] - batch["y"]) ** 2), {}

  return core.Method(init, loss_fn), {"x": x, "y": y}, exact


def test_train_least_squares_reaches_closed_form():
  method, data, exact = _least_squares()
  config = {"optim": {"name": "sgd", "lr": 0.3}, "num_steps": 300, "log_every": 100}
  result = core.train(method, lambda step: data, config, progress=False)
  np.testing.assert_allclose(result.params["w"], exact[:3], atol=1e-4)
  np.testing.assert_allclose(result.params["b"], exact[3], atol=1e-4)
  assert int(result.state.step) == 300 and result.best_step is None
  assert result.steps_per_dispatch == 50     # the largest K <= 50 dividing log_every=100


def _ramp(rates, vector: bool):
  """w_m = rate_m * step under sgd(lr=1); the score -(w - target)^2 peaks at step target / rate."""
  rates = jnp.asarray(rates, jnp.float32)

  def init(rng, batch):
    del rng, batch
    return {"w": jnp.zeros(rates.shape)}

  def loss_fn(params, batch, rng):
    del batch, rng
    return -jnp.sum(params["w"] * rates), {}

  def eval_fn(params, batch):
    score = -(params["w"] - batch["target"]) ** 2
    return {"score": score if vector else jnp.sum(score), "neg": -jnp.sum(score)}

  return core.Method(init, loss_fn, eval_fn)


RAMP_CONFIG = {"optim": {"name": "sgd", "lr": 1.0}, "num_steps": 12, "log_every": 12, "eval_every": 1}
ROWS = lambda step: {"x": np.zeros((8, 1), np.float32)}  # noqa: E731


@pytest.mark.parametrize("mode, metric", [("max", "score"), ("min", "neg")])
def test_selection_picks_the_known_best_step(mode, metric):
  result = core.train(_ramp([1.0], vector=False), ROWS, RAMP_CONFIG, eval_batches={"target": np.float32(7.0)},
                      select=core.Selection(metric, mode), progress=False)
  assert result.best_step == 7 and float(result.params["w"][0]) == 7.0
  assert int(result.state.step) == 12 and not result.stopped_early
  assert result.best_metric == (0.0 if mode == "max" else -0.0)


def test_selection_per_member_and_early_stopping():
  """Members peak at steps 3 and 6; with patience 2 the run stops once both are out of patience."""
  result = core.train(_ramp([2.0, 1.0], vector=True), ROWS, RAMP_CONFIG,
                      eval_batches={"target": np.array([6.0, 6.0], np.float32)},
                      select=core.Selection("score", "max", patience=2), progress=False)
  np.testing.assert_array_equal(result.best.step, [3, 6])
  np.testing.assert_array_equal(result.params["w"], [6.0, 6.0])
  assert result.stopped_early and int(result.state.step) == 8   # member 2's last bad check is step 8


def test_selection_sees_extra_after_hooks_and_keeps_it():
  """A hook sets extra['shift'] = step; the eval reads it (eval_uses_extra), so the score
  -(w + shift - 10)^2 with w = step peaks at step 5, and the record keeps extra of step 5."""
  base = _ramp([1.0], vector=False)

  def eval_fn(params, batch, extra):
    return {"score": -jnp.sum((params["w"] + extra["shift"] - batch["target"]) ** 2)}

  def shift(step, st):
    return st.replace(extra={"shift": jnp.float32(step)})

  method = base._replace(eval_fn=eval_fn, eval_uses_extra=True,
                         init_extra=lambda rng, p: {"shift": jnp.float32(0.0)}, hooks=lambda ctx: [core.Hook(1, shift)])
  method = method._replace(loss_fn=lambda p, b, r, e: base.loss_fn(p, b, r))
  result = core.train(method, ROWS, RAMP_CONFIG, eval_batches={"target": np.float32(10.0)},
                      select=core.Selection("score", "max", keep_extra=True), progress=False)
  assert result.best_step == 5 and float(result.params["w"][0]) == 5.0
  assert float(result.extra["shift"]) == 5.0 and float(result.state.extra["shift"]) == 12.0
  with pytest.raises(ValueError, match="keep_extra needs a scalar metric"):
    core.train(_ramp([1.0, 2.0], vector=True), ROWS, RAMP_CONFIG, eval_batches={"target": np.float32(1.0)},
               select=core.Selection("score", keep_extra=True), progress=False)


def test_early_stopping_stops_and_stays_stopped_on_rerun(tmp_path):
  config = dict(RAMP_CONFIG, checkpoint_every=4)
  kwargs = dict(eval_batches={"target": np.float32(3.0)}, select=core.Selection("score", patience=2),
                workdir=str(tmp_path), progress=False)
  first = core.train(_ramp([1.0], vector=False), ROWS, config, **kwargs)
  assert first.stopped_early and int(first.state.step) == 5 and first.best_step == 3
  again = core.train(_ramp([1.0], vector=False), ROWS, config, **kwargs)
  assert again.resumed_from == 5 and int(again.state.step) == 5 and again.best_step == 3


def test_learning_rate_grid_shares_one_trace():
  method, data, _ = _least_squares()
  method = method._replace(loss_fn=chex.assert_max_traces(method.loss_fn, n=1))
  config = {"optim": {"name": "sgd", "lr": 0.1}, "num_steps": 20, "log_every": 10}
  trainer = core.make_trainer(method, config)
  finals = []
  for lr in (0.01, 0.05, 0.2):
    result = core.train(trainer, lambda step: data, config, lr=lr, progress=False)
    assert float(core.optim.learning_rate(result.state.opt_state)) == pytest.approx(lr)
    finals.append(float(result.train_metrics["loss"]))
  chex.clear_trace_counter()
  assert finals[0] > finals[1] > finals[2]       # larger steps make more progress in 20 steps


def test_injected_lr_gives_the_same_numbers_as_a_float_lr():
  state, _, data = toy.fresh_state()
  cfg = ml_collections.ConfigDict({"name": "adam", "lr": 3e-3})
  plain, injected = core.make_optimizer(cfg), core.make_optimizer(dict(cfg), inject_lr=True)
  results = []
  for tx in (plain, injected):
    s = core.create_train_state(state.params, tx, 0)
    step = jax.jit(core.make_train_step(toy.mlp_loss, tx))
    for i in range(5):
      s, _ = step(s, toy.batch_fn(data)(i))
    results.append(s.params)
  chex.assert_trees_all_equal(results[0], results[1])


def _mlp_train(tmp_path, name, *, stop_at=None, k=0, select=True, unroll=False):
  state, _, data = toy.fresh_state()
  method = core.Method(lambda rng, b: state.params, toy.mlp_loss,
                       lambda p, b: {"mse": toy.mlp_loss(p, b, None)[0]})
  config = {"optim": {"name": "adam", "lr": 1e-2}, "num_steps": 40, "log_every": 5, "eval_every": 5,
            "checkpoint_every": 10, "steps_per_dispatch": k, "unroll": unroll}

  def stop(step, st):
    if step == stop_at:
      raise KeyboardInterrupt
  hooks = [core.Hook(5, stop)] if stop_at else []
  return core.train(method, toy.batch_fn(data), config, workdir=str(tmp_path / name), name=name,
                    eval_batches=[data], select=core.Selection("mse", "min") if select else None, hooks=hooks,
                    progress=False)


def test_resume_with_selection_is_exact(tmp_path):
  full = _mlp_train(tmp_path, "full")
  with pytest.raises(KeyboardInterrupt):
    _mlp_train(tmp_path, "cut", stop_at=25)    # dies after the step-20 checkpoint
  resumed = _mlp_train(tmp_path, "cut")
  assert resumed.resumed_from == 20
  chex.assert_trees_all_equal(resumed.state.params, full.state.params)
  chex.assert_trees_all_equal(resumed.params, full.params)
  assert resumed.best_step == full.best_step and resumed.best_metric == full.best_metric


def test_k_steps_per_dispatch_equal_single_steps(tmp_path):
  one = _mlp_train(tmp_path, "k1", k=1, select=False)
  auto = _mlp_train(tmp_path, "auto", select=False)
  assert one.steps_per_dispatch == 1 and auto.steps_per_dispatch == 5
  chex.assert_trees_all_close(auto.state.params, one.state.params, rtol=1e-6, atol=1e-7)
  assert auto.train_metrics["loss"] == pytest.approx(one.train_metrics["loss"], rel=1e-6)
  steps = [json.loads(line)["step"] for line in open(tmp_path / "auto" / "metrics.jsonl")]
  assert steps == [s for s in range(5, 41, 5) for _ in range(2)]     # train and eval rows every 5 steps


def test_unrolled_dispatches_equal_the_scanned_ones(tmp_path):
  scanned = _mlp_train(tmp_path, "scan", k=5, select=False)
  unrolled = _mlp_train(tmp_path, "unroll", k=5, select=False, unroll=True)
  default_k = _mlp_train(tmp_path, "unroll1", select=False, unroll=True)
  assert unrolled.steps_per_dispatch == 5 and default_k.steps_per_dispatch == 1   # unrolled: 1 unless asked
  for run in (unrolled, default_k):
    chex.assert_trees_all_close(run.state.params, scanned.state.params, rtol=1e-5, atol=1e-6)


def test_unrolled_multi_step_stacks_metrics_and_compares_by_step_and_mode():
  def step(state, batch):
    return state + batch["x"].sum(), {"loss": batch["x"].mean()}

  multi = core.make_multi_step(step, unroll=True)
  state, metrics = jax.jit(multi)(0.0, {"x": np.arange(6.0).reshape(3, 2)})
  assert float(state) == 15.0
  np.testing.assert_allclose(np.asarray(metrics["loss"]), [0.5, 2.5, 4.5])
  scanned_state, scanned = jax.jit(core.make_multi_step(step))(0.0, {"x": np.arange(6.0).reshape(3, 2)})
  assert float(scanned_state) == 15.0
  np.testing.assert_allclose(np.asarray(scanned["loss"]), np.asarray(metrics["loss"]))
  traces = []

  def counted(state, batch):
    traces.append(1)
    return step(state, batch)

  for unroll, want in ((False, 1), (True, 3)):     # the scan traces the step once, the unrolled form K times
    traces.clear()
    jax.jit(core.make_multi_step(counted, unroll=unroll))(0.0, {"x": np.arange(6.0).reshape(3, 2)})
    assert len(traces) == want, unroll
  assert core.make_multi_step(step).unroll is False
  same = core.make_multi_step(step, unroll=True)
  assert multi == same and hash(multi) == hash(same)
  assert multi != core.make_multi_step(step) and multi != core.make_multi_step(lambda s, b: step(s, b), unroll=True)


@pytest.mark.multidevice
def test_sharded_fit_with_k_steps_equals_single_device():
  state, optimizer, data = toy.fresh_state()
  step = core.make_train_step(toy.mlp_loss, optimizer)
  runs = [core.fit(state, step, toy.batch_fn(data), num_steps=20, log_every=10, progress=False,
                   mesh=core.make_mesh(n)) for n in (1, 8)]
  assert runs[1].steps_per_dispatch == 10
  chex.assert_trees_all_close(runs[1].state.params, runs[0].state.params, rtol=1e-5, atol=1e-6)


def test_auto_steps_per_dispatch():
  assert core.auto_steps_per_dispatch([50, 150, 75]) == 25
  assert core.auto_steps_per_dispatch([500]) == 50
  assert core.auto_steps_per_dispatch([7, 0]) == 7
  assert core.auto_steps_per_dispatch([-5, 6]) == 6        # a cadence <= 0 is off, as 0 is
  assert core.auto_steps_per_dispatch([100], batch_bytes=30 << 20) == 2


def test_mesh_and_optimizer_accept_plain_dicts_and_config_dicts():
  cfg = {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4, "clip_norm": 1.0}
  params = {"w": jnp.ones(3)}
  grads = {"w": jnp.full(3, 2.0)}
  outs = [tx.update(grads, tx.init(params), params)[0] for tx in
          (core.make_optimizer(cfg), core.make_optimizer(ml_collections.ConfigDict(cfg)))]
  chex.assert_trees_all_equal(*outs)
  assert mesh_from_config({"num_data": 2}).shape["data"] == 2
  assert mesh_from_config(ml_collections.ConfigDict({"num_data": 0})).devices.size == jax.device_count()
