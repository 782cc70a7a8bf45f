"""A small ResNet-style image network for the accelerator (`paper`) presets. GroupNorm, not BatchNorm: without
mutable batch statistics the parameters are one plain tree that samplers, optimizers and checkpoints treat alike."""

from typing import Sequence

import flax.linen as nn
import jax

__all__ = ["ResidualBlock", "ResNetEncoder", "ResNet"]


def _groups(width: int) -> int:
  return next(g for g in (8, 4, 2, 1) if width % g == 0)


class ResidualBlock(nn.Module):
  """Two 3x3 convolutions with a (projected) skip connection."""

  width: int
  stride: int = 1

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    y = nn.Conv(self.width, (3, 3), strides=self.stride, use_bias=False)(x)
    y = nn.relu(nn.GroupNorm(num_groups=_groups(self.width))(y))
    y = nn.Conv(self.width, (3, 3), use_bias=False)(y)
    y = nn.GroupNorm(num_groups=_groups(self.width))(y)
    if x.shape[-1] != self.width or self.stride != 1:
      x = nn.Conv(self.width, (1, 1), strides=self.stride, use_bias=False)(x)
    return nn.relu(x + y)


class ResNetEncoder(nn.Module):
  """[B, H, W, C] -> [B, D] pooled features, D = width * 2**(len(stage_sizes) - 1)."""

  stage_sizes: Sequence[int] = (1, 1, 1)
  width: int = 16

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = nn.relu(nn.Conv(self.width, (3, 3), use_bias=False)(x))
    for i, blocks in enumerate(self.stage_sizes):
      for j in range(blocks):
        x = ResidualBlock(self.width * 2**i, stride=2 if (i > 0 and j == 0) else 1)(x)
    return x.mean(axis=(1, 2))


class ResNet(nn.Module):
  """Encoder plus a linear head; submodules are named `encoder` and `head` so that
  representation-level methods can freeze or replace either one."""

  num_classes: int
  stage_sizes: Sequence[int] = (1, 1, 1)
  width: int = 16

  def setup(self):
    self.encoder = ResNetEncoder(self.stage_sizes, self.width)
    self.head = nn.Dense(self.num_classes)

  def __call__(self, x: jax.Array) -> jax.Array:
    return self.head(self.encoder(x))

  def embed(self, x: jax.Array) -> jax.Array:
    return self.encoder(x)
