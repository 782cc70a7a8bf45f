"""Host-side reference sampling for SOL batches (numpy, seeded by the caller)."""

from typing import Callable

import numpy as np

__all__ = ["sample_references", "LabelBook", "make_pair_batches"]


def sample_references(labels: np.ndarray, base_idx: np.ndarray, tau: int,
                      rng: np.random.Generator) -> np.ndarray:
  """One reference per base: an order class is drawn uniformly from {>, <, ≈} (w.r.t. the
  noisy labels and τ), then a uniform training instance in that class; an empty class falls
  back to the next one (≈ is never empty: it holds the base's own rank).

  Args:
    labels: [N] int current noisy ranks; base_idx: [B] int; rng: seeded numpy Generator.
  Returns:
    [B] int64 indices of references.
  """
  labels = np.asarray(labels)
  order = np.argsort(labels, kind="stable")
  sorted_labels = labels[order]
  r = labels[base_idx]
  n = labels.size
  lt = np.searchsorted(sorted_labels, r - tau, side="left")       # labels < r − τ
  le = np.searchsorted(sorted_labels, r + tau, side="right")      # labels ≤ r + τ
  # ranges in sorted order: greater-than-ref (ref below) [0, lt), less [le, n), similar [lt, le)
  lo = np.stack([np.zeros_like(lt), le, lt], 1)
  hi = np.stack([lt, np.full_like(le, n), le], 1)
  first = rng.integers(0, 3, size=r.size)
  u = rng.random(r.size)
  chosen_lo, chosen_hi = np.empty_like(lt), np.empty_like(lt)
  done = np.zeros(r.size, bool)
  for shift in range(3):
    cls = (first + shift) % 3
    a, b = lo[np.arange(r.size), cls], hi[np.arange(r.size), cls]
    take = ~done & (b > a)
    chosen_lo[take], chosen_hi[take] = a[take], b[take]
    done |= take
  pos = chosen_lo + np.floor(u * (chosen_hi - chosen_lo)).astype(np.int64)
  return order[np.minimum(pos, chosen_hi - 1)]


class LabelBook:
  """Host copy of the current noisy training labels that the batch function reads.

  The refresh hook updates it after relabelling; on resume, `update` it from the restored
  `state.extra["labels"]` before training so batches match an uninterrupted run.
  """

  def __init__(self, labels: np.ndarray):
    self.labels = np.asarray(labels, np.int32).copy()

  def update(self, labels: np.ndarray) -> None:
    self.labels = np.asarray(labels, np.int32).copy()


def make_pair_batches(x: np.ndarray, book: LabelBook, batch_size: int, *, seed: int,
                      tau: int) -> Callable[[int], dict[str, np.ndarray]]:
  """`batch_at(step)` -> {"x": [2B, ...], "idx": [2B] int32}: B bases from a seeded per-epoch
  permutation (drop last), then one reference per base (`sample_references`, seeded by step)."""
  n = len(x)
  if batch_size > n:
    raise ValueError(f"batch_size {batch_size} exceeds the {n} training rows")
  per_epoch = n // batch_size

  def batch_at(step: int) -> dict[str, np.ndarray]:
    epoch, i = divmod(int(step), per_epoch)
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    base = perm[i * batch_size:(i + 1) * batch_size]
    ref = sample_references(book.labels, base, tau, np.random.default_rng([seed, 1, int(step)]))
    idx = np.concatenate([base, ref]).astype(np.int32)
    return {"x": x[idx], "idx": idx}

  return batch_at
