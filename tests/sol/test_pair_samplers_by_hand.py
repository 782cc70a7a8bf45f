"""SOL's in-step pair sampler against a numpy version that reads the same random draws.

`losses.sample_pairs` is rebuilt here from its documented rule: the uniforms are drawn with the same keys
as the sampler draws them, then classes, ranking, orientation and padding are done in numpy. Any change to
the rule (a class boundary, an orientation, a count, a key split) changes the pairs.
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


def _check(got, want):
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), w)
  assert np.asarray(got.base).dtype == np.asarray(got.ref).dtype == np.int32       # indices
  assert np.asarray(got.valid).dtype == np.float32


@pytest.mark.parametrize("seed,per_class", [(0, 5), (1, 40), (2, 70)])
def test_exact_sampler_equals_the_numpy_rule(seed, per_class):
  key = jax.random.key(seed)
  _check(L.sample_pairs(key, RANKS, TAU, per_class), _exact(key, RANKS, per_class))
