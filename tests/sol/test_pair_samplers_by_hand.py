"""SOL's in-step pair samplers against numpy versions that read the same random draws.

`losses.sample_pairs` (exact, pooled and with-replacement paths) is rebuilt here from its
documented rule: the uniforms are drawn with the same keys and split as the sampler draws them,
then classes, ranking, orientation and padding are done in numpy. Any change to the rule (a
class boundary, an orientation, a count, a key split) changes the pairs.
"""

import jax
import numpy as np
import pytest

from jaxml.sol import losses as L

TAU = 1
RANKS = np.array([0, 0, 1, 2, 5, 5, 8, 9, 9, 3, 4, 7], np.int32)


def _classes(diff: np.ndarray) -> np.ndarray:
  return np.where(diff > TAU, 0, np.where(diff < -TAU, 1, 2))


def _top_per_class(base, ref, score, ranks, per_class):
  cls = _classes(ranks[base] - ranks[ref])
  per_class = min(per_class, base.size)
  out_b, out_r, out_v = [], [], []
  for c in range(3):
    masked = np.where(cls == c, score, -1.0)
    order = np.argsort(-masked, kind="stable")[:per_class]
    out_b.append(base[order])
    out_r.append(ref[order])
    out_v.append((masked[order] >= 0.0).astype(np.float32))
  return np.concatenate(out_b), np.concatenate(out_r), np.concatenate(out_v)


def _exact(key, ranks, per_class):
  iu, ku = np.triu_indices(ranks.size, 1)
  u = np.asarray(jax.random.uniform(key, (iu.size,)))
  flip = u < 0.5
  score = np.where(flip, 2.0 * u, 2.0 * u - 1.0)
  return _top_per_class(np.where(flip, ku, iu), np.where(flip, iu, ku), score, ranks, per_class)


def _pooled(key, ranks, per_class, pool):
  m = ranks.size
  k1, k2, k3 = jax.random.split(key, 3)
  base = np.asarray(jax.random.randint(k1, (pool,), 0, m))
  ref = (base + np.asarray(jax.random.randint(k2, (pool,), 1, m))) % m
  return _top_per_class(base, ref, np.asarray(jax.random.uniform(k3, (pool,))), ranks, per_class)


def _with_replacement(key, ranks, per_class):
  iu, ku = np.triu_indices(ranks.size, 1)
  diff = ranks[iu] - ranks[ku]
  far = np.abs(diff) > TAU
  u_key, flip_key = jax.random.split(key)
  u = np.asarray(jax.random.uniform(u_key, (3, per_class)))
  flip = np.asarray(jax.random.uniform(flip_key, (per_class,))) < 0.5
  out_b, out_r, out_v = [], [], []
  for c, members in enumerate((far, far, ~far)):
    idx = np.flatnonzero(members)
    n = idx.size
    pick = idx[np.minimum(np.floor(u[c] * n).astype(int), max(n - 1, 0))] if n else np.full(per_class, iu.size - 1)
    a, b = iu[pick], ku[pick]
    if c < 2:
      keep = (ranks[a] > ranks[b]) == (c == 0)       # ">" puts the larger rank first, "<" the smaller
      base, ref = np.where(keep, a, b), np.where(keep, b, a)
    else:
      base, ref = np.where(flip, b, a), np.where(flip, a, b)
    out_b.append(base)
    out_r.append(ref)
    out_v.append((np.arange(per_class) < n).astype(np.float32))
  return np.concatenate(out_b), np.concatenate(out_r), np.concatenate(out_v)


def _check(got, want):
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), w)
  assert np.asarray(got.base).dtype == np.asarray(got.ref).dtype == np.int32       # indices
  assert np.asarray(got.valid).dtype == np.float32


@pytest.mark.parametrize("seed,per_class", [(0, 5), (1, 40), (2, 70)])
def test_exact_sampler_equals_the_numpy_rule(seed, per_class):
  key = jax.random.key(seed)
  _check(L.sample_pairs(key, RANKS, TAU, per_class), _exact(key, RANKS, per_class))


@pytest.mark.parametrize("seed,pool", [(3, 20), (4, 65)])
def test_pooled_sampler_equals_the_numpy_rule(seed, pool):
  key = jax.random.key(seed)
  got = L.sample_pairs(key, RANKS, TAU, 6, pool=pool)
  _check(got, _pooled(key, RANKS, 6, pool))
  assert np.all(np.asarray(got.base) != np.asarray(got.ref))
  # a pool as large as the exact candidate set falls back to the exact sampler
  _check(L.sample_pairs(key, RANKS, TAU, 6, pool=66), _exact(key, RANKS, 6))


@pytest.mark.parametrize("seed,ranks", [(5, RANKS), (6, np.array([0, 0, 0, 0, 0, 0, 0, 9], np.int32)),
                                        (7, np.array([4, 4, 4, 4, 4], np.int32))])
def test_with_replacement_sampler_equals_the_numpy_rule(seed, ranks):
  key = jax.random.key(seed)
  got = L.sample_pairs(key, ranks, TAU, 9, pool=3, replacement=True)     # pool is ignored
  want = _with_replacement(key, ranks, 9)
  np.testing.assert_array_equal(np.asarray(got.valid), want[2])
  ok = want[2] > 0                                                        # padding rows: any index
  np.testing.assert_array_equal(np.asarray(got.base)[ok], want[0][ok])
  np.testing.assert_array_equal(np.asarray(got.ref)[ok], want[1][ok])
  assert np.asarray(got.base).dtype == np.asarray(got.ref).dtype == np.int32
  assert np.asarray(got.valid).dtype == np.float32
