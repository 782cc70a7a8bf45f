"""Host-side utilities shared by every method: row-chunked evaluation and a finite-tree check."""

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["batched_apply", "tree_all_finite"]


def batched_apply(fn: Callable[[jax.Array], Any], x: np.ndarray, batch_size: int, *,
                  shrink: bool = False) -> Any:
  """Applies `fn` (rows -> pytree with a leading rows axis) to row chunks of `x` [n, ...] and concatenates
  the numpy outputs. Chunks are zero-padded to `batch_size` so a jitted `fn` compiles once; `shrink`
  runs an input shorter than one chunk at its own size."""
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}")
  x = np.asarray(x)
  n = x.shape[0]
  size = min(batch_size, max(n, 1)) if shrink else batch_size
  outs = []
  for start in range(0, n, size):
    part = x[start:start + size]
    keep = part.shape[0]
    if keep < size:  # one compiled shape: pad the last chunk, drop the padding from the output
      part = np.concatenate([part, np.zeros((size - keep,) + part.shape[1:], part.dtype)])
    out = jax.device_get(fn(jnp.asarray(part)))
    outs.append(jax.tree.map(lambda a, k=keep: np.asarray(a)[:k], out))
  return jax.tree.map(lambda *a: np.concatenate(a, axis=0), *outs)


def tree_all_finite(tree: Any) -> jax.Array:
  """True iff every floating-point leaf of `tree` is finite (integer leaves are ignored); jittable."""
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
            if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
  return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)
