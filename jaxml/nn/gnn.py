"""Graph neural network backbones with sparse message passing (GCN, GAT, APPNP).

Graphs are edge lists `edges: [2, E] int32` (row 0 = source, row 1 = target), symmetric, without self-loops (the
layers add them); messages are summed with `jax.ops.segment_sum` (O(E + N) memory). Features are dense `[N, F]` or
`SparseFeatures` (COO; padding carries value 0). Every backbone returns logits [N, K], q [N, d] (the node-own
first-layer latent `x W1`) and z [N, d] (the pre-logit latent)."""

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["SparseFeatures", "FirstLinear", "GCN", "GAT", "APPNP", "add_self_loops", "gcn_norm_weights",
           "row_norm_weights", "propagate", "feature_matmul"]


class SparseFeatures(NamedTuple):
  """COO node features: value `values[k]` at (rows[k], cols[k]); rows, cols int32 [nnz]."""

  rows: jax.Array
  cols: jax.Array
  values: jax.Array


def add_self_loops(edges: jax.Array, num_nodes: int) -> tuple[jax.Array, jax.Array]:
  """(senders, receivers) of `edges` plus one self-loop per node."""
  loop = jnp.arange(num_nodes, dtype=edges.dtype)
  return jnp.concatenate([edges[0], loop]), jnp.concatenate([edges[1], loop])


def _degree(receivers: jax.Array, num_nodes: int) -> jax.Array:
  return jax.ops.segment_sum(jnp.ones_like(receivers, jnp.float32), receivers, num_nodes)


def gcn_norm_weights(edges: jax.Array, num_nodes: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Edge weights of Â = D̃^{-1/2}(A + I)D̃^{-1/2}: w_ji = 1/sqrt(d̃_i d̃_j)."""
  s, r = add_self_loops(edges, num_nodes)
  inv_sqrt = jax.lax.rsqrt(_degree(r, num_nodes))
  return s, r, inv_sqrt[s] * inv_sqrt[r]


def row_norm_weights(edges: jax.Array, num_nodes: int, *, self_loops: bool = True) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Edge weights of P = D̃^{-1}(A + I) (or D^{-1}A without self-loops; isolated rows stay 0)."""
  s, r = add_self_loops(edges, num_nodes) if self_loops else (edges[0], edges[1])
  return s, r, 1.0 / jnp.maximum(_degree(r, num_nodes), 1.0)[r]


def propagate(x: jax.Array, senders: jax.Array, receivers: jax.Array, weights: jax.Array,
              num_nodes: int) -> jax.Array:
  """(M x)_i = Σ_{(j→i)} w_ji x_j for x of shape [N] or [N, ...]."""
  w = weights.reshape(weights.shape + (1,) * (x.ndim - 1))
  return jax.ops.segment_sum(w * x[senders], receivers, num_nodes)


def feature_matmul(x: jax.Array | SparseFeatures, kernel: jax.Array, num_nodes: int) -> jax.Array:
  """x @ kernel for dense or COO features."""
  if isinstance(x, SparseFeatures):
    return jax.ops.segment_sum(x.values[:, None] * kernel[x.cols], x.rows, num_nodes)
  return x @ kernel


def _num_nodes(x: jax.Array | SparseFeatures, num_nodes: int | None) -> int:
  if num_nodes is not None:
    return num_nodes
  if isinstance(x, SparseFeatures):
    raise ValueError("num_nodes is required with SparseFeatures")
  return x.shape[0]


class FirstLinear(nn.Module):
  """x W (no bias) for dense or sparse x; the kernel has shape [num_features, features] and is named
  'kernel'. The node-own first layer of every backbone here (and of method encoders that read node features)."""

  features: int
  num_features: int

  @nn.compact
  def __call__(self, x, num_nodes: int) -> jax.Array:
    kernel = self.param("kernel", nn.initializers.glorot_uniform(), (self.num_features, self.features))
    return feature_matmul(x, kernel, num_nodes)


class GCN(nn.Module):
  """Two-layer GCN (Kipf & Welling): q = X W1, h = ReLU(Â q + b1), z = Â h, logits = z W2 + b2; since
  `Â(h W2) = (Â h) W2` this equals the usual GCNConv stack. Dropout acts on h."""

  num_classes: int
  num_features: int
  hidden: int = 64
  dropout: float = 0.5

  @nn.compact
  def __call__(self, x, edges: jax.Array, *, num_nodes: int | None = None, train: bool = False) -> dict:
    n = _num_nodes(x, num_nodes)
    s, r, w = gcn_norm_weights(edges, n)
    q = FirstLinear(self.hidden, self.num_features, name="conv1")(x, n)
    b1 = self.param("bias1", nn.initializers.zeros, (self.hidden,))
    h = nn.relu(propagate(q, s, r, w, n) + b1)
    h = nn.Dropout(self.dropout, deterministic=not train)(h)
    z = propagate(h, s, r, w, n)
    logits = nn.Dense(self.num_classes, name="conv2")(z)
    return {"logits": logits, "q": q, "z": z}


class GAT(nn.Module):
  """Two-layer GAT (Veličković et al. 2018), edge softmax over in-edges and self-loops: e_ji = LeakyReLU(a_s·g_j +
  a_t·g_i), out_i = Σ_j softmax_j(e_ji) g_j; hidden heads concatenated + ELU, one output head; q = X W1, z hidden."""

  num_classes: int
  num_features: int
  hidden: int = 8
  heads: int = 8
  dropout: float = 0.6

  def _attend(self, g: jax.Array, s, r, n: int, name: str, train: bool) -> jax.Array:
    heads, dim = g.shape[1], g.shape[2]
    a_src = self.param(f"{name}_att_src", nn.initializers.glorot_uniform(), (1, heads, dim))
    a_dst = self.param(f"{name}_att_dst", nn.initializers.glorot_uniform(), (1, heads, dim))
    logit = nn.leaky_relu((g * a_src).sum(-1)[s] + (g * a_dst).sum(-1)[r], 0.2)      # [E, H]
    logit = logit - jax.ops.segment_max(logit, r, n)[r]
    num = jnp.exp(logit)
    att = num / jax.ops.segment_sum(num, r, n)[r]
    att = nn.Dropout(self.dropout, deterministic=not train)(att)
    return jax.ops.segment_sum(att[..., None] * g[s], r, n)                           # [N, H, D]

  @nn.compact
  def __call__(self, x, edges: jax.Array, *, num_nodes: int | None = None, train: bool = False) -> dict:
    n = _num_nodes(x, num_nodes)
    s, r = add_self_loops(edges, n)
    q = FirstLinear(self.hidden * self.heads, self.num_features, name="lin1")(x, n)
    g = q.reshape(n, self.heads, self.hidden)
    b1 = self.param("bias1", nn.initializers.zeros, (self.heads * self.hidden,))
    z = nn.elu(self._attend(g, s, r, n, "layer1", train).reshape(n, -1) + b1)
    z = nn.Dropout(self.dropout, deterministic=not train)(z)
    g2 = nn.Dense(self.num_classes, use_bias=False, name="lin2")(z)[:, None, :]
    b2 = self.param("bias2", nn.initializers.zeros, (self.num_classes,))
    logits = self._attend(g2, s, r, n, "layer2", train)[:, 0, :] + b2
    return {"logits": logits, "q": q, "z": z}


class APPNP(nn.Module):
  """APPNP (Gasteiger et al. 2019), an MLP then K steps of personalised PageRank with Â: q = X W1,
  z = ReLU(q + b1) (after dropout), l0 = z W2 + b2, l^{(k+1)} = (1 − a) Â l^{(k)} + a l0, logits = l^{(K)}."""

  num_classes: int
  num_features: int
  hidden: int = 64
  dropout: float = 0.5
  k_steps: int = 10
  teleport: float = 0.1

  @nn.compact
  def __call__(self, x, edges: jax.Array, *, num_nodes: int | None = None, train: bool = False) -> dict:
    n = _num_nodes(x, num_nodes)
    s, r, w = gcn_norm_weights(edges, n)
    q = FirstLinear(self.hidden, self.num_features, name="lin1")(x, n)
    b1 = self.param("bias1", nn.initializers.zeros, (self.hidden,))
    z = nn.Dropout(self.dropout, deterministic=not train)(nn.relu(q + b1))
    l0 = nn.Dense(self.num_classes, name="lin2")(z)

    def body(_, logits):
      return (1.0 - self.teleport) * propagate(logits, s, r, w, n) + self.teleport * l0

    logits = jax.lax.fori_loop(0, self.k_steps, body, l0)
    return {"logits": logits, "q": q, "z": z}
