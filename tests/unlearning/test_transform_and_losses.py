"""Transform starts at identity; objectives match their definitions; frozen parameters stay put."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import core
from jaxml.unlearning import api, losses, targets
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.sampling import with_values
from jaxml.unlearning.transform import make_transform


@pytest.mark.parametrize("kind", ["linear", "residual"])
def test_transform_is_identity_at_init(kind):
  z = jax.random.normal(jax.random.key(0), (8, 16))
  t = make_transform(kind, (32,))
  params = t.init(jax.random.key(1), z)["params"]
  np.testing.assert_array_equal(np.asarray(t.apply({"params": params}, z)), np.asarray(z))


def test_reference_mlp_transform_is_not_identity_at_init():
  z = jax.random.normal(jax.random.key(0), (8, 16))
  t = make_transform("mlp", (32,))
  params = t.init(jax.random.key(1), z)["params"]
  assert float(jnp.max(jnp.abs(t.apply({"params": params}, z) - z))) > 1e-2


def test_unlearned_model_predicts_like_original_before_training():
  model = model_lib.MLPClassifier(4, (16, 8))
  x = jax.random.normal(jax.random.key(0), (8, 5))
  mparams = model.init(jax.random.key(1), x)["params"]
  stats = targets.class_statistics(np.array([0, 1, 2, 3]), 4, (1,), 1.0)
  method = api.make_method({"transform": "residual", "hidden": (8,)}, model, mparams, stats)
  params = method.init(jax.random.key(2), {"zf": jnp.zeros((1, 8))})
  logits, _ = api.make_predict_fn({"transform": "residual", "hidden": (8,)}, model)(params, x)
  np.testing.assert_array_equal(np.asarray(logits), np.asarray(model.apply({"params": mparams}, x)))


def _linear_t(a):
  return lambda z: z @ a


def test_forget_loss_equals_pairwise_mean():
  k = jax.random.split(jax.random.key(0), 4)
  a = jnp.eye(5) + 0.1 * jax.random.normal(k[0], (5, 5))
  zf, zref = jax.random.normal(k[1], (8, 5)), jax.random.normal(k[2], (8, 5))
  w = jnp.array([1, 1, 0, 1, 1, 1, 0, 1], jnp.float32)
  got = losses.forget_loss(_linear_t(a), zf, w, zref, k[3])
  pair = jnp.mean(jnp.sum(((zf @ a)[:, None, :] - zref[None]) ** 2, axis=-1), axis=1)
  want = jnp.sum(w * pair) / jnp.sum(w)
  np.testing.assert_allclose(float(got), float(want), rtol=1e-5)


def test_beta_zero_gives_retain_objective_and_retain_is_zero_at_identity():
  k = jax.random.split(jax.random.key(0), 3)
  zr, zf = jax.random.normal(k[0], (8, 4)), jax.random.normal(k[1], (8, 4))
  t = _linear_t(jnp.eye(4) * 1.3)
  loss, aux = losses.standard_objective(t, zr, zf, jnp.ones(8), zr, k[2], beta=0.0)
  np.testing.assert_allclose(float(loss), float(jnp.mean((1.3 * zr - zr) ** 2)), rtol=1e-6)
  assert float(aux["forget_loss"]) > 0
  assert float(losses.retain_loss(lambda z: z, zr, k[2], num_samples=3, noise_scale=0.0)) == 0.0


def test_zero_shot_forget_minimiser_is_prior_weighted_prototype_mean():
  protos = jax.random.normal(jax.random.key(0), (3, 4))
  pi = jnp.array([0.2, 0.3, 0.5])
  zf = jax.random.normal(jax.random.key(1), (8, 4))
  target = pi @ protos
  at_min = losses.zero_shot_forget_loss(lambda z: jnp.broadcast_to(target, z.shape), zf, jnp.ones(8), protos, pi,
                                        jax.random.key(2))
  moved = losses.zero_shot_forget_loss(lambda z: jnp.broadcast_to(target + 0.1, z.shape), zf, jnp.ones(8), protos,
                                       pi, jax.random.key(2))
  assert float(at_min) < float(moved)
  np.testing.assert_allclose(float(at_min), float(pi @ jnp.sum((protos - target) ** 2, -1)), rtol=1e-5)


def test_zero_shot_target_shift_moves_only_the_forget_minimiser():
  protos = jax.random.normal(jax.random.key(0), (3, 4))
  pi = jnp.array([0.2, 0.3, 0.5])
  zf = jax.random.normal(jax.random.key(1), (8, 4))
  shift = jnp.array([0.5, -1.0, 0.0, 2.0])
  const = lambda p: (lambda z: jnp.broadcast_to(p, z.shape))  # noqa: E731
  run = lambda p, s: losses.zero_shot_objective(const(p), zf, jnp.ones(8), protos, pi, pi, jax.random.key(2),  # noqa: E731
                                                beta=1.0, target_shift=s)[1]
  new_min = pi @ protos + shift
  grad = jax.grad(lambda p: run(p, shift)["forget_loss"])(new_min)
  np.testing.assert_allclose(np.asarray(grad), 0.0, atol=1e-5)        # the forget term's minimiser moved by s
  for p in (new_min, pi @ protos):
    a, b = run(p, shift), run(p, None)
    np.testing.assert_allclose(float(a["retain_loss"]), float(b["retain_loss"]), rtol=1e-6)   # retain term untouched
  zero = run(new_min, jnp.zeros(4))["forget_loss"]
  np.testing.assert_allclose(float(zero), float(run(new_min, None)["forget_loss"]), rtol=1e-6)


def test_frozen_model_and_stats_bit_identical_after_training():
  model = model_lib.MLPClassifier(3, (16, 8))
  x = jax.random.normal(jax.random.key(0), (8, 5))
  mparams = model.init(jax.random.key(1), x)["params"]
  cfg = {"transform": "residual", "hidden": (8,), "beta": 0.5, "lr": 1e-2}
  params = api.init_params(cfg, jax.random.key(2), mparams, 8, targets.class_statistics(np.array([0, 1, 2]), 3, (), 1.0))
  loss_fn = api.make_loss_fn(cfg, model)
  z = np.asarray(model_lib.encode(model, mparams, x))
  batch = {"zr": z, "yr": np.zeros(8, np.int32), "zf": z[::-1].copy(), "wf": np.ones(8, np.float32), "zref": z}
  batch = with_values(lambda step: batch, 8, **api.batch_values(cfg))(0)      # beta etc. ride in the batch
  grads = jax.grad(lambda p: loss_fn(p, batch, jax.random.key(0))[0])(params)
  chex.assert_trees_all_equal(grads["model"], jax.tree.map(jnp.zeros_like, mparams))
  opt = api.make_optimizer(cfg)
  state = core.create_train_state(params, opt, 0)
  res = core.fit(state, core.make_train_step(loss_fn, opt), lambda s: batch, num_steps=3, log_every=3, progress=False)
  chex.assert_trees_all_equal(res.state.params["model"], mparams)
  chex.assert_trees_all_equal(res.state.params["stats"], params["stats"])
  assert not np.allclose(np.asarray(res.state.params["transform"]["out"]["kernel"]), 0.0)


def _random_params(params, seed):
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  return jax.tree.unflatten(tree, [jax.random.normal(k, leaf.shape) for k, leaf in zip(keys, leaves)])


@pytest.mark.parametrize("kind", ["linear", "residual", "mlp"])
def test_transforms_compute_their_documented_formula(kind):
  # Non-identity parameters, checked against numpy: linear z A + c; residual z + relu(z V + a) U + b;
  # mlp relu(z V + a) U + b (the reference's plain MLP, no skip).
  z = np.asarray(jax.random.normal(jax.random.key(0), (6, 5)))
  t = make_transform(kind, (7,))
  p = _random_params(t.init(jax.random.key(1), jnp.asarray(z))["params"], seed=2)
  got = np.asarray(t.apply({"params": p}, jnp.asarray(z)))
  if kind == "linear":
    want = z @ np.asarray(p["kernel"]) + np.asarray(p["bias"])
  else:
    hidden = np.maximum(z @ np.asarray(p["Dense_0"]["kernel"]) + np.asarray(p["Dense_0"]["bias"]), 0.0)
    want = hidden @ np.asarray(p["out"]["kernel"]) + np.asarray(p["out"]["bias"]) + (z if kind == "residual" else 0.0)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
