"""RU objectives and evaluation assembly against brute-force numpy versions of their definitions
(module docs of `unlearning/losses.py` and `unlearning/evaluate.py`), with a nonlinear transform,
several Monte-Carlo samples, noise and padded forget rows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import softmax

from jaxml.metrics import mia
from jaxml import core
from jaxml.unlearning import api, evaluate, fitting, losses
from jaxml.unlearning.task import UnlearningTask

B, M, D, C, B_REF = 3, 2, 5, 4, 6
_RNG = np.random.default_rng(7)
# numpy at import time: mutmut's fork server imports this module, and a JAX array made before the fork
# would start XLA's thread pool in the parent (forked workers then hang).
_W = _RNG.normal(size=(D, D)).astype(np.float32)
_BIAS = _RNG.normal(size=D).astype(np.float32)


def _t(z: jax.Array) -> jax.Array:
  """A nonlinear, non-symmetric transform of rows [n, D]."""
  return jnp.tanh(z @ _W) + _BIAS


def _noisy(z: np.ndarray, rng: jax.Array, scale: float, m: int = M) -> np.ndarray:
  """z~ [n, m, D] = z + scale * N(0, I) with the same draw as the documented perturbation."""
  eps = np.asarray(jax.random.normal(rng, (z.shape[0], m, D), jnp.float32))
  return z[:, None, :] + scale * eps


def _apply(zt: np.ndarray) -> np.ndarray:
  return np.asarray(_t(jnp.asarray(zt.reshape(-1, D), jnp.float32))).reshape(zt.shape)


def _data():
  z_r = _RNG.normal(size=(B, D)).astype(np.float32)
  z_f = _RNG.normal(size=(B, D)).astype(np.float32)
  z_ref = _RNG.normal(size=(B_REF, D)).astype(np.float32)
  protos = _RNG.normal(size=(C, D)).astype(np.float32)
  return z_r, z_f, z_ref, protos


def _retain(z_r, rng, scale, m=M):
  return np.mean((_apply(_noisy(z_r, rng, scale, m)) - z_r[:, None, :]) ** 2)


def _forget(z_f, w, z_ref, rng, scale, m=M):
  out = _apply(_noisy(z_f, rng, scale, m))                                            # [B, M, D]
  per_row = np.mean(np.sum((out[:, :, None, :] - z_ref[None, None]) ** 2, -1), axis=(1, 2))
  return np.sum(w * per_row) / max(np.sum(w), 1.0)


def _zs_retain(protos, pi_r, rng, scale, m=M):
  out = _apply(_noisy(protos, rng, scale, m))
  return np.sum(pi_r * np.mean(np.sum((out - protos[:, None, :]) ** 2, -1), 1))


def _zs_forget(z_f, w, protos, pi, rng, scale, m=M):
  out = _apply(_noisy(z_f, rng, scale, m))
  per_row = np.mean(np.sum(pi * np.sum((out[:, :, None, :] - protos[None, None]) ** 2, -1), -1), 1)
  return np.sum(w * per_row) / max(np.sum(w), 1.0)


@pytest.mark.parametrize("scale", [0.0, 1.0, 0.3])
def test_perturb_is_copies_plus_scaled_gaussian_noise(scale):
  z = _RNG.normal(size=(B, D)).astype(np.float32)
  key = jax.random.key(1)
  got = losses.perturb(jnp.asarray(z), key, M, scale)
  assert got.shape == (B, M, D)
  np.testing.assert_allclose(got, _noisy(z, key, scale), rtol=1e-6, atol=1e-6)


def test_weighted_mean_divides_by_the_weight_sum_but_at_least_one():
  v = jnp.array([1.0, 2.0, 4.0])
  np.testing.assert_allclose(losses.weighted_mean(v, jnp.array([1.0, 0.0, 2.0])), 9.0 / 3.0, rtol=1e-6)
  np.testing.assert_allclose(losses.weighted_mean(v, jnp.array([0.25, 0.0, 0.25])), 1.25, rtol=1e-6)  # not / 0.5
  assert float(losses.weighted_mean(v, jnp.zeros(3))) == 0.0


@pytest.mark.parametrize("scale", [0.0, 0.3])
def test_standard_terms_match_brute_force(scale):
  z_r, z_f, z_ref, _ = _data()
  w = np.array([1.0, 0.0, 1.0], np.float32)            # one padded forget row
  key = jax.random.key(2)
  kw = dict(num_samples=M, noise_scale=scale)
  np.testing.assert_allclose(losses.retain_loss(_t, jnp.asarray(z_r), key, **kw), _retain(z_r, key, scale), rtol=1e-5)
  np.testing.assert_allclose(losses.forget_loss(_t, jnp.asarray(z_f), jnp.asarray(w), jnp.asarray(z_ref), key, **kw),
                             _forget(z_f, w, z_ref, key, scale), rtol=1e-5)
  assert float(losses.forget_loss(_t, jnp.asarray(z_f), jnp.zeros(B), jnp.asarray(z_ref), key, **kw)) == 0.0


@pytest.mark.parametrize("scale", [0.0, 0.3])
def test_zero_shot_terms_match_brute_force(scale):
  _, z_f, _, protos = _data()
  w = np.array([0.0, 1.0, 1.0], np.float32)
  pi = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
  pi_r = np.array([0.0, 0.5, 0.2, 0.3], np.float32)   # class 0 forgotten
  key = jax.random.key(3)
  kw = dict(num_samples=M, noise_scale=scale)
  np.testing.assert_allclose(losses.zero_shot_retain_loss(_t, jnp.asarray(protos), jnp.asarray(pi_r), key, **kw),
                             _zs_retain(protos, pi_r, key, scale), rtol=1e-5)
  np.testing.assert_allclose(
      losses.zero_shot_forget_loss(_t, jnp.asarray(z_f), jnp.asarray(w), jnp.asarray(protos), jnp.asarray(pi), key, **kw),
      _zs_forget(z_f, w, protos, pi, key, scale), rtol=1e-5)


def test_objectives_add_beta_times_forget_with_split_keys():
  z_r, z_f, z_ref, protos = _data()
  w = np.array([1.0, 1.0, 0.0], np.float32)
  pi = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
  pi_r = np.array([0.0, 0.5, 0.2, 0.3], np.float32)
  key, scale, beta = jax.random.key(4), 0.3, 0.7
  r_key, f_key = jax.random.split(key)
  kw = dict(num_samples=M, noise_scale=scale)
  loss, aux = losses.standard_objective(_t, jnp.asarray(z_r), jnp.asarray(z_f), jnp.asarray(w), jnp.asarray(z_ref),
                                        key, beta=beta, **kw)
  l_r, l_f = _retain(z_r, r_key, scale), _forget(z_f, w, z_ref, f_key, scale)
  np.testing.assert_allclose([aux["retain_loss"], aux["forget_loss"]], [l_r, l_f], rtol=1e-5)
  np.testing.assert_allclose(loss, l_r + beta * l_f, rtol=1e-5)
  loss, aux = losses.zero_shot_objective(_t, jnp.asarray(z_f), jnp.asarray(w), jnp.asarray(protos), jnp.asarray(pi),
                                         jnp.asarray(pi_r), key, beta=beta, **kw)
  l_r, l_f = _zs_retain(protos, pi_r, r_key, scale), _zs_forget(z_f, w, protos, pi, f_key, scale)
  np.testing.assert_allclose([aux["retain_loss"], aux["forget_loss"]], [l_r, l_f], rtol=1e-5)
  np.testing.assert_allclose(loss, l_r + beta * l_f, rtol=1e-5)


def test_defaults_are_one_sample_without_noise():
  """Omitted num_samples / noise_scale mean M = 1 and s = 0; a noise scale alone still draws one sample."""
  z_r, z_f, z_ref, protos = _data()
  w = np.array([1.0, 0.0, 1.0], np.float32)
  pi = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
  pi_r = np.array([0.0, 0.5, 0.2, 0.3], np.float32)
  key, beta = jax.random.key(5), 0.7
  r_key, f_key = jax.random.split(key)
  args = {"standard": (jnp.asarray(z_r), jnp.asarray(z_f), jnp.asarray(w), jnp.asarray(z_ref), key),
          "zero_shot": (jnp.asarray(z_f), jnp.asarray(w), jnp.asarray(protos), jnp.asarray(pi), jnp.asarray(pi_r), key)}
  for scale in (0.0, 0.3):
    kw = {} if scale == 0.0 else {"noise_scale": scale}
    np.testing.assert_allclose(losses.retain_loss(_t, jnp.asarray(z_r), key, **kw), _retain(z_r, key, scale, m=1),
                               rtol=1e-5)
    np.testing.assert_allclose(losses.forget_loss(_t, *args["standard"][1:], **kw),
                               _forget(z_f, w, z_ref, key, scale, m=1), rtol=1e-5)
    np.testing.assert_allclose(losses.zero_shot_retain_loss(_t, jnp.asarray(protos), jnp.asarray(pi_r), key, **kw),
                               _zs_retain(protos, pi_r, key, scale, m=1), rtol=1e-5)
    np.testing.assert_allclose(losses.zero_shot_forget_loss(_t, *args["zero_shot"][:4], key, **kw),
                               _zs_forget(z_f, w, protos, pi, key, scale, m=1), rtol=1e-5)
    loss, _ = losses.standard_objective(_t, *args["standard"], beta=beta, **kw)
    np.testing.assert_allclose(loss, _retain(z_r, r_key, scale, m=1) + beta * _forget(z_f, w, z_ref, f_key, scale, m=1),
                               rtol=1e-5)
    loss, _ = losses.zero_shot_objective(_t, *args["zero_shot"], beta=beta, **kw)
    np.testing.assert_allclose(
        loss, _zs_retain(protos, pi_r, r_key, scale, m=1) + beta * _zs_forget(z_f, w, protos, pi, f_key, scale, m=1),
        rtol=1e-5)


def _task(y, retain, forget, y_test, mask):
  return UnlearningTask(np.arange(len(y), dtype=np.float32)[:, None], np.asarray(y), np.asarray(retain),
                        np.asarray(forget), np.arange(len(y_test), dtype=np.float32)[:, None] + 100.0,
                        np.asarray(y_test), 3, (), mask, None)


def test_collect_outputs_concatenates_chunks_in_order():
  task = _task([0, 1, 2, 0, 1], [0, 1, 2], [3, 4], [2, 1, 0], None)
  out = evaluate.collect_outputs(lambda x: (2.0 * x, x + 1.0), task, chunk=2)
  np.testing.assert_array_equal(out.logits_train, 2.0 * task.x_train)
  np.testing.assert_array_equal(out.feats_train, task.x_train + 1.0)
  np.testing.assert_array_equal(out.logits_test, 2.0 * task.x_test)
  np.testing.assert_array_equal(out.feats_test, task.x_test + 1.0)


def test_batched_apply_calls_one_shape_and_drops_the_padding():
  seen = []
  fn = lambda x: (seen.append(x.shape[0]), (x.sum(-1), -x))[1]
  x = np.arange(14, dtype=np.float32).reshape(7, 2)
  s, neg = core.batched_apply(fn, x, 3)                 # 3 + 3 + (1 row padded to 3)
  assert seen == [3, 3, 3]
  np.testing.assert_array_equal(s, x.sum(-1))
  np.testing.assert_array_equal(neg, -x)
  seen.clear()
  s, _ = core.batched_apply(fn, x, fitting.CHUNK)                # fewer rows than a chunk: the same one padded shape
  assert seen == [fitting.CHUNK]
  np.testing.assert_array_equal(s, x.sum(-1))


def test_metrics_use_every_retained_row_as_members_and_drop_absent_keys():
  rng = np.random.default_rng(0)
  y = rng.integers(0, 3, 12)
  y_test = rng.integers(0, 3, 10)
  retain, forget = np.arange(4, 12), np.arange(4)         # |D_r| = 8 <= |D_t| = 10: all retained rows are members
  logits_train = rng.normal(size=(12, 3)) + 3.0 * np.eye(3)[y]
  logits_test = rng.normal(size=(10, 3))
  out = evaluate.Outputs(logits_train, np.zeros((12, 2)), logits_test, np.zeros((10, 2)))
  m = evaluate.unlearning_metrics(out, _task(y, retain, forget, y_test, None))
  assert "TA_r" not in m and "TA_f" not in m               # no test row of the forgotten kind
  acc = lambda lg, lab: 100.0 * np.mean(np.argmax(lg, -1) == lab)  # noqa: E731
  np.testing.assert_allclose([m["UA"], m["RA"], m["TA"]],
                             [100.0 - acc(logits_train[forget], y[forget]), acc(logits_train[retain], y[retain]),
                              acc(logits_test, y_test)])
  want = mia.svc_mia_efficacy(logits_train[retain], y[retain], logits_test, y_test, logits_train[forget], y[forget])
  assert m["MIA"] == pytest.approx(want)
  assert m["MIA_AUC"] == pytest.approx(mia.loss_mia_auc(logits_train[forget], y[forget], logits_test, y_test))
  empty = evaluate.unlearning_metrics(out, _task(y, np.arange(12), np.arange(0), y_test, None))
  assert np.isnan(empty["UA"]) and np.isnan(empty["MIA_AUC"]) and empty["RA"] == pytest.approx(acc(logits_train, y))


def test_divergences_match_the_softmax_kl_and_js():
  rng = np.random.default_rng(1)
  a_tr, b_tr, a_te, b_te = (rng.normal(size=s) for s in [(6, 3), (6, 3), (4, 3), (4, 3)])
  out = evaluate.Outputs(a_tr, np.zeros((6, 1)), a_te, np.zeros((4, 1)))
  ref = evaluate.Outputs(b_tr, np.zeros((6, 1)), b_te, np.zeros((4, 1)))
  task = _task([0] * 6, [0, 2, 3, 5], [1, 4], [0] * 4, None)
  res = evaluate.divergences(out, ref, task)
  kl = lambda u, v: np.sum(u * np.log(u / v), -1)  # noqa: E731
  for name, a, b in (("r", a_tr[[0, 2, 3, 5]], b_tr[[0, 2, 3, 5]]), ("f", a_tr[[1, 4]], b_tr[[1, 4]]), ("t", a_te, b_te)):
    p, q = softmax(a, -1), softmax(b, -1)
    mix = 0.5 * (p + q)
    assert res[f"KL_{name}"] == pytest.approx(np.mean(kl(q, p)), rel=1e-6)
    assert res[f"JS_{name}"] == pytest.approx(np.mean(0.5 * kl(p, mix) + 0.5 * kl(q, mix)), rel=1e-6)
  empty = evaluate.divergences(out, ref, task._replace(forget_idx=np.arange(0)))
  assert np.isnan(empty["KL_f"]) and np.isnan(empty["JS_f"])
  assert all(np.isfinite(empty[k]) for k in ("KL_r", "JS_r", "KL_t", "JS_t"))   # the empty set skips only itself


def test_divergences_are_float64_stable_and_finite_at_zero_probabilities():
  """float32 logits are evaluated in float64 (KL of nearly equal outputs is a cancellation), rows are
  shifted by their own max (logits of ±400 neither overflow nor vanish), and a class with ~0
  probability keeps the divergences finite."""
  rng = np.random.default_rng(2)
  ref_test = rng.normal(size=(4, 3)).astype(np.float32)
  out_test = (ref_test + 1e-3 * rng.normal(size=(4, 3))).astype(np.float32)
  big = np.array([[400.0, 399.0, 398.0], [-400.0, -401.0, -399.5]])          # rows of very different scale
  zero = np.array([[0.0, 45.0, -45.0], [1.0, -45.0, 44.0]])                  # ~0 and ~1 probabilities
  out = evaluate.Outputs(np.concatenate([big, zero]), np.zeros((4, 1)), out_test, np.zeros((4, 1)))
  ref = evaluate.Outputs(np.concatenate([big[::-1], zero[::-1]]), np.zeros((4, 1)), ref_test, np.zeros((4, 1)))
  task = _task([0] * 4, [0, 1], [2, 3], [0] * 4, None)
  res = evaluate.divergences(out, ref, task)
  assert all(np.isfinite(v) for v in res.values())
  p, q = softmax(out_test.astype(np.float64), -1), softmax(ref_test.astype(np.float64), -1)
  assert res["KL_t"] == pytest.approx(np.mean(np.sum(q * np.log(q / p), -1)), rel=1e-6)
  for name, rows in (("r", [0, 1]), ("f", [2, 3])):
    a, b = softmax(out.logits_train[rows], -1), softmax(ref.logits_train[rows], -1)
    assert res[f"KL_{name}"] == pytest.approx(np.mean(np.sum(b * (np.log(b + 1e-12) - np.log(a + 1e-12)), -1)),
                                              rel=1e-6)


def test_metrics_are_deterministic_when_members_are_subsampled():
  rng = np.random.default_rng(3)
  y, y_test = rng.integers(0, 3, 30), rng.integers(0, 3, 6)               # |D_r| = 26 > |D_t| = 6
  out = evaluate.Outputs(rng.normal(size=(30, 3)) + 2.0 * np.eye(3)[y], np.zeros((30, 1)), rng.normal(size=(6, 3)),
                         np.zeros((6, 1)))
  task = _task(y, np.arange(4, 30), np.arange(4), y_test, None)
  first = evaluate.unlearning_metrics(out, task)
  assert all(evaluate.unlearning_metrics(out, task)["MIA"] == first["MIA"] for _ in range(5))


def _representation_by_hand(out, orig, retain, forget, y_probe, seed, max_rows):
  """The documented checks: rows drawn by one generator seeded [seed, 17] (forget first), the probe fitted on
  half of the drawn D_f plus as many D_r rows and scored on the other half, CKA on the drawn rows."""
  from jaxml.metrics.representation import linear_cka, linear_probe_accuracy

  rng = np.random.default_rng([seed, 17])
  f = rng.permutation(forget)[: 2 * max_rows]
  r = rng.permutation(retain)[:max_rows]
  half = f.size // 2
  fit = np.concatenate([f[:half], r[:half]])
  return dict(probe_f=linear_probe_accuracy(out.feats_train[fit], y_probe[fit], out.feats_train[f[half:]],
                                            y_probe[f[half:]]),
              CKA_f=linear_cka(out.feats_train[f], orig.feats_train[f]),
              CKA_r=linear_cka(out.feats_train[r], orig.feats_train[r]))


@pytest.mark.parametrize("n_forget,seed,max_rows,probe_labels", [(850, None, None, False), (30, 3, 6, True),
                                                                 (4, 2, 400, False), (3, 1, 400, True)])
def test_representation_checks_follow_the_documented_rows(n_forget, seed, max_rows, probe_labels):
  rng = np.random.default_rng(11)
  n = n_forget + 120
  feats = rng.normal(size=(n, 4))
  y = rng.integers(0, 3, n)
  y_fine = rng.integers(0, 5, n)
  feats[:, 0] += y_fine if probe_labels else y         # decodable, noisily, from the first feature
  orig = evaluate.Outputs(None, feats + 0.7 * rng.normal(size=(n, 4)), None, None)
  out = evaluate.Outputs(None, feats, None, None)
  perm = rng.permutation(n)
  forget, retain = np.sort(perm[:n_forget]), np.sort(perm[n_forget:])
  task = UnlearningTask(np.zeros((n, 1)), y, retain, forget, np.zeros((2, 1)), np.zeros(2, int), 3, (), None,
                        y_fine if probe_labels else None)
  kw = {k: v for k, v in dict(seed=seed, max_rows=max_rows).items() if v is not None}
  got = evaluate.representation_checks(out, orig, task, **kw)
  assert set(got) == {"probe_f", "CKA_f", "CKA_r"}
  want = _representation_by_hand(out, orig, retain, forget, y_fine if probe_labels else y, kw.get("seed", 0),
                                 kw.get("max_rows", 400))
  if n_forget < 4:
    assert np.isnan(got["probe_f"]) and np.isnan(got["CKA_f"])
    assert got["CKA_r"] == want["CKA_r"]
  else:
    assert got == want
