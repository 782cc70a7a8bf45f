"""Time, interval and label embeddings for flow / flow-map networks."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["sinusoidal", "TimeIntervalEmbed"]


def sinusoidal(t: jax.Array, dim: int, *, max_freq: float = 30.0, min_freq: float = 1.0) -> jax.Array:
  """Sin/cos features [B, dim] (dim even) of times [B], geometric angular frequencies in [min_freq, max_freq].
  A bounded top frequency keeps a finite-difference step delta = 0.01 under 1 rad (`max_freq * delta`)."""
  freqs = jnp.exp(jnp.linspace(math.log(min_freq), math.log(max_freq), dim // 2, dtype=t.dtype))
  ang = t[:, None] * freqs[None, :]
  return jnp.concatenate([jnp.sin(ang), jnp.cos(ang)], axis=-1)


class TimeIntervalEmbed(nn.Module):
  """Conditioning vector cond = MLP([sin(t); sin(h)]) + Embed(label) from (t, h = r - t) and an optional
  class label; label `num_classes` is the null (unconditional) label."""

  features: int = 128
  num_classes: int = 0
  freq_dim: int = 64
  max_freq: float = 30.0

  @nn.compact
  def __call__(self, t: jax.Array, r: jax.Array, label: jax.Array | None = None) -> jax.Array:
    emb = jnp.concatenate([sinusoidal(t, self.freq_dim, max_freq=self.max_freq),
                           sinusoidal(r - t, self.freq_dim, max_freq=self.max_freq)], axis=-1)
    emb = nn.Dense(self.features)(emb)
    emb = nn.Dense(self.features)(nn.silu(emb))
    if self.num_classes > 0:
      if label is None:
        label = jnp.full(t.shape, self.num_classes, jnp.int32)
      emb = emb + nn.Embed(self.num_classes + 1, self.features)(label)
    return emb
