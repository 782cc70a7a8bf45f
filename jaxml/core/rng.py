"""Explicit keys: one config seed is the root of every random stream."""

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["fold_in_each", "numpy_rng"]


def fold_in_each(rng: jax.Array, ids: jax.Array) -> jax.Array:
  """Keys [len(ids)], `fold_in(rng, id)` each: a stream's key depends on its own id only, not on how many
  other streams (chains, ensemble members) share the run or where it sits among them."""
  return jax.vmap(lambda i: jax.random.fold_in(rng, i))(jnp.asarray(ids, jnp.int32))


def numpy_rng(seed: int, *streams: int) -> np.random.Generator:
  """A seeded numpy Generator for host-side data work (never the global np.random)."""
  return np.random.default_rng([seed, *streams])
