"""`emf/losses.py` against its formulas written out in numpy (module doc of `emf.losses`), on a small
smooth network whose time derivative is known: the whole EMF loss (draws, labels, guidance, target,
weights, diagnostics) for u / x1, every Euler field, the convex form, clips and both time laws; the
JVP target; and the gradient of the loss = that of the same regression onto the constant target."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.emf import losses
from jaxml.emf.losses import EMFConfig

# numpy at import time (no XLA client before mutmut's fork server forks its workers).
_D, _K = 3, 3
_rng = np.random.default_rng(0)
_P = {"W": (0.4 * _rng.normal(size=(_D, _D))).astype(np.float32), "a": _rng.normal(size=_D).astype(np.float32),
      "b": _rng.normal(size=_D).astype(np.float32), "c": _rng.normal(size=_D).astype(np.float32),
      "emb": _rng.normal(size=(_K + 1, _D)).astype(np.float32)}
_X1 = _rng.normal(size=(8, _D)).astype(np.float32)
_Y = np.array([0, 1, 2, 0, 1, 2, 2, 1], np.int32)
_SEED = 10    # the loss's key: some labels dropped and some kept, the clamp, the clip and both convex branches act


def _net(xp):
  """f(x, t, r | label) = x W + a t + b r + c tanh(t r) (+ emb[label] (1 + t)) in numpy or jax.numpy."""
  def apply_fn(params, x, t, r, label=None):
    out = x @ params["W"] + params["a"] * t[:, None] + params["b"] * r[:, None] + params["c"] * xp.tanh(t * r)[:, None]
    return out if label is None else out + params["emb"][label] * (1.0 + t)[:, None]
  return apply_fn


_NP = {k: v.astype(np.float64) for k, v in _P.items()}


def _velocity(out, x, t, cfg):
  return out if cfg.param == "u" else (out - x) / np.maximum(1.0 - t, cfg.eps)[:, None]


def _euler_target(x, t, r, anchor, out, label, cfg, vc):
  """Returns (target, gain, rms of the correction) written out from the module doc."""
  f, d = _net(np), cfg.delta
  if cfg.euler_field in ("model", "diag"):
    vel = _velocity(f(_NP, x, t, t, label), x, t, cfg)
  elif cfg.euler_field == "full":
    vel = _velocity(f(_NP, x, t, np.ones_like(t), label), x, t, cfg)
  else:
    vel = vc
  nxt = f(_NP, x + d * vel, t + d, r, label)
  span = np.maximum(r - t - d, 0.0)
  if cfg.form == "convex":
    long = (r - t) > d
    gap = np.where(long, r - t, 1.0)
    target = np.where(long[:, None], (d * anchor + span[:, None] * nxt) / gap[:, None], anchor)
    gain = np.where(long, span / gap, 0.0)
    corr = target - anchor
  else:
    gain = span / d if cfg.param == "u" else span * np.maximum(1 - t, cfg.eps) / (np.maximum(1 - r, cfg.eps) * d)
    corr = gain[:, None] * (nxt - out)
    if cfg.target_clip > 0:
      corr = np.clip(corr, -cfg.target_clip, cfg.target_clip)
    target = anchor + corr
  return target, gain, np.sqrt(np.sum(corr ** 2, axis=1) / x.shape[1])


def _time_draws(key, bsz, cfg):
  if cfg.time_law == "uniform":
    ab = np.asarray(jax.random.uniform(key, (2, bsz)), np.float64)
  else:
    ab = 1.0 / (1.0 + np.exp(-(cfg.ln_mu + cfg.ln_sigma * np.asarray(jax.random.normal(key, (2, bsz)), np.float64))))
  n_int = int(round(cfg.rho * bsz))
  is_int = np.arange(bsz) < n_int
  return np.where(is_int, ab.min(0), ab[0]), np.where(is_int, ab.max(0), ab[0])


def _draws(rng, cfg, with_labels):
  """The loss's random draws, taken from the same keys: x0, t, r, labels, dropped."""
  bsz = _X1.shape[0]
  noise_rng, time_rng, label_rng = jax.random.split(rng, 3)
  x0 = np.asarray(jax.random.normal(noise_rng, _X1.shape), np.float64)
  t, r = _time_draws(time_rng, bsz, cfg)
  n_int = int(round(cfg.rho * bsz))
  if not with_labels:
    return x0, t, r, None, None, n_int
  dropped = np.asarray(jax.random.uniform(label_rng, (bsz,))) < cfg.label_dropout
  return x0, t, r, np.where(dropped, _K, _Y), dropped, n_int


def _reference_loss(cfg, rng, with_labels):
  """(loss, aux, constant target, constant weight, inputs of the differentiated call)."""
  f = _net(np)
  x1 = _X1.astype(np.float64)
  x0, t, r, labels, dropped, n_int = _draws(rng, cfg, with_labels)
  bsz = len(t)
  xt = (1 - t)[:, None] * x0 + t[:, None] * x1
  vc = x1 - x0
  out = f(_NP, xt, t, r, labels)
  anchor = vc if cfg.param == "u" else x1
  if labels is not None and not (cfg.guidance_w == 1.0 and cfg.guidance_k == 0.0):
    null = np.full(bsz, _K)
    w, k = cfg.guidance_w, cfg.guidance_k
    guided = w * anchor + (1 - w - k) * f(_NP, xt, t, t, null) + k * f(_NP, xt, t, t, labels)
    anchor = np.where(dropped[:, None], anchor, guided)
  m = bsz if cfg.aux_rows == "all" else n_int
  target, aux = anchor.copy(), {}
  if m:
    lab = None if labels is None else labels[:m]
    target[:m], gain, corr = _euler_target(xt[:m], t[:m], r[:m], anchor[:m], out[:m], lab, cfg, vc[:m])
    gain, corr = (gain[:n_int], corr[:n_int]) if n_int else (gain, corr)
    aux = {"gain_median": np.median(gain), "gain_max": gain.max(), "corr_median": np.median(corr),
           "corr_max": corr.max()}
  err = np.sum((out - target) ** 2, axis=1)
  scale = np.maximum(1 - t, cfg.eps) ** 2 if cfg.param == "x1" else np.ones_like(t)
  err = err / scale
  weight = np.ones_like(err) if cfg.p == 0 else (err + cfg.c) ** -cfg.p
  is_int = np.arange(bsz) < n_int
  aux |= {"mse": err.mean(), "mse_diag": np.sum(np.where(is_int, 0, err)) / max(bsz - n_int, 1),
          "mse_interval": np.sum(np.where(is_int, err, 0)) / max(n_int, 1), "active_frac": np.mean(r - t > cfg.delta)}
  return np.mean(weight * err), aux, target, weight / scale, (xt, t, r, labels)


_CASES = {
    "u_model": (EMFConfig(delta=0.05, rho=0.5), False),
    "x1_full_clip_logit": (EMFConfig(param="x1", delta=0.04, rho=0.75, euler_field="full", time_law="logit_normal",
                                     ln_mu=0.8, ln_sigma=1.2, p=0.5, c=0.1, eps=0.3, aux_rows="all",
                                     target_clip=0.4, guidance_w=2.0), False),   # guidance needs labels: ignored
    "u_one_interval_row": (EMFConfig(delta=0.05, rho=0.125), False),
    "u_one_diagonal_row": (EMFConfig(delta=0.05, rho=0.875), False),
    "u_vc_convex_guided": (EMFConfig(delta=0.05, rho=0.5, euler_field="vc", form="convex", num_classes=_K,
                                     label_dropout=0.3, guidance_w=1.5, guidance_k=0.2, p=0), True),
    "x1_diag_labels_all_rows": (EMFConfig(param="x1", delta=0.05, rho=1.0, euler_field="diag", num_classes=_K,
                                          label_dropout=0.4, guidance_w=0.7, p=1.5, c=0.5, eps=0.1,
                                          target_clip=2.5), True),
    "u_labels_no_guidance_no_interval": (EMFConfig(delta=0.05, rho=0.0, num_classes=_K, label_dropout=0.5,
                                                   aux_rows="interval"), True),
    "u_labels_all_rows_rho0": (EMFConfig(delta=0.05, rho=0.0, num_classes=_K, guidance_k=0.6, aux_rows="all",
                                         target_clip=0.05), True),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_emf_loss_value_aux_and_gradient_match_the_formulas(name):
  cfg, with_labels = _CASES[name]
  rng = jax.random.key(_SEED)
  batch = {"x": _X1, "y": _Y} if with_labels else {"x": _X1}
  loss_fn = losses.make_emf_loss(_net(jnp), cfg)
  loss, aux = loss_fn(_P, batch, rng)
  want, want_aux, target, weight, (xt, t, r, labels) = _reference_loss(cfg, rng, with_labels)
  np.testing.assert_allclose(float(loss), want, rtol=2e-4, atol=1e-6)
  assert sorted(aux) == sorted(want_aux)
  for k in want_aux:
    np.testing.assert_allclose(float(aux[k]), want_aux[k], rtol=2e-4, atol=1e-6, err_msg=k)
  # The target and the weight are constants: the gradient is that of a weighted regression onto them.
  f, args = _net(jnp), [jnp.asarray(a, jnp.float32) for a in (xt, t, r, target, weight)]
  lab = None if labels is None else jnp.asarray(labels)
  plain = lambda p: jnp.mean(args[4] * jnp.sum((f(p, args[0], args[1], args[2], lab) - args[3]) ** 2, axis=1))
  got, ref = jax.grad(lambda p: loss_fn(p, batch, rng)[0])(_P), jax.grad(plain)(_P)
  for k in _P:
    np.testing.assert_allclose(got[k], ref[k], rtol=2e-3, atol=2e-5, err_msg=k)


def test_the_cases_exercise_the_branches():
  """Guards against a reference that agrees only because a branch is never reached."""
  cfg, _ = _CASES["x1_full_clip_logit"]
  x0, t, r, *_ = _draws(jax.random.key(_SEED), cfg, False)
  assert np.any(1 - t < cfg.eps) and np.any(1 - t > cfg.eps)          # the eps clamp acts on some rows
  _, _, target, _, (xt, *_rest) = _reference_loss(cfg, jax.random.key(_SEED), False)
  unclipped, _, _ = _euler_target(xt, t, r, _X1.astype(np.float64), _net(np)(_NP, xt, t, r), None,
                                  cfg._replace(target_clip=0.0), None)
  assert not np.allclose(unclipped, target)                             # the clip changes the target
  for cfg, with_labels in _CASES.values():
    if with_labels:
      dropped = _draws(jax.random.key(_SEED), cfg, True)[4]
      assert dropped.any() and not dropped.all()
  cfg, _ = _CASES["u_vc_convex_guided"]
  _, t, r, _, dropped, n_int = _draws(jax.random.key(_SEED), cfg, True)
  assert np.any(r[:n_int] - t[:n_int] > cfg.delta) and np.any(r[:n_int] - t[:n_int] < cfg.delta)


def test_rejects_unknown_settings():
  f = _net(jnp)
  for bad, what in ((EMFConfig(param="v"), "param 'v'"), (EMFConfig(aux_rows="some"), "aux_rows 'some'")):
    with pytest.raises(ValueError, match=what):
      losses.make_emf_loss(f, bad)
  with pytest.raises(ValueError, match="time_law"):
    losses.sample_time_pairs(jax.random.key(0), 4, EMFConfig(time_law="beta"))
  x, t = jnp.asarray(_X1[:2]), jnp.array([0.1, 0.2])
  with pytest.raises(ValueError, match="euler_field"):
    losses.euler_target(f, _P, x, t, t + 0.5, x, x, None, EMFConfig(euler_field="other"))
  with pytest.raises(ValueError, match="conditional velocity"):
    losses.euler_target(f, _P, x, t, t + 0.5, x, x, None, EMFConfig(euler_field="vc"))
  with pytest.raises(ValueError, match="u-prediction"):
    losses.euler_target(f, _P, x, t, t + 0.5, x, x, None, EMFConfig(param="x1", form="convex"))


def test_jvp_target_is_the_analytic_time_derivative():
  """D_t f along (v, 1, 0) = v W + a + c r (1 − tanh²(t r)) (+ emb[label]); u: anchor + (r − t) D; x1: the
  (1 − t)/(1 − r) factor."""
  x, v, anchor = (_rng_case(i) for i in range(3))
  t, r = np.array([0.1, 0.3, 0.85, 0.5]), np.array([0.6, 0.95, 0.9, 0.5])
  d = v @ _NP["W"] + _NP["a"] + _NP["c"] * (r * (1 - np.tanh(t * r) ** 2))[:, None]
  lab = np.array([0, 2, 1, 3])
  args = [jnp.asarray(a, jnp.float32) for a in (x, t, r, anchor)]
  got = losses.jvp_target(_net(jnp), _P, args[0], args[1], args[2], args[3], None, "u", jnp.asarray(v, jnp.float32))
  np.testing.assert_allclose(got, anchor + (r - t)[:, None] * d, rtol=1e-5, atol=1e-5)
  got = losses.jvp_target(_net(jnp), _P, args[0], args[1], args[2], args[3], jnp.asarray(lab), "x1",
                          jnp.asarray(v, jnp.float32), eps=0.2)
  coef = (r - t) * np.maximum(1 - t, 0.2) / np.maximum(1 - r, 0.2)
  np.testing.assert_allclose(got, anchor + coef[:, None] * (d + _NP["emb"][lab]), rtol=1e-5, atol=1e-5)
  got = losses.jvp_target(_net(jnp), _P, args[0], args[1], args[2], args[3], None, "x1", jnp.asarray(v, jnp.float32))
  coef = (r - t) * (1 - t) / (1 - r)                                    # eps = 0 by default
  np.testing.assert_allclose(got, anchor + coef[:, None] * d, rtol=1e-5, atol=1e-5)


def _rng_case(i):
  return np.random.default_rng(100 + i).normal(size=(4, _D))


def test_small_helpers():
  x = jnp.zeros((2, 3, 4))
  assert losses._bcast(jnp.array([1.0, 2.0]), x).shape == (2, 1, 1)
  np.testing.assert_allclose(losses.per_row_sq(jnp.arange(24.0).reshape(2, 3, 4)),
                             [np.sum(np.arange(12.0) ** 2), np.sum(np.arange(12.0, 24.0) ** 2)])
  assert [losses.num_interval_rows(b, rho) for b, rho in [(8, 0.5), (7, 0.5), (5, 0.5), (10, 0.25), (3, 0.0)]] == \
      [4, 4, 2, 2, 0]
  out, xx, t = jnp.asarray(_X1[:4]), jnp.asarray(_X1[4:]), jnp.array([0.0, 0.5, 0.95, 1.0])
  np.testing.assert_array_equal(losses.velocity_from(out, xx, t, "u", 0.1), out)
  np.testing.assert_allclose(losses.velocity_from(out, xx, t, "x1", 0.1),
                             (_X1[:4] - _X1[4:]) / np.maximum(1 - np.asarray(t), 0.1)[:, None], rtol=1e-6)
  labels, dropped = losses.labels_for_training(jax.random.key(0), jnp.asarray(_Y), EMFConfig(num_classes=_K))
  assert labels.dtype == jnp.int32 and dropped.dtype == jnp.bool_
  want = np.asarray(jax.random.uniform(jax.random.key(0), _Y.shape)) < 0.1
  np.testing.assert_array_equal(dropped, want)
  np.testing.assert_array_equal(labels, np.where(want, _K, _Y))
  assert losses.labels_for_training(jax.random.key(0), None, EMFConfig(num_classes=_K)) == (None, None)
  assert losses.labels_for_training(jax.random.key(0), jnp.asarray(_Y), EMFConfig()) == (None, None)
  one, _ = losses.labels_for_training(jax.random.key(0), jnp.zeros(8, jnp.int32), EMFConfig(num_classes=1))
  np.testing.assert_array_equal(one, np.where(np.asarray(jax.random.uniform(jax.random.key(0), (8,))) < 0.1, 1, 0))
  w = losses.adaptive_weight(jnp.array([0.0, 1.0, 3.0]), 0.5, 1.0)
  np.testing.assert_allclose(w, [1.0, 2 ** -0.5, 0.5], rtol=1e-6)
  np.testing.assert_array_equal(losses.adaptive_weight(jnp.array([0.0, 5.0]), 0, 1.0), [1.0, 1.0])


def test_time_pairs_by_hand():
  for cfg in (EMFConfig(rho=0.5), EMFConfig(rho=0.3, time_law="logit_normal", ln_mu=-0.5, ln_sigma=2.0)):
    t, r = losses.sample_time_pairs(jax.random.key(4), 10, cfg)
    want_t, want_r = _time_draws(jax.random.key(4), 10, cfg)
    np.testing.assert_allclose(t, want_t, rtol=1e-6)
    np.testing.assert_allclose(r, want_r, rtol=1e-6)

