"""Explicit keys: one config seed is the root of every random stream."""

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["root_key", "named_split", "fold_in_each", "process_seed", "numpy_rng"]


def root_key(seed: int) -> jax.Array:
  return jax.random.key(seed)


def named_split(rng: jax.Array, *names: str) -> dict[str, jax.Array]:
  """Splits a key by purpose, so no key is reused for two things."""
  return dict(zip(names, jax.random.split(rng, len(names))))


def fold_in_each(rng: jax.Array, ids: jax.Array) -> jax.Array:
  """Keys [len(ids)], `fold_in(rng, id)` each: a stream's key depends on its own id only, not on how many
  other streams (chains, ensemble members) share the run or where it sits among them."""
  return jax.vmap(lambda i: jax.random.fold_in(rng, i))(jnp.asarray(ids, jnp.int32))


def process_seed(seed: int, process_index: int) -> int:
  """Per-process data seed, stable across restarts."""
  return int(np.random.SeedSequence([seed, process_index]).generate_state(1)[0])


def numpy_rng(seed: int, *streams: int) -> np.random.Generator:
  """A seeded numpy Generator for host-side data work (never the global np.random)."""
  return np.random.default_rng([seed, *streams])
