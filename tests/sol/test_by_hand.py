"""SOL's loss terms and decoders against loop-by-loop numpy versions of the formulas in the module docs
(spec sol.md §2), on small random, asymmetric inputs with edge ranks, ties and masked ranks."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.sol import decoders as D
from jaxml.sol import losses as L

_RNG = np.random.default_rng(11)


def _unit(x: np.ndarray) -> np.ndarray:
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("sigma", [1.3, 1.0, 0.4])    # σ ≤ 1 rank (the ranks protocol uses 1) stays soft
def test_gaussian_rows_soft_and_hard(sigma):
  c = 7
  centres = np.array([0.3, 4.0, 6.7])
  j = np.arange(c)
  logits = -((j[None, :] - centres[:, None]) ** 2) / (2 * sigma**2)
  want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(L.gaussian_rows(jnp.asarray(centres), c, sigma), want, rtol=1e-5, atol=1e-7)
  hard = np.asarray(L.gaussian_rows(jnp.asarray([-1.0, 2.5, 3.5, 5.4, 9.0]), c, 0.0))
  np.testing.assert_array_equal(hard.argmax(-1), [0, 2, 4, 5, 6])       # round half to even, clipped
  np.testing.assert_array_equal(hard.sum(-1), 1.0)
  np.testing.assert_allclose(L.gaussian_rows(jnp.asarray(centres.reshape(3, 1)), c, sigma), want[:, None], rtol=1e-5,
                             atol=1e-7)                # batched centres [3, 1] -> [3, 1, C]
  np.testing.assert_allclose(L.gaussian_table(c, sigma), L.gaussian_rows(jnp.arange(c), c, sigma), rtol=1e-6)
  np.testing.assert_array_equal(L.gaussian_table(c, 0.0), np.eye(c))


@pytest.mark.parametrize("normalize", [True, False])
def test_soft_centroids_weighted_means_and_empty_rank(normalize):
  e = _unit(_RNG.normal(size=(5, 3)))
  probs = _RNG.uniform(size=(5, 4))
  probs[:, 2] = 0.0                                     # rank 2 has no mass
  mu = probs.T @ e / np.maximum(probs.sum(0), 1e-12)[:, None]
  if normalize:
    mu = mu / np.maximum(np.linalg.norm(mu, axis=-1, keepdims=True), 1e-12)
  got = np.asarray(L.soft_centroids(jnp.asarray(e), jnp.asarray(probs), normalize=normalize))
  np.testing.assert_allclose(got, mu, rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(got[2], 0.0)
  if normalize:                                          # the default normalises
    np.testing.assert_allclose(L.soft_centroids(jnp.asarray(e), jnp.asarray(probs)), got, rtol=1e-6)


def test_sq_dists_and_expected_profile():
  e = _RNG.normal(size=(3, 4))
  cent = np.concatenate([_RNG.normal(size=(4, 4)), e[:1]])       # the last centroid equals e_0
  d = np.sum((e[:, None, :] - cent[None]) ** 2, -1)
  got = np.asarray(L.sq_dists(jnp.asarray(e), jnp.asarray(cent)))
  np.testing.assert_allclose(got, d, rtol=1e-5, atol=1e-5)
  assert got[0, 4] >= 0.0
  table = _RNG.uniform(size=(5, 5))
  np.testing.assert_allclose(L.expected_profile(jnp.asarray(e), jnp.asarray(cent), jnp.asarray(table)),
                             d @ table.T, rtol=1e-5, atol=1e-5)


def test_order_masks_and_probs_by_loops():
  c, tau = 6, 1
  greater, less, similar = L.order_masks(c, tau)
  for a, r in itertools.product(range(c), range(c)):
    assert (greater[a, r], less[a, r], similar[a, r]) == (float(r < a - tau), float(r > a + tau), float(abs(r - a) <= tau))
  p_base, p_ref = _RNG.uniform(size=(3, c)), _RNG.uniform(size=(3, c))   # unnormalised on purpose
  got = [np.asarray(x) for x in L.order_probs(jnp.asarray(p_base), jnp.asarray(p_ref), tau)]
  for k in range(3):
    joint = np.outer(p_base[k], p_ref[k])
    np.testing.assert_allclose([got[0][k], got[1][k], got[2][k]],
                               [np.sum(joint * greater), np.sum(joint * less), np.sum(joint * similar)], rtol=1e-5)


def _disc_loops(profile, ranks, nb):
  c = profile.shape[1]
  out = []
  for row, r in zip(profile, ranks):
    total = 0.0
    for l in range(1, nb + 1):
      up = row[r] - row[r + l] if r + l <= c - 1 else None
      down = row[r] - row[r - l] if r - l >= 0 else None
      if up is not None and down is not None:
        total += up + down
      elif up is not None:
        total += 2 * up
      elif down is not None:
        total += 2 * down
    out.append(total)
  return np.array(out)


@pytest.mark.parametrize("nb", [1, 2, 5])
def test_discriminative_loss_by_loops(nb):
  profile = _RNG.normal(size=(6, 5))
  ranks = np.array([0, 1, 2, 3, 4, 1])
  np.testing.assert_allclose(L.discriminative_loss(jnp.asarray(profile), jnp.asarray(ranks), nb),
                             _disc_loops(profile, ranks, nb), rtol=1e-5, atol=1e-6)


def _violations_loops(s_i, s_k, r_i, r_k, m):
  relu = lambda x: max(x, 0.0)  # noqa: E731
  out = []
  for si, sk, ri, rk in zip(s_i, s_k, r_i, r_k):
    c = len(si)
    v_gt = sum(relu(sk[l] - si[l] + m) for l in range(c) if l < rk) + sum(relu(si[l] - sk[l] + m) for l in range(c) if l >= ri)
    v_lt = sum(relu(si[l] - sk[l] + m) for l in range(c) if l < ri) + sum(relu(sk[l] - si[l] + m) for l in range(c) if l >= rk)
    v_sim = sum(relu(abs(si[l] - sk[l]) - m) for l in range(c))
    out.append((v_gt, v_lt, v_sim))
  return np.array(out).T


def test_order_violations_and_stochastic_order_loss_by_loops():
  s_i, s_k = _RNG.normal(size=(4, 5)), _RNG.normal(size=(4, 5))
  r_i, r_k = np.array([0, 3, 4, 2]), np.array([2, 1, 4, 0])
  m = 0.3
  want = _violations_loops(s_i, s_k, r_i, r_k, m)
  args = (jnp.asarray(s_i - s_k), jnp.asarray(r_i), jnp.asarray(r_k))   # the hinges read the gap S^i − S^k
  np.testing.assert_allclose(np.stack(L.order_violations(*args, m)), want, rtol=1e-5, atol=1e-6)
  probs = _RNG.dirichlet(np.ones(3), size=4).T
  per_pair = np.sum(probs * want, 0)
  jprobs = tuple(jnp.asarray(p) for p in probs)
  np.testing.assert_allclose(L.stochastic_order_loss(*args, jprobs, m), per_pair.mean(), rtol=1e-5)
  w = np.array([1.0, 0.0, 0.5, 1.0])
  np.testing.assert_allclose(L.stochastic_order_loss(*args, jprobs, m, jnp.asarray(w)),
                             np.sum(w * per_pair) / 2.5, rtol=1e-5)
  w = np.array([0.2, 0.0, 0.3, 0.0])                   # weight sum below one: divided by one
  np.testing.assert_allclose(L.stochastic_order_loss(*args, jprobs, m, jnp.asarray(w)),
                             np.sum(w * per_pair), rtol=1e-5)


def test_center_loss_by_hand():
  e, cent = _RNG.normal(size=(4, 3)), _RNG.normal(size=(5, 3))
  ranks = np.array([4, 0, 2, 2])
  np.testing.assert_allclose(L.center_loss(jnp.asarray(e), jnp.asarray(cent), jnp.asarray(ranks)),
                             np.mean(np.sum((e - cent[ranks]) ** 2, -1)), rtol=1e-5)


def _position_loops(prof, table, valid, window):
  c = prof.shape[1]
  j = np.arange(c, dtype=np.float64)
  mean = table @ j
  var = table @ (j * j) - mean**2
  out = []
  for s in prof:
    lstar = int(np.argmin(s))
    rows = [l for l in range(c) if valid[l] and abs(l - lstar) <= window]
    x = np.array([[1.0, mean[l] - lstar, (mean[l] - lstar) ** 2 + var[l]] for l in rows])
    coef = np.linalg.solve(x.T @ x + 1e-6 * np.eye(3), x.T @ s[rows])
    shift = -coef[1] / (2 * coef[2]) if coef[2] > 1e-9 else 0.0
    out.append(lstar + np.clip(shift, -window, window))
  return np.array(out)


def test_profile_position_is_the_windowed_least_squares_vertex():
  c, sigma, window = 12, 1.5, 3
  table = np.asarray(L.gaussian_table(c, sigma), np.float64)
  valid = np.ones(c, bool)
  valid[[3, 10]] = False
  l = np.arange(c)
  prof = np.stack([0.05 * (l - 6.3) ** 2 + 0.01 * _RNG.normal(size=c) + 1.0,      # interior minimum
                   0.05 * (l - 0.4) ** 2 + 0.01 * _RNG.normal(size=c) + 1.0,      # minimum near an edge
                   -0.05 * (l - 5.5) ** 2 + 3.0,                                   # concave: no vertex (shift 0)
                   0.05 * (l + 2.0) ** 2,                                           # fitted vertex far below 0: clipped
                   0.05 * (l - 13.0) ** 2])                                         # fitted vertex far above 11: clipped
  prof = np.where(valid[None, :], prof, np.inf)
  got = D.profile_position(jnp.asarray(prof, jnp.float32), jnp.asarray(table, jnp.float32), jnp.asarray(valid), window)
  want = _position_loops(prof, table, valid, window)
  np.testing.assert_allclose(got, want, atol=2e-3)
  assert float(got[2]) == float(np.argmin(prof[2]))
  np.testing.assert_allclose(got[3:], [0.0 - window, 11.0 + window])
  default = D.profile_position(jnp.asarray(prof, jnp.float32), jnp.asarray(table, jnp.float32), jnp.asarray(valid))
  np.testing.assert_allclose(default, _position_loops(prof, table, valid, 4), atol=2e-3)     # window defaults to 4


def test_masked_profile_expectation_and_profile_clip_to_the_valid_ranks():
  e = _unit(_RNG.normal(size=(4, 3)))
  cent = _unit(_RNG.normal(size=(6, 3)))
  table = np.asarray(L.gaussian_table(6, 1.0))
  valid = np.array([False, True, True, False, True, False])
  prof = np.asarray(D.masked_profile(jnp.asarray(e), jnp.asarray(cent), jnp.asarray(table), jnp.asarray(valid)))
  full = np.sum((e[:, None] - cent[None]) ** 2, -1) @ table.T
  np.testing.assert_allclose(prof[:, valid], full[:, valid], rtol=1e-5)
  assert np.all(np.isinf(prof[:, ~valid]))
  pred = D.expectation(jnp.asarray(prof))
  np.testing.assert_array_equal(pred, np.argmin(np.where(valid, full, np.inf), -1))
  assert pred.dtype == jnp.int32
  # profile decoder: least-squares line through (t_train, labels), rounded, clipped to [1, 4]
  t_train, labels = np.array([0.0, 0.25, 0.5, 1.0]), np.array([1, 1, 2, 4])    # var(t_train) < 1
  b = np.cov(t_train, labels, bias=True)[0, 1] / np.var(t_train)
  t = np.array([-3.0, 0.3, 0.55, 0.8, 9.0])
  want = np.clip(np.round(labels.mean() + b * (t - t_train.mean())), 1, 4)
  got = D.profile(jnp.asarray(t), jnp.asarray(t_train), jnp.asarray(labels), jnp.asarray(valid))
  np.testing.assert_array_equal(got, want)
  assert got.dtype == jnp.int32
  only_first = jnp.zeros(6, bool).at[0].set(True)          # a label set {0}: every prediction is 0
  np.testing.assert_array_equal(D.profile(jnp.asarray(t), jnp.asarray(t_train), jnp.asarray(labels), only_first), 0)
  assert np.all(np.asarray(D.profile(jnp.asarray(t), jnp.full(4, 2.0), jnp.asarray(labels), jnp.asarray(valid))) == 2)


def test_knn_by_brute_force_with_and_without_self_exclusion():
  train = _unit(_RNG.normal(size=(9, 3)))
  labels = np.array([0, 1, 2, 3, 4, 5, 6, 7, 20])
  q = _unit(_RNG.normal(size=(4, 3)))
  for k in (1, 3, 4):
    nearest = np.argsort(-(q @ train.T), -1)[:, :k]
    np.testing.assert_array_equal(D.knn(jnp.asarray(q), jnp.asarray(train), jnp.asarray(labels), k),
                                  np.round(labels[nearest].mean(-1)))
  idx = np.array([8, 5, 0])
  sims = train[idx] @ train.T
  sims[np.arange(3), idx] = -np.inf
  nearest = np.argsort(-sims, -1)[:, :3]
  np.testing.assert_array_equal(D.knn(jnp.asarray(train[idx]), jnp.asarray(train), jnp.asarray(labels), 3,
                                      query_idx=jnp.asarray(idx)), np.round(labels[nearest].mean(-1)))
  # k larger than the training set minus the query itself: every other row is used
  got = D.knn(jnp.asarray(train[idx]), jnp.asarray(train), jnp.asarray(labels), 50, query_idx=jnp.asarray(idx))
  np.testing.assert_array_equal(got, np.round((labels.sum() - labels[idx]) / 8))
  assert got.dtype == jnp.int32
  # without query_idx, k is capped at the training-set size: every row counts
  np.testing.assert_array_equal(D.knn(jnp.asarray(q), jnp.asarray(train), jnp.asarray(labels), 50),
                                np.full(4, np.round(labels.mean())))


def test_decode_all_passes_window_and_query_idx_through():
  c, n = 8, 12
  train = _unit(np.random.default_rng(1).normal(size=(n, 3)))      # own draw: the last two asserts need this case
  labels = np.array([0, 1, 1, 2, 3, 3, 4, 5, 5, 6, 7, 7])
  table = L.gaussian_table(c, 1.0)
  cent = L.soft_centroids(jnp.asarray(train), L.gaussian_rows(jnp.asarray(labels), c, 1.0))
  valid = jnp.ones(c, bool)
  prof = D.masked_profile(jnp.asarray(train), cent, table, valid)
  t_train = D.profile_position(prof, table, valid, 2)
  logp = D.log_prior(jnp.asarray(labels), c)
  extra = {"centroids": cent, "valid": valid, "embeddings": jnp.asarray(train), "labels": jnp.asarray(labels),
           "t_train": t_train, "log_prior": logp, "kappa": jnp.asarray(3.0)}
  idx = jnp.arange(n)
  out = np.asarray(D.decode_all(jnp.asarray(train), extra, table, k=3, window=2, query_idx=idx))
  np.testing.assert_array_equal(out[0], D.expectation(prof))
  np.testing.assert_array_equal(out[1], D.profile(t_train, t_train, jnp.asarray(labels), valid))
  np.testing.assert_array_equal(out[2], D.knn(jnp.asarray(train), jnp.asarray(train), jnp.asarray(labels), 3,
                                              query_idx=idx))
  np.testing.assert_array_equal(out[3], D.knn_median(jnp.asarray(train), jnp.asarray(train), jnp.asarray(labels), 3,
                                                     query_idx=idx))
  np.testing.assert_array_equal(out[4], D.posterior_median(D.masked_dists(jnp.asarray(train), cent, valid), logp,
                                                           jnp.asarray(3.0)))
  # the case distinguishes the arguments: another window / no self-exclusion would decode differently
  t4 = D.profile_position(prof, table, valid, 4)
  assert not np.array_equal(D.profile(t4, t_train, jnp.asarray(labels), valid), out[1])
  assert not np.array_equal(out[2], D.knn(jnp.asarray(train), jnp.asarray(train), jnp.asarray(labels), 3))
