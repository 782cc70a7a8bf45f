"""Batch samplers over numpy arrays (numpy only, so data loaders and methods share them): seeded per-epoch shuffles with random access by step."""

from typing import Callable, Mapping

import numpy as np

__all__ = ["epoch_batches", "process_slice"]


def epoch_batches(arrays: Mapping[str, np.ndarray], batch_size: int, *,
                  seed: int) -> Callable[[int], dict[str, np.ndarray]]:
  """Returns `batch_at(step)`: rows of a seeded permutation of epoch `step // (rows // batch_size)`.

  Random access makes resume exact: the batch at step k never depends on earlier calls.
  The last partial batch of an epoch is dropped (fixed shapes, no recompiles).
  """
  sizes = {k: len(v) for k, v in arrays.items()}
  if len(set(sizes.values())) != 1:
    raise ValueError(f"arrays have different numbers of rows: {sizes}")
  n = next(iter(sizes.values()))
  if batch_size <= 0:
    raise ValueError(f"batch_size must be positive, got {batch_size}")
  if batch_size > n:
    raise ValueError(f"batch_size {batch_size} exceeds the {n} rows available")
  per_epoch = n // batch_size

  def batch_at(step: int) -> dict[str, np.ndarray]:
    epoch, i = divmod(int(step), per_epoch)
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    rows = perm[i * batch_size:(i + 1) * batch_size]
    return {k: v[rows] for k, v in arrays.items()}

  return batch_at


def process_slice(batch: Mapping[str, np.ndarray], process_index: int, process_count: int) -> dict[str, np.ndarray]:
  """This process's contiguous share of a global batch (what `shard_batch` expects per process)."""
  def take(v):
    if len(v) % process_count:
      raise ValueError(f"global batch of {len(v)} rows does not split over {process_count} processes")
    per = len(v) // process_count
    return v[process_index * per:(process_index + 1) * per]
  return {k: take(v) for k, v in batch.items()}
