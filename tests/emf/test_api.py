"""The method registry: plain dicts and ConfigDicts build the same method, strict sections, weighting p
as an array (one compile for a grid), and user-defined toy targets as a function argument."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxml import core, emf
from jaxml.data import toys
from jaxml.emf.losses import EMFConfig, make_emf_loss
from jaxml.emf.model import FlowNet, make_apply_fn


def _plain(method, **sections):
  return {"method": method, "num_classes": 0, "model": {"kind": "mlp", "width": 16, "depth": 1, "cond_dim": 16},
          "emf": {"delta": 0.01, "rho": 0.5}, "ct": {"grid_start": 10, "grid_end": 40}, **sections}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["emf_u", "fm", "ct"])
def test_plain_dict_and_config_dict_build_the_same_method(method):
  batch = {"x": np.asarray(jax.random.normal(jax.random.key(0), (8, 2)), np.float32)}
  losses = []
  for cfg in (_plain(method), ml_collections.ConfigDict(_plain(method))):
    gen = emf.make_generator(cfg)
    params = gen.method.init(jax.random.key(0), batch)
    extra = () if gen.method.init_extra is None else (gen.method.init_extra(jax.random.key(1), params),)
    losses.append(float(gen.method.loss_fn(params, batch, jax.random.key(2), *extra)[0]))
  assert np.isfinite(losses[0]) and losses[0] == losses[1]


def test_registry_owns_every_method_and_rejects_unknown_names_and_keys():
  assert set(emf.METHODS) == {"emf_u", "emf_x1", "emf_u_vc", "emf_x1_vc", "fm", "meanflow", "meanflow_split",
                              "shortcut", "ct"}
  assert {m.sampler for m in emf.REGISTRY.values()} == {"flow_map", "flow", "consistency"}
  with pytest.raises(ValueError, match="unknown method"):
    emf.make_generator(_plain("nope"))
  with pytest.raises(ValueError, match="unknown emf setting"):
    emf.make_generator(_plain("emf_u", emf={"delta": 0.01, "dleta": 0.1}))
  with pytest.raises(ValueError, match="unknown shortcut setting"):
    emf.make_generator(_plain("shortcut", shortcut={"max_step": 8}))


def test_weighting_p_as_an_array_compiles_once_for_a_grid():
  net = FlowNet(kind="mlp", width=16, depth=1, cond_dim=16)
  apply_fn = make_apply_fn(net)
  x = jax.random.normal(jax.random.key(0), (8, 2))
  params = net.init(jax.random.key(0), x, jnp.zeros(8), jnp.zeros(8))["params"]
  batch, rng = {"x": x}, jax.random.key(3)

  @jax.jit
  @chex.assert_max_traces(n=1)
  def grid_loss(ps):
    return jax.vmap(lambda p: make_emf_loss(apply_fn, EMFConfig(p=p))(params, batch, rng)[0])(ps)

  chex.clear_trace_counter()
  got = grid_loss(jnp.asarray([0.0, 0.5, 1.0]))
  grid_loss(jnp.asarray([0.25, 0.75, 2.0]))          # a second grid of the same shape: no retrace
  want = [float(make_emf_loss(apply_fn, EMFConfig(p=p))(params, batch, rng)[0]) for p in (0.0, 0.5, 1.0)]
  np.testing.assert_allclose(got, want, rtol=1e-5)


def _ring_1d(n, rng):
  """A user-defined 1-D target: two well-separated Gaussian bumps."""
  return np.where(rng.uniform(size=n) < 0.5, -3.0, 3.0) + 0.2 * rng.standard_normal(n)


def _annulus(n, rng):
  """A user-defined 2-D target: a thin ring of radius 2."""
  ang = rng.uniform(0, 2 * np.pi, n)
  return np.stack([2 * np.cos(ang), 2 * np.sin(ang)], -1) + 0.05 * rng.standard_normal((n, 2))


@pytest.mark.slow
@pytest.mark.parametrize("target,dim", [(_ring_1d, 1), (_annulus, 2)])
def test_user_defined_toy_target_trains_through_the_package(target, dim):
  dom = toys.toy_domain(target, num_train=256, num_eval=64)
  assert dom["train"].shape == (256, dim) and dom["eval"].shape == (64, dim) and dom["floor"].shape == (64, dim)
  np.testing.assert_allclose(dom["train"].mean(0), 0.0, atol=1e-5)
  np.testing.assert_allclose(dom["train"].std(0), 1.0, rtol=1e-4)
  np.testing.assert_array_equal(toys.toy_domain(target, num_train=256, num_eval=64)["train"], dom["train"])
  assert not np.allclose(dom["eval"], dom["floor"])                 # disjoint seeds
  gen = emf.make_generator(_plain("emf_u"))
  data = dom["train"]
  res = core.train(gen.method, lambda step: {"x": data[(step * 32) % 256:(step * 32) % 256 + 32]},
                   {"optim": {"name": "adam", "lr": 1e-3}, "num_steps": 3, "log_every": 3, "ema_decay": 0.9})
  x = gen.sample_fn(res.params, jnp.zeros((5, dim)), None, jax.random.key(0), 2)
  chex.assert_shape(x, (5, dim))
  chex.assert_tree_all_finite(x)


def test_toy_target_rejects_bad_shapes():
  with pytest.raises(ValueError, match="toy target"):
    toys.sample_target(lambda n, rng: np.zeros((n, 2, 2)), 10, 0)
