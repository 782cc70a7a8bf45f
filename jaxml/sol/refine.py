"""Outlier detection and relabelling of noisy ranks (spec `sol.md` §2.6), pure jnp."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Refinement", "refine_labels", "RELABEL_STEPS"]

RELABEL_STEPS = ("constant_rate_mean", "half_delta", "fixed")


class Refinement(NamedTuple):
  labels: jax.Array     # [N] int32 refined noisy ranks
  flagged: jax.Array    # [N] bool, instances judged noisy this round
  step: jax.Array       # scalar float32, the constant step c (constant_rate_mean) or its mean


def refine_labels(profile: jax.Array, labels: jax.Array, *, eta: float = 0.9,
                  step_rule: str = "constant_rate_mean") -> Refinement:
  """One refinement round on the noisy labels only.

  ŷ_i = argmin_l S_l(e_i);  δ_i = ỹ_i − ŷ_i;
  flag i if |δ_i| / max_{i' : ỹ_{i'} = ỹ_i} |δ_{i'}| ≥ η   (classes whose max is 0 flag nobody);
  flagged labels move toward ŷ: ỹ_i ← clip(ỹ_i − sign(δ_i) · c_i, 0, C−1) with
  c = floor(mean|δ| / 2) ("constant_rate_mean", the reference default), c_i = floor(|δ_i| / 2)
  ("half_delta") or c = 1 ("fixed"). With δ ≡ 0 nothing changes.

  Args:
    profile: [N, C] expected dissimilarity profiles of the training set.
    labels: [N] int current noisy ranks.
  """
  if step_rule not in RELABEL_STEPS:
    raise ValueError(f"unknown relabel step rule {step_rule!r}; expected one of {RELABEL_STEPS}")
  c = profile.shape[-1]
  labels = labels.astype(jnp.int32)
  pred = jnp.argmin(profile, axis=-1).astype(jnp.int32)
  delta = labels - pred
  ad = jnp.abs(delta).astype(jnp.float32)
  class_max = jax.ops.segment_max(ad, labels, num_segments=c)[labels]
  flagged = (class_max > 0) & (ad >= eta * class_max)
  if step_rule == "constant_rate_mean":
    step = jnp.floor(0.5 * ad.mean()) * jnp.ones_like(ad)
  elif step_rule == "half_delta":
    step = jnp.floor(0.5 * ad)
  else:
    step = jnp.ones_like(ad)
  moved = jnp.clip(jnp.round(labels - jnp.sign(delta) * step), 0, c - 1).astype(jnp.int32)
  return Refinement(jnp.where(flagged, moved, labels), flagged, step.mean())
