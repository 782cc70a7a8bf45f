"""The representation transform T_phi: R^D -> R^D that unlearning trains (and only it): `linear` and `residual`
(the default, our choice) are the identity at init; `mlp` is the reference code's."""

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["LinearTransform", "ResidualTransform", "MLPTransform", "make_transform", "TRANSFORMS"]

TRANSFORMS = ("linear", "residual", "mlp")


class LinearTransform(nn.Module):
  """z' = z A + c, A initialised to the identity."""

  @nn.compact
  def __call__(self, z: jax.Array) -> jax.Array:
    d = z.shape[-1]
    a = self.param("kernel", lambda _, shape: jnp.eye(*shape, dtype=jnp.float32), (d, d))
    c = self.param("bias", nn.initializers.zeros, (d,))
    return z @ a + c


def _relu_stack(h: jax.Array, hidden: Sequence[int]) -> jax.Array:
  """ReLU(Dense) layers named Dense_0, Dense_1, ... in the calling module's scope."""
  for i, width in enumerate(hidden):
    h = nn.relu(nn.Dense(width, name=f"Dense_{i}")(h))
  return h


class ResidualTransform(nn.Module):
  """z' = z + MLP(z), the MLP's last layer zero-initialised."""

  hidden: Sequence[int] = (256,)

  @nn.compact
  def __call__(self, z: jax.Array) -> jax.Array:
    h = _relu_stack(z, self.hidden)
    out = nn.Dense(z.shape[-1], kernel_init=nn.initializers.zeros, bias_init=nn.initializers.zeros,
                   name="out")(h)
    return z + out


class MLPTransform(nn.Module):
  """Plain MLP D -> hidden... -> D (the reference's `mlp`, random init, no skip)."""

  hidden: Sequence[int] = (256,)

  @nn.compact
  def __call__(self, z: jax.Array) -> jax.Array:
    return nn.Dense(z.shape[-1], name="out")(_relu_stack(z, self.hidden))


def make_transform(kind: str = "residual", hidden: Sequence[int] = (256,)) -> nn.Module:
  """Builds T by name (`linear`, `residual` or `mlp`)."""
  if kind == "linear":
    return LinearTransform()
  if kind == "residual":
    return ResidualTransform(tuple(hidden))
  if kind == "mlp":
    return MLPTransform(tuple(hidden))
  raise ValueError(f"unknown transform {kind!r}; expected one of {', '.join(TRANSFORMS)}")
