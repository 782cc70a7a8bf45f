"""Dirichlet read-outs against the formulas of the module doc, written out with numpy/scipy loops."""

import jax.numpy as jnp
import numpy as np
from scipy.special import digamma

from jaxml.eviprobe import readouts

# Rows with zero beliefs (α_c = 1) exercise the 0/0 guards of the balance and of the denominator.
_ALPHA = np.array([[2.5, 1.0, 4.0, 1.7],
                   [1.0, 1.0, 6.0, 1.0],
                   [1.0, 1.0, 1.0, 1.0],
                   [3.0, 3.0, 1.2, 9.0],
                   [1.0, 2.0, 1.0, 5.5]])


def _dissonance_loops(alpha: np.ndarray) -> np.ndarray:
  out = []
  for row in alpha:
    b = (row - 1.0) / row.sum()
    total = 0.0
    for k in range(len(b)):
      others = [j for j in range(len(b)) if j != k]
      den = sum(b[j] for j in others)
      if den <= 0:
        continue
      bal = [0.0 if b[j] + b[k] == 0 else 1.0 - abs(b[j] - b[k]) / (b[j] + b[k]) for j in others]
      total += b[k] * sum(b[j] * w for j, w in zip(others, bal)) / den
    out.append(total)
  return np.array(out)


def _expected_entropy(alpha: np.ndarray) -> np.ndarray:
  a0 = alpha.sum(-1)
  return digamma(a0 + 1.0) - np.sum(alpha / a0[..., None] * digamma(alpha + 1.0), -1)


def test_expected_entropy_closed_form_on_batched_input():
  alpha = np.random.default_rng(0).uniform(0.5, 6.0, size=(2, 3, 4))
  np.testing.assert_allclose(readouts.expected_entropy(jnp.asarray(alpha, jnp.float32)), _expected_entropy(alpha),
                             rtol=1e-4)


def test_dissonance_matches_the_subjective_logic_loops():
  d = np.asarray(readouts.dissonance(jnp.asarray(_ALPHA, jnp.float32)))
  assert np.all(np.isfinite(d))
  np.testing.assert_allclose(d, _dissonance_loops(_ALPHA), rtol=1e-5, atol=1e-7)
  assert d[1] == 0.0 and d[2] == 0.0         # one class holds all belief / no belief at all


def test_dirichlet_readouts_every_key():
  alpha = _ALPHA
  pred = np.array([2, 0, 3, 1, 1])            # not the argmax everywhere: u_alea must use `pred`
  out = readouts.dirichlet_readouts(jnp.asarray(alpha, jnp.float32), jnp.asarray(pred))
  a0 = alpha.sum(-1)
  mean = alpha / a0[:, None]
  total = -np.sum(mean * np.log(mean), -1)
  eh = _expected_entropy(alpha)
  expected = {"alpha0": a0, "mean_probs": mean, "u_epi": 4.0 / a0, "u_alea": 1.0 - mean[np.arange(5), pred],
              "expected_entropy": eh, "total_entropy": total, "mutual_info": total - eh,
              "dissonance": _dissonance_loops(alpha)}
  assert set(out) == set(expected)
  for key, value in expected.items():
    np.testing.assert_allclose(out[key], value, rtol=1e-4, atol=1e-6, err_msg=key)
