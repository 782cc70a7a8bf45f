"""Outlier detection and relabelling of noisy ranks (spec `sol.md` §2.6), pure jnp."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Refinement", "refine_labels", "RELABEL_STEPS"]

RELABEL_STEPS = ("constant_rate_mean", "round_mean", "half_delta", "fixed")


class Refinement(NamedTuple):
  labels: jax.Array     # [N] int32 refined noisy ranks
  flagged: jax.Array    # [N] bool, instances judged noisy this round
  step: jax.Array       # scalar float32, the mean step of the flagged labels' rule


def refine_labels(pred: jax.Array, labels: jax.Array, *, eta: float = 0.9,
                  step_rule: str = "round_mean") -> Refinement:
  """One refinement round on the noisy labels [N] given decoded ranks `pred` [N] of the training set.

  δ_i = ỹ_i − ŷ_i; flag i if |δ_i| / max_{i' : ỹ_{i'} = ỹ_i} |δ_{i'}| ≥ η; a flagged label moves toward ŷ_i
  by c_i, never past it, clipped at 0: constant_rate_mean c = floor(mean|δ| / 2) (the authors'),
  round_mean c = max(1, round(mean|δ| / 2)), half_delta c_i = floor(|δ_i| / 2), fixed c = 1."""
  if step_rule not in RELABEL_STEPS:
    raise ValueError(f"unknown relabel step rule {step_rule!r}; expected one of {RELABEL_STEPS}")
  labels = labels.astype(jnp.int32)
  delta = labels - pred.astype(jnp.int32)
  ad = jnp.abs(delta).astype(jnp.float32)
  num = labels.shape[0] + 1
  seg = jnp.clip(labels, 0, num - 1)
  class_max = jax.ops.segment_max(ad, seg, num_segments=num)[seg]
  flagged = (class_max > 0) & (ad >= eta * class_max)
  half_mean = 0.5 * ad.mean()
  step = {"constant_rate_mean": jnp.floor(half_mean), "round_mean": jnp.maximum(1.0, jnp.round(half_mean)),
          "half_delta": jnp.floor(0.5 * ad), "fixed": 1.0}[step_rule]
  step = jnp.minimum(step * jnp.ones_like(ad), ad)
  moved = jnp.maximum(labels - jnp.sign(delta) * step.astype(jnp.int32), 0).astype(jnp.int32)
  new = jnp.where(flagged, moved, labels)
  return Refinement(new, flagged, jnp.sum(jnp.where(flagged, step, 0.0)) / jnp.maximum(flagged.sum(), 1))
