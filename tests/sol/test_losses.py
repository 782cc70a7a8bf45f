"""SOL losses: probabilities, σ → 0 limit, boundary gradients, discriminative loss, pair sampler."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.sol import losses as L

C, TAU = 10, 1


def _random_dists(rng, n, c=C):
  return jax.random.dirichlet(rng, jnp.ones(c) * 0.7, (n,))


@pytest.mark.parametrize("tau", [0, 1, 3])
def test_order_probabilities_sum_to_one(tau):
  pi = _random_dists(jax.random.key(0), 64)
  pk = _random_dists(jax.random.key(1), 64)
  pg, pl, ps = L.order_probs(pi, pk, tau)
  np.testing.assert_allclose(pg + pl + ps, 1.0, atol=1e-5)
  assert np.all(np.asarray(pg) >= 0) and np.all(np.asarray(pl) >= 0)


@pytest.mark.parametrize("sigma,tau", [(1.0, 1), (1.0, 3), (0.0, 1)])
def test_order_prob_tables_equal_order_probs_of_every_rank_pair(sigma, tau):
  """The step's lookup T[r_i, r_k] equals `order_probs` of the two ranks' Gaussian rows."""
  c = 12
  table = L.gaussian_table(c, sigma)
  ri, rk = (a.ravel() for a in np.meshgrid(np.arange(c), np.arange(c), indexing="ij"))
  want = L.order_probs(L.gaussian_rows(ri, c, sigma), L.gaussian_rows(rk, c, sigma), tau)
  for t, w in zip(L.order_prob_tables(table, tau), want):
    np.testing.assert_allclose(t[ri, rk], w, atol=1e-6)
  gt, lt, sim = L.order_prob_tables(table, tau)
  if sigma == 0.0:   # one-hot rows: the masks themselves
    np.testing.assert_array_equal(gt, L.order_masks(c, tau)[0])
  assert float(gt[c - 1, 0]) > 0.99 and float(lt[0, c - 1]) > 0.99 and float(sim[4, 4]) > 0.5


def test_gaussian_rows_are_distributions_and_peak_at_centre():
  p = L.gaussian_rows(jnp.arange(C), C, 1.0)
  np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-6)
  np.testing.assert_array_equal(np.argmax(p, -1), np.arange(C))
  # symmetric away from the edges: g_5(4) == g_5(6)
  assert float(p[5, 4]) == pytest.approx(float(p[5, 6]), rel=1e-6)


def test_reference_code_window_quirk_differs_near_top_rank():
  """The reference code clips the 'less' window with min(C−1, j+τ+1), so the top rank's mass is
  counted as both 'similar' and 'less': its three probabilities can sum to more than one.
  jaxml's clean masks partition the grid (sum exactly 1)."""
  a = np.arange(C)[:, None]
  c = np.arange(C)[None, :]
  quirk_less = (c >= np.minimum(C - 1, a + TAU + 1)).astype(np.float32)
  greater, less, similar = L.order_masks(C, TAU)
  p = np.asarray(L.gaussian_rows(jnp.array([C - 1.0]), C, 1.0))[0]
  joint = np.outer(p, p)
  clean = (joint * (greater + less + similar)).sum()
  quirky = (joint * (greater + quirk_less + similar)).sum()
  assert clean == pytest.approx(1.0, abs=1e-6)
  assert quirky > 1.0 + 1e-3


def test_sigma_to_zero_recovers_deterministic_windows():
  ranks_i = jnp.array([0, 3, 7, 9, 5, 4])
  ranks_k = jnp.array([5, 3, 2, 9, 6, 0])
  p0i, p0k = L.gaussian_rows(ranks_i, C, 0.0), L.gaussian_rows(ranks_k, C, 0.0)
  psmall_i, psmall_k = L.gaussian_rows(ranks_i, C, 1e-3), L.gaussian_rows(ranks_k, C, 1e-3)
  np.testing.assert_allclose(psmall_i, p0i, atol=1e-6)
  pg, pl, ps = L.order_probs(psmall_i, psmall_k, TAU)
  diff = np.asarray(ranks_i - ranks_k)
  np.testing.assert_allclose(pg, diff > TAU, atol=1e-6)
  np.testing.assert_allclose(pl, diff < -TAU, atol=1e-6)
  np.testing.assert_allclose(ps, np.abs(diff) <= TAU, atol=1e-6)
  # σ = 0 table is the identity, so S = d (GOL's distances to reference points)
  np.testing.assert_array_equal(L.gaussian_table(C, 0.0), np.eye(C))
  e = jax.random.normal(jax.random.key(2), (6, 4))
  cent = jax.random.normal(jax.random.key(3), (C, 4))
  np.testing.assert_allclose(L.expected_profile(e, cent, L.gaussian_table(C, 0.0)), L.sq_dists(e, cent),
                             rtol=1e-6)
  # the stochastic loss with one-hot distributions is the deterministic window of the true order
  s_i, s_k = L.sq_dists(e, cent), L.sq_dists(e[::-1], cent)
  v_gt, v_lt, v_sim = L.order_violations(s_i - s_k, ranks_i, ranks_k, 0.25)
  expected = np.where(diff > TAU, v_gt, np.where(diff < -TAU, v_lt, v_sim)).mean()
  got = L.stochastic_order_loss(s_i - s_k, ranks_i, ranks_k, (pg, pl, ps), 0.25)
  assert float(got) == pytest.approx(float(expected), rel=1e-5)


def test_order_violations_by_hand():
  s_i = jnp.array([[1.0, 0.5, 0.0]])
  s_k = jnp.array([[0.0, 0.5, 1.0]])
  m = 0.25
  v_gt, v_lt, v_sim = L.order_violations(s_i - s_k, jnp.array([2]), jnp.array([0]), m)
  # base rank 2 > ref rank 0: window l < 0 is empty; l >= 2: [S^i_2 − S^k_2 + m]_+ = [0 − 1 + .25]_+ = 0
  assert float(v_gt[0]) == pytest.approx(0.0)
  # V_< windows: l < 2 -> [S^i − S^k + m]_+ = [1.25, 0.25]; l >= 0 -> [S^k − S^i + m]_+ = [0, .25, 1.25]
  assert float(v_lt[0]) == pytest.approx(1.25 + 0.25 + 0.0 + 0.25 + 1.25)
  assert float(v_sim[0]) == pytest.approx(0.75 + 0.0 + 0.75)


def test_discriminative_loss_doubles_missing_side():
  prof = jnp.array([[0.1, 0.4, 0.9], [0.5, 0.2, 0.6], [0.9, 0.3, 0.05]])
  got = np.asarray(L.discriminative_loss(prof, jnp.array([0, 1, 2]), 1))
  np.testing.assert_allclose(got, [2 * (0.1 - 0.4), (0.2 - 0.6) + (0.2 - 0.5), 2 * (0.05 - 0.3)], rtol=1e-6)


def _full_loss(e, cent, ranks, rng, sigma=1.0):
  table = L.gaussian_table(C, sigma)
  e = e / jnp.linalg.norm(e, axis=-1, keepdims=True)
  prof = L.expected_profile(e, cent, table)
  pairs = L.sample_pairs(rng, ranks, TAU, 8)
  dist = L.gaussian_rows(ranks, C, sigma)
  probs = L.order_probs(dist[pairs.base], dist[pairs.ref], TAU)
  so = L.stochastic_order_loss(prof[pairs.base] - prof[pairs.ref], ranks[pairs.base], ranks[pairs.ref], probs,
                               0.25, pairs.valid)
  return so + L.discriminative_loss(prof, ranks).mean()


@pytest.mark.parametrize("sigma", [1.0, 0.0])
def test_gradient_finite_at_boundary_ranks(sigma):
  ranks = jnp.array([0, 0, C - 1, C - 1, 0, C - 1, 0, C - 1])
  e = jax.random.normal(jax.random.key(0), (8, 4))
  cent = L.soft_centroids(e / jnp.linalg.norm(e, axis=-1, keepdims=True), L.gaussian_rows(ranks, C, sigma))
  g = jax.grad(_full_loss)(e, cent, ranks, jax.random.key(1), sigma)
  chex.assert_tree_all_finite(g)
  assert float(jnp.abs(g).sum()) > 0


def test_soft_centroids_are_weighted_means():
  e = jnp.array([[1.0, 0.0], [0.0, 1.0]])
  p = jnp.array([[0.75, 0.25], [0.25, 0.75]])
  mu = L.soft_centroids(e, p, normalize=False)
  np.testing.assert_allclose(mu, [[0.75, 0.25], [0.25, 0.75]], rtol=1e-6)
  np.testing.assert_allclose(jnp.linalg.norm(L.soft_centroids(e, p), axis=-1), 1.0, rtol=1e-6)


def test_sample_pairs_respects_classes_and_limits():
  ranks = jnp.array([0, 0, 1, 2, 5, 5, 8, 9, 9, 3, 4, 7])
  pairs = L.sample_pairs(jax.random.key(0), ranks, TAU, 5)
  base, ref, valid = map(np.asarray, pairs)
  assert base.shape == (15,)
  assert np.all(base != ref)
  diff = np.asarray(ranks)[base] - np.asarray(ranks)[ref]
  cls = np.where(diff > TAU, 0, np.where(diff < -TAU, 1, 2))
  for c in range(3):
    block = slice(5 * c, 5 * c + 5)
    assert np.all(cls[block][valid[block] > 0] == c)
  # every pair is distinct (unordered)
  keys = {tuple(sorted(p)) for p, v in zip(zip(base, ref), valid) if v}
  assert len(keys) == int(valid.sum())


def test_sample_pairs_pads_when_a_class_is_short():
  ranks = jnp.array([0, 0, 0, 0, 0, 0, 0, 9])   # only 7 ">"/"<" pairs in total, ≈ has 21
  pairs = L.sample_pairs(jax.random.key(3), ranks, TAU, 16)
  valid = np.asarray(pairs.valid)
  assert valid.sum() == 7 + 16
  assert L.stochastic_order_loss(jnp.zeros((23, C)), ranks[pairs.base[:23]],
                                 ranks[pairs.ref[:23]], (jnp.ones(23),) * 3, 0.25).shape == ()


def test_discriminative_loss_is_permutation_invariant():
  prof = jax.random.uniform(jax.random.key(0), (16, C))
  ranks = jax.random.randint(jax.random.key(1), (16,), 0, C)
  perm = jax.random.permutation(jax.random.key(2), 16)
  a = L.discriminative_loss(prof, ranks).mean()
  b = L.discriminative_loss(prof[perm], ranks[perm]).mean()
  assert float(a) == pytest.approx(float(b), rel=1e-6)


def test_profile_minimal_at_label_for_ideal_1d_embedding():
  """e_r = (cos θ_r, sin θ_r) on a quarter circle: with the stochastic centroids of these
  embeddings, argmin_l S_l(e_r) = r (interior ranks; σ = 0.5 keeps the edge effect small)."""
  theta = jnp.linspace(0, jnp.pi / 2, C)
  ranks = jnp.repeat(jnp.arange(C), 20)
  e = jnp.stack([jnp.cos(theta[ranks]), jnp.sin(theta[ranks])], -1)
  cent = L.soft_centroids(e, L.gaussian_rows(ranks, C, 0.5))
  prof = L.expected_profile(e, cent, L.gaussian_table(C, 0.5))
  np.testing.assert_array_equal(np.asarray(jnp.argmin(prof, -1)), np.asarray(ranks))


@pytest.mark.parametrize("sigma", [1.0, 0.0])
def test_profile_affine_and_gaps_equal_the_profile(sigma):
  """`profile_affine` with `table` = Q is `expected_profile`, with A Q it is A applied to the profile;
  `profile_gaps` is the difference of the gathered profile rows (the step's form)."""
  c, d = 7, 5
  e = jax.random.normal(jax.random.key(0), (12, d))                        # not unit: the ‖e‖² term counts
  cent = jax.random.normal(jax.random.key(1), (c, d)).at[3].set(0.0)      # a rank without mass
  table = L.gaussian_table(c, sigma)
  prof = L.expected_profile(e, cent, table)
  aff = L.profile_affine(cent, table)
  e2 = jnp.sum(e * e, -1)
  np.testing.assert_allclose(aff.scale * e2[:, None] + aff.bias - 2.0 * e @ aff.weight.T, prof, rtol=1e-5, atol=1e-5)
  a = jax.random.normal(jax.random.key(2), (4, c))
  mapped = L.profile_affine(cent, a @ table)
  np.testing.assert_allclose(mapped.scale * e2[:, None] + mapped.bias - 2.0 * e @ mapped.weight.T, prof @ a.T,
                             rtol=1e-4, atol=1e-4)
  base, ref = jnp.array([0, 3, 11, 5, 5]), jnp.array([1, 3, 2, 10, 0])
  np.testing.assert_allclose(L.profile_gaps(e, aff, base, ref), prof[base] - prof[ref], rtol=1e-5, atol=1e-5)
  assert float(jnp.abs(L.profile_gaps(e, aff, base, ref)[1]).max()) == 0.0   # a pair with itself
  mapped_prof = prof @ a.T                                                    # rows of a @ table do not sum to 1
  np.testing.assert_allclose(L.profile_gaps(e, mapped, base, ref), mapped_prof[base] - mapped_prof[ref],
                             rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,nb", [(2, 1), (3, 1), (9, 1), (9, 2), (4, 3)])
def test_discriminative_weights_reproduce_discriminative_loss(c, nb):
  """L_D(b) = A[r_b] · S_b for every rank (missing sides doubled), so the step's A Q map is L_D."""
  a = L.discriminative_weights(c, nb)
  prof = jax.random.normal(jax.random.key(c + nb), (3 * c, c))
  ranks = jnp.tile(jnp.arange(c), 3)
  np.testing.assert_allclose(jnp.sum(a[ranks] * prof, -1), L.discriminative_loss(prof, ranks, nb), rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(a.sum(-1), 0.0, atol=1e-6)   # L_D ignores a constant shift of the profile


def test_discriminative_weights_default_to_one_neighbour_by_hand():
  """L = 1: L_D(r) = (S_r - S_{r+1}) + (S_r - S_{r-1}), the missing side doubled at both ends."""
  want = [[2, -2, 0, 0], [-1, 2, -1, 0], [0, -1, 2, -1], [0, 0, -2, 2]]
  np.testing.assert_allclose(L.discriminative_weights(4), want, atol=1e-6)
