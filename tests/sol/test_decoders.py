"""Every ordinal decoder on hand-made cases with known answers (SOL's three and the baselines' rules),
and the arc geometry that explains the centroid 'collapse'."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.sol import baselines, geometry
from jaxml.sol import decoders as D
from jaxml.sol import losses as L


def _arc(c, sigma=1.0, span=np.pi / 2, per_rank=1):
  ranks = jnp.repeat(jnp.arange(c), per_rank)
  e = geometry.arc_embeddings(c, span / (c - 1))[ranks]
  cent = L.soft_centroids(e, L.gaussian_rows(ranks, c, sigma))
  table = L.gaussian_table(c, sigma)
  return e, ranks, cent, table


def test_nearest_expectation_has_the_documented_edge_bias():
  """Embeddings exactly on an ordered arc, σ = 1, C = 10: argmin S is right in the interior and
  sends ranks 1 and C−2 to the ends (the truncated edge rows have smaller variance)."""
  e, ranks, cent, table = _arc(10)
  pred = np.asarray(D.expectation(D.masked_profile(e, cent, table, jnp.ones(10, bool))))
  np.testing.assert_array_equal(pred, [0, 0, 2, 3, 4, 5, 6, 7, 9, 9])


@pytest.mark.parametrize("c", [10, 30])
def test_profile_position_removes_the_edge_bias(c):
  e, ranks, cent, table = _arc(c)
  valid = jnp.ones(c, bool)
  t = D.profile_position(D.masked_profile(e, cent, table, valid), table, valid)
  np.testing.assert_allclose(np.asarray(t), np.arange(c), atol=0.2)
  # with the identity calibration (training t̂ = labels), the decoder returns every rank
  pred = D.profile(t, t, ranks, valid)
  np.testing.assert_array_equal(np.asarray(pred), np.arange(c))


def test_profile_calibration_undoes_a_known_spread_and_respects_the_rank_set():
  t_train = jnp.asarray([0.0, 10.0, 20.0, 30.0])          # positions spread 2× around the labels' mean
  labels = jnp.asarray([5, 10, 15, 20])
  valid = jnp.zeros(40, bool).at[5:21].set(True)
  pred = D.profile(jnp.asarray([15.0, 2.0, 60.0]), t_train, labels, valid)
  # a + b t with b = 0.5, a = 5: 15 -> 12.5 -> 12 (round half to even), 2 -> 6, 60 -> 35 -> clipped to 20
  np.testing.assert_array_equal(np.asarray(pred), [12, 6, 20])


def test_masked_ranks_are_never_predicted():
  e, ranks, cent, table = _arc(10)
  valid = jnp.ones(10, bool).at[0].set(False).at[9].set(False)
  pred = np.asarray(D.expectation(D.masked_profile(e, cent, table, valid)))
  assert pred.min() == 1 and pred.max() == 8


def test_knn_rounds_to_nearest_and_excludes_self():
  train = jnp.asarray([[1.0, 0.0], [0.99, 0.14], [0.98, 0.2], [0.0, 1.0]])
  train = train / jnp.linalg.norm(train, axis=-1, keepdims=True)
  labels = jnp.asarray([2, 3, 3, 9])
  q = jnp.asarray([[1.0, 0.0]])
  # 3 nearest: labels 2, 3, 3 -> mean 2.67 -> 3 (a floor would give 2)
  assert int(D.knn(q, train, labels, 3)[0]) == 3
  # 2 nearest: 2, 3 -> 2.5 -> 2 (round half to even); not 3 from a ceiling
  assert int(D.knn(q, train, labels, 2)[0]) == 2
  # decoding the training set: row 0 must not see itself -> neighbours 1, 2 -> 3
  assert int(D.knn(train[:1], train, labels, 2, query_idx=jnp.asarray([0]))[0]) == 3


def test_decode_all_rows_follow_DECODERS():
  e, ranks, cent, table = _arc(10, per_rank=6)
  valid = jnp.ones(10, bool)
  t = D.profile_position(D.masked_profile(e, cent, table, valid), table, valid)
  logp = D.log_prior(ranks, 10)
  extra = {"centroids": cent, "valid": valid, "embeddings": e, "labels": ranks, "t_train": t,
           "log_prior": logp, "kappa": D.fit_kappa(D.masked_dists(e, cent, valid), ranks, logp)}
  out = np.asarray(D.decode_all(e[::6], extra, table, k=5, window=4))
  assert out.shape == (5, 10) and D.DECODERS == ("expectation", "profile", "knn", "knn_median", "posterior_median")
  np.testing.assert_array_equal(out[1], np.arange(10))       # profile: exact
  np.testing.assert_array_equal(out[2], np.arange(10))       # 5-NN inside a rank's 6 copies: exact
  np.testing.assert_array_equal(out[3], np.arange(10))       # their median too
  np.testing.assert_array_equal(out[4], np.arange(10))       # posterior median: no edge bias on clean labels
  assert out[0][1] == 0                                      # expectation: edge bias


def test_knn_median_differs_from_the_mean_on_a_skewed_boundary_case():
  """Neighbour labels 0, 0, 0, 5, 9 (noise clipped at 0 piles labels there): median 0, mean 2.8 -> 3."""
  train = jnp.asarray([[1.0, 0.0], [0.99, 0.14], [0.98, 0.2], [0.9, 0.44], [0.8, 0.6], [0.0, 1.0]])
  train = train / jnp.linalg.norm(train, axis=-1, keepdims=True)
  labels = jnp.asarray([0, 0, 0, 5, 9, 30])
  q = jnp.asarray([[1.0, 0.0]])
  assert int(D.knn(q, train, labels, 5)[0]) == 3
  assert int(D.knn_median(q, train, labels, 5)[0]) == 0
  # even k: labels 0, 0, 0, 5 -> lower median 0; k = 2 of (0, 0, 0, 5, 9) without the query row 0 -> (0, 0)
  assert int(D.knn_median(q, train, labels, 4)[0]) == 0
  # k = 5 without self (query = row 3, label 5): neighbours 4 (9), 2 (0), 1 (0), 0 (0), 5 (30) -> median 0
  got = D.knn_median(train[3:4], train, labels, 5, query_idx=jnp.asarray([3]))
  assert int(got[0]) == 0 and got.dtype == jnp.int32
  # lower median of an even count: (1, 2, 3, 7) -> 2 (any of 2..3 minimises Σ|y − r|; the lower one is kept)
  np.testing.assert_array_equal(D.knn_median(q, train, jnp.asarray([7, 2, 3, 1, 40, 50]), 4), [2])


def test_posterior_median_is_the_prior_median_under_flat_distances():
  """d constant: p(l | e) = π_l. π = (.5, .1, .1, .1, .2): median 0 (P(r ≤ 0) = ½), mean 1.4;
  π = (.4, .1, .1, .1, .3): median 1, mean 1.8 -> 2 when rounded."""
  prof = jnp.zeros((1, 5))
  for pri, want in (([.5, .1, .1, .1, .2], 0), ([.4, .1, .1, .1, .3], 1)):
    got = D.posterior_median(prof, jnp.log(jnp.asarray(pri)), jnp.asarray(2.0))
    assert int(got[0]) == want and got.dtype == jnp.int32
  # masked ranks (prior −inf, distance +inf) carry no mass and are never returned
  logp = jnp.log(jnp.asarray([0.0, 0.3, 0.0, 0.2, 0.5]))          # ranks 0 and 2 absent
  prof = jnp.asarray([[jnp.inf, 0.0, jnp.inf, 0.0, 0.0]])
  np.testing.assert_allclose(D.posterior(prof, logp, jnp.asarray(1.0))[0], [0, .3, 0, .2, .5], atol=1e-6)
  assert int(D.posterior_median(prof, logp, jnp.asarray(1.0))[0]) == 3


def test_posterior_median_follows_the_distances_when_the_prior_is_flat():
  """κ d_l = −log w_l with a flat prior gives p = w / Σ w: w = (1, 1, 6, 1, 1) -> median 2;
  w = (6, 1, 1, 1, 1) -> median 0 while the mean is 1.0."""
  for w, want in (([1., 1., 6., 1., 1.], 2), ([6., 1., 1., 1., 1.], 0)):
    kappa = 2.0
    prof = -jnp.log(jnp.asarray([w])) / kappa
    p = D.posterior(prof, jnp.zeros(5), jnp.asarray(kappa))
    np.testing.assert_allclose(p[0], np.asarray(w) / sum(w), rtol=1e-5)
    assert int(D.posterior_median(prof, jnp.zeros(5), jnp.asarray(kappa))[0]) == want


def test_fit_kappa_recovers_the_concentration_of_labels_drawn_from_the_model():
  rng = np.random.default_rng(0)
  n, c, kappa = 4000, 6, 3.0
  prof = rng.uniform(0.0, 1.0, size=(n, c)).astype(np.float32)
  pri = np.asarray([.4, .2, .1, .1, .1, .1])
  logits = -kappa * prof + np.log(pri)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  labels = jnp.asarray((p.cumsum(-1) > rng.uniform(size=(n, 1))).argmax(-1))
  got = float(D.fit_kappa(jnp.asarray(prof), labels, jnp.log(jnp.asarray(pri, jnp.float32)), max_rows=n))
  assert abs(got - kappa) < 0.3
  # labels independent of the profile: κ goes to (near) 0 from any start
  flat = jnp.asarray(rng.choice(c, n, p=pri))
  assert float(D.fit_kappa(jnp.asarray(prof), flat, jnp.log(jnp.asarray(pri, jnp.float32)), max_rows=n)) < 0.3


def test_baseline_decoding_rules_by_hand():
  # CORAL: count of thresholds above ½ (ordered biases make them contiguous)
  coral = baselines.decode_head("coral", {"logits": jnp.asarray([[3.0, 1.0, -1.0, -3.0]])}, 5)
  assert int(coral[0]) == 2
  # CORN: P(r > k) = Π σ(g_j); a late confident "yes" after a "no" does not count
  corn = baselines.decode_head("corn", {"logits": jnp.asarray([[3.0, 3.0, -3.0, 3.0]])}, 5)
  assert int(corn[0]) == 2
  # all thresholds passed -> top rank C−1; none -> 0 (no off-by-one at either end)
  assert int(baselines.decode_head("coral", {"logits": jnp.full((1, 4), 5.0)}, 5)[0]) == 4
  assert int(baselines.decode_head("corn", {"logits": jnp.full((1, 4), -5.0)}, 5)[0]) == 0
  # regression heads: nearest rank, clipped to the rank range
  reg = baselines.decode_head("l1", {"value": jnp.asarray([2.6, 2.4, -3.0, 7.2])}, 5)
  np.testing.assert_array_equal(np.asarray(reg), [3, 2, 0, 4])
  ce = baselines.decode_head("ce", {"logits": jnp.asarray([[0.1, 2.0, 0.3]])}, 3)
  assert int(ce[0]) == 1


def test_arc_loss_prefers_a_margin_set_span_not_a_collapsed_one():
  """Clean labels, C = 30, τ = 3, m = 0.25: SOL's loss on an ideal arc is lowest at a span near
  90°, far above the ~60° 'collapse' seen under noise; a smaller margin prefers a smaller span."""
  total = lambda span, m: float(sum(geometry.arc_loss(30, np.radians(span) / 29, tau=3, margin=m)[:2]))
  assert total(90, 0.25) < total(30, 0.25) and total(90, 0.25) < total(180, 0.25)
  assert total(60, 0.1) < total(90, 0.1)
  arc = geometry.arc_loss(30, np.radians(90) / 29)
  assert abs(float(arc.d)) < 0.05 * float(arc.so)            # L_D is a small part of the loss


def test_reliability_and_centroid_span():
  y = np.arange(10)
  assert geometry.reliability(y, 0.0) == 1.0
  assert geometry.reliability(y, np.std(y)) == pytest.approx(0.5)
  cent = geometry.arc_embeddings(5, np.radians(10))
  span = geometry.centroid_span(np.asarray(cent))
  assert span["end_to_end_deg"] == pytest.approx(40, abs=1e-3)
  assert span["mean_step_deg"] == pytest.approx(10, abs=1e-3)


@pytest.mark.parametrize("n,k", [(5000, 50), (103, 10), (37, 20), (64, 1), (9, 9)])
def test_top_k_is_lax_top_k_including_ties(n, k):
  """The pruned top-k returns exactly lax.top_k's indices: ties (to the lower index), -inf entries
  (the excluded query) and a column count that is not a multiple of k included."""
  rng = np.random.default_rng(n + k)
  cont = rng.normal(size=(16, n)).astype(np.float32)
  ties = rng.integers(0, 4, size=(16, n)).astype(np.float32)   # many equal values at the k-th place
  ties[0, : n // 2] = -np.inf
  for values in (cont, ties, np.sort(cont, -1)):                  # sorted: the top k sit in the last blocks
    want = jax.lax.top_k(jnp.asarray(values), k)[1]
    np.testing.assert_array_equal(D.top_k(jnp.asarray(values), k), want)
