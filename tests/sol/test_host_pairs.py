"""The exact pair sampler on the host (`pairs.sample_pairs`): same distribution as the in-step
sampler (`losses.sample_pairs`), exact class sizes, and the loss it feeds equals the in-step one."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import core, sol
from jaxml.sol import losses as L
from jaxml.sol import pairs as P

TAU = 1


def _classes(ranks, base, ref):
  d = ranks[base] - ranks[ref]
  return np.where(d > TAU, 0, np.where(d < -TAU, 1, 2))


@pytest.mark.parametrize("ranks", [[0, 4, 0, 1, 3], [0, 0, 1, 2, 5, 5, 8, 9, 9, 3, 4, 7], [2, 2, 2, 2], [0, 9]])
def test_host_pairs_respect_classes_sizes_and_are_distinct(ranks):
  ranks = np.asarray(ranks)
  m, k = ranks.size, 4
  rng = np.random.default_rng(0)
  i, j = np.triu_indices(m, 1)
  n_sim = int(np.sum(np.abs(ranks[i] - ranks[j]) <= TAU))
  n_far = i.size - n_sim
  for _ in range(50):
    base, ref, valid = P.sample_pairs(ranks, TAU, k, rng)
    kk = min(k, i.size)
    assert base.shape == ref.shape == valid.shape == (3 * kk,)
    ok = valid > 0
    assert np.all(base[ok] != ref[ok])
    cls = _classes(ranks, base, ref)
    for c in range(3):
      blk = slice(c * kk, (c + 1) * kk)
      assert np.all(cls[blk][ok[blk]] == c)
    assert ok[2 * kk:].sum() == min(kk, n_sim)                         # ≈: exactly min(k, size)
    assert ok[:2 * kk].sum() <= min(2 * kk, n_far)
    pairs = {tuple(sorted(p)) for p in zip(base[ok], ref[ok])}
    assert len(pairs) == ok.sum()                                      # no pair twice, > and < disjoint


@pytest.mark.slow
def test_host_sampler_has_the_in_step_distribution():
  """Per ordered pair and class, the inclusion frequency of the host sampler matches the in-step
  one, and both match the exact values: a far pair is in ">" (larger first) with probability
  E[min(k, n_>)] / n_far, n_> ~ Binomial(n_far, ½); a similar pair with min(k, n_sim) / (2 n_sim)
  per orientation."""
  ranks = np.array([0, 4, 0, 1, 3])
  k, n = 3, 20000
  i, j = np.triu_indices(ranks.size, 1)
  far = np.abs(ranks[i] - ranks[j]) > TAU
  n_far, n_sim = int(far.sum()), int((~far).sum())
  from scipy import stats
  e_gt = sum(stats.binom.pmf(a, n_far, 0.5) * min(k, a) for a in range(n_far + 1))
  exact = {}
  for a, b, f in zip(i, j, far):
    if f:
      hi_, lo_ = (a, b) if ranks[a] > ranks[b] else (b, a)
      exact[(hi_, lo_, 0)] = exact[(lo_, hi_, 1)] = e_gt / n_far
    else:
      exact[(a, b, 2)] = exact[(b, a, 2)] = min(k, n_sim) / (2 * n_sim)

  def freqs(base, ref, valid):
    cnt = collections.Counter()
    for c in range(3):
      blk = slice(c * k, (c + 1) * k)
      for x, y in zip(base[:, blk][valid[:, blk] > 0], ref[:, blk][valid[:, blk] > 0]):
        cnt[(int(x), int(y), c)] += 1
    return cnt

  g = np.random.default_rng(1)
  host = freqs(*[np.stack(z) for z in zip(*(P.sample_pairs(ranks, TAU, k, g) for _ in range(n)))])
  draw = jax.jit(jax.vmap(lambda key: L.sample_pairs(key, jnp.asarray(ranks), TAU, k)))
  step = freqs(*map(np.asarray, draw(jax.random.split(jax.random.key(2), n))))
  assert set(host) <= set(exact) and set(step) <= set(exact)
  for key, p in exact.items():
    sd = np.sqrt(p * (1 - p) / n)
    assert abs(host[key] / n - p) < 5 * sd, (key, host[key] / n, p)
    assert abs(step[key] / n - p) < 5 * sd, (key, step[key] / n, p)


@pytest.mark.slow
@pytest.mark.parametrize("variant,extra_cfg", [("sol", {}), ("sol", {"neighbourhood": 2, "sigma": 0.7}),
                                               ("sol_sigma0", {}), ("gol", {})])
def test_loss_with_host_pairs_equals_the_in_step_formula(variant, extra_cfg):
  """Restructuring check: the SOL loss (pairs from the batch, profile only through `profile_affine`)
  is the earlier in-step expression on the same pairs (the [B, C] profile, its gathered rows and
  `discriminative_loss`), value and gradient; also for L_D over two neighbours, σ = 0 and GOL's
  learnt reference points."""
  c, m = 8, 16
  s = dict(num_classes=c, tau=TAU, hidden=(16,), embed_dim=4, pairs_per_class=6, **extra_cfg)
  method = sol.make_method(s, variant)
  rng = np.random.default_rng(0)
  labels = jnp.asarray(rng.integers(0, c, 40), jnp.int32)
  idx = rng.integers(0, 40, m).astype(np.int32)
  x = rng.normal(size=(m, 3)).astype(np.float32)
  base, ref, valid = P.sample_pairs(np.asarray(labels)[idx], TAU, 6, np.random.default_rng(3))
  batch = {"x": x, "idx": idx, "pair_base": base, "pair_ref": ref, "pair_valid": valid}
  params = method.init(jax.random.key(0), batch)
  cent = jax.random.normal(jax.random.key(1), (c, 4))
  extra = {"labels": labels, "centroids": cent / jnp.linalg.norm(cent, axis=-1, keepdims=True)}
  settings = sol.sol_settings(s, variant)
  net = sol.api._net(settings, "gol" if variant == "gol" else "embed")
  sigma = float(settings["sigma"])
  table = L.gaussian_table(c, sigma)

  def reference(params):
    out = net.apply({"params": params}, x)
    e, mu = out["embedding"], out.get("centroids", extra["centroids"])
    r = labels[idx]
    prof = L.expected_profile(e, mu, table)
    dist = L.gaussian_rows(r, c, sigma)
    probs = L.order_probs(dist[base], dist[ref], TAU)
    l_so = L.stochastic_order_loss(prof[base] - prof[ref], r[base], r[ref], probs, float(settings["margin"]), valid)
    loss = (float(settings["w_so"]) * l_so
            + float(settings["w_d"]) * L.discriminative_loss(prof, r, int(settings["neighbourhood"])).mean())
    return loss + (float(settings["w_center"]) * L.center_loss(e, mu, r) if variant == "gol" else 0.0)

  got, g_got = jax.value_and_grad(lambda p: method.loss_fn(p, batch, jax.random.key(9), extra)[0])(params)
  want, g_want = jax.value_and_grad(reference)(params)
  np.testing.assert_allclose(got, want, rtol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), g_got, g_want)
  # without pairs in the batch the step draws its own (the in-step sampler) and still runs
  plain = {"x": x, "idx": idx}
  assert np.isfinite(method.loss_fn(params, plain, jax.random.key(9), extra)[0])


def test_label_book_keeps_the_sort_order_and_batches_carry_host_pairs():
  labels = np.random.default_rng(0).integers(0, 6, 50).astype(np.int32)
  book = sol.LabelBook(labels)
  base = np.arange(0, 50, 5)
  a = P.sample_references(book.labels, base, 1, np.random.default_rng(4), book.order)
  b = P.sample_references(book.labels, base, 1, np.random.default_rng(4))
  np.testing.assert_array_equal(a, b)
  book.update(labels[::-1])
  np.testing.assert_array_equal(book.order, np.argsort(labels[::-1], kind="stable"))
  x = np.arange(50, dtype=np.float32)[:, None]
  f = P.make_pair_batches(x, book, 8, seed=1, tau=1, pairs_per_class=5)
  bt = f(3)
  assert bt["pair_base"].shape == (15,) and bt["pair_valid"].dtype == np.float32
  cls = _classes(book.labels[bt["idx"]], bt["pair_base"], bt["pair_ref"])
  ok = bt["pair_valid"] > 0
  assert np.all(cls[:5][ok[:5]] == 0) and np.all(cls[10:][ok[10:]] == 2)
  np.testing.assert_array_equal(f(3)["pair_base"], bt["pair_base"])     # seeded by step
  assert sol.host_pair_count(sol.sol_settings()) == 32


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [None, "expectation", "knn", "knn_median", "posterior_median"])
def test_relabelling_uses_the_validation_chosen_decoder(fixed):
  """The relabel refresh decodes the training set with the decoder of lowest noisy-validation MAE
  ("auto") or the named one, and refines the labels with that decoder's predictions."""
  c, n = 6, 60
  rng = np.random.default_rng(0)
  y = np.repeat(np.arange(c), n // c).astype(np.int32)
  x = (y / (c - 1) + 0.05 * rng.normal(size=n)).astype(np.float32)[:, None]
  noisy = np.clip(y + rng.integers(-2, 3, n), 0, c - 1).astype(np.int32)
  s = dict(num_classes=c, hidden=(8,), embed_dim=2, knn=5, relabel_decoder=fixed or "auto")
  refresh = sol.make_refresh_fn(s)
  params = sol.make_method(s).init(jax.random.key(0), {"x": x[:4]})
  extra = sol.init_extra(s, params, x, noisy, refresh, x[:20], noisy[:20])
  new, stats = refresh(params, extra, jnp.asarray(x), jnp.asarray(x[:20]), jnp.asarray(noisy[:20]), jnp.asarray(True))
  plain, _ = refresh(params, extra, jnp.asarray(x), jnp.asarray(x[:20]), jnp.asarray(noisy[:20]), jnp.asarray(False))
  table = L.gaussian_table(c, 1.0)
  from jaxml.sol import decoders as D
  from jaxml.sol.refine import refine_labels
  val_pred = np.asarray(D.decode_all(plain["embeddings"][:20], plain, table, k=5, window=4))
  want = int(np.argmin(np.abs(val_pred - noisy[:20]).mean(-1))) if fixed is None else sol.DECODERS.index(fixed)
  assert int(new["decoder"]) == want
  train_pred = D.decode_all(plain["embeddings"], plain, table, k=5, window=4, query_idx=jnp.arange(n))
  ref = refine_labels(train_pred[want], jnp.asarray(noisy), eta=0.9, step_rule="round_mean")
  np.testing.assert_array_equal(new["labels"], ref.labels)
  assert int(stats["changed"]) == int(np.sum(np.asarray(ref.labels) != noisy))
  # the posterior decoder's prior and κ follow the refined labels
  np.testing.assert_allclose(new["log_prior"], D.log_prior(ref.labels, c))
  dists = D.masked_dists(new["embeddings"], new["centroids"], new["valid"])
  # κ is a float32 Newton solution (~1.5e3 here), jitted inside the refresh and eager here: 2e-4 apart.
  np.testing.assert_allclose(new["kappa"], D.fit_kappa(dists, ref.labels, D.log_prior(ref.labels, c)), rtol=1e-3)
  stale = D.fit_kappa(dists, jnp.asarray(noisy), D.log_prior(jnp.asarray(noisy), c))
  assert abs(float(stale) / float(new["kappa"]) - 1) > 1e-2      # the stale labels would give another κ


def _references_loop(labels, base_idx, tau, rng):
  """The earlier loop form of `sample_references` (fallback class by class), for the equality test."""
  order = np.argsort(labels, kind="stable")
  s, r, n = labels[order], labels[base_idx], labels.size
  lt, le = np.searchsorted(s, r - tau, side="left"), np.searchsorted(s, r + tau, side="right")
  lo, hi = np.stack([np.zeros_like(lt), le, lt], 1), np.stack([lt, np.full_like(le, n), le], 1)
  first, u = rng.integers(0, 3, size=r.size), rng.random(r.size)
  c_lo, c_hi, done = np.empty_like(lt), np.empty_like(lt), np.zeros(r.size, bool)
  for shift in range(3):
    cls = (first + shift) % 3
    a, b = lo[np.arange(r.size), cls], hi[np.arange(r.size), cls]
    take = ~done & (b > a)
    c_lo[take], c_hi[take] = a[take], b[take]
    done |= take
  return order[np.minimum(c_lo + np.floor(u * (c_hi - c_lo)).astype(np.int64), c_hi - 1)]


@pytest.mark.parametrize("top", [3, 30])
def test_vectorised_references_equal_the_loop_form(top):
  labels = np.random.default_rng(top).integers(0, top, 400)
  labels[:50] = 0                                    # empty classes at the bottom force fallbacks
  base = np.random.default_rng(1).integers(0, 400, 200)
  for tau in (0, 1, 3):
    np.testing.assert_array_equal(P.sample_references(labels, base, tau, np.random.default_rng(tau)),
                                  _references_loop(labels, base, tau, np.random.default_rng(tau)))


def test_row_sampler_has_the_exact_distribution():
  """`sample_pairs_rows` (R batches at once) against the exact inclusion probabilities."""
  ranks = np.array([0, 4, 0, 1, 3])
  k, n = 3, 20000
  base, ref, valid = P.sample_pairs_rows(np.tile(ranks, (n, 1)), TAU, k, np.random.default_rng(5))
  i, j = np.triu_indices(ranks.size, 1)
  far = np.abs(ranks[i] - ranks[j]) > TAU
  n_far, n_sim = int(far.sum()), int((~far).sum())
  from scipy import stats
  e_gt = sum(stats.binom.pmf(a, n_far, 0.5) * min(k, a) for a in range(n_far + 1))
  cls = _classes(ranks, base, ref)
  ok = valid > 0
  for c in range(3):
    blk = slice(c * k, (c + 1) * k)
    assert np.all(cls[:, blk][ok[:, blk]] == c)
  for a, b, f in zip(i, j, far):
    lo_, hi_ = (a, b) if ranks[a] < ranks[b] else (b, a)
    for (x, y, c), p in ([((hi_, lo_, 0), e_gt / n_far), ((lo_, hi_, 1), e_gt / n_far)] if f else
                         [((a, b, 2), min(k, n_sim) / (2 * n_sim)), ((b, a, 2), min(k, n_sim) / (2 * n_sim))]):
      blk = slice(c * k, (c + 1) * k)
      got = np.sum((base[:, blk] == x) & (ref[:, blk] == y) & ok[:, blk]) / n
      assert abs(got - p) < 5 * np.sqrt(p * (1 - p) / n), ((x, y, c), got, p)
  # rows with different rank sets in one call: sizes per row as in the per-batch sampler
  rows = np.random.default_rng(0).integers(0, 8, (50, 12))
  b2, r2, v2 = P.sample_pairs_rows(rows, TAU, 4, np.random.default_rng(1))
  for rk, bb, rr, vv in zip(rows, b2, r2, v2):
    cl, o = _classes(rk, bb, rr), vv > 0
    assert all(np.all(cl[c * 4:(c + 1) * 4][o[c * 4:(c + 1) * 4]] == c) for c in range(3))
    ii, jj = np.triu_indices(12, 1)
    assert o[8:].sum() == min(4, int(np.sum(np.abs(rk[ii] - rk[jj]) <= TAU)))
    assert len({tuple(sorted(p)) for p in zip(bb[o], rr[o])}) == o.sum()


def test_block_batches_follow_the_book_and_are_reproducible():
  labels = np.random.default_rng(0).integers(0, 6, 60).astype(np.int32)
  x = np.arange(60, dtype=np.float32)[:, None]
  book = sol.LabelBook(labels)
  f = P.make_pair_batches(x, book, 8, seed=1, tau=1, pairs_per_class=5, block=10)
  first = [f(t) for t in range(20)]
  g = P.make_pair_batches(x, sol.LabelBook(labels), 8, seed=1, tau=1, pairs_per_class=5, block=10)
  for t in (13, 3, 19):                                   # any order, e.g. after a resume
    for key in first[t]:
      np.testing.assert_array_equal(g(t)[key], first[t][key])
  per_step = P.make_pair_batches(x, sol.LabelBook(labels), 8, seed=1, tau=1, pairs_per_class=5)
  for t in range(20):                                     # same bases as step-by-step batches
    np.testing.assert_array_equal(first[t]["idx"][:8], per_step(t)["idx"][:8])
    bt = first[t]
    cls = _classes(labels[bt["idx"]], bt["pair_base"], bt["pair_ref"])
    ok = bt["pair_valid"] > 0
    assert all(np.all(cls[c * 5:(c + 1) * 5][ok[c * 5:(c + 1) * 5]] == c) for c in range(3))
  book.update(np.zeros(60, np.int32))                     # relabelled: the block is drawn again
  assert first[15]["pair_valid"][:10].sum() > 0
  after = f(15)                                           # block 1 was cached with the old labels
  assert np.all(after["pair_valid"][:10] == 0)           # all ranks equal: no ">" / "<" pairs
  np.testing.assert_array_equal(after["idx"][:8], per_step(15)["idx"][:8])
