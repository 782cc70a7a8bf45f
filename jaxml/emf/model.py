"""Networks `net(x, t, r, label) -> same shape as x` shared by EMF and every baseline (`t` and `h = r - t`
embedded; methods without `r` pass `r = t`); `apply_fn(params, x, t, r, label)` is the pure form."""

import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxml.core.config import reject_unknown
from jaxml.nn.embeddings import TimeIntervalEmbed
from jaxml.nn.setnet import SetNet
from jaxml.nn.unet import UNet

__all__ = ["FlowMLP", "FlowNet", "ApplyFn", "make_network", "make_apply_fn"]

ApplyFn = Callable[[Any, jax.Array, jax.Array, jax.Array, jax.Array | None], jax.Array]


class FlowMLP(nn.Module):
  """Residual MLP with FiLM conditioning in every block; `x [B, ...] -> [B, ...]` (flattened inside)."""

  width: int = 256
  depth: int = 4

  @nn.compact
  def __call__(self, x: jax.Array, cond: jax.Array) -> jax.Array:
    shape = x.shape
    h = nn.Dense(self.width)(x.reshape(shape[0], -1))
    for _ in range(self.depth):
      scale, shift = jnp.split(nn.Dense(2 * self.width)(nn.silu(cond)), 2, axis=-1)
      z = nn.LayerNorm(use_scale=False, use_bias=False)(h) * (1 + scale) + shift
      z = nn.Dense(self.width)(nn.silu(z))
      z = nn.Dense(self.width)(nn.silu(z))
      h = h + z
    out = nn.Dense(math.prod(shape[1:]), kernel_init=nn.initializers.zeros)(nn.silu(h))
    return out.reshape(shape)


class FlowNet(nn.Module):
  """Embedding of (t, r - t, label) + a body ('mlp', 'unet' or 'setnet')."""

  kind: str = "mlp"
  width: int = 256
  depth: int = 4
  channels: tuple[int, ...] = (32, 64)
  blocks: int = 2
  attention: bool = True
  cond_dim: int = 128
  num_classes: int = 0
  max_freq: float = 30.0

  @nn.compact
  def __call__(self, x: jax.Array, t: jax.Array, r: jax.Array, label: jax.Array | None = None) -> jax.Array:
    cond = TimeIntervalEmbed(self.cond_dim, self.num_classes, max_freq=self.max_freq)(t, r, label)
    if self.kind == "mlp":
      return FlowMLP(self.width, self.depth)(x, cond)
    if self.kind == "unet":
      return UNet(tuple(self.channels), self.blocks, attention=self.attention)(x, cond)
    if self.kind == "setnet":
      return SetNet(self.width, self.depth)(x, cond)
    raise ValueError(f"unknown network kind {self.kind!r}; expected mlp, unet or setnet")


def make_network(cfg: Any, num_classes: int = 0) -> FlowNet:
  """FlowNet from a config section with `kind`, `width`, `depth`, `channels`, `blocks`, ..."""
  get = cfg.get if hasattr(cfg, "get") else (lambda k, d=None: getattr(cfg, k, d))
  if hasattr(cfg, "keys"):
    reject_unknown(cfg, ("kind", "width", "depth", "channels", "blocks", "attention", "cond_dim", "max_freq"), "model")
  return FlowNet(kind=get("kind", "mlp"), width=int(get("width", 256)), depth=int(get("depth", 4)),
                 channels=tuple(get("channels", (32, 64))), blocks=int(get("blocks", 2)),
                 attention=bool(get("attention", True)), cond_dim=int(get("cond_dim", 128)),
                 num_classes=num_classes, max_freq=float(get("max_freq", 30.0)))


def make_apply_fn(net: nn.Module) -> ApplyFn:
  """`apply_fn(params, x, t, r, label=None)` for a Linen module taking `(x, t, r, label)`."""
  return lambda params, x, t, r, label=None: net.apply({"params": params}, x, t, r, label)
