"""Permutation-equivariant set network (point clouds) with a conditioning vector: layers
`h_i <- h_i + MLP([h_i, mean_j h_j, max_j h_j, cond])`, symmetric pooling, so `net(P x) = P net(x)` for every P."""

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["SetNet"]


class SetNet(nn.Module):
  """`x [B, N, C], cond [B, D] -> [B, N, C]`; zero-initialised output layer."""

  width: int = 128
  depth: int = 4

  @nn.compact
  def __call__(self, x: jax.Array, cond: jax.Array) -> jax.Array:
    h = nn.Dense(self.width)(x)
    c = jnp.broadcast_to(cond[:, None, :], (cond.shape[0], x.shape[1], cond.shape[-1]))
    for _ in range(self.depth):
      mean = jnp.broadcast_to(h.mean(axis=1, keepdims=True), h.shape)
      mx = jnp.broadcast_to(h.max(axis=1, keepdims=True), h.shape)
      z = nn.LayerNorm()(jnp.concatenate([h, mean, mx, c], axis=-1))
      z = nn.Dense(self.width)(z)
      z = nn.Dense(self.width, kernel_init=nn.initializers.zeros)(nn.silu(z))
      h = h + z
    return nn.Dense(x.shape[-1], kernel_init=nn.initializers.zeros)(nn.silu(nn.LayerNorm()(h)))
