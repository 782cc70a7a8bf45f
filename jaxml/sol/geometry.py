"""Geometry of SOL embeddings: ideal arc configurations e_r = (cos rΔ, sin rΔ), SOL's exact losses over the
sampler's pair distribution as a function of the span (C−1)Δ, and centroid shrinkage (why centroids collapse)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.sol import losses as L

__all__ = ["ArcLoss", "arc_embeddings", "arc_loss", "centroid_span", "reliability"]


class ArcLoss(NamedTuple):
  so: jax.Array      # L_SO, mean over the three order classes of the class-mean pair loss
  d: jax.Array       # mean_r L_D(r)
  so_similar: jax.Array
  so_ordered: jax.Array


def arc_embeddings(num_classes: int, spacing: float, dim: int = 2) -> jax.Array:
  """[C, dim] unit embeddings on a great-circle arc, centred on the first axis, spacing Δ rad."""
  theta = (jnp.arange(num_classes) - 0.5 * (num_classes - 1)) * spacing
  return jnp.zeros((num_classes, dim)).at[:, 0].set(jnp.cos(theta)).at[:, 1].set(jnp.sin(theta))


def arc_loss(num_classes: int, spacing: float, *, sigma: float = 1.0, tau: int = 3,
             margin: float = 0.25, neighbourhood: int = 1) -> ArcLoss:
  """SOL's losses for one embedding per rank on an arc, with clean labels r and soft centroids
  from those embeddings (normalised, σ-weighted as in training). Pairs: every ordered pair of
  ranks, averaged inside each order class, classes weighted equally (the sampler's balance)."""
  c = num_classes
  e = arc_embeddings(c, spacing)
  ranks = jnp.arange(c)
  cent = L.soft_centroids(e, L.gaussian_rows(ranks, c, sigma))
  prof = L.expected_profile(e, cent, L.gaussian_table(c, sigma))
  bi, ki = np.nonzero(~np.eye(c, dtype=bool))                  # every ordered pair of distinct ranks
  dist = L.gaussian_rows(ranks, c, sigma)
  probs = L.order_probs(dist[bi], dist[ki], tau)
  v = L.order_violations(prof[bi] - prof[ki], ranks[bi], ranks[ki], margin)
  per = probs[0] * v[0] + probs[1] * v[1] + probs[2] * v[2]
  diff = bi - ki
  cls = np.where(diff > tau, 0, np.where(diff < -tau, 1, 2))
  means = [jnp.mean(per[cls == k]) if np.any(cls == k) else jnp.zeros(()) for k in range(3)]
  return ArcLoss(sum(means) / 3.0, L.discriminative_loss(prof, ranks, neighbourhood).mean(), means[2],
                 0.5 * (means[0] + means[1]))


def centroid_span(centroids: np.ndarray, valid: np.ndarray | None = None) -> dict[str, float]:
  """Summary of a centroid set [C, d]: min cosine to the middle rank's centroid, angle (deg)
  between the end centroids, and mean angle (deg) between consecutive centroids."""
  cent = np.asarray(centroids, np.float64)
  if valid is not None:
    cent = cent[np.asarray(valid, bool)]
  cent = cent / np.maximum(np.linalg.norm(cent, axis=-1, keepdims=True), 1e-12)
  mid = cent[len(cent) // 2]
  ang = lambda a, b: float(np.degrees(np.arccos(np.clip(a @ b, -1.0, 1.0))))
  steps = [ang(cent[i], cent[i + 1]) for i in range(len(cent) - 1)]
  return {"min_cos_to_middle": float(np.min(cent @ mid)), "end_to_end_deg": ang(cent[0], cent[-1]),
          "mean_step_deg": float(np.mean(steps)) if steps else 0.0}


def reliability(y_clean: np.ndarray, noise_std: float) -> float:
  """ρ = Var(y) / (Var(y) + s²): the slope of E[y | ỹ] in ỹ under additive Gaussian label
  noise of std s. Class means taken over noisy labels (soft centroids) sit near the embedding
  of E[y | ỹ = j], so their spread shrinks by about ρ."""
  v = float(np.var(np.asarray(y_clean, np.float64)))
  return v / (v + float(noise_std) ** 2)
