"""Relabelling, reference sampling, noise models and ranking metrics."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.data import countdots, ordinal_noise
from jaxml.metrics import ranking
from jaxml.sol.pairs import LabelBook, make_pair_batches, sample_references
from jaxml.sol.refine import refine_labels


@pytest.mark.parametrize("rule", ["constant_rate_mean", "round_mean", "half_delta", "fixed"])
def test_relabelling_is_noop_when_delta_is_zero(rule):
  labels = np.array([0, 1, 2, 3, 4, 5, 2, 2])
  out = refine_labels(jnp.asarray(labels), jnp.asarray(labels), eta=0.9, step_rule=rule)
  np.testing.assert_array_equal(out.labels, labels)
  assert not np.any(np.asarray(out.flagged))


def test_relabelling_moves_outliers_toward_prediction():
  labels = np.array([5, 2, 2, 2, 2, 0])
  pred = jnp.asarray([1, 2, 2, 2, 3, 4])  # δ = [4, 0, 0, 0, −1, −4]; mean|δ| = 1.5
  out = refine_labels(pred, jnp.asarray(labels), eta=0.9, step_rule="constant_rate_mean")
  np.testing.assert_array_equal(out.flagged, [True, False, False, False, True, True])
  np.testing.assert_array_equal(out.labels, labels)          # authors' floor(0.75) = 0: flagged, not moved
  out = refine_labels(pred, jnp.asarray(labels), eta=0.9)    # round_mean: max(1, round(0.75)) = 1
  np.testing.assert_array_equal(out.labels, [4, 2, 2, 2, 3, 1])
  out = refine_labels(pred, jnp.asarray(labels), eta=0.9, step_rule="half_delta")
  np.testing.assert_array_equal(out.labels, [3, 2, 2, 2, 2, 2])   # 5 − 2, 2 (|δ|=1 → 0), 0 + 2
  big = np.array([5, 5, 0, 0])
  out = refine_labels(jnp.asarray([0, 5, 5, 0]), jnp.asarray(big), eta=0.9, step_rule="constant_rate_mean")
  # δ = [5, 0, −5, 0], mean |δ| = 2.5 → c = 1; per-class max is 5 → flagged where |δ| = 5
  np.testing.assert_array_equal(out.labels, [4, 5, 1, 0])


def test_relabelling_never_passes_the_prediction_and_clips_only_at_zero():
  labels = jnp.asarray([40, 0, 1, 30])
  pred = jnp.asarray([39, 20, 30, 30])     # δ = [1, −20, −29, 0]; mean|δ| = 12.5 → step 6
  out = refine_labels(pred, labels, eta=0.5)
  # 40 moves by at most |δ| = 1; labels above the old top rank are allowed (no upper clip)
  np.testing.assert_array_equal(out.labels, [39, 6, 7, 30])
  assert int(out.labels.min()) >= 0


def test_sample_references_classes():
  labels = np.array([0, 0, 1, 2, 3, 5, 5, 6, 8, 9] * 5)
  rng = np.random.default_rng(0)
  base = np.arange(50)
  counts = np.zeros(3)
  for _ in range(20):
    ref = sample_references(labels, base, 1, rng)
    d = labels[base] - labels[ref]
    counts += [np.sum(d > 1), np.sum(d < -1), np.sum(np.abs(d) <= 1)]
  assert np.all(counts > 0.2 * counts.sum())      # roughly balanced draw of the order class
  # a base at the top rank has no "less" references: falls back, never out of range
  ref = sample_references(np.array([9, 9, 9]), np.array([0, 1, 2]), 1, rng)
  assert np.all((ref >= 0) & (ref < 3))


def test_pair_batches_are_seeded_and_read_the_label_book():
  x = np.arange(40, dtype=np.float32)[:, None]
  book = LabelBook(np.repeat(np.arange(4), 10))
  f = make_pair_batches(x, book, 8, seed=3, tau=0)
  a, b = f(5), f(5)
  np.testing.assert_array_equal(a["idx"], b["idx"])
  assert a["x"].shape == (16, 1) and a["idx"].dtype == np.int32
  book.update(np.zeros(40, np.int32))          # all equal: every reference is "similar"
  assert f(5)["idx"][:8].tolist() == a["idx"][:8].tolist()   # bases unchanged


@pytest.mark.parametrize("kind", ordinal_noise.NOISE_KINDS)
def test_noise_models_seeded_and_in_range(kind):
  rng = np.random.default_rng(0)
  y = rng.integers(0, 10, 4000)
  x = y[:, None] + rng.normal(size=(4000, 3))
  a, rate_a = ordinal_noise.add_label_noise(y, 10, kind, 0.4, seed=1, x=x)
  b, rate_b = ordinal_noise.add_label_noise(y, 10, kind, 0.4, seed=1, x=x)
  np.testing.assert_array_equal(a, b)
  assert rate_a == rate_b == pytest.approx(np.mean(a != y))
  assert a.min() >= 0 and a.max() <= 9 and a.dtype == np.int32
  if kind == "none":
    assert rate_a == 0
  else:
    assert rate_a > 0.2


def test_noise_model_statistics():
  y = np.full(20000, 5)
  g, _ = ordinal_noise.add_label_noise(y, 11, "gaussian", 0.1, seed=0)   # s = 1.0, no clipping at 5 ± 5
  assert np.std(g - y) == pytest.approx(np.sqrt(1.0 + 1 / 12), rel=0.05)   # rounding adds 1/12
  adj, rate = ordinal_noise.add_label_noise(y, 11, "adjacent", 0.3, seed=0)
  assert set(np.unique(adj - y)) == {-1, 0, 1} and rate == pytest.approx(0.3, abs=0.02)
  sym, rate = ordinal_noise.add_label_noise(y, 11, "symmetric", 0.4, seed=0)
  assert rate == pytest.approx(0.4 * 10 / 11, abs=0.02)     # a uniform draw can hit the true rank
  sk, _ = ordinal_noise.add_label_noise(y, 11, "skewed", 0.1, seed=0)
  assert np.all(sk >= y)
  edge, _ = ordinal_noise.add_label_noise(np.zeros(1000, int), 5, "adjacent", 1.0, seed=0)
  assert np.all(edge == 1)                       # reflected at the lower end
  with pytest.raises(ValueError, match="input_dependent noise needs"):
    ordinal_noise.add_label_noise(y, 11, "input_dependent", 0.2, seed=0)
  with pytest.raises(ValueError, match="unknown noise kind"):
    ordinal_noise.add_label_noise(y, 11, "bogus", 0.2, seed=0)


def test_input_dependent_noise_is_larger_where_ridge_fails():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6000, 2))
  y = np.clip(np.rint(3 * x[:, 0] + 10), 0, 20).astype(int)
  y[:3000] = rng.integers(0, 21, 3000)          # first half not predictable from x
  noisy, _ = ordinal_noise.add_label_noise(y, 21, "input_dependent", 0.1, seed=0, x=x)
  hard, easy = np.abs(noisy - y)[:3000].mean(), np.abs(noisy - y)[3000:].mean()
  assert hard > 2 * easy


def test_ranking_metrics():
  pred, y = np.array([0, 2, 3, 5]), np.array([0, 1, 3, 2])
  assert ranking.mae(pred, y) == pytest.approx(1.0)
  assert ranking.zero_one(pred, y) == pytest.approx(0.5)
  assert ranking.cumulative_score(pred, y, 1) == pytest.approx(0.75)
  p, r = ranking.flag_precision_recall([1, 1, 0, 0], [1, 0, 1, 0])
  assert (p, r) == (0.5, 0.5)
  assert ranking.wilcoxon_paired([1, 2, 3], [1, 2, 3]) == 1.0
  a = np.arange(10.0)
  assert ranking.wilcoxon_paired(a, a + 1.0 + 0.01 * a) < 0.01


def test_countdots_is_seeded_and_counts_blobs():
  d = countdots.make_countdots(num_train=40, num_test=8, num_classes=6, seed=1)
  e = countdots.make_countdots(num_train=40, num_test=8, num_classes=6, seed=1)
  np.testing.assert_array_equal(d["x_train"], e["x_train"])
  assert d["x_train"].shape == (40, 28, 28) and d["x_train"].dtype == np.float32
  assert d["x_train"].min() >= 0 and d["x_train"].max() <= 1
  bright = (d["x_train"] > 0.5).sum((1, 2))
  assert np.corrcoef(bright, d["y_train"])[0, 1] > 0.8     # more blobs, more bright pixels


def test_open_range_noise_clips_only_at_zero_and_scales_with_the_range():
  y = np.full(20000, 3)
  low, _ = ordinal_noise.add_label_noise(y, 30, "gaussian", 0.4, seed=0, scale=29.0, clip="low")
  assert low.min() == 0 and low.max() > 29                   # runs past the clean top rank
  assert np.mean(low == 0) > 0.3                             # P(3 + ε ≤ 0.5) with s = 11.6 ≈ 0.41
  none, _ = ordinal_noise.add_label_noise(y, 30, "gaussian", 0.4, seed=0, scale=29.0, clip="none")
  assert none.min() < 0
  assert np.std(none - y) == pytest.approx(0.4 * 29.0, rel=0.03)
  both, _ = ordinal_noise.add_label_noise(y, 30, "gaussian", 0.4, seed=0, clip="both")
  assert both.min() == 0 and both.max() == 29
  assert ordinal_noise.noisy_rank_count(low, y) == int(low.max()) + 1
  with pytest.raises(ValueError, match="clip mode"):
    ordinal_noise.add_label_noise(y, 30, "gaussian", 0.4, seed=0, clip="top")


def test_user_defined_noise_model():
  """A custom model (here: every label pushed up by `rate · scale`, rounded) as a function argument."""
  def shift_up(y, rate, rng, *, scale, x):
    del rng, x
    return y + rate * scale

  y = np.arange(10)
  noisy, rate = ordinal_noise.add_label_noise(y, 10, shift_up, 0.25, seed=0, scale=8.0, clip="low")
  np.testing.assert_array_equal(noisy, y + 2)
  assert rate == 1.0 and noisy.dtype == np.int32
  clipped, _ = ordinal_noise.add_label_noise(y, 10, shift_up, 0.25, seed=0, scale=8.0)   # clip="both"
  assert clipped.max() == 9
  with pytest.raises(ValueError, match="shape"):
    ordinal_noise.add_label_noise(y, 10, lambda y, r, g, *, scale, x: y[:3], 0.1, seed=0)
