"""Stochastic Order Learning (SOL) objectives: rank distributions, centroids, profiles, losses.

Notation (spec `sol.md` §2): C ranks, unit-norm embeddings e ∈ S^{d-1}, noisy ranks r.

* Rank distribution  g_μ(j) = softmax_j(−(j − μ)² / 2σ²)    (σ = 0: one-hot at round(μ)).
* Stochastic centroids  μ̂_j = normalise(Σ_i p_i(j) e_i / Σ_i p_i(j)).
* Expected dissimilarity profile  S_l(e) = Σ_j Q[l, j] ||e − μ̂_j||²,   Q[l] = g_l.
* Discriminative loss  L_D = (S_r − S_{r+1}) + (S_r − S_{r−1})  (missing side doubled).
* Stochastic order loss  L_SO = mean_pairs(P_> V_> + P_< V_< + P_≈ V_≈)  with the clean
  probabilities P_> + P_< + P_≈ = 1.

Everything is pure and vectorised; the pair sampler draws inside `jit` from an explicit key.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["gaussian_rows", "gaussian_table", "soft_centroids", "sq_dists", "expected_profile", "ProfileAffine",
           "profile_affine", "profile_gaps", "order_masks", "order_probs", "order_prob_tables",
           "discriminative_loss", "discriminative_weights", "order_violations", "stochastic_order_loss", "Pairs",
           "sample_pairs", "center_loss"]

_EPS = 1e-12


def gaussian_rows(centres: jax.Array, num_classes: int, sigma: float) -> jax.Array:
  """Discretised Gaussians [..., C] over ranks {0..C−1} centred at `centres` [...] (sigma in rank units;
  0 gives one-hot rows at round(centre)), float32 rows summing to one."""
  centres = jnp.asarray(centres, jnp.float32)
  j = jnp.arange(num_classes, dtype=jnp.float32)
  if sigma <= 0.0:
    return jax.nn.one_hot(jnp.clip(jnp.round(centres), 0, num_classes - 1).astype(jnp.int32), num_classes)
  logits = -jnp.square(j - centres[..., None]) / (2.0 * sigma * sigma)
  return jax.nn.softmax(logits, axis=-1)


def gaussian_table(num_classes: int, sigma: float) -> jax.Array:
  """Q[l, j] = g_l(j): [C, C]; the identity when σ = 0."""
  return gaussian_rows(jnp.arange(num_classes), num_classes, sigma)


def soft_centroids(embeddings: jax.Array, probs: jax.Array, *, normalize: bool = True) -> jax.Array:
  """Centroids [C, d] μ_j = Σ_i p_i(j) e_i / Σ_i p_i(j) of embeddings [N, d] under probs [N, C], optionally
  unit-normed; a rank with no mass gets the zero vector (distance 1 to every unit embedding)."""
  mass = probs.sum(0)                                          # [C]
  mu = (probs.T @ embeddings) / jnp.maximum(mass, _EPS)[:, None]
  if normalize:
    mu = mu / jnp.maximum(jnp.linalg.norm(mu, axis=-1, keepdims=True), _EPS)
  return mu


def sq_dists(embeddings: jax.Array, centroids: jax.Array) -> jax.Array:
  """d_j(e) = ||e − μ_j||²: [B, d] x [C, d] -> [B, C] (clipped at 0 against round-off)."""
  e2 = jnp.sum(jnp.square(embeddings), -1, keepdims=True)
  c2 = jnp.sum(jnp.square(centroids), -1)[None, :]
  return jnp.maximum(e2 + c2 - 2.0 * embeddings @ centroids.T, 0.0)


def expected_profile(embeddings: jax.Array, centroids: jax.Array, table: jax.Array) -> jax.Array:
  """S = D Qᵀ: S_l(e) = Σ_j Q[l, j] d_j(e); [B, d] -> [B, C]."""
  return sq_dists(embeddings, centroids) @ table.T


class ProfileAffine(NamedTuple):
  """Rows of a linear map A of the expected profile as affine functions of the embedding:
  (A S)(e) = scale ‖e‖² + bias − 2 e weightᵀ (`profile_affine`)."""

  weight: jax.Array   # [R, d]  A Q μ
  bias: jax.Array     # [R]     A Q ‖μ‖²
  scale: jax.Array    # [R]     A Q 1


def profile_affine(centroids: jax.Array, table: jax.Array) -> ProfileAffine:
  """`expected_profile` with `table` [R, C] = A Q as an affine function of e, from centroids [C, d]:
  S_l(e) = (Q 1)_l ‖e‖² + (Q ‖μ‖²)_l − 2 e·(Q μ)_l, so the step needs [R, d] and [R] tables, not [B, C]
  distances; equal to `expected_profile` up to its round-off clip at 0."""
  c2 = jnp.sum(jnp.square(centroids), -1)
  return ProfileAffine(table @ centroids, table @ c2, table.sum(-1))


def profile_gaps(embeddings: jax.Array, affine: ProfileAffine, base: jax.Array, ref: jax.Array) -> jax.Array:
  """S(e_base) − S(e_ref) [P, R] for pairs of rows of [M, d] embeddings: the rows [e, ‖e‖²] are gathered once
  (one scatter-add in the gradient, a serial loop on XLA:CPU) and one [P, d] x [d, R] product gives the gaps."""
  p = base.shape[0]
  rows = jnp.concatenate([embeddings, jnp.sum(jnp.square(embeddings), -1, keepdims=True)], -1)
  both = rows[jnp.concatenate([base, ref])]
  diff = both[:p] - both[p:]                                   # [e_b − e_r, ‖e_b‖² − ‖e_r‖²]
  return diff[:, -1:] * affine.scale[None, :] - 2.0 * diff[:, :-1] @ affine.weight.T


def order_masks(num_classes: int, tau: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """[C, C] masks over (a = base rank, c = reference rank): greater (c < a−τ), less (c > a+τ),
  similar (|c − a| ≤ τ). They partition the grid, so the three probabilities sum to one."""
  a = np.arange(num_classes)[:, None]
  c = np.arange(num_classes)[None, :]
  greater = (c < a - tau).astype(np.float32)
  less = (c > a + tau).astype(np.float32)
  similar = (np.abs(c - a) <= tau).astype(np.float32)
  return greater, less, similar


def order_probs(p_base: jax.Array, p_ref: jax.Array, tau: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """P_>, P_<, P_≈ [P] of pairs with rank distributions p_base, p_ref [P, C]: Σ_{a,c} p_i(a) p_k(c) M[a, c]
  per order mask M; they sum to one (not the reference code's clipped windows)."""
  greater, less, _ = order_masks(p_base.shape[-1], tau)
  p_gt = jnp.sum((p_base @ greater) * p_ref, -1)             # Σ_a p_i(a) Σ_c M[a, c] p_k(c)
  p_lt = jnp.sum((p_base @ less) * p_ref, -1)
  total = p_base.sum(-1) * p_ref.sum(-1)
  return p_gt, p_lt, total - p_gt - p_lt                     # the masks partition the grid


def order_prob_tables(table: jax.Array, tau: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """`order_probs` for every pair of integer ranks: three [C, C] tables T[r_i, r_k].

  With p_i = Q[r_i] (rows of `table`), P_>(i, k) = Σ_{a,c} Q[r_i, a] Q[r_k, c] M[a, c] = (Q M Qᵀ)[r_i, r_k];
  the step looks the pair probabilities up instead of forming [P, C] rows and products.
  """
  greater, less, similar = order_masks(table.shape[-1], tau)
  return tuple(table @ m @ table.T for m in (greater, less, similar))


def discriminative_loss(profile: jax.Array, ranks: jax.Array, neighbourhood: int = 1) -> jax.Array:
  """Per-instance L_D(b) = Σ_{l=1..L} (S_r − S_{r+l}) + (S_r − S_{r−l}) [B] from profiles [B, C] and ranks [B];
  a missing side doubles the existing one (spec §2.3). No hinge."""
  c = profile.shape[-1]
  ranks = ranks.astype(jnp.int32)
  take = lambda idx: jnp.take_along_axis(profile, jnp.clip(idx, 0, c - 1)[:, None], axis=1)[:, 0]
  s_r = take(ranks)
  total = jnp.zeros_like(s_r)
  for l in range(1, neighbourhood + 1):   # static, small
    up_ok, down_ok = ranks + l <= c - 1, ranks - l >= 0
    up, down = s_r - take(ranks + l), s_r - take(ranks - l)
    term = jnp.where(up_ok & down_ok, up + down,
                     jnp.where(up_ok, 2.0 * up, jnp.where(down_ok, 2.0 * down, 0.0)))
    total = total + term
  return total


def discriminative_weights(num_classes: int, neighbourhood: int = 1) -> np.ndarray:
  """A [C, C] with `discriminative_loss`(S, r)_b = A[r_b] · S_b: L_D is linear in the profile.

  Column l is `discriminative_loss` of every rank for the unit profile e_l, so that function stays
  the one definition (missing sides included); the step applies A through `profile_affine`.
  """
  c = num_classes
  units = np.eye(c, dtype=np.float32)
  cols = [np.asarray(discriminative_loss(jnp.broadcast_to(u, (c, c)), jnp.arange(c), neighbourhood)) for u in units]
  return np.stack(cols, 1)


def order_violations(gap: jax.Array, r_base: jax.Array, r_ref: jax.Array,
                     margin: float) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Hinge windows V_>, V_<, V_≈ [P] (spec §2.4) from gap [P, C] = S^i − S^k and ranks r_base, r_ref [P]:

  V_> = Σ_{l<r_k} [S^k_l − S^i_l + m]_+ + Σ_{l≥r_i} [S^i_l − S^k_l + m]_+
  V_< = Σ_{l<r_i} [S^i_l − S^k_l + m]_+ + Σ_{l≥r_k} [S^k_l − S^i_l + m]_+
  V_≈ = Σ_l [|S^i_l − S^k_l| − m]_+"""
  l = jnp.arange(gap.shape[-1])[None, :]
  ri, rk = r_base[:, None], r_ref[:, None]
  ki = jax.nn.relu(margin - gap)                              # base farther than ref
  ik = jax.nn.relu(gap + margin)                              # ref farther than base
  v_gt = jnp.sum(jnp.where(l < rk, ki, 0.0) + jnp.where(l >= ri, ik, 0.0), -1)
  v_lt = jnp.sum(jnp.where(l < ri, ik, 0.0) + jnp.where(l >= rk, ki, 0.0), -1)
  v_sim = jnp.sum(jax.nn.relu(jnp.abs(gap) - margin), -1)
  return v_gt, v_lt, v_sim


def stochastic_order_loss(gap: jax.Array, r_base: jax.Array, r_ref: jax.Array,
                          probs: tuple[jax.Array, jax.Array, jax.Array], margin: float,
                          weights: jax.Array | None = None) -> jax.Array:
  """L_SO = weighted mean over pairs of P_> V_> + P_< V_< + P_≈ V_≈ (scalar); gap = S^i − S^k, [P, C]."""
  v_gt, v_lt, v_sim = order_violations(gap, r_base, r_ref, margin)
  p_gt, p_lt, p_sim = probs
  per_pair = p_gt * v_gt + p_lt * v_lt + p_sim * v_sim
  if weights is None:
    return per_pair.mean()
  return jnp.sum(per_pair * weights) / jnp.maximum(jnp.sum(weights), 1.0)


class Pairs(NamedTuple):
  """Indices into the 2B embeddings of a batch; `valid` marks real (not padding) pairs."""

  base: jax.Array     # [3 * per_class] int32
  ref: jax.Array      # [3 * per_class] int32
  valid: jax.Array    # [3 * per_class] float32 in {0, 1}


def sample_pairs(rng: jax.Array, ranks: jax.Array, tau: int, per_class: int) -> Pairs:
  """≤ `per_class` pairs per order class (>, <, ≈ of the noisy ranks [M] with threshold τ), uniform, random
  orientation, all M(M−1)/2 pairs candidates (exact, spec §2.5). The classes only balance the sample; the loss
  weights pairs by P_>, P_<, P_≈."""
  iu, ku = np.triu_indices(ranks.shape[0], 1)
  # One uniform per pair: its half decides the orientation, its rescaled value (uniform and
  # independent of the orientation) ranks the pair inside its class.
  u = jax.random.uniform(rng, (iu.size,))
  flip = u < 0.5
  score = jnp.where(flip, 2.0 * u, 2.0 * u - 1.0)
  base = jnp.where(flip, ku, iu)
  ref = jnp.where(flip, iu, ku)
  n_cand = base.shape[0]
  per_class = min(per_class, n_cand)
  diff = ranks[base] - ranks[ref]
  cls = jnp.where(diff > tau, 0, jnp.where(diff < -tau, 1, 2))
  masked = jnp.where(cls[None, :] == jnp.arange(3)[:, None], score[None, :], -1.0)   # [3, n_cand]
  top, idx = jax.lax.top_k(masked, per_class)                                       # batched over classes
  idx = idx.reshape(-1)
  return Pairs(base[idx].astype(jnp.int32), ref[idx].astype(jnp.int32),
               (top.reshape(-1) >= 0.0).astype(jnp.float32))


def center_loss(embeddings: jax.Array, centroids: jax.Array, ranks: jax.Array) -> jax.Array:
  """GOL-style pull to the own rank's reference point: mean_b ||e_b − μ_{r_b}||²."""
  return jnp.mean(jnp.sum(jnp.square(embeddings - centroids[ranks]), -1))
