"""A small N-D U-Net (1-D signals, 2-D images) with FiLM conditioning, for flow-map models: input `[B, *spatial, C]`
(sizes divisible by `2 ** (len(channels) - 1)`), conditioning `[B, D]`; attention at the lowest resolution."""

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["FiLMResBlock", "UNet"]


def _groups(ch: int, groups: int) -> int:
  """The largest group count <= `groups` that divides `ch`."""
  return next(g for g in range(min(groups, ch), 0, -1) if ch % g == 0)


class FiLMResBlock(nn.Module):
  """h + conv(silu(FiLM(GN(conv(silu(GN(h))))))), with a 1x1 skip when channels change."""

  channels: int
  groups: int = 8

  @nn.compact
  def __call__(self, x: jax.Array, cond: jax.Array) -> jax.Array:
    nd = x.ndim - 2
    k = (3,) * nd
    h = nn.Conv(self.channels, k)(nn.silu(nn.GroupNorm(_groups(x.shape[-1], self.groups))(x)))
    scale, shift = jnp.split(nn.Dense(2 * self.channels)(nn.silu(cond)), 2, axis=-1)
    bshape = (cond.shape[0],) + (1,) * nd + (self.channels,)
    h = nn.GroupNorm(_groups(self.channels, self.groups))(h)
    h = h * (1 + scale.reshape(bshape)) + shift.reshape(bshape)
    h = nn.Conv(self.channels, k, kernel_init=nn.initializers.zeros)(nn.silu(h))
    if x.shape[-1] != self.channels:
      x = nn.Conv(self.channels, (1,) * nd)(x)
    return x + h


class _Attention(nn.Module):
  heads: int = 4
  groups: int = 8

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    b, ch = x.shape[0], x.shape[-1]
    tokens = nn.GroupNorm(_groups(ch, self.groups))(x).reshape(b, -1, ch)
    out = nn.MultiHeadDotProductAttention(num_heads=self.heads, out_kernel_init=nn.initializers.zeros)(tokens)
    return x + out.reshape(x.shape)


class UNet(nn.Module):
  """U-Net body: `x [B, *spatial, C], cond [B, D] -> [B, *spatial, C]`; zero-initialised output."""

  channels: Sequence[int] = (32, 64)
  blocks: int = 2
  groups: int = 8
  heads: int = 4
  attention: bool = True

  @nn.compact
  def __call__(self, x: jax.Array, cond: jax.Array) -> jax.Array:
    nd = x.ndim - 2
    h = nn.Conv(self.channels[0], (3,) * nd)(x)
    skips = []
    for level, ch in enumerate(self.channels):
      for _ in range(self.blocks):
        h = FiLMResBlock(ch, self.groups)(h, cond)
      skips.append(h)
      if level < len(self.channels) - 1:
        h = nn.Conv(self.channels[level + 1], (3,) * nd, strides=(2,) * nd)(h)
    h = FiLMResBlock(self.channels[-1], self.groups)(h, cond)
    if self.attention:
      h = _Attention(self.heads, self.groups)(h)
    h = FiLMResBlock(self.channels[-1], self.groups)(h, cond)
    for level in reversed(range(len(self.channels))):
      ch = self.channels[level]
      if h.shape[1:-1] != skips[level].shape[1:-1]:
        h = jax.image.resize(h, h.shape[:1] + skips[level].shape[1:-1] + h.shape[-1:], "nearest")
        h = nn.Conv(ch, (3,) * nd)(h)
      h = jnp.concatenate([h, skips[level]], axis=-1)
      for _ in range(self.blocks):
        h = FiLMResBlock(ch, self.groups)(h, cond)
    h = nn.silu(nn.GroupNorm(_groups(h.shape[-1], self.groups))(h))
    return nn.Conv(x.shape[-1], (3,) * nd, kernel_init=nn.initializers.zeros)(h)
