"""EMF loss properties: delta -> 0 limit, exact flow maps, rho = 0 reduction, time pairs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.emf import baselines
from jaxml.emf.losses import EMFConfig, euler_target, jvp_target, make_emf_loss, sample_time_pairs
from jaxml.emf.model import FlowNet, make_apply_fn


def _random_net_f64(seed=0, dim=3):
  net = FlowNet(kind="mlp", width=32, depth=2, cond_dim=32)
  apply_fn = make_apply_fn(net)
  x = jnp.zeros((4, dim))
  params = net.init(jax.random.key(seed), x, jnp.zeros(4), jnp.zeros(4))["params"]
  # The output layer is zero-initialised; give it random weights so the map is non-trivial.
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed + 1), len(leaves))
  leaves = [(l + 0.1 * jax.random.normal(k, l.shape)).astype(jnp.float64) for l, k in zip(leaves, keys)]
  return apply_fn, jax.tree.unflatten(tree, leaves)


@pytest.mark.parametrize("param", ["u", "x1"])
def test_euler_target_converges_linearly_to_jvp_target(param):
  with jax.enable_x64(True):
    apply_fn, params = _random_net_f64()
    rng = np.random.default_rng(0)
    b = 6
    x = jnp.asarray(rng.normal(size=(b, 3)))
    t = jnp.asarray(rng.uniform(0.05, 0.4, b))
    r = jnp.asarray(rng.uniform(0.6, 0.85, b))
    anchor = jnp.asarray(rng.normal(size=(b, 3)))
    out = apply_fn(params, x, t, r)
    inst = apply_fn(params, x, t, t)
    tangent = inst if param == "u" else (inst - x) / (1 - t)[:, None]
    ref = jvp_target(apply_fn, params, x, t, r, anchor, None, param, tangent)
    errs = []
    for delta in (1e-2, 1e-3, 1e-4):
      cfg = EMFConfig(param=param, delta=delta)
      tgt, _ = euler_target(apply_fn, params, x, t, r, anchor, out, None, cfg)
      assert tgt.dtype == jnp.float64
      errs.append(float(jnp.max(jnp.abs(tgt - ref))))
    assert errs[0] > 1e-6, errs  # the two targets really differ at finite delta
    for big, small in zip(errs[:-1], errs[1:]):
      assert 5.0 <= big / small <= 20.0, errs


def _gaussian_flow(mu, sigma):
  """Exact average velocity of the flow from N(0,1) to N(mu, sigma^2) (linear in x)."""
  s = lambda t: jnp.sqrt((1 - t) ** 2 + t ** 2 * sigma ** 2)
  ds = lambda t: (-(1 - t) + t * sigma ** 2) / s(t)

  def apply_fn(params, x, t, r, label=None):
    t, r = t[:, None], r[:, None]
    psi = r * mu + s(r) / s(t) * (x - t * mu)
    v = mu + ds(t) / s(t) * (x - t * mu)
    gap = r - t
    return jnp.where(gap > 0, (psi - x) / jnp.where(gap > 0, gap, 1.0), v)

  return apply_fn


def test_gaussian_flow_map_convex_residual_is_second_order():
  with jax.enable_x64(True):
    apply_fn = _gaussian_flow(1.5, 0.5)
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(8, 1)))
    t = jnp.asarray(rng.uniform(0.0, 0.4, 8))
    r = jnp.asarray(rng.uniform(0.6, 1.0, 8))
    u = apply_fn(None, x, t, r)
    v = apply_fn(None, x, t, t)
    res = []
    for delta in (1e-2, 1e-3):
      tgt, _ = euler_target(apply_fn, None, x, t, r, v, u, None, EMFConfig(param="u", delta=delta, form="convex"))
      res.append(float(jnp.max(jnp.abs((tgt - u) * (r - t)[:, None]))))
      lin, _ = euler_target(apply_fn, None, x, t, r, v, u, None, EMFConfig(param="u", delta=delta))
      # The linear (EMF) target is off by O(delta) only.
      assert float(jnp.max(jnp.abs(lin - u))) < 30 * delta
    assert res[0] / res[1] > 50, res


@pytest.mark.parametrize("param", ["u", "x1"])
def test_loss_is_zero_at_exact_flow_map_of_point_mass(param):
  # Data = a point mass at mu: the flow is straight, Euler steps are exact and v_c = v, so the EMF
  # loss with per-sample data supervision vanishes exactly at the true map (and only there).
  with jax.enable_x64(True):
    mu = jnp.asarray([1.0, -2.0, 0.5])

    def exact(scale):
      def apply_fn(params, x, t, r, label=None):
        u = scale * (mu - x) / (1 - t)[:, None]
        return u if param == "u" else x + (1 - t)[:, None] * u
      return apply_fn

    batch = {"x": jnp.tile(mu, (64, 1))}
    cfg = EMFConfig(param=param, rho=0.75)
    loss, aux = make_emf_loss(exact(1.0), cfg)(None, batch, jax.random.key(0))
    assert float(aux["mse"]) < 1e-20 and float(loss) < 1e-16
    assert float(aux["active_frac"]) > 0.5
    wrong, _ = make_emf_loss(exact(1.05), cfg)(None, batch, jax.random.key(0))
    assert float(wrong) > 1e-3


@pytest.mark.parametrize("param", ["u", "x1"])
def test_rho_zero_equals_flow_matching(param):
  net = FlowNet(kind="mlp", width=16, depth=1, cond_dim=16)
  apply_fn = make_apply_fn(net)
  x = jax.random.normal(jax.random.key(1), (8, 2))
  params = net.init(jax.random.key(0), x, jnp.zeros(8), jnp.zeros(8))["params"]
  params = jax.tree.map(lambda l: l + 0.1 * jnp.ones_like(l), params)
  cfg = EMFConfig(param=param, rho=0.0, p=1.0)
  emf = jax.value_and_grad(make_emf_loss(apply_fn, cfg), has_aux=True)
  fm = jax.value_and_grad(baselines.make_fm_loss(apply_fn, cfg), has_aux=True)
  (l1, _), g1 = emf(params, {"x": x}, jax.random.key(3))
  (l2, _), g2 = fm(params, {"x": x}, jax.random.key(3))
  np.testing.assert_array_equal(np.asarray(l1), np.asarray(l2))
  jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), g1, g2)


def test_meanflow_fused_and_split_agree():
  net = FlowNet(kind="mlp", width=16, depth=1, cond_dim=16)
  apply_fn = make_apply_fn(net)
  x = jax.random.normal(jax.random.key(1), (8, 2))
  params = net.init(jax.random.key(0), x, jnp.zeros(8), jnp.zeros(8))["params"]
  params = jax.tree.map(lambda l: l + 0.1 * jnp.ones_like(l), params)
  for aux_rows in ("interval", "all"):
    cfg = EMFConfig(rho=0.5, aux_rows=aux_rows)
    fused = jax.value_and_grad(baselines.make_meanflow_loss(apply_fn, cfg, impl="fused"), has_aux=True)
    split = jax.value_and_grad(baselines.make_meanflow_loss(apply_fn, cfg, impl="split"), has_aux=True)
    (l1, _), g1 = fused(params, {"x": x}, jax.random.key(3))
    (l2, _), g2 = split(params, {"x": x}, jax.random.key(3))
    np.testing.assert_allclose(l1, l2, rtol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), g1, g2)
  dvjp = jax.value_and_grad(baselines.make_meanflow_loss(apply_fn, cfg, jvp_impl="double_vjp"), has_aux=True)
  (l3, _), g3 = dvjp(params, {"x": x}, jax.random.key(3))
  np.testing.assert_allclose(l1, l3, rtol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), g1, g3)


def test_time_pairs():
  cfg = EMFConfig(rho=0.5)
  t, r = sample_time_pairs(jax.random.key(0), 4096, cfg)
  t, r = np.asarray(t), np.asarray(r)
  assert np.all(t <= r) and np.all((t >= 0) & (r <= 1))
  assert int(np.sum(r > t)) == 2048
  corner = np.mean((t[:2048] < 0.1) & (r[:2048] > 0.9))
  assert 0.01 < corner < 0.03  # uniform pairs: P = 2 * 0.1 * 0.1 = 0.02
  t2, r2 = sample_time_pairs(jax.random.key(0), 4096, cfg._replace(time_law="logit_normal", ln_mu=-0.4))
  assert np.all(np.asarray(t2) <= np.asarray(r2))


def test_guided_anchor_mixes_fields_only_on_kept_rows():
  from jaxml.emf.losses import guided_anchor

  def apply_fn(params, x, t, r, label):  # "field" = label value, so the mixture is checkable by hand
    return jnp.broadcast_to(label[:, None].astype(x.dtype), x.shape)

  cfg = EMFConfig(num_classes=3, guidance_w=2.0, guidance_k=0.5)
  x = jnp.zeros((4, 2))
  anchor = jnp.ones((4, 2))
  labels = jnp.array([0, 1, 2, 3])  # 3 = null
  dropped = jnp.array([False, False, True, True])
  out = guided_anchor(apply_fn, None, x, jnp.zeros(4), anchor, labels, dropped, cfg)
  # kept rows: w * 1 + (1 - w - k) * 3 + k * label
  np.testing.assert_allclose(out[:, 0], [2 - 1.5 * 3 + 0.0, 2 - 4.5 + 0.5, 1.0, 1.0])
  cond = make_emf_loss(make_apply_fn(FlowNet(kind="mlp", width=8, depth=1, cond_dim=8, num_classes=3)),
                       cfg._replace(param="x1"))
  net = FlowNet(kind="mlp", width=8, depth=1, cond_dim=8, num_classes=3)
  params = net.init(jax.random.key(0), x, jnp.zeros(4), jnp.zeros(4), labels)["params"]
  loss, _ = cond(params, {"x": x + 1.0, "y": jnp.array([0, 1, 2, 0])}, jax.random.key(1))
  assert np.isfinite(float(loss))
