"""Sparse GNN layers equal a dense-adjacency oracle on a tiny graph."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.nn.gnn import APPNP, GAT, GCN, SparseFeatures, gcn_norm_weights, propagate, row_norm_weights


def _graph(n=10, f=6, seed=0):
  rng = np.random.default_rng(seed)
  a = np.triu(rng.random((n, n)) < 0.3, 1)
  a = a | a.T
  src, dst = np.nonzero(a)
  x = (rng.random((n, f)) < 0.4) * rng.random((n, f))
  return a.astype(np.float32), np.stack([src, dst]).astype(np.int32), x.astype(np.float32)


def _dense_ahat(a):
  a_t = a + np.eye(a.shape[0], dtype=a.dtype)
  d = a_t.sum(1)
  return a_t / np.sqrt(d[:, None] * d[None, :])


def _sparse(x):
  r, c = np.nonzero(x)
  pad = 5   # padded zero entries must not change anything
  return SparseFeatures(jnp.asarray(np.r_[r, np.zeros(pad, int)], jnp.int32),
                        jnp.asarray(np.r_[c, np.zeros(pad, int)], jnp.int32),
                        jnp.asarray(np.r_[x[r, c], np.zeros(pad)], jnp.float32))


def test_propagation_matches_dense_operators():
  a, edges, x = _graph()
  n = a.shape[0]
  s, r, w = gcn_norm_weights(jnp.asarray(edges), n)
  np.testing.assert_allclose(propagate(jnp.asarray(x), s, r, w, n), _dense_ahat(a) @ x, rtol=1e-5, atol=1e-6)
  s, r, w = row_norm_weights(jnp.asarray(edges), n)
  a_t = a + np.eye(n)
  np.testing.assert_allclose(propagate(jnp.asarray(x), s, r, w, n), (a_t / a_t.sum(1, keepdims=True)) @ x,
                             rtol=1e-5, atol=1e-6)


def test_gcn_matches_dense_oracle_and_sparse_features():
  a, edges, x = _graph()
  model = GCN(3, x.shape[1], hidden=4, dropout=0.5)
  params = model.init(jax.random.key(0), jnp.asarray(x), jnp.asarray(edges))
  out = model.apply(params, jnp.asarray(x), jnp.asarray(edges))
  p = params["params"]
  ahat = _dense_ahat(a)
  q = x @ np.asarray(p["conv1"]["kernel"])
  h = np.maximum(ahat @ q + np.asarray(p["bias1"]), 0)
  logits = (ahat @ h) @ np.asarray(p["conv2"]["kernel"]) + np.asarray(p["conv2"]["bias"])
  np.testing.assert_allclose(out["q"], q, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out["logits"], logits, rtol=1e-4, atol=1e-5)
  sp = model.apply(params, _sparse(x), jnp.asarray(edges), num_nodes=x.shape[0])
  np.testing.assert_allclose(sp["logits"], out["logits"], rtol=1e-5, atol=1e-6)


def test_gat_matches_dense_oracle():
  a, edges, x = _graph()
  n = a.shape[0]
  model = GAT(3, x.shape[1], hidden=2, heads=2, dropout=0.0)
  params = model.init(jax.random.key(1), jnp.asarray(x), jnp.asarray(edges))
  out = model.apply(params, jnp.asarray(x), jnp.asarray(edges))
  p = jax.tree.map(np.asarray, params["params"])
  mask = (a + np.eye(n)) > 0

  def layer(g, a_src, a_dst):          # g [N, H, D]
    src = (g * a_src).sum(-1)          # [N, H]
    dst = (g * a_dst).sum(-1)
    e = dst[:, None, :] + src[None, :, :]             # [i, j, H]
    e = np.where(e > 0, e, 0.2 * e)
    e = np.where(mask[:, :, None], e, -np.inf)
    att = np.exp(e - e.max(1, keepdims=True))
    att = att / att.sum(1, keepdims=True)
    return np.einsum("ijh,jhd->ihd", att, g)

  g = (x @ p["lin1"]["kernel"]).reshape(n, 2, 2)
  z = layer(g, p["layer1_att_src"], p["layer1_att_dst"]).reshape(n, -1) + p["bias1"]
  z = np.where(z > 0, z, np.expm1(z))
  g2 = (z @ p["lin2"]["kernel"])[:, None, :]
  logits = layer(g2, p["layer2_att_src"], p["layer2_att_dst"])[:, 0] + p["bias2"]
  np.testing.assert_allclose(out["logits"], logits, rtol=1e-4, atol=1e-5)


def test_appnp_matches_dense_oracle():
  a, edges, x = _graph()
  model = APPNP(3, x.shape[1], hidden=4, dropout=0.0, k_steps=5, teleport=0.2)
  params = model.init(jax.random.key(2), jnp.asarray(x), jnp.asarray(edges))
  out = model.apply(params, jnp.asarray(x), jnp.asarray(edges))
  p = jax.tree.map(np.asarray, params["params"])
  ahat = _dense_ahat(a)
  l0 = np.maximum(x @ p["lin1"]["kernel"] + p["bias1"], 0) @ p["lin2"]["kernel"] + p["lin2"]["bias"]
  logits = l0
  for _ in range(5):
    logits = 0.8 * ahat @ logits + 0.2 * l0
  np.testing.assert_allclose(out["logits"], logits, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("cls", [GCN, GAT, APPNP])
def test_dropout_only_in_training(cls):
  _, edges, x = _graph()
  model = cls(3, x.shape[1], dropout=0.5)
  params = model.init(jax.random.key(0), jnp.asarray(x), jnp.asarray(edges))
  eval_a = model.apply(params, jnp.asarray(x), jnp.asarray(edges))["logits"]
  eval_b = model.apply(params, jnp.asarray(x), jnp.asarray(edges))["logits"]
  train = model.apply(params, jnp.asarray(x), jnp.asarray(edges), train=True,
                      rngs={"dropout": jax.random.key(3)})["logits"]
  np.testing.assert_array_equal(eval_a, eval_b)
  assert not np.allclose(train, eval_a)
