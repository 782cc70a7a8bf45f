"""Probe properties on the 4-node path graph of `test_evidence_by_hand` (q = (−3, −1, 1, 3), labels (0, 0, 1, 1),
μ = (−2, 2), Σ = 1, so m_i· = (1, 25), (1, 9), (9, 1), (25, 1)), worked out by hand for the fit's validation scale
and the conformal typicality.
"""

import jax.numpy as jnp
import numpy as np

from jaxml.eviprobe import probe

Q = np.array([[-3.0], [-1.0], [1.0], [3.0]], np.float32)
LABELS = np.array([0, 0, 1, 1], np.int32)
ALL = np.arange(4)


def _fit(val_idx):
  return probe.fit_latent_probe(jnp.asarray(Q), jnp.asarray(LABELS), jnp.asarray(ALL), jnp.asarray(val_idx), 2)


def test_validation_scale_with_one_validation_node_per_class_is_d_over_its_distance():
  # V = {1, 3}: one validation node per class, m_{1,0} = (−1 + 2)² = 1 and m_{3,1} = (3 − 2)² = 1, so
  # s_c = d / mean_{j ∈ V_c} m_jc = 1 / 1 for both classes (a mean over one node is that node's m).
  lp = _fit(np.array([1, 3]))
  np.testing.assert_allclose(np.asarray(lp.scale), [1.0, 1.0], rtol=1e-6)
  # V = {0, 2, 3}: class 0 has the single validation node 0 (m = 1), class 1 two nodes (m = 1, 1).
  np.testing.assert_allclose(np.asarray(_fit(np.array([0, 2, 3])).scale), [1.0, 1.0], rtol=1e-6)


def test_conformal_typicality_counts_only_the_class_validation_nodes():
  # π_ic = (1 + #{j ∈ V_c : m_jc ≥ m_ic}) / (|V_c| + 1), V = all nodes, V_0 = {0, 1}, V_1 = {2, 3}; the members'
  # own-class distances are all 1. An own-class node (m = 1) ties both members: 3 / 3; the other class
  # (m = 9 or 25) exceeds both: 1 / 3 (counting every validation node would give node 0's m_01 = 25 a count of 1).
  lp = _fit(ALL)
  log_pi = np.asarray(probe.latent_log_typicality(lp, jnp.asarray(Q), "conformal"))
  expected = np.array([[1.0, 1 / 3], [1.0, 1 / 3], [1 / 3, 1.0], [1 / 3, 1.0]])
  np.testing.assert_allclose(np.exp(log_pi), expected, rtol=1e-6)
  # a query at the class-0 mean: m = (0, 16) -> (3/3, 1/3); between the means: m = (4, 4) -> (1/3, 1/3)
  q = jnp.asarray([[-2.0], [0.0]], jnp.float32)
  np.testing.assert_allclose(np.exp(np.asarray(probe.latent_log_typicality(lp, q, "conformal"))),
                             [[1.0, 1 / 3], [1 / 3, 1 / 3]], rtol=1e-6)
