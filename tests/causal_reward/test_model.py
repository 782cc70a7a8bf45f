"""GRL, schedule, losses, factored model and optimiser groups."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxml import core
from jaxml.causal_reward import api, losses
from jaxml.causal_reward.model import FactoredRM, grad_reverse, grl_schedule, layer_norm


@pytest.mark.parametrize("use_jit", [False, True])
def test_grad_reverse_identity_forward_and_reversed_backward(use_jit):
  x = jnp.arange(6.0).reshape(2, 3) - 2.0
  v = jnp.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
  lam = jnp.asarray(0.7)
  fwd = jax.jit(grad_reverse) if use_jit else grad_reverse
  np.testing.assert_array_equal(fwd(x, lam), x)
  grad = jax.grad(lambda x_, l_: jnp.sum(grad_reverse(x_, l_) * v), argnums=(0, 1))
  grad = jax.jit(grad) if use_jit else grad
  gx, glam = grad(x, lam)
  np.testing.assert_allclose(gx, -0.7 * v, rtol=1e-6)
  assert float(glam) == 0.0


def test_grad_reverse_does_not_recompile_when_lambda_changes():
  v = jnp.ones((4,))

  @jax.jit
  @chex.assert_max_traces(n=1)
  def g(x, lam):
    return jax.grad(lambda x_: jnp.sum(grad_reverse(x_, lam) * v))(x)

  for lam in (0.0, 0.3, 1.0):
    np.testing.assert_allclose(g(jnp.zeros(4), jnp.asarray(lam)), -lam * np.ones(4), rtol=1e-6)


def test_grl_schedule_ramp():
  total = 1000
  lams = grl_schedule(np.arange(total + 1), total, lam_max=2.0)
  assert lams[0] == 0.0
  assert np.all(np.diff(lams) > 0)
  np.testing.assert_allclose(lams[-1], 2.0 * np.tanh(5.0), rtol=1e-6)   # = lam_max * 0.99991
  assert abs(lams[-1] / 2.0 - 0.9999) < 1e-4
  assert grl_schedule(5, total, kind="constant", lam_max=1.5) == 1.5
  with pytest.raises(ValueError):
    grl_schedule(0, 10, kind="linear")


def test_bt_loss_log2_and_swap_symmetry():
  r = jnp.array([0.3, -1.0, 2.0])
  np.testing.assert_allclose(losses.bt_loss(r, r), np.log(2.0), rtol=1e-6)
  r_w, r_l = jnp.array([1.0, -0.5, 0.2]), jnp.array([0.0, 0.7, 0.9])
  y = jnp.array([1.0, 0.8, 0.3])
  np.testing.assert_allclose(losses.bt_loss(r_w, r_l, y), losses.bt_loss(r_l, r_w, 1.0 - y), rtol=1e-6)
  np.testing.assert_allclose(losses.bt_loss(r_w, r_l), losses.bt_loss(r_l, r_w, jnp.zeros(3)), rtol=1e-6)
  # exact value: -log sigmoid(1) for a single pair
  np.testing.assert_allclose(losses.bt_loss(jnp.array([1.0]), jnp.array([0.0])), np.log1p(np.exp(-1.0)), rtol=1e-6)


def test_pearson_crosscov_and_kl():
  x = jnp.array([1.0, 2.0, 3.0, 4.0])
  np.testing.assert_allclose(losses.pearson(x, 2 * x + 1), 1.0, atol=1e-5)
  np.testing.assert_allclose(losses.pearson(x, -x), -1.0, atol=1e-5)
  rng = np.random.default_rng(0)
  a = rng.normal(size=(5000, 3))
  b = rng.normal(size=(5000, 2))
  assert float(losses.cross_cov_fro2(a, b)) < 1e-3
  np.testing.assert_allclose(losses.cross_cov_fro2(a, a[:, :1] * np.ones((1, 2))),
                             np.sum(np.cov(a.T, bias=True)[:, :1] ** 2) * 2 / 6, rtol=1e-5)
  assert float(losses.gaussian_kl(jnp.zeros((2, 3)), jnp.zeros((2, 3)))) == 0.0


def test_factored_model_shapes_and_layer_norm():
  model = FactoredRM(dim=10, d_c=4, d_n=6, num_cues=2)
  h = jnp.asarray(np.random.default_rng(0).normal(size=(5, 10)), jnp.float32)
  params = jax.jit(model.init)(jax.random.key(0), h, 0.0)
  out = jax.jit(model.apply)(params, h, 0.5)
  chex.assert_shape(out["r"], (5,))
  chex.assert_shape(out["a"], (5,))
  chex.assert_shape(out["z_c"], (5, 4))
  chex.assert_shape(out["z_n"], (5, 6))
  chex.assert_shape(out["h_hat"], (5, 10))
  chex.assert_shape(out["t_aux"], (5, 2))
  chex.assert_shape(out["t_adv"], (5, 2))
  # default: no norm on z_c (it would bound the reward), parameter-free norm on z_n
  assert np.max(np.abs(np.mean(out["z_c"], -1))) > 1e-3
  np.testing.assert_allclose(np.var(out["z_n"], -1), 1.0, rtol=1e-3)
  normed = FactoredRM(dim=10, d_c=4, d_n=6, num_cues=2, norm_c=True)
  out_n = normed.apply(params, h, 0.5)
  np.testing.assert_allclose(np.mean(out_n["z_c"], -1), 0.0, atol=1e-5)
  np.testing.assert_allclose(np.var(out_n["z_c"], -1), 1.0, rtol=1e-3)
  np.testing.assert_allclose(layer_norm(jnp.ones((2, 3))), 0.0)
  # the conditional adversary reads [z_n, t]; the reward does not depend on t
  cond = FactoredRM(dim=10, d_c=4, d_n=6, num_cues=2, adv_condition=True)
  p_cond = cond.init(jax.random.key(0), h, 0.0)
  assert p_cond["params"]["adversary"]["Dense_0"]["kernel"].shape[0] == 6 + 2
  t = jnp.ones((5, 2))
  np.testing.assert_allclose(cond.apply(p_cond, h, 0.0, None, t)["r"], cond.apply(p_cond, h, 0.0)["r"])
  assert not np.allclose(cond.apply(p_cond, h, 0.0, None, t)["a"], cond.apply(p_cond, h, 0.0)["a"])


def _batch(n=16, d=8, k=2, seed=0):
  rng = np.random.default_rng(seed)
  return {"h_w": rng.normal(size=(n, d)).astype(np.float32), "h_l": rng.normal(size=(n, d)).astype(np.float32),
          "t_w": rng.normal(size=(n, k)).astype(np.float32), "t_l": rng.normal(size=(n, k)).astype(np.float32),
          "grl_lambda": np.full(n, 0.5, np.float32)}


def test_grl_reverses_adversary_gradient_into_encoder():
  """The trunk receives -lam * grad of L_adv; the adversary's own weights get +grad."""
  cfg = {"kind": "crm_u", "dim": 8, "rec": 0.0, "orth": 0.0}
  method = api.make_method(cfg)
  batch = _batch()
  params = method.init(jax.random.key(0), batch)

  # d(loss - l_bt)/d(params) is the gradient of the adversarial (+ rec, orth = 0) part.
  def reversed_part(p, lam):
    b = dict(batch, grl_lambda=jnp.full(16, lam, jnp.float32))
    loss, aux = method.loss_fn(p, b, jax.random.key(0))
    return loss - aux["l_bt"]

  grad_fn = jax.jit(jax.grad(reversed_part))
  g_half = grad_fn(params, 0.5)
  g_one = grad_fn(params, 1.0)
  # adversary weights: independent of lam; encoder (proj_n) weights: proportional to -lam
  np.testing.assert_allclose(g_half["params"]["adversary"]["Dense_0"]["kernel"],
                             g_one["params"]["adversary"]["Dense_0"]["kernel"], rtol=1e-5)
  np.testing.assert_allclose(2 * g_half["params"]["proj_n"]["kernel"], g_one["params"]["proj_n"]["kernel"],
                             rtol=1e-4, atol=1e-7)
  # sign: compare with the un-reversed gradient of the adversary loss w.r.t. proj_n
  model = FactoredRM(dim=8)

  def plain_adv(p):
    h = jnp.concatenate([batch["h_w"], batch["h_l"]])
    out = model.apply(p, h, -1.0)   # GRL with lam = -1 is the identity in both directions
    return losses.bt_loss(out["a"][:16], out["a"][16:])

  g_ref = jax.jit(jax.grad(plain_adv))(params)
  np.testing.assert_allclose(g_one["params"]["proj_n"]["kernel"], -g_ref["params"]["proj_n"]["kernel"],
                             rtol=1e-4, atol=1e-7)


def test_alternating_adversary_trains_on_frozen_z_n_and_encoder_confuses_it():
  """adv_mode='alternating': the adversary's own gradient does not reach the encoder (lam = 0 in
  its layer); the encoder's adversarial gradient is lam times the confusion term's."""
  cfg = {"kind": "crm_u", "dim": 8, "rec": 0.0, "orth": 0.0, "adv_mode": "alternating", "adv_steps": 3}
  method = api.make_method(cfg)
  batch = _batch()
  params = method.init(jax.random.key(0), batch)

  def adv_part(p, lam):
    loss, aux = method.loss_fn(p, dict(batch, grl_lambda=jnp.full(16, lam, jnp.float32)), jax.random.key(0))
    return loss - aux["l_bt"]

  g0, g1, g2 = (jax.jit(jax.grad(adv_part))(params, lam) for lam in (0.0, 0.5, 1.0))
  assert np.all(g0["params"]["proj_n"]["kernel"] == 0.0)            # nothing reaches z_n at lam = 0
  assert np.max(np.abs(g1["params"]["proj_n"]["kernel"])) > 0.0
  np.testing.assert_allclose(2 * g1["params"]["proj_n"]["kernel"], g2["params"]["proj_n"]["kernel"], rtol=1e-4,
                             atol=1e-8)
  np.testing.assert_allclose(g0["params"]["adversary"]["Dense_0"]["kernel"],
                             g2["params"]["adversary"]["Dense_0"]["kernel"], rtol=1e-5)
  _, aux = method.loss_fn(params, batch, jax.random.key(0))
  assert float(aux["l_confuse"]) >= float(jnp.log(2.0)) - 1e-6       # confusion BT loss is minimal at a_w = a_l


def test_two_optimiser_groups_read_the_optim_section():
  cfg = {"kind": "crm_n", "dim": 8, "adv_lr_mult": 10.0}
  method = api.make_method(cfg)
  params = method.init(jax.random.key(0), _batch())
  opt = api.make_optimizer(cfg, {"name": "adamw", "lr": 1e-3, "weight_decay": 0.0, "clip_norm": 1.0})
  grads = jax.tree.map(lambda p: 1e-3 * jnp.ones_like(p), params)   # below the clip norm
  updates, _ = jax.jit(lambda g, p: opt.update(g, opt.init(p), p))(grads, params)
  # first Adam step moves every weight by ~lr regardless of gradient scale
  for name in ("adversary", "adversary2"):
    np.testing.assert_allclose(updates["params"][name]["Dense_0"]["kernel"], -1e-2, rtol=1e-3)
  for name in ("trunk", "proj_c", "proj_n", "reward_head", "decoder", "aux"):
    leaf = jax.tree.leaves(updates["params"][name])[0]
    np.testing.assert_allclose(leaf, -1e-3, rtol=1e-3)
  assert isinstance(api.make_optimizer({"kind": "vanilla"}, {"lr": 1e-3}), optax.GradientTransformation)
  big = api.make_optimizer(cfg, {"name": "adam", "lr": 1000.0})
  updates, _ = jax.jit(lambda g, p: big.update(g, big.init(p), p))(grads, params)
  np.testing.assert_allclose(updates["params"]["trunk"]["mlp"]["Dense_0"]["kernel"], -1000.0, rtol=1e-3)


@pytest.mark.parametrize("kind", api.KINDS)
def test_every_kind_trains_one_step(kind):
  cfg = {"kind": kind, "dim": 8, "trunk_hidden": 16, "trunk_out": 8, "d_c": 4, "d_n": 4}
  method = api.make_method(cfg)
  batch = _batch()
  params = method.init(jax.random.key(0), batch)
  opt = api.make_optimizer(cfg, {"name": "adamw", "lr": 1e-3, "weight_decay": 1e-4, "clip_norm": 1.0})
  state = core.create_train_state(params, opt, 0)
  state, metrics = jax.jit(core.make_train_step(method.loss_fn, opt))(state, batch)
  chex.assert_tree_all_finite(state.params)
  assert np.isfinite(float(metrics["loss"]))
  out = method.eval_fn(state.params, batch)
  assert 0.0 <= float(out["acc"]) <= 1.0
  r = api.make_reward_fn(cfg)(state.params, batch["h_w"])
  chex.assert_shape(r, (16,))


def test_crm_n_loss_adds_decorrelation_terms():
  batch = _batch()
  base = {"dim": 8, "trunk_hidden": 16, "trunk_out": 8}
  params = api.make_method(base | {"kind": "crm_n"}).init(jax.random.key(1), batch)
  loss_n, aux_n = api.make_method(base | {"kind": "crm_n"}).loss_fn(params, batch, jax.random.key(0))
  loss_0, _ = api.make_method(base | {"kind": "crm_n", "aux": 0.0, "adv2": 0.0, "dec": 0.0}).loss_fn(
      params, batch, jax.random.key(0))
  np.testing.assert_allclose(loss_n - loss_0, aux_n["l_aux"] + aux_n["l_adv2"] + aux_n["l_dec"], rtol=1e-5)
  r = api.make_reward_fn(base | {"kind": "crm_n"})(params, np.concatenate([batch["h_w"], batch["h_l"]]))
  t = np.concatenate([batch["t_w"], batch["t_l"]])
  expected = sum(abs(np.corrcoef(np.asarray(r), t[:, k])[0, 1]) for k in range(2))
  np.testing.assert_allclose(aux_n["l_dec"], expected, rtol=1e-3)


def test_unknown_kind_and_keys_raise():
  with pytest.raises(ValueError, match="unknown causal_reward kind"):
    api.make_method({"kind": "nope"})
  with pytest.raises(ValueError, match="unknown causal_reward config setting"):
    api.make_method({"kind": "crm_n", "lr": 1e-3})     # rates live in the optim section


def test_loss_weights_fed_as_arrays_match_the_config():
  """batch["hp"] overrides a weight exactly like the config value does (so one compiled step serves both)."""
  batch = _batch()
  base = {"dim": 8, "trunk_hidden": 16, "trunk_out": 8, "kind": "crm_n"}
  params = api.make_method(base).init(jax.random.key(1), batch)
  via_cfg, _ = api.make_method(base | {"dec": 0.0, "rec": 0.5}).loss_fn(params, batch, jax.random.key(0))
  hp = {"dec": np.zeros(16, np.float32), "rec": np.full(16, 0.5, np.float32)}
  via_hp, _ = api.make_method(base).loss_fn(params, dict(batch, hp=hp), jax.random.key(0))
  np.testing.assert_allclose(via_cfg, via_hp, rtol=1e-6)
