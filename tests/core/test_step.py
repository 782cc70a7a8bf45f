"""Train step: correctness on a closed-form problem, sharding invariance, EMA, extra, freezing."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxml import core
from tests.core import toy


def test_least_squares_reaches_closed_form():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(128, 3)).astype(np.float32)
  y = (x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.05 * rng.normal(size=128)).astype(np.float32)
  design = np.c_[x, np.ones(128)]
  exact = np.linalg.lstsq(design, y, rcond=None)[0]

  def loss_fn(params, batch, rng):
    del rng
    pred = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((pred - batch["y"]) ** 2), {}

  optimizer = optax.sgd(0.3)
  state = core.create_train_state({"w": jnp.zeros(3), "b": jnp.zeros(())}, optimizer, 0)
  step = jax.jit(core.make_train_step(loss_fn, optimizer))
  for _ in range(300):
    state, metrics = step(state, {"x": x, "y": y})
  np.testing.assert_allclose(state.params["w"], exact[:3], atol=1e-4)
  np.testing.assert_allclose(state.params["b"], exact[3], atol=1e-4)
  assert int(state.step) == 300 and np.isfinite(metrics["grad_norm"])


@pytest.mark.multidevice
def test_sharded_step_matches_single_device():
  assert jax.device_count() == 8, "conftest should simulate 8 CPU devices"
  state, optimizer, data = toy.fresh_state()
  batch = toy.batch_fn(data)(0)
  step = core.make_train_step(toy.mlp_loss, optimizer)
  expected, expected_metrics = jax.jit(step)(state, batch)
  mesh = core.make_mesh()
  shardings = jax.tree.map(lambda _: NamedSharding(mesh, P()), state)
  compiled = core.sharding.compile_train_step(step, shardings, mesh)
  got, metrics = compiled(jax.device_put(state, shardings), core.sharding.shard_batch(batch, mesh))
  chex.assert_trees_all_close(got.params, expected.params, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(metrics["loss"], expected_metrics["loss"], rtol=1e-5)


def test_step_traces_once_and_keys_differ_per_step():
  state, optimizer, data = toy.fresh_state()
  seen = []

  def loss_fn(params, batch, rng):
    seen.append(1)
    loss, aux = toy.mlp_loss(params, batch, rng)
    return loss, {**aux, "u": jax.random.uniform(rng)}

  step = jax.jit(core.make_train_step(loss_fn, optimizer))
  us = []
  for i in range(3):
    state, m = step(state, toy.batch_fn(data)(i))
    us.append(float(m["u"]))
  assert len(seen) == 1, "the step retraced"
  assert len(set(us)) == 3


def test_ema_matches_its_closed_form_at_an_asymmetric_decay():
  """After 3 steps, ema = d^3 p0 + (1 - d)(d^2 p1 + d p2 + p3); at d = 0.9 a swapped d and 1 - d is far off."""
  state, optimizer, data = toy.fresh_state()
  state = core.create_train_state(state.params, optimizer, 0, ema=True)
  d = 0.9
  step = jax.jit(core.make_train_step(toy.mlp_loss, optimizer, ema_decay=d))
  params = [state.params]
  for i in range(3):
    state, _ = step(state, toy.batch_fn(data)(i))
    params.append(state.params)
  p0, p1, p2, p3 = params
  expected = jax.tree.map(lambda a, b, c, e: d ** 3 * a + (1 - d) * (d * d * b + d * c + e), p0, p1, p2, p3)
  chex.assert_trees_all_close(state.ema_params, expected, rtol=1e-5, atol=1e-7)
  assert not np.allclose(state.ema_params["Dense_0"]["kernel"], p3["Dense_0"]["kernel"], atol=1e-4)


def test_extra_reaches_loss():
  def loss_fn(params, batch, rng, extra):
    del rng
    return jnp.sum((params["w"] - extra["target"]) ** 2), {}

  optimizer = optax.sgd(0.25)
  state = core.create_train_state({"w": jnp.zeros(2)}, optimizer, 0, extra={"target": jnp.array([1.0, -1.0])})
  step = jax.jit(core.make_train_step(loss_fn, optimizer, uses_extra=True))
  for _ in range(50):
    state, _ = step(state, {"x": jnp.zeros(1)})
  np.testing.assert_allclose(state.params["w"], [1.0, -1.0], atol=1e-5)


def test_step_hands_the_params_to_the_optimizer():
  """Weight decay reads the current parameters: w1 = w0 - lr (g + wd w0) for the linear loss g . w."""
  g, w0, lr, wd = jnp.array([1.0, -2.0]), jnp.array([3.0, 0.5]), 0.1, 0.2

  def loss_fn(params, batch, rng):
    del batch, rng
    return jnp.sum(g * params["w"]), {}

  optimizer = optax.chain(optax.add_decayed_weights(wd), optax.sgd(lr))
  state = core.create_train_state({"w": w0}, optimizer, 0)
  state, _ = core.make_train_step(loss_fn, optimizer)(state, {})
  np.testing.assert_allclose(state.params["w"], w0 - lr * (g + wd * w0), rtol=1e-6)


def test_step_carries_the_optimizer_state_and_reports_the_gradient_norm():
  """Heavy-ball momentum on the linear loss g . w (constant gradient g): the trace is g, then (1 + beta) g, so
  w2 = w0 - lr (2 + beta) g, which needs the step to keep the new optimizer state (a stale one gives
  w0 - 2 lr g); the metric grad_norm is |g|."""
  g, w0, lr, beta = jnp.array([3.0, -4.0]), jnp.array([1.0, 2.0]), 0.1, 0.5

  def loss_fn(params, batch, rng):
    del batch, rng
    return jnp.sum(g * params["w"]), {}

  optimizer = optax.sgd(lr, momentum=beta)
  state = core.create_train_state({"w": w0}, optimizer, 0)
  step = jax.jit(core.make_train_step(loss_fn, optimizer))
  for _ in range(2):
    state, metrics = step(state, {})
  np.testing.assert_allclose(state.params["w"], w0 - lr * (2 + beta) * g, rtol=1e-6)
  np.testing.assert_allclose(metrics["grad_norm"], 5.0, rtol=1e-6)


def test_eval_step_reads_the_ema_copy_and_extra_when_asked():
  params, ema, extra = {"w": jnp.array(1.0)}, {"w": jnp.array(5.0)}, {"shift": jnp.array(10.0)}
  optimizer = optax.sgd(0.1)
  state = core.create_train_state(params, optimizer, 0, ema=True, extra=extra)
  state = state.replace(ema_params=ema)
  batch = {"x": jnp.array(2.0)}
  plain = core.step.make_eval_step(lambda p, b: {"v": p["w"] * b["x"]})
  with_extra = core.step.make_eval_step(lambda p, b, e: {"v": p["w"] * b["x"] + e["shift"]}, use_ema=True,
                                   uses_extra=True)
  assert float(plain(state, batch)["v"]) == 2.0
  assert float(core.step.make_eval_step(lambda p, b: {"v": p["w"] * b["x"]}, use_ema=True)(state, batch)["v"]) == 10.0
  assert float(with_extra(state, batch)["v"]) == 20.0
  assert float(core.step.make_eval_step(lambda p, b, e: {"v": p["w"] + e["shift"]}, uses_extra=True)(state, batch)["v"]) == 11.0


def test_freeze_gives_exactly_zero_updates():
  state, _, data = toy.fresh_state()
  optimizer = core.freeze(optax.adam(1e-2), [r"Dense_0"])
  state = core.create_train_state(state.params, optimizer, 0)
  step = jax.jit(core.make_train_step(toy.mlp_loss, optimizer))
  new, _ = step(state, toy.batch_fn(data)(0))
  chex.assert_trees_all_equal(new.params["Dense_0"], state.params["Dense_0"])
  assert not np.allclose(new.params["Dense_1"]["kernel"], state.params["Dense_1"]["kernel"])


def test_make_optimizer_rejects_unknown_names():
  with pytest.raises(ValueError, match="unknown optimizer"):
    core.make_optimizer({"name": "adagrad-typo", "lr": 1e-3})
  with pytest.raises(ValueError, match="unknown schedule"):
    core.make_optimizer({"name": "adam", "lr": 1e-3, "schedule": "linearx"})
  tx = core.make_optimizer({"name": "sgd", "lr": 0.1, "momentum": 0.9, "clip_norm": 1.0,
                            "schedule": "cosine", "warmup_steps": 2}, total_steps=10)
  params = {"w": jnp.ones(3)}
  updates, _ = tx.update({"w": jnp.full(3, 100.0)}, tx.init(params), params)
  assert np.all(np.isfinite(updates["w"]))


@pytest.mark.multidevice
def test_sharding_rules_place_params_and_keep_results():
  """A ('data', 'model') mesh with a regex rule splitting the hidden layer gives the same step."""
  state, optimizer, data = toy.fresh_state()
  batch = toy.batch_fn(data)(0)
  step = core.make_train_step(toy.mlp_loss, optimizer)
  expected, _ = jax.jit(step)(state, batch)
  mesh = core.make_mesh(num_model=2)
  rules = [(r"params/Dense_0/kernel", P(None, "model")), (r"opt_state/.*Dense_0/kernel", P(None, "model"))]
  shardings = core.sharding.state_shardings(state, mesh, rules)
  placed = core.sharding.replicate(state, mesh, shardings)
  assert placed.params["Dense_0"]["kernel"].sharding.spec == P(None, "model")
  got, _ = core.sharding.compile_train_step(step, shardings, mesh)(placed, core.sharding.shard_batch(batch, mesh))
  chex.assert_trees_all_close(got.params, expected.params, rtol=1e-5, atol=1e-6)
