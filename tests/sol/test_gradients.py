"""Gradient structure of SOL: centroids are constants of the step (stopped), GOL's are learnt;
analytic gradients of the profile and of the discriminative loss on tiny cases."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.sol import api
from jaxml.sol import losses as L

CFG = {"num_classes": 4, "hidden": (8,), "embed_dim": 3, "pairs_per_class": 4, "sigma": 1.0}


def _setup(variant):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(16, 5)).astype(np.float32)
  labels = np.arange(16) % 4
  method = api.make_method(CFG, variant)
  params = method.init(jax.random.key(0), {"x": x[:8]})
  refresh = api.make_refresh_fn(CFG, variant)
  extra = api.init_extra(CFG, params, x, labels, refresh, x[:4], labels[:4])
  batch = {"x": jnp.asarray(x[:8]), "idx": jnp.arange(8, dtype=jnp.int32)}
  return method, params, extra, batch


@pytest.mark.slow
def test_sol_loss_does_not_differentiate_through_the_stored_centroids():
  method, params, extra, batch = _setup("sol")
  g_cent = jax.grad(lambda c: method.loss_fn(params, batch, jax.random.key(1), {**extra, "centroids": c})[0])(
      extra["centroids"])
  assert float(jnp.max(jnp.abs(g_cent))) == 0.0
  g = jax.grad(lambda p: method.loss_fn(p, batch, jax.random.key(1), extra)[0])(params)
  assert max(float(jnp.max(jnp.abs(v))) for v in jax.tree.leaves(g)) > 1e-5


@pytest.mark.slow
def test_gol_learns_its_reference_points():
  method, params, extra, batch = _setup("gol")
  g = jax.grad(lambda p: method.loss_fn(p, batch, jax.random.key(1), extra)[0])(params)
  flat = {"/".join(str(getattr(k, "key", k)) for k in path): v
          for path, v in jax.tree_util.tree_flatten_with_path(g)[0]}
  ref = [v for k, v in flat.items() if "ref" in k or "centroid" in k]
  assert ref and max(float(jnp.max(jnp.abs(v))) for v in ref) > 1e-5, sorted(flat)


def test_profile_gradient_is_analytic():
  rng = np.random.default_rng(1)
  e = jnp.asarray(rng.normal(size=(1, 3)))
  mu = jnp.asarray(rng.normal(size=(4, 3)))
  q = L.gaussian_table(4, 0.8)
  for l in range(4):
    g = jax.grad(lambda v: L.expected_profile(v, mu, q)[0, l])(e)[0]
    expected = 2.0 * np.sum(np.asarray(q[l])[:, None] * (np.asarray(e[0])[None] - np.asarray(mu)), 0)
    np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-5)


def test_discriminative_loss_gradient_on_the_profile():
  prof = jnp.asarray(np.random.default_rng(2).normal(size=(4, 5)), jnp.float32)
  ranks = jnp.array([0, 2, 4, 1])
  g = jax.grad(lambda s: L.discriminative_loss(s, ranks).sum())(prof)
  expected = np.array([[2, -2, 0, 0, 0],          # rank 0: 2 (S_0 - S_1)
                       [0, -1, 2, -1, 0],         # rank 2: (S_2 - S_3) + (S_2 - S_1)
                       [0, 0, 0, -2, 2],          # rank 4: 2 (S_4 - S_3)
                       [-1, 2, -1, 0, 0]], np.float32)
  np.testing.assert_array_equal(np.asarray(g), expected)
  g2 = jax.grad(lambda s: L.discriminative_loss(s, ranks, neighbourhood=2).sum())(prof)
  np.testing.assert_array_equal(np.asarray(g2)[1], [-1, -1, 4, -1, -1])
  np.testing.assert_array_equal(np.asarray(g2)[0], [4, -2, -2, 0, 0])
