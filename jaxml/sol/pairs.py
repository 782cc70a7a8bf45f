"""Host-side reference sampling for SOL batches (numpy, seeded by the caller)."""

from typing import Callable

import numpy as np

from jaxml import core

__all__ = ["sample_references", "sample_pairs", "sample_pairs_rows", "LabelBook", "make_pair_batches"]


def sample_references(labels: np.ndarray, base_idx: np.ndarray, tau: int,
                      rng: np.random.Generator, order: np.ndarray | None = None) -> np.ndarray:
  """One reference per base [B] (int64 indices): an order class drawn uniformly from {>, <, ≈} (noisy labels
  [N], τ), then a uniform training instance in it; an empty class falls back to the next (≈ always holds
  the base's own rank). `order`: `np.argsort(labels, kind="stable")` if the caller keeps it (`LabelBook`)."""
  labels = np.asarray(labels)
  order = np.argsort(labels, kind="stable") if order is None else order
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
  rows = np.arange(r.size)[:, None]
  cand = (first[:, None] + np.arange(3)[None, :]) % 3                 # preference order of classes
  nonempty = hi[rows, cand] > lo[rows, cand]
  cls = cand[rows[:, 0], np.argmax(nonempty, axis=1)]                 # first non-empty (≈ never is)
  chosen_lo, chosen_hi = lo[rows[:, 0], cls], hi[rows[:, 0], cls]
  pos = chosen_lo + np.floor(u * (chosen_hi - chosen_lo)).astype(np.int64)
  return order[np.minimum(pos, chosen_hi - 1)]


def _row_searchsorted(sorted_rows: np.ndarray, queries: np.ndarray, side: str) -> np.ndarray:
  """np.searchsorted per row of [R, M] non-decreasing int rows ([R, Q] queries), in one call:
  each row is shifted into its own disjoint value range."""
  r = sorted_rows.shape[0]
  lo = min(int(sorted_rows.min()), int(queries.min()))
  span = max(int(sorted_rows.max()), int(queries.max())) - lo + 1
  shift = (np.arange(r, dtype=np.int64) * span)[:, None]
  flat = (sorted_rows.astype(np.int64) - lo + shift).ravel()
  return np.searchsorted(flat, (queries.astype(np.int64) - lo + shift).ravel(), side=side).reshape(
      queries.shape) - (np.arange(r) * sorted_rows.shape[1])[:, None]


def _floyd_rows(counts: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
  """Per row, a uniform random min(k, n)-subset of {0..n−1} (Floyd's algorithm, vectorised over
  rows; for j = n−k..n−1 add t ~ U{0..j}, or j if t is taken): [R, k] int64, −1 for padding."""
  u = rng.random((k, counts.size))
  j = counts[None, :] - k + np.arange(k)[:, None]                      # [k, R]; the draws t do not depend
  t = np.minimum(np.floor(u * (j + 1)).astype(np.int64), j)           # on earlier picks, only "taken" does
  chosen = np.full((k, counts.size), -1, np.int64)
  for i in range(k):
    taken = (chosen[:i] == t[i]).any(0)
    chosen[i] = np.where(j[i] >= 0, np.where(taken, j[i], t[i]), -1)
  return chosen.T


def sample_pairs_rows(ranks: np.ndarray, tau: int, per_class: int,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """SOL's exact pair sampler (spec §2.5) for R batches at once ([R, M] ranks -> [R, 3k] base, ref, valid), per
  row the distribution of `losses.sample_pairs` without enumerating the M(M−1)/2 pairs: sorted ranks and prefix
  sums index the far and similar pairs, Floyd's algorithm picks the uniform subsets, a random key per pick the
  order of the far pairs before the ">" / "<" split (n_> ~ Binomial(n_far, ½))."""
  ranks = np.asarray(ranks)
  r, m = ranks.shape
  k = min(per_class, m * (m - 1) // 2)
  order = np.argsort(ranks, axis=1, kind="stable")
  s = np.take_along_axis(ranks, order, 1)
  pos = np.broadcast_to(np.arange(m), (r, m))
  hi = _row_searchsorted(s, s + tau, "right")
  n_far_a, n_sim_a = m - hi, hi - pos - 1
  far_cum, sim_cum = np.cumsum(n_far_a, 1), np.cumsum(n_sim_a, 1)
  n_far, n_sim = far_cum[:, -1], sim_cum[:, -1]
  rows = np.arange(r)[:, None]

  def pairs_of(ordinals, cum, count_a, first_b):
    o = np.maximum(ordinals, 0)
    a = np.minimum(_row_searchsorted(cum, o, "right"), m - 1)
    b = np.minimum(first_b[rows, a] + o - (cum[rows, a] - count_a[rows, a]), m - 1)
    return order[rows, a], order[rows, b]

  n_gt = rng.binomial(n_far, 0.5)
  k_gt, k_lt = np.minimum(k, n_gt), np.minimum(k, n_far - n_gt)
  far = _floyd_rows(n_far, 2 * k, rng)
  far = np.take_along_axis(far, np.argsort(np.where(far >= 0, rng.random(far.shape), 2.0), 1), 1)  # random order
  slot = np.arange(k)[None, :]
  gt_lo, gt_hi = pairs_of(far[:, :k], far_cum, n_far_a, hi)
  lt_lo, lt_hi = pairs_of(np.take_along_axis(far, np.minimum(k_gt[:, None] + slot, 2 * k - 1), 1),
                          far_cum, n_far_a, hi)
  sim = _floyd_rows(n_sim, k, rng)
  sim_lo, sim_hi = pairs_of(sim, sim_cum, n_sim_a, pos + 1)
  flip = rng.random((r, k)) < 0.5
  base = np.concatenate([gt_hi, lt_lo, np.where(flip, sim_hi, sim_lo)], 1).astype(np.int32)
  ref = np.concatenate([gt_lo, lt_hi, np.where(flip, sim_lo, sim_hi)], 1).astype(np.int32)
  valid = np.concatenate([slot < k_gt[:, None], slot < k_lt[:, None], sim >= 0], 1).astype(np.float32)
  return base, ref, valid


def sample_pairs(ranks: np.ndarray, tau: int, per_class: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """SOL's exact pair sampler (spec §2.5) for one batch of ranks [M], the distribution of `losses.sample_pairs`:
  base, ref [3k] int32 (">", "<", "≈" blocks, k = min(per_class, M(M−1)/2)) and valid [3k] float32."""
  base, ref, valid = sample_pairs_rows(np.asarray(ranks)[None], tau, per_class, rng)
  return base[0], ref[0], valid[0]


class LabelBook:
  """Host copy of the current noisy training labels, read by the batch function and kept in stable sort
  order; the refresh hook updates it, and on resume `update` it from `state.extra["labels"]`."""

  def __init__(self, labels: np.ndarray):
    self.version = -1
    self.update(labels)

  def update(self, labels: np.ndarray) -> None:
    self.labels = np.asarray(labels, np.int32).copy()
    self.order = np.argsort(self.labels, kind="stable")
    self.version += 1


def make_pair_batches(x: np.ndarray, book: LabelBook, batch_size: int, *, seed: int, tau: int,
                      pairs_per_class: int = 0, block: int = 1) -> Callable[[int], dict[str, np.ndarray]]:
  """`batch_at(step)` -> {"x": [2B, ...], "idx": [2B] int32}: B bases from a seeded per-epoch permutation, then
  one reference per base; pairs_per_class > 0 adds "pair_base", "pair_ref" [3k] int32 and "pair_valid".
  References and pairs are drawn for `block` steps at once (seeded by the block, redrawn if the book changed);
  with `block` dividing the refresh cadence every batch sees the labels it would step by step."""
  rows = core.epoch_batches({"i": np.arange(len(x))}, batch_size, seed=seed)
  block = max(block, 1)
  cache: dict[str, object] = {"key": None}

  def fill(b: int) -> None:
    base = np.stack([rows(t)["i"] for t in range(b * block, (b + 1) * block)])      # [block, B]
    rng = np.random.default_rng([seed, 2, b])
    ref = sample_references(book.labels, base.ravel(), tau, rng, book.order).reshape(base.shape)
    idx = np.concatenate([base, ref], 1).astype(np.int32)
    cache.update(key=(b, book.version), idx=idx)
    if pairs_per_class:
      cache["pairs"] = sample_pairs_rows(book.labels[idx], tau, pairs_per_class, rng)

  def batch_at(step: int) -> dict[str, np.ndarray]:
    b, row = divmod(int(step), block)
    if cache["key"] != (b, book.version):
      fill(b)
    idx = cache["idx"][row]
    out = {"x": x[idx], "idx": idx}
    if pairs_per_class:
      out["pair_base"], out["pair_ref"], out["pair_valid"] = (a[row] for a in cache["pairs"])
    return out

  return batch_at
