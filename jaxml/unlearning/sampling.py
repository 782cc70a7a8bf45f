"""Host-side batch builders for unlearning: fixed-size batches drawn from index sets.

`index_stream(idx, batch_size, seed, stream)` returns `rows_at(step) -> (rows [B], weights [B])`:
position p = step * B + i of an endless sequence of seeded permutations of `idx` (epoch
e = p // |idx| uses permutation (seed, stream, e)). Random access by step keeps resume exact;
sets smaller than a batch simply wrap into the next permutation; an empty set yields row 0
with weight 0 everywhere (the losses then ignore those rows).
"""

from typing import Callable

import numpy as np

__all__ = ["index_stream", "steps_for_epochs"]


def steps_for_epochs(num_rows: int, batch_size: int, epochs: float, *, minimum: int = 1) -> int:
  """ceil(epochs * num_rows / batch_size), at least `minimum`."""
  return max(int(minimum), int(np.ceil(epochs * num_rows / batch_size)))


def index_stream(idx: np.ndarray, batch_size: int, seed: int,
                 stream: int = 0) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
  """Seeded random-access batches of rows of `idx` (see module docstring)."""
  idx = np.asarray(idx, np.int64)
  n = idx.shape[0]

  def rows_at(step: int) -> tuple[np.ndarray, np.ndarray]:
    if n == 0:
      return np.zeros(batch_size, np.int64), np.zeros(batch_size, np.float32)
    pos = int(step) * batch_size + np.arange(batch_size)
    epochs, offsets = np.divmod(pos, n)
    rows = np.empty(batch_size, np.int64)
    for e in np.unique(epochs):
      perm = np.random.default_rng([seed, stream, int(e)]).permutation(n)
      sel = epochs == e
      rows[sel] = idx[perm[offsets[sel]]]
    return rows, np.ones(batch_size, np.float32)

  return rows_at
