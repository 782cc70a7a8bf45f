"""Gradients of every EMF-family loss equal those of the same regression onto a CONSTANT target.

Each loss is `mean w ||out(θ) − sg T||²` (CT: a pseudo-Huber of `f(θ) − sg f_b`). The test records
the inputs the loss feeds the network (an eager call through a recording `apply_fn`), rebuilds the
target with the public functions as a plain array at θ₀, and compares `jax.grad` of the loss with
`jax.grad` of the regression onto that array. Removing any effective stop-gradient changes the
gradient (the loss value stays the same), so these tests fail; the values are compared too.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.emf import baselines
from jaxml.emf.losses import EMFConfig, euler_target, jvp_target, make_emf_loss, per_row_sq
from jaxml.emf.model import FlowNet, make_apply_fn
from jaxml.emf.sample import consistency_fn

DIM, B = 2, 8


def _weight(err, p, c):
  """The adaptive weight (err + c)^-p written out (not the package's function, so a bug there shows)."""
  return np.ones_like(err) if p == 0 else 1.0 / (np.asarray(err) + c) ** p


def _net():
  net = FlowNet(kind="mlp", width=16, depth=1, cond_dim=16)
  apply_fn = make_apply_fn(net)
  x = jnp.zeros((B, DIM))
  params = net.init(jax.random.key(0), x, jnp.zeros(B), jnp.zeros(B))["params"]
  # The output layer starts at zero; random weights make the map (and the target's θ-dependence) non-trivial.
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(1), len(leaves))
  leaves = [(l + 0.3 * jax.random.normal(k, l.shape)).astype(jnp.float64) for l, k in zip(leaves, keys)]
  return apply_fn, jax.tree.unflatten(tree, leaves)


class _Recorder:
  """apply_fn wrapper that remembers the (x, t, r) and output of every eager call."""

  def __init__(self, apply_fn):
    self.apply_fn, self.calls = apply_fn, []

  def __call__(self, params, x, t, r, label=None):
    out = self.apply_fn(params, x, t, r, label)
    if not isinstance(out, jax.core.Tracer):
      self.calls.append((x, t, r, out))
    return out


def _data():
  x1 = jnp.asarray(np.random.default_rng(0).normal(size=(B, DIM)) + 1.0)
  return {"x": x1}, jax.random.key(3)


def _tree_close(a, b, rtol=1e-9):
  for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=1e-11)


def _assert_grad_matches(loss_fn, ref_fn, params, batch, rng, *extra):
  (val, _), grad = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, rng, *extra)
  ref_val, ref_grad = jax.value_and_grad(ref_fn)(params)
  np.testing.assert_allclose(float(val), float(ref_val), rtol=1e-10)
  _tree_close(grad, ref_grad)
  # The target really depends on θ: a gradient through it would differ (guards against a vacuous test).
  assert max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(grad)) > 1e-6


def _x0_vc(batch, xt, t):
  x1 = batch["x"]
  x0 = (xt - t[:, None] * x1) / (1.0 - t)[:, None]
  return x1 - x0


@pytest.mark.parametrize("param,form,field", [("u", "linear", "model"), ("x1", "linear", "model"),
                                              ("u", "convex", "model"), ("u", "linear", "full"),
                                              ("u", "linear", "vc"), ("x1", "linear", "vc")])
def test_emf_gradient_is_that_of_a_constant_target(param, form, field):
  with jax.enable_x64(True):
    apply_fn, params = _net()
    cfg = EMFConfig(param=param, form=form, euler_field=field, delta=0.05, rho=0.75, p=1.0, c=1e-3)
    batch, rng = _data()
    rec = _Recorder(apply_fn)
    make_emf_loss(rec, cfg)(params, batch, rng)
    # Differentiated forward, (Euler-step field unless v_c), the pass at the Euler point.
    assert len(rec.calls) == (2 if field == "vc" else 3)
    xt, t, r, out0 = rec.calls[0]
    vc = _x0_vc(batch, xt, t)
    anchor = vc if param == "u" else batch["x"]
    # r == t rows have gain 0, so the public euler_target gives the anchor there: one call for all rows.
    target, _ = euler_target(apply_fn, params, xt, t, r, anchor, out0, None, cfg, vc)
    scale = 1.0 if param == "u" else jnp.square(jnp.maximum(1.0 - t, cfg.eps))
    w = _weight(per_row_sq(out0 - target) / scale, cfg.p, cfg.c)

    def ref(p):
      return jnp.mean(w * per_row_sq(apply_fn(p, xt, t, r) - target) / scale)

    _assert_grad_matches(make_emf_loss(apply_fn, cfg), ref, params, batch, rng)


def test_flow_matching_gradient_is_plain_regression():
  with jax.enable_x64(True):
    apply_fn, params = _net()
    cfg = EMFConfig(param="u", p=0.0)
    batch, rng = _data()
    rec = _Recorder(apply_fn)
    baselines.make_fm_loss(rec, cfg)(params, batch, rng)
    xt, t, r, _ = rec.calls[0]
    np.testing.assert_array_equal(t, r)
    vc = _x0_vc(batch, xt, t)
    ref = lambda p: jnp.mean(per_row_sq(apply_fn(p, xt, t, t) - vc))
    _assert_grad_matches(baselines.make_fm_loss(apply_fn, cfg), ref, params, batch, rng)


@pytest.mark.parametrize("impl,aux_rows", [("fused", "all"), ("fused", "interval"), ("split", "interval")])
def test_meanflow_gradient_is_that_of_a_constant_jvp_target(impl, aux_rows):
  with jax.enable_x64(True):
    apply_fn, params = _net()
    cfg = EMFConfig(param="u", rho=0.75, p=1.0, aux_rows=aux_rows)
    batch, rng = _data()
    rec = _Recorder(apply_fn)
    # Both impls draw (x_t, t, r) alike; 'split' makes its forward call outside the JVP, so record that one.
    baselines.make_meanflow_loss(rec, cfg, impl="split")(params, batch, rng)
    xt, t, r, _ = rec.calls[0]
    vc = _x0_vc(batch, xt, t)
    n_jvp = B if aux_rows == "all" else int(round(cfg.rho * B))
    tgt = jvp_target(apply_fn, params, xt[:n_jvp], t[:n_jvp], r[:n_jvp], vc[:n_jvp], None, "u", vc[:n_jvp])
    target = jnp.concatenate([tgt, vc[n_jvp:]])
    out0 = apply_fn(params, xt, t, r)
    w = _weight(per_row_sq(out0 - target), cfg.p, cfg.c)
    ref = lambda p: jnp.mean(w * per_row_sq(apply_fn(p, xt, t, r) - target))
    _assert_grad_matches(baselines.make_meanflow_loss(apply_fn, cfg, impl=impl), ref, params, batch, rng)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_shortcut_gradient_is_that_of_a_constant_bootstrap_target(p):
  with jax.enable_x64(True):
    apply_fn, params = _net()
    scfg = baselines.ShortcutConfig(max_steps=4, boot_frac=0.5, target_clip=0.5, p=p, c=1e-3)
    batch, rng = _data()
    rec = _Recorder(apply_fn)
    baselines.make_shortcut_loss(rec, scfg)(params, batch, rng)
    (xt, t, r, _), (_, _, _, s1), (_, _, _, s2) = rec.calls[:3]
    n_boot = s1.shape[0]
    assert 0 < n_boot < B
    vc = _x0_vc(batch, xt, t)
    boot = jnp.clip((s1 + s2) / 2, -scfg.target_clip, scfg.target_clip)
    assert float(jnp.max(jnp.abs(boot))) == pytest.approx(scfg.target_clip)   # the clip is exercised
    target = jnp.concatenate([boot, vc[n_boot:]])
    w = _weight(per_row_sq(apply_fn(params, xt, t, r) - target), scfg.p, scfg.c)
    ref = lambda q: jnp.mean(w * per_row_sq(apply_fn(q, xt, t, r) - target))
    _assert_grad_matches(baselines.make_shortcut_loss(apply_fn, scfg), ref, params, batch, rng)


@pytest.mark.parametrize("m", [8, 32])
def test_shortcut_trains_the_finest_level_the_bootstrap_asks_for(m):
  """Flow rows sit at d = 1/M; the finest bootstrap level d = 2/M asks for half steps d = 1/M, which is
  therefore a trained level; every half step asked for is a trained d (no untrained level is queried)."""
  apply_fn, params = _net()
  batch = {"x": jnp.asarray(np.random.default_rng(0).normal(size=(64, DIM)), jnp.float32)}
  rec = _Recorder(apply_fn)
  baselines.make_shortcut_loss(rec, baselines.ShortcutConfig(max_steps=m, boot_frac=0.25))(
      jax.tree.map(lambda a: a.astype(jnp.float32), params), batch, jax.random.key(0))
  (_, t, r, _), (_, tb, rb, _) = rec.calls[:2]
  n_boot = tb.shape[0]
  d_all, half = np.round(np.asarray(r - t), 6), np.round(np.asarray(rb - tb), 6)
  np.testing.assert_allclose(d_all[n_boot:], 1.0 / m, rtol=1e-5)                       # flow rows at d = 1/M
  assert half.min() == pytest.approx(1.0 / m, rel=1e-5)                                 # finest asked level
  assert set(np.unique(half)) <= set(np.unique(d_all))                                  # all asked are trained
  assert sorted(np.unique(d_all[:n_boot])) == pytest.approx([2.0 ** -j for j in range(int(np.log2(m)))][::-1])
  assert float(np.max(np.asarray(t[n_boot:] + 1.0 / m))) <= 1.0 + 1e-6


def test_consistency_training_gradient_stops_at_the_later_point():
  with jax.enable_x64(True):
    apply_fn, params = _net()
    ccfg = baselines.CTConfig(grid_start=4, grid_end=8, c_scale=0.1)
    batch, rng = _data()
    extra = {"grid": jnp.asarray(4, jnp.int32)}
    rec = _Recorder(apply_fn)
    baselines.make_ct_loss(rec, ccfg)(params, batch, rng, extra)
    (xa, ta, _, _), (xb, tb, _, _) = rec.calls[:2]
    np.testing.assert_allclose(tb - ta, 0.25)
    f_b = consistency_fn(apply_fn, params, xb, tb, None)
    c = ccfg.c_scale * np.sqrt(DIM)

    def ref(p):
      d = per_row_sq(consistency_fn(apply_fn, p, xa, ta, None) - f_b)
      return jnp.mean((jnp.sqrt(d + c ** 2) - c) * 4.0)

    _assert_grad_matches(baselines.make_ct_loss(apply_fn, ccfg), ref, params, batch, rng, extra)


# --------------------------------------------------------------------------- cheap one-step claim (strict)
def _gaussian_maps(mu, sigma):
  """Exact average velocity of the flow N(0, 1) -> N(mu, sigma^2), and the one-step flow-matching
  map (average velocity = instantaneous velocity, whose one step sends every x0 to mu)."""
  s = lambda t: jnp.sqrt((1 - t) ** 2 + t ** 2 * sigma ** 2)
  ds = lambda t: (-(1 - t) + t * sigma ** 2) / s(t)
  vel = lambda x, t: mu + (ds(t) / s(t))[:, None] * (x - t[:, None] * mu)

  def exact(params, x, t, r, label=None):
    psi = r[:, None] * mu + (s(r) / s(t))[:, None] * (x - t[:, None] * mu)
    gap = (r - t)[:, None]
    return jnp.where(gap > 0, (psi - x) / jnp.where(gap > 0, gap, 1.0), vel(x, t))

  def collapsed(params, x, t, r, label=None):
    return vel(x, t)

  return exact, collapsed


def test_emf_target_fixes_the_exact_one_step_map_and_rejects_the_fm_collapse():
  with jax.enable_x64(True):
    mu, sigma = 1.5, 0.5
    exact, collapsed = _gaussian_maps(mu, sigma)
    x0 = jnp.asarray(np.random.default_rng(0).normal(size=(64, 1)))
    t, r = jnp.zeros(64), jnp.ones(64)
    np.testing.assert_allclose(x0 + collapsed(None, x0, t, r), mu)              # collapse: every x0 -> mu
    np.testing.assert_allclose(np.var(np.asarray(x0 + exact(None, x0, t, r))), sigma ** 2 * np.var(np.asarray(x0)),
                               rtol=1e-10)
    for param in ("u", "x1"):
      cfg = EMFConfig(param=param, delta=1e-3, eps=1e-3)
      r_ = r if param == "u" else jnp.full(64, 0.9)                 # the x1 gain divides by 1 - r
      res = {}
      for name, fn in (("exact", exact), ("collapsed", collapsed)):
        # u-prediction uses the map itself; x1-prediction its endpoint x + (1 - t) u.
        net = fn if param == "u" else (lambda f: lambda p, x, tt, rr, l=None: x + (1 - tt)[:, None] * f(p, x, tt, rr))(fn)
        out = net(None, x0, t, r_)
        # With the data anchor replaced by its conditional mean (the model at r = t), a correct flow
        # map is a fixed point of the EMF target up to O(delta).
        tgt, _ = euler_target(net, None, x0, t, r_, net(None, x0, t, t), out, None, cfg)
        res[name] = float(jnp.sqrt(jnp.mean(jnp.square(tgt - out))))
      assert res["exact"] < 0.01, (param, res)
      assert res["collapsed"] > 0.2, (param, res)
