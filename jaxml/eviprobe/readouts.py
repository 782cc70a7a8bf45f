"""Closed-form uncertainty read-outs of Dirichlet concentrations α [N, K].

With α_0 = Σ_c α_c and ᾱ = α / α_0:
  vacuity (epistemic)   u_epi  = K / α_0
  aleatoric             u_alea = 1 − ᾱ_ŷ   (ŷ = the frozen model's prediction)
  expected entropy      EH = E_{π~Dir(α)} H(π) = ψ(α_0 + 1) − Σ_c ᾱ_c ψ(α_c + 1)
  total entropy         H(ᾱ);   mutual information  MI = H(ᾱ) − EH
  dissonance (subjective logic, beliefs b_c = (α_c − 1)/α_0)
      diss = Σ_k b_k Σ_{j≠k} b_j Bal(b_j, b_k) / Σ_{j≠k} b_j,  Bal(x, y) = 1 − |x − y|/(x + y).
"""

import jax
import jax.numpy as jnp
from jax.scipy.special import digamma

__all__ = ["expected_entropy", "dissonance", "dirichlet_readouts"]


def expected_entropy(alpha: jax.Array) -> jax.Array:
  """E_{Dir(α)}[−Σ_c π_c log π_c] for α [..., K] -> [...]."""
  a0 = alpha.sum(-1)
  return digamma(a0 + 1.0) - jnp.sum(alpha / a0[..., None] * digamma(alpha + 1.0), -1)


def dissonance(alpha: jax.Array) -> jax.Array:
  """Subjective-logic dissonance of α [N, K] -> [N] (0 when one class holds all belief)."""
  b = (alpha - 1.0) / alpha.sum(-1, keepdims=True)
  bj, bk = b[:, :, None], b[:, None, :]
  tot = bj + bk
  bal = jnp.where(tot > 0, 1.0 - jnp.abs(bj - bk) / jnp.where(tot > 0, tot, 1.0), 0.0)
  off = 1.0 - jnp.eye(b.shape[-1], dtype=b.dtype)
  num = jnp.sum(bj * bal * off, axis=1)                 # [N, K] over j for each k
  den = jnp.sum(bj * off, axis=1)
  return jnp.sum(b * jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0), -1)


def dirichlet_readouts(alpha: jax.Array, pred: jax.Array) -> dict:
  """All read-outs for α [N, K] and predicted classes `pred` [N] (int)."""
  k = alpha.shape[-1]
  a0 = alpha.sum(-1)
  mean = alpha / a0[:, None]
  eh = expected_entropy(alpha)
  total = -jnp.sum(mean * jnp.log(jnp.maximum(mean, 1e-30)), -1)
  return {"alpha0": a0, "mean_probs": mean, "u_epi": k / a0,
          "u_alea": 1.0 - jnp.take_along_axis(mean, pred[:, None], -1)[:, 0], "expected_entropy": eh,
          "total_entropy": total, "mutual_info": total - eh, "dissonance": dissonance(alpha)}
