"""Small convolutional encoder for 28x28 grey images (CountDots)."""

import flax.linen as nn
import jax

__all__ = ["SmallCNN"]


class SmallCNN(nn.Module):
  """`blocks` x (conv 3x3, `channels`, ReLU, 2x2 max-pool) -> Dense(hidden) ReLU -> Dense(features).
  x: [B, H, W] or [B, H, W, C] -> [B, features]"""

  features: int = 32
  channels: int = 32
  blocks: int = 3
  hidden: int = 64

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
    del train
    if x.ndim == 3:
      x = x[..., None]
    for i in range(self.blocks):
      x = nn.Conv(self.channels, (3, 3), padding="SAME", name=f"Conv_{i}")(x)
      x = nn.relu(x)
      x = nn.max_pool(x, (2, 2), strides=(2, 2), padding="SAME")
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.Dense(self.hidden, name="Dense_0")(x))
    return nn.Dense(self.features, name="Dense_1")(x)
