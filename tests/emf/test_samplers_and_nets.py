"""Samplers (shapes, NFE, K = 1 formulas), network equivariance, one compile per method, sharding."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxml import core
from jaxml.emf import api, sample
from jaxml.emf.model import FlowNet, make_apply_fn


def _net(kind="mlp", **kw):
  net = FlowNet(kind=kind, width=16, depth=2, cond_dim=16, **kw)
  return net, make_apply_fn(net)


def _params(net, x, seed=0):
  params = net.init(jax.random.key(seed), x, jnp.zeros(x.shape[0]), jnp.zeros(x.shape[0]))["params"]
  return jax.tree.map(lambda l: l + 0.1 * jax.random.normal(jax.random.key(seed + 7), l.shape), params)


def test_one_step_samplers_match_formulas_bitwise():
  net, apply_fn = _net()
  x0 = jax.random.normal(jax.random.key(1), (5, 2))
  params = _params(net, x0)
  zeros, ones = jnp.zeros(5), jnp.ones(5)
  got_u = jax.jit(lambda p, x: sample.sample_flow_map(apply_fn, p, x, 1, None, "u"))(params, x0)
  want_u = jax.jit(lambda p, x: x + apply_fn(p, x, zeros, ones))(params, x0)
  np.testing.assert_array_equal(got_u, want_u)
  got_x = jax.jit(lambda p, x: sample.sample_flow_map(apply_fn, p, x, 1, None, "x1"))(params, x0)
  want_x = jax.jit(lambda p, x: apply_fn(p, x, zeros, ones))(params, x0)
  np.testing.assert_array_equal(got_x, want_x)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_u_and_x1_samplers_agree_and_count_nfe(k):
  net, apply_fn = _net()
  x0 = jax.random.normal(jax.random.key(2), (6, 3))
  params = _params(net, x0)
  calls = []

  def counted(p, x, t, r, label=None):
    jax.debug.callback(lambda: calls.append(1))
    return apply_fn(p, x, t, r, label)

  def as_x1(p, x, t, r, label=None):
    return x + (1 - t)[:, None] * apply_fn(p, x, t, r, label)

  xu = sample.sample_flow_map(counted, params, x0, k, None, "u")
  jax.block_until_ready(xu)
  assert len(calls) == k and xu.shape == x0.shape and xu.dtype == x0.dtype
  xx = sample.sample_flow_map(as_x1, params, x0, k, None, "x1")
  np.testing.assert_allclose(xu, xx, rtol=1e-5, atol=1e-5)
  calls.clear()
  xf = sample.sample_flow(counted, params, x0, k)
  jax.block_until_ready(xf)
  assert len(calls) == k and xf.shape == x0.shape
  calls.clear()
  xc = sample.sample_consistency(counted, params, x0, min(k, 2), None, jax.random.key(0))
  jax.block_until_ready(xc)
  assert len(calls) == min(k, 2) and xc.shape == x0.shape


@pytest.mark.parametrize("k,t_mid,times", [(2, 0.8, (0.0, 0.8)), (3, 0.4, (0.0, 0.4, 0.7)),
                                             (4, None, (0.0, 0.25, 0.5, 0.75)), (2, None, (0.0, 0.5))])
def test_consistency_sampler_renoises_at_t_mid_along_the_training_path(k, t_mid, times):
  # With F = 0, f(x, t) = x, so each step returns its re-noised input (1 - t_k) z_k + t_k x: the output pins
  # both the re-noise times (t_mid first, then evenly up to 1; default k/K) and the path they re-noise along.
  seen = []

  def zero_field(p, x, t, r, label=None):
    jax.debug.callback(lambda tt, rr: seen.append((float(tt[0]), float(rr[0]))), t, r)
    return jnp.zeros_like(x)

  x0 = jax.random.normal(jax.random.key(3), (5, 2))
  rng = jax.random.key(4)
  got = sample.sample_consistency(zero_field, None, x0, k, None, rng, t_mid)
  jax.block_until_ready(got)
  np.testing.assert_allclose([t for t, _ in seen], times, atol=1e-6)
  assert all(r == 1.0 for _, r in seen)
  want = x0
  for j, t in enumerate(times[1:], start=1):
    want = (1 - t) * jax.random.normal(jax.random.fold_in(rng, j), x0.shape) + t * want
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_every_sampler_conditions_every_step_on_the_label():
  """Class-conditional sampling: each sampler hands its label to every network call, so with a conditional
  net changing one row's label changes that row's sample only."""
  net, apply_fn = _net(num_classes=3)
  x0 = jax.random.normal(jax.random.key(6), (2, 2))
  params = net.init(jax.random.key(0), x0, jnp.zeros(2), jnp.zeros(2), jnp.zeros(2, jnp.int32))["params"]
  params = jax.tree.map(lambda l: l + 0.3 * jax.random.normal(jax.random.key(8), l.shape), params)
  samplers = {"flow_map_u": lambda f, y: sample.sample_flow_map(f, params, x0, 2, y, "u"),
              "flow_map_x1": lambda f, y: sample.sample_flow_map(f, params, x0, 2, y, "x1"),
              "flow": lambda f, y: sample.sample_flow(f, params, x0, 2, y),
              "consistency": lambda f, y: sample.sample_consistency(f, params, x0, 2, y, jax.random.key(1))}
  base, other = jnp.array([0, 0]), jnp.array([0, 2])
  for name, draw in samplers.items():
    seen = []

    def recorded(p, x, t, r, label=None):
      if label is None:
        seen.append(None)
      else:
        jax.debug.callback(lambda y: seen.append(tuple(np.asarray(y))), label)
      return apply_fn(p, x, t, r, label)

    jax.block_until_ready(draw(recorded, other))
    assert seen == [(0, 2), (0, 2)], name
    a, b = draw(apply_fn, base), draw(apply_fn, other)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-6, atol=1e-6, err_msg=name)
    assert float(jnp.max(jnp.abs(a[1] - b[1]))) > 1e-3, name


def test_consistency_sampler_compiles_once_for_every_t_mid():
  chex.clear_trace_counter()
  x0 = jax.random.normal(jax.random.key(2), (4, 2))
  gen = api.make_generator(_config("ct"))
  params = jax.tree.map(lambda l: l + 0.3 * jax.random.normal(jax.random.key(5), l.shape),
                        gen.method.init(jax.random.key(0), {"x": x0}))
  draw = jax.jit(chex.assert_max_traces(gen.sample_fn, n=1))
  outs = [draw(params, x0, None, jax.random.key(0), jnp.asarray(2), t_mid=tm) for tm in (0.2, 0.6, 0.9)]
  assert float(jnp.max(jnp.abs(outs[0] - outs[1]))) > 1e-4      # t_mid changes the second step


def test_setnet_is_permutation_equivariant():
  x = jax.random.normal(jax.random.key(0), (2, 16, 3))
  net, apply_fn = _net("setnet")
  params = _params(net, x)
  t, r = jnp.full(2, 0.3), jnp.full(2, 0.8)
  perm = jax.random.permutation(jax.random.key(5), 16)
  out = apply_fn(params, x, t, r)
  out_p = apply_fn(params, x[:, perm], t, r)
  assert float(jnp.max(jnp.abs(out))) > 1e-3
  np.testing.assert_allclose(out_p, out[:, perm], rtol=1e-5, atol=1e-6)


def test_unet_shapes_and_conditioning():
  """The U-Net keeps the input shape, and each conditioning input (t, r, class, the null class) moves
  the output of the same image, while one row's conditioning leaves the other row alone."""
  net = FlowNet(kind="unet", channels=(8, 16), blocks=1, cond_dim=16, num_classes=3)
  apply_fn = jax.jit(make_apply_fn(net))
  x = jnp.broadcast_to(jax.random.normal(jax.random.key(0), (1, 8, 8, 1)), (2, 8, 8, 1))
  params = net.init(jax.random.key(0), x, jnp.zeros(2), jnp.zeros(2), jnp.zeros(2, jnp.int32))["params"]
  params = jax.tree.map(lambda l: l + 0.1 * jax.random.normal(jax.random.key(3), l.shape), params)
  t, r = jnp.array([0.2, 0.2]), jnp.array([0.7, 0.7])
  base = apply_fn(params, x, t, r, jnp.array([0, 0]))
  chex.assert_shape(base, x.shape)
  np.testing.assert_allclose(base[0], base[1], rtol=1e-6, atol=1e-6)     # same image, same conditioning
  for changed in (apply_fn(params, x, t, r, jnp.array([0, 1])), apply_fn(params, x, t, r, jnp.array([0, 3])),
                  apply_fn(params, x, jnp.array([0.2, 0.5]), r, jnp.array([0, 0])),
                  apply_fn(params, x, t, jnp.array([0.7, 0.9]), jnp.array([0, 0]))):
    np.testing.assert_allclose(changed[0], base[0], rtol=1e-6, atol=1e-6)
    assert float(jnp.max(jnp.abs(changed[1] - base[1]))) > 1e-3


def _config(method, **extra):
  cfg = ml_collections.ConfigDict({
      "method": method, "num_classes": 0,
      "model": {"kind": "mlp", "width": 16, "depth": 1, "cond_dim": 16},
      "emf": {"delta": 0.01, "rho": 0.5}, "meanflow": {}, "fm": {"p": 0.0},
      "shortcut": {"max_steps": 8}, "ct": {"grid_start": 10, "grid_end": 40}})
  cfg.update(extra)
  return cfg


@pytest.mark.parametrize("method", api.METHODS)
def test_each_method_compiles_once_and_trains(method):
  chex.clear_trace_counter()
  gen = api.make_generator(_config(method))
  batch = {"x": np.asarray(jax.random.normal(jax.random.key(0), (16, 2)), np.float32)}
  params = gen.method.init(jax.random.key(0), batch)
  opt = core.make_optimizer({"name": "adam", "lr": 1e-3}, 3)
  uses_extra = gen.method.init_extra is not None
  extra = gen.method.init_extra(jax.random.key(1), params) if uses_extra else None
  state = core.create_train_state(params, opt, 0, ema=True, extra=extra)
  step = chex.assert_max_traces(core.make_train_step(gen.method.loss_fn, opt, ema_decay=0.9,
                                                     uses_extra=uses_extra), n=1)
  step = jax.jit(step)
  for _ in range(3):
    state, metrics = step(state, batch)
  chex.assert_tree_all_finite(state.params)
  assert np.isfinite(float(metrics["loss"]))
  x0 = jnp.asarray([[0.0, 0.0], [0.0, 0.0], [1.0, -1.0], [2.0, 0.5]])
  x = jax.jit(gen.sample_fn, static_argnums=4)(state.ema_params, x0, None, jax.random.key(1), 1)
  chex.assert_shape(x, (4, 2))
  assert float(jnp.min(jnp.abs(x - x0).sum(-1))) > 1e-4            # the network moves every sample
  np.testing.assert_allclose(x[0], x[1], rtol=1e-6, atol=1e-6)     # same noise, same sample
  assert float(jnp.abs(x[2] - x[3]).sum()) > 1e-4                  # a map of its noise, not a constant


def test_sharded_emf_step_matches_single_device():
  gen = api.make_generator(_config("emf_u"))
  batch = {"x": np.asarray(jax.random.normal(jax.random.key(0), (16, 2)), np.float32)}
  params = gen.method.init(jax.random.key(0), batch)
  opt = core.make_optimizer({"name": "adam", "lr": 1e-2}, 3)
  state = core.create_train_state(params, opt, 0)
  step = core.make_train_step(gen.method.loss_fn, opt)
  expected, _ = jax.jit(step)(state, batch)
  mesh = core.make_mesh()
  assert mesh.devices.size == 8
  shardings = jax.tree.map(lambda _: NamedSharding(mesh, P()), state)
  compiled = core.sharding.compile_train_step(step, shardings, mesh)
  got, _ = compiled(jax.device_put(state, shardings), core.sharding.shard_batch(batch, mesh))
  chex.assert_trees_all_close(got.params, expected.params, rtol=1e-5, atol=1e-6)
