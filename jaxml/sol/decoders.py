"""Rank decoders for SOL embeddings: nearest expectation, boundary-corrected profile, k-NN.

All are pure jnp and take a `valid` [C] mask of the ranks that exist in the current (noisy)
label set; ranks outside it are never predicted.

* expectation (authors): r̂ = argmin_l S_l(e), S_l = Σ_j Q[l, j] ‖e − μ̂_j‖².
* profile (ours): near its minimum, for embeddings on an arc of spacing Δ, S_l(e) ≈
  Δ²[(t − m_l)² + V_l], with t the embedding's position in rank units and m_l, V_l the mean and
  variance of row Q_l. The edge rows are truncated Gaussians (m_l ≠ l, V_l < σ²), which is what
  biases argmin S towards the end ranks. Fitting S_l = α + γ u_l + β (u_l² + V_l), u_l = m_l − l*,
  by least squares over the valid ranks within `window` of l* = argmin S gives t̂ = l* − γ / 2β,
  free of that edge bias. Nearest-centroid decoding is also an inverse regression: the centroid of
  noisy rank j sits near the embedding of E[y | ỹ = j], compressed by the label reliability, so
  t̂ spreads too far; the decoder therefore regresses the training labels on the training t̂
  (ordinary least squares, a + b t̂) and returns round(a + b t̂).
* knn (authors' alternative): round(mean label of the k most cosine-similar training embeddings).
"""

import jax
import jax.numpy as jnp

from jaxml.sol import losses as L

__all__ = ["DECODERS", "masked_profile", "expectation", "profile_position", "profile", "knn", "decode_all"]

DECODERS = ("expectation", "profile", "knn")


def masked_profile(emb: jax.Array, centroids: jax.Array, table: jax.Array, valid: jax.Array) -> jax.Array:
  """S with +inf at ranks outside the label set: [B, C]."""
  return jnp.where(valid[None, :], L.expected_profile(emb, centroids, table), jnp.inf)


def expectation(prof: jax.Array) -> jax.Array:
  """Nearest expectation: argmin_l S_l, [B] int32."""
  return jnp.argmin(prof, -1).astype(jnp.int32)


def profile_position(prof: jax.Array, table: jax.Array, valid: jax.Array, window: int = 4) -> jax.Array:
  """Boundary-corrected continuous position t̂ ([B] float32) from masked profiles (module doc)."""
  c = prof.shape[-1]
  j = jnp.arange(c, dtype=jnp.float32)
  mean = table @ j                                             # m_l
  var = table @ (j * j) - mean * mean                          # V_l
  lstar = jnp.argmin(prof, -1)
  u = mean[None, :] - lstar[:, None].astype(jnp.float32)       # [B, C]
  w = (valid[None, :] & (jnp.abs(j[None, :] - lstar[:, None]) <= window)).astype(jnp.float32)
  feats = jnp.stack([jnp.ones_like(u), u, u * u + var[None, :]], -1)           # [B, C, 3]
  s = jnp.where(w > 0, prof, 0.0)
  a = jnp.einsum("bc,bci,bcj->bij", w, feats, feats) + 1e-6 * jnp.eye(3)
  rhs = jnp.einsum("bc,bci,bc->bi", w, feats, s)
  coef = jnp.linalg.solve(a, rhs[..., None])[..., 0]
  gamma, beta = coef[:, 1], coef[:, 2]
  shift = jnp.where(beta > 1e-9, -gamma / (2.0 * jnp.maximum(beta, 1e-9)), 0.0)
  return lstar.astype(jnp.float32) + jnp.clip(shift, -window, window)


def _clip_to_valid(r: jax.Array, valid: jax.Array) -> jax.Array:
  idx = jnp.arange(valid.shape[0])
  lo = jnp.min(jnp.where(valid, idx, valid.shape[0]))
  hi = jnp.max(jnp.where(valid, idx, -1))
  return jnp.clip(r, lo, hi).astype(jnp.int32)


def profile(t: jax.Array, t_train: jax.Array, labels: jax.Array, valid: jax.Array) -> jax.Array:
  """round(a + b t), (a, b) the least-squares fit of the training labels on the training t̂."""
  tm, ym = t_train.mean(), labels.astype(jnp.float32).mean()
  cov = jnp.mean((t_train - tm) * (labels - ym))
  b = cov / jnp.maximum(jnp.var(t_train), 1e-9)
  return _clip_to_valid(jnp.round(ym + b * (t - tm)), valid)


def knn(emb: jax.Array, train_emb: jax.Array, labels: jax.Array, k: int, *,
        query_idx: jax.Array | None = None) -> jax.Array:
  """round(mean of the labels of the k most cosine-similar training embeddings); `query_idx`
  ([B] indices into the training set) excludes each query itself (decoding the training set)."""
  k = min(int(k), train_emb.shape[0] - (query_idx is not None))
  sims = emb @ train_emb.T
  if query_idx is not None:
    sims = jnp.where(jnp.arange(train_emb.shape[0])[None, :] == query_idx[:, None], -jnp.inf, sims)
  _, idx = jax.lax.top_k(sims, k)
  return jnp.round(labels[idx].astype(jnp.float32).mean(-1)).astype(jnp.int32)


def decode_all(emb: jax.Array, extra: dict, table: jax.Array, *, k: int, window: int,
               query_idx: jax.Array | None = None) -> jax.Array:
  """[3, B] predictions of (expectation, profile, knn) from `extra` (centroids, valid, embeddings,
  labels, t_train: the training t̂ of the last refresh)."""
  prof = masked_profile(emb, extra["centroids"], table, extra["valid"])
  t = profile_position(prof, table, extra["valid"], window)
  return jnp.stack([expectation(prof), profile(t, extra["t_train"], extra["labels"], extra["valid"]),
                    knn(emb, extra["embeddings"], extra["labels"], k, query_idx=query_idx)])
