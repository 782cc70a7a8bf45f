"""Spec §6 properties of the closed-form probe, propagation and read-outs."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.eviprobe import probe, readouts
from jaxml.eviprobe.probe import ProbeConfig


def _toy(n=40, k=3, d=5, seed=0):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, k, n).astype(np.int32)
  means = 3.0 * rng.normal(size=(k, d))
  q = (means[labels] + rng.normal(size=(n, d))).astype(np.float32)
  z = (q @ rng.normal(size=(d, d)) * 0.5).astype(np.float32)
  logits = (q @ rng.normal(size=(d, k))).astype(np.float32)
  a = np.triu(rng.random((n, n)) < 0.1, 1)
  src, dst = np.nonzero(a | a.T)
  edges = np.stack([src, dst]).astype(np.int32)
  idx = rng.permutation(n)
  return dict(q=q, z=z, logits=logits, labels=labels, edges=edges, train_idx=np.sort(idx[:15]),
              val_idx=np.sort(idx[15:25]), k=k)


def _fit_score(t, config=ProbeConfig()):
  st = probe.fit_probe(jnp.asarray(t["q"]), jnp.asarray(t["z"]), jnp.asarray(t["logits"]), jnp.asarray(t["labels"]),
                       jnp.asarray(t["train_idx"]), jnp.asarray(t["val_idx"]), config)
  return st, probe.score(st, jnp.asarray(t["q"]), jnp.asarray(t["z"]), jnp.asarray(t["logits"]),
                         jnp.asarray(t["edges"]), config)


ABLATIONS = [ProbeConfig(), ProbeConfig(fusion="latent"), ProbeConfig(fusion="output"), ProbeConfig(propagation="none"),
             ProbeConfig(propagation="tau"), ProbeConfig(propagation="classwise"), ProbeConfig(norm="sym"),
             ProbeConfig(typicality="chi2"), ProbeConfig(typicality="conformal"), ProbeConfig(typicality="cosine"),
             ProbeConfig(temperature=True), ProbeConfig(latent="z"), ProbeConfig(latent="both"),
             ProbeConfig(propagation="log"), ProbeConfig(teleport=1.0)]


@pytest.mark.parametrize("config", ABLATIONS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c._asdict().items()
                                                                      if v != ProbeConfig._field_defaults[k]) or "default")
def test_alpha_at_least_one_and_alpha0_identity(config):
  t = _toy()
  _, out = _fit_score(t, config)
  alpha = np.asarray(out["alpha"])
  assert np.all(np.isfinite(alpha)) and np.all(alpha >= 1.0)
  np.testing.assert_allclose(alpha.sum(-1), t["k"] + np.asarray(out["evidence"]), rtol=1e-5)
  u = np.asarray(out["u_epi"])
  assert np.all((u > 0) & (u <= 1)) and np.all((np.asarray(out["u_alea"]) >= 0) & (np.asarray(out["u_alea"]) < 1))


def test_permutation_invariance():
  t = _toy()
  _, out = _fit_score(t)
  perm = np.random.default_rng(1).permutation(t["q"].shape[0])
  inv = np.argsort(perm)
  tp = dict(t, q=t["q"][perm], z=t["z"][perm], logits=t["logits"][perm], labels=t["labels"][perm],
            edges=inv[t["edges"]].astype(np.int32), train_idx=np.sort(inv[t["train_idx"]]),
            val_idx=np.sort(inv[t["val_idx"]]))
  _, outp = _fit_score(tp)
  for key in ("alpha", "u_epi", "u_alea", "mutual_info"):
    np.testing.assert_allclose(np.asarray(outp[key]), np.asarray(out[key])[perm], rtol=2e-4, atol=1e-5)


def test_propagation_identities():
  t = _toy()
  s = jnp.asarray(np.random.default_rng(0).random(t["q"].shape[0]), jnp.float32)
  edges = jnp.asarray(t["edges"])
  np.testing.assert_array_equal(probe.propagate_scalar(s, edges, teleport=1.0, steps=10), s)
  const = jnp.full_like(s, 2.5)
  np.testing.assert_allclose(probe.propagate_scalar(const, edges, teleport=0.1, steps=10), const, rtol=1e-6)
  # symmetric normalisation does not keep a constant field constant on an irregular graph
  assert not np.allclose(probe.propagate_scalar(const, edges, teleport=0.1, steps=10, norm="sym"), const)


def test_moving_latent_away_increases_epistemic_score():
  t = _toy()
  st, _ = _fit_score(t)
  lp = st.latents[0]
  centre = np.asarray(lp.mu).mean(0)
  direction = np.random.default_rng(2).normal(size=centre.shape)
  direction /= np.linalg.norm(direction)
  spread = np.linalg.norm(np.asarray(lp.mu) - centre, axis=1).max()
  u_prev, m_prev = None, None
  for dist in spread * np.linspace(1.5, 3.0, 6):
    q = t["q"].copy()
    q[0] = centre + dist * direction
    m = np.asarray(probe.sq_mahalanobis(jnp.asarray(q[:1]), lp.mu, lp.chol))[0]
    out = probe.score(st, jnp.asarray(q), jnp.asarray(t["z"]), jnp.asarray(t["logits"]), jnp.asarray(t["edges"]))
    assert int(out["n_clamped"]) == 0
    u = float(out["u_epi"][0])
    if u_prev is not None:
      assert np.all(m > m_prev)          # the point really moves away from every class mean
      assert u > u_prev
    u_prev, m_prev = u, m


def test_expected_entropy_matches_monte_carlo():
  alpha = jnp.asarray([[1.0, 1.0, 1.0], [5.0, 2.0, 1.5], [20.0, 1.2, 3.0], [1.1, 0.9 + 0.2, 40.0]])
  samples = jax.random.dirichlet(jax.random.key(0), alpha, shape=(20000, 4))
  mc = -jnp.sum(samples * jnp.log(jnp.maximum(samples, 1e-30)), -1).mean(0)
  np.testing.assert_allclose(readouts.expected_entropy(alpha), mc, atol=1e-2)


def test_dissonance_cases():
  alpha = jnp.asarray([[1.0, 1.0, 1.0], [11.0, 1.0, 1.0], [11.0, 11.0, 1.0]])
  d = np.asarray(readouts.dissonance(alpha))
  np.testing.assert_allclose(d[:2], 0.0, atol=1e-7)
  np.testing.assert_allclose(d[2], 2 * (10 / 23) * 1.0, rtol=1e-6)   # two equal beliefs b = 10/23


def test_oas_matches_sklearn():
  covariance = pytest.importorskip("sklearn.covariance")
  x = np.random.default_rng(0).normal(size=(30, 8)) @ np.random.default_rng(1).normal(size=(8, 8))
  emp = np.cov(x, rowvar=False, bias=True)
  shrunk, rho = probe.oas_shrink(jnp.asarray(emp, jnp.float32), 30)
  ref = covariance.OAS().fit(x)
  np.testing.assert_allclose(shrunk, ref.covariance_, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(rho, ref.shrinkage_, rtol=1e-4)


def test_fit_and_score_compile_once():
  t = _toy()
  fit = chex.assert_max_traces(probe.fit_probe, n=1)
  fit = jax.jit(fit, static_argnums=6)
  sc = jax.jit(chex.assert_max_traces(probe.score, n=1), static_argnums=5)
  args = [jnp.asarray(t[k]) for k in ("q", "z", "logits", "labels", "train_idx", "val_idx")]
  for shift in (0.0, 1.0, 2.0):
    st = fit(args[0] + shift, *args[1:], ProbeConfig())
    out = sc(st, args[0] + shift, args[1], args[2], jnp.asarray(t["edges"]), ProbeConfig())
    chex.assert_tree_all_finite(out)
  with pytest.raises(ValueError, match="unknown typicality"):
    ProbeConfig(typicality="gauss").validate()


def test_misc_readouts_are_the_named_quantities():
  t = _toy()
  _, out = _fit_score(t)
  pred = np.asarray(t["logits"]).argmax(-1)
  p = np.asarray(jax.nn.softmax(jnp.asarray(t["logits"]), -1))
  np.testing.assert_allclose(np.asarray(out["msp"]), 1.0 - p.max(-1), atol=1e-6)
  # class_split: 1 − r_ŷ, with α = 1 + Ẽ r, so r_ŷ = (α_ŷ − 1) / Ẽ
  alpha, ev = np.asarray(out["alpha"]), np.asarray(out["evidence"])
  r_pred = (alpha[np.arange(pred.size), pred] - 1.0) / ev
  np.testing.assert_allclose(np.asarray(out["class_split"]), 1.0 - r_pred, rtol=1e-4, atol=1e-5)
  # u_alea mixes in vacuity: with little evidence it tends to 1 − 1/K, class_split does not
  assert not np.allclose(np.asarray(out["class_split"]), np.asarray(out["u_alea"]), atol=1e-3)
  for name in probe.MISC_READOUTS:
    _, o = _fit_score(t, ProbeConfig(misc_readout=name))
    np.testing.assert_array_equal(np.asarray(o["misc"]), np.asarray(o[name]))
    np.testing.assert_array_equal(np.asarray(o["u_epi"]), np.asarray(out["u_epi"]))   # OOD score unchanged
  with pytest.raises(ValueError, match="misc_readout"):
    ProbeConfig(misc_readout="vacuity").validate()
