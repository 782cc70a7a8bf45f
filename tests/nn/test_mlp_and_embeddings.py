"""Shared layers: the MLP is the written-out affine/ReLU composition, dropout acts only in training, and the
time embedding's null label is the unconditional one."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.nn.embeddings import TimeIntervalEmbed
from jaxml.nn.mlp import MLP


def test_mlp_is_relu_between_dense_layers_and_linear_at_the_end():
  x = jax.random.normal(jax.random.key(0), (5, 3))
  net = MLP((4, 2))
  p = net.init(jax.random.key(1), x)["params"]
  want = np.maximum(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"], 0) @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]
  out = net.apply({"params": p}, x)
  assert out.shape == (5, 2) and float(jnp.min(out)) < 0          # no activation after the last layer
  np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_mlp_dropout_only_in_training():
  x = jnp.ones((4, 8))
  net, plain = MLP((64, 1), dropout=0.5), MLP((64, 1))
  p = net.init(jax.random.key(1), x)["params"]
  np.testing.assert_array_equal(net.apply({"params": p}, x), plain.apply({"params": p}, x))
  a = net.apply({"params": p}, x, train=True, rngs={"dropout": jax.random.key(2)})
  b = net.apply({"params": p}, x, train=True, rngs={"dropout": jax.random.key(3)})
  assert float(jnp.max(jnp.abs(a - b))) > 1e-4


def test_time_embedding_reads_t_r_and_label_and_defaults_to_the_null_label():
  emb = TimeIntervalEmbed(8, num_classes=3)
  t, r = jnp.array([0.2, 0.2]), jnp.array([0.6, 0.6])
  p = emb.init(jax.random.key(0), t, r, jnp.array([0, 1]))
  p = jax.tree.map(lambda l: l + 0.1 * jax.random.normal(jax.random.key(4), l.shape), p)
  base = emb.apply(p, t, r, jnp.array([0, 1]))
  assert float(jnp.max(jnp.abs(base[0] - base[1]))) > 1e-4                     # the label moves it
  np.testing.assert_allclose(emb.apply(p, t, r, None), emb.apply(p, t, r, jnp.array([3, 3])), rtol=1e-6)
  assert float(jnp.max(jnp.abs(emb.apply(p, t, r + 0.2, jnp.array([0, 1])) - base))) > 1e-4
