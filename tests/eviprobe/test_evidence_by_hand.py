"""The probe's evidence on a 4-node path graph, against values worked out by hand.

Graph 0 - 1 - 2 - 3, one latent dimension, q = (−3, −1, 1, 3), labels (0, 0, 1, 1), every node both a train and a
validation node. Fit: μ = (−2, 2); C = (1 + 1 + 1 + 1) / 4 = 1; in one dimension OAS gives ρ = 1 and Σ = tr C = 1;
m_i· = (q_i − μ)² = (1, 25), (1, 9), (9, 1), (25, 1); the validation mean of m per class is 1, so s = 1 and
log π = −m / 2. Logits (b_i, b_i) with b = (0, 1, 2, 3): p = ½, ν_i = b_i + log 2, τ_i = (i + 2) / 5.
Evidence e_ic = N_L p π = 2 exp(−m_ic / 2): E = 2(e^{−½} + e^{−12.5}), 2(e^{−½} + e^{−4.5}) and the mirror image.
Own-evidence guard: q̄ = 0, so g = q² = (9, 1, 1, 9) and log g has mean and std log 9 / 2 over the validation
nodes; the inner nodes sit one std below: p^ctr = Φ(−1); the outer ones at Φ(1).
"""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from configs import eviprobe_graphs as cfg_module
from jaxml.eviprobe import api, probe
from jaxml.eviprobe.probe import ProbeConfig

Q = np.array([[-3.0], [-1.0], [1.0], [3.0]], np.float32)
LABELS = np.array([0, 0, 1, 1], np.int32)
LOGITS = np.repeat(np.arange(4.0, dtype=np.float32)[:, None], 2, 1)
EDGES = np.array([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]], np.int32)
ALL = np.arange(4)
# P = D̃⁻¹(A + I) of the path written out
P = np.array([[1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [0, 1 / 3, 1 / 3, 1 / 3], [0, 0, 1 / 2, 1 / 2]])
E_OWN = 2.0 * np.array([np.exp(-0.5) + np.exp(-12.5), np.exp(-0.5) + np.exp(-4.5),
                        np.exp(-4.5) + np.exp(-0.5), np.exp(-12.5) + np.exp(-0.5)])
TAU = np.array([0.4, 0.6, 0.8, 1.0])
R0 = np.array([1 / (1 + np.exp(-12.0)), 1 / (1 + np.exp(-4.0)), 1 / (1 + np.exp(4.0)), 1 / (1 + np.exp(12.0))])


def _state():
  return probe.fit_probe(jnp.asarray(Q), None, jnp.asarray(LOGITS), jnp.asarray(LABELS), jnp.asarray(ALL),
                         jnp.asarray(ALL))


def _score(config):
  return probe.score(_state(), jnp.asarray(Q), None, jnp.asarray(LOGITS), jnp.asarray(EDGES), config)


def _ppr(s, a, steps):
  """x ← (1 − a) P x + a s, written with the dense P above."""
  x = s.copy()
  for _ in range(steps):
    x = (1 - a) * P @ x + a * s
  return x


def test_fit_by_hand():
  lp = _state().latents[0]
  np.testing.assert_allclose(np.asarray(lp.mu), [[-2.0], [2.0]], atol=1e-6)
  np.testing.assert_allclose(np.asarray(lp.chol), [[1.0]], atol=1e-6)
  np.testing.assert_allclose(np.asarray(lp.scale), [1.0, 1.0], rtol=1e-6)
  np.testing.assert_allclose(float(lp.shrinkage), 1.0)


def test_own_evidence_and_output_typicality_by_hand():
  ev = probe.evidence(_state(), (jnp.asarray(Q),), jnp.asarray(LOGITS), ProbeConfig())
  np.testing.assert_allclose(np.exp(np.asarray(ev["log_E"])), E_OWN, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(ev["r"])[:, 0], R0, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(np.asarray(probe.output_typicality(_state(), jnp.asarray(LOGITS))), TAU, rtol=1e-6)


def test_one_strength_step_by_hand():
  """k_prop = 1, a = ½: Ẽ = ½ P S + ½ S with S = E τ; for node 0, ½ (S_0 + S_1) / 2 + ½ S_0."""
  out = _score(ProbeConfig(teleport=0.5, k_prop=1))
  s = E_OWN * TAU
  node0 = 0.5 * (s[0] + s[1]) / 2 + 0.5 * s[0]
  node1 = 0.5 * (s[0] + s[1] + s[2]) / 3 + 0.5 * s[1]
  np.testing.assert_allclose(np.asarray(out["evidence"])[:2], [node0, node1], rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["u_epi"])[0], 2.0 / (2.0 + node0), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["alpha"])[0], 1.0 + node0 * np.array([R0[0], 1 - R0[0]]), rtol=1e-5)


def _default_expected(propagation, a, steps):
  if propagation == "strength":
    return _ppr(E_OWN * TAU, a, steps)
  if propagation == "tau":
    return E_OWN * _ppr(TAU, a, steps)
  if propagation == "log":
    return np.exp(_ppr(np.log(E_OWN * TAU), a, steps))
  return E_OWN * TAU


@pytest.mark.parametrize("where", ["ProbeConfig", "experiment config"])
def test_default_propagation_by_hand(where):
  """The default rule (linear propagation of S = E τ; ProbeConfig's a = 0.1, the experiment's a = 0.5) with its
  K_prop = 10 steps; any other rule gives different numbers on this graph."""
  config = ProbeConfig() if where == "ProbeConfig" else api.probe_config(dict(cfg_module.get_config("smoke").eviprobe))
  out = _score(config)
  want = _default_expected("strength", config.teleport, config.k_prop)
  np.testing.assert_allclose(np.asarray(out["evidence"]), want, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["u_epi"]), 2.0 / (2.0 + want), rtol=1e-5)
  for other in ("tau", "log", "none"):
    assert not np.allclose(_default_expected(other, config.teleport, config.k_prop), want, rtol=1e-3), other


@pytest.mark.parametrize("propagation", ["tau", "log", "none"])
def test_other_propagation_rules_by_hand(propagation):
  out = _score(ProbeConfig(propagation=propagation, teleport=0.3))
  np.testing.assert_allclose(np.asarray(out["evidence"]), _default_expected(propagation, 0.3, 10), rtol=1e-5)


def test_centre_guard_by_hand():
  """γ_c = 0.2: the inner nodes' strength is scaled by Φ(−1) / 0.2, the outer ones' (Φ(1) > γ_c) kept; the far
  guard sees f = 1 on every node (its validation spread is 0), so it leaves all of them alone."""
  lp = _state().latents[0]
  np.testing.assert_allclose(np.asarray(lp.tails)[2:], [np.log(9) / 2, np.log(9) / 2], rtol=1e-5)
  base = np.asarray(_score(ProbeConfig(teleport=0.5))["evidence"])
  out = _score(ProbeConfig(teleport=0.5, own_guard=0.1, centre_guard=0.2))
  factor = np.array([1.0, norm.cdf(-1) / 0.2, norm.cdf(-1) / 0.2, 1.0])
  np.testing.assert_allclose(np.asarray(out["evidence"]), base * factor, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["u_epi"]), 2.0 / (2.0 + base * factor), rtol=1e-5)
  # with both guards off the paper's probe is returned unchanged
  off = _score(ProbeConfig(teleport=0.5, own_guard=0.0, centre_guard=0.0))
  np.testing.assert_array_equal(np.asarray(off["evidence"]), base)
