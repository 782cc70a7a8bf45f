"""Host-side reference sampling for SOL batches (numpy, seeded by the caller)."""

from typing import Callable

import numpy as np

__all__ = ["sample_references", "sample_pairs", "LabelBook", "make_pair_batches"]


def sample_references(labels: np.ndarray, base_idx: np.ndarray, tau: int,
                      rng: np.random.Generator, order: np.ndarray | None = None) -> np.ndarray:
  """One reference per base: an order class is drawn uniformly from {>, <, ≈} (w.r.t. the
  noisy labels and τ), then a uniform training instance in that class; an empty class falls
  back to the next one (≈ is never empty: it holds the base's own rank).

  Args:
    labels: [N] int current noisy ranks; base_idx: [B] int; rng: seeded numpy Generator;
    order: `np.argsort(labels, kind="stable")` if the caller keeps it (`LabelBook`), else computed.
  Returns:
    [B] int64 indices of references.
  """
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


def sample_pairs(ranks: np.ndarray, tau: int, per_class: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """SOL's exact pair sampler (spec §2.5) on the host, without enumerating the M(M−1)/2 pairs.

  The distribution is that of the in-step `losses.sample_pairs` (pool = 0): every unordered pair
  of the M batch rows is oriented by a fair coin and classed as ">" (base rank > ref rank + τ),
  "<" or "≈"; each class gives a uniform subset of min(per_class, size) pairs. Here: sort the
  ranks; far partners above sorted position a are the positions ≥ hi(a), similar ones lie in
  (a, hi(a)); prefix sums index both kinds of unordered pairs. The coins split the n_far far pairs
  into ">" (larger rank first) and "<" with n_> ~ Binomial(n_far, ½), so a uniform sample of
  k_> + k_< far pairs in random order, its first k_> = min(per_class, n_>) to ">" and the rest
  (k_< = min(per_class, n_far − n_>)) to "<", has the distribution of the two class subsets.
  Similar pairs: a uniform subset, each oriented by a coin.

  Args:
    ranks: [M] int noisy ranks of the batch rows; rng: seeded numpy Generator.
  Returns:
    base, ref: [3·k] int32 row indices (">" block, "<" block, "≈" block, k = min(per_class,
    M(M−1)/2)); valid: [3·k] float32, 0 for padding.
  """
  ranks = np.asarray(ranks)
  m = ranks.size
  k = min(per_class, m * (m - 1) // 2)
  order = np.argsort(ranks, kind="stable")
  s = ranks[order]
  pos = np.arange(m)
  hi = np.searchsorted(s, s + tau, side="right")
  n_far_a, n_sim_a = m - hi, hi - pos - 1
  far_cum, sim_cum = np.cumsum(n_far_a), np.cumsum(n_sim_a)
  n_far, n_sim = int(far_cum[-1]), int(sim_cum[-1])

  def rows(ordinals, cum, count_a, first_b):
    a = np.searchsorted(cum, ordinals, side="right")
    return order[a], order[first_b[a] + ordinals - (cum[a] - count_a[a])]

  base, ref, valid = (np.zeros(3 * k, np.int32) for _ in range(3))
  valid = valid.astype(np.float32)
  n_gt = int(rng.binomial(n_far, 0.5)) if n_far else 0
  k_gt, k_lt = min(k, n_gt), min(k, n_far - n_gt)
  far = rng.choice(n_far, k_gt + k_lt, replace=False) if k_gt + k_lt else np.zeros(0, np.int64)
  lo, up = rows(far, far_cum, n_far_a, hi)
  base[:k_gt], ref[:k_gt] = up[:k_gt], lo[:k_gt]                     # ">": larger rank first
  base[k:k + k_lt], ref[k:k + k_lt] = lo[k_gt:], up[k_gt:]           # "<": smaller rank first
  k_sim = min(k, n_sim)
  sim = rng.choice(n_sim, k_sim, replace=False) if k_sim else np.zeros(0, np.int64)
  lo, up = rows(sim, sim_cum, n_sim_a, pos + 1)
  flip = rng.random(k_sim) < 0.5
  base[2 * k:2 * k + k_sim], ref[2 * k:2 * k + k_sim] = np.where(flip, up, lo), np.where(flip, lo, up)
  valid[:k_gt], valid[k:k + k_lt], valid[2 * k:2 * k + k_sim] = 1.0, 1.0, 1.0
  return base, ref, valid


class LabelBook:
  """Host copy of the current noisy training labels that the batch function reads.

  The refresh hook updates it after relabelling; on resume, `update` it from the restored
  `state.extra["labels"]` before training so batches match an uninterrupted run. It keeps the
  labels' stable sort order, so reference sampling does not sort N labels every step.
  """

  def __init__(self, labels: np.ndarray):
    self.update(labels)

  def update(self, labels: np.ndarray) -> None:
    self.labels = np.asarray(labels, np.int32).copy()
    self.order = np.argsort(self.labels, kind="stable")


def make_pair_batches(x: np.ndarray, book: LabelBook, batch_size: int, *, seed: int, tau: int,
                      pairs_per_class: int = 0) -> Callable[[int], dict[str, np.ndarray]]:
  """`batch_at(step)` -> {"x": [2B, ...], "idx": [2B] int32}: B bases from a seeded per-epoch
  permutation (drop last), then one reference per base (`sample_references`, seeded by step).
  pairs_per_class > 0 adds the loss's pairs drawn here (`sample_pairs`, same generator):
  "pair_base", "pair_ref" [3k] int32 indices into the 2B rows and "pair_valid" [3k] float32."""
  n = len(x)
  if batch_size > n:
    raise ValueError(f"batch_size {batch_size} exceeds the {n} training rows")
  per_epoch = n // batch_size

  def batch_at(step: int) -> dict[str, np.ndarray]:
    epoch, i = divmod(int(step), per_epoch)
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    base = perm[i * batch_size:(i + 1) * batch_size]
    rng = np.random.default_rng([seed, 1, int(step)])
    ref = sample_references(book.labels, base, tau, rng, book.order)
    idx = np.concatenate([base, ref]).astype(np.int32)
    out = {"x": x[idx], "idx": idx}
    if pairs_per_class:
      out["pair_base"], out["pair_ref"], out["pair_valid"] = sample_pairs(book.labels[idx], tau, pairs_per_class, rng)
    return out

  return batch_at
