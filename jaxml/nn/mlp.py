"""Multi-layer perceptrons."""

from typing import Callable, Sequence

import flax.linen as nn
import jax

__all__ = ["MLP"]


class MLP(nn.Module):
  """Dense layers with an activation between them; the last layer is linear: [..., d_in] -> [..., features[-1]]."""

  features: Sequence[int]
  activation: Callable[[jax.Array], jax.Array] = nn.relu
  dropout: float = 0.0

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
    for i, width in enumerate(self.features):
      x = nn.Dense(width, name=f"Dense_{i}")(x)
      if i < len(self.features) - 1:
        x = self.activation(x)
        if self.dropout > 0:
          x = nn.Dropout(self.dropout, deterministic=not train)(x)
    return x
