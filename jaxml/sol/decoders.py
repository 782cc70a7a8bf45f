"""Rank decoders for SOL embeddings; pure jnp, never predicting a rank outside the `valid` [C] mask.

* expectation (authors): r̂ = argmin_l S_l(e), S_l = Σ_j Q[l, j] ‖e − μ̂_j‖².
* profile (ours): on an arc of spacing Δ, S_l(e) ≈ Δ²[(t − m_l)² + V_l]; the truncated edge rows bias
  argmin S to the end ranks. Fitting S_l = α + γ u_l + β (u_l² + V_l), u_l = m_l − l*, within `window`
  of l* gives t̂ = l* − γ / 2β; training labels are then regressed on the training t̂ (a + b t̂, undoing
  the inverse-regression spread) and round(a + b t̂) is returned.
* knn (authors' alternative): round(mean label of the k most cosine-similar training embeddings).
* knn_median, posterior_median (ours): for zero-median noise the median of ỹ = max(0, round(y + ε)) is y
  while its mean is biased near rank 0, so medians estimate the clean rank. knn_median: the lower median
  of the k neighbours' labels; posterior_median: the median of p(l | e) ∝ π_l exp(−κ ‖e − μ̂_l‖²), κ fitted
  to the training labels (`fit_kappa`, Newton; concave).
"""

import jax
import jax.numpy as jnp

from jaxml.sol import losses as L

__all__ = ["DECODERS", "masked_profile", "expectation", "profile_position", "profile", "top_k", "knn_labels", "knn",
           "knn_median", "masked_dists", "log_prior", "posterior", "fit_kappa", "posterior_median", "decode_all"]

DECODERS = ("expectation", "profile", "knn", "knn_median", "posterior_median")


def masked_profile(emb: jax.Array, centroids: jax.Array, table: jax.Array, valid: jax.Array) -> jax.Array:
  """S with +inf at ranks outside the label set: [B, C]."""
  return jnp.where(valid[None, :], L.expected_profile(emb, centroids, table), jnp.inf)


def masked_dists(emb: jax.Array, centroids: jax.Array, valid: jax.Array) -> jax.Array:
  """‖e − μ̂_l‖² with +inf at ranks outside the label set: [B, C]."""
  return jnp.where(valid[None, :], L.sq_dists(emb, centroids), jnp.inf)


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


def profile(t: jax.Array, t_train: jax.Array, labels: jax.Array, valid: jax.Array) -> jax.Array:
  """round(a + b t), (a, b) the least-squares fit of the training labels on the training t̂, clipped to the
  lowest and highest valid rank."""
  tm, ym = t_train.mean(), labels.astype(jnp.float32).mean()
  cov = jnp.mean((t_train - tm) * (labels - ym))
  b = cov / jnp.maximum(jnp.var(t_train), 1e-9)
  idx = jnp.arange(valid.shape[0])
  lo, hi = jnp.min(jnp.where(valid, idx, valid.shape[0])), jnp.max(jnp.where(valid, idx, -1))
  return jnp.clip(jnp.round(ym + b * (t - tm)), lo, hi).astype(jnp.int32)


def top_k(values: jax.Array, k: int) -> jax.Array:
  """Indices of `jax.lax.top_k(values, k)` along the last axis (same order, ties to the lower index),
  after masking entries below the smallest of the maxima of k column blocks (a lower bound of the k-th
  largest): XLA:CPU's top-k pays per heap insertion, and the mask roughly halves its time."""
  n = values.shape[-1]
  if k < 1 or n < 2 * k:          # too few columns for blocks to prune anything
    return jax.lax.top_k(values, k)[1]
  size = -(-n // k)
  pad = jnp.full(values.shape[:-1] + (size * k - n,), -jnp.inf, values.dtype)
  blocks = jnp.concatenate([values, pad], -1).reshape(values.shape[:-1] + (k, size))
  bound = blocks.max(-1).min(-1, keepdims=True)
  return jax.lax.top_k(jnp.where(values >= bound, values, -jnp.inf), k)[1]


def knn_labels(emb: jax.Array, train_emb: jax.Array, labels: jax.Array, k: int, *,
               query_idx: jax.Array | None = None) -> jax.Array:
  """[B, k'] labels of the k' = min(k, available) most cosine-similar training embeddings; `query_idx`
  ([B] indices into the training set) excludes each query itself (decoding the training set)."""
  k = min(int(k), train_emb.shape[0] - (query_idx is not None))
  sims = emb @ train_emb.T
  if query_idx is not None:
    sims = jnp.where(jnp.arange(train_emb.shape[0])[None, :] == query_idx[:, None], -jnp.inf, sims)
  return labels[top_k(sims, k)]


def _round_mean(neigh: jax.Array) -> jax.Array:
  return jnp.round(neigh.astype(jnp.float32).mean(-1)).astype(jnp.int32)


def _lower_median(neigh: jax.Array) -> jax.Array:
  return jnp.sort(neigh, -1)[..., (neigh.shape[-1] - 1) // 2].astype(jnp.int32)


def knn(emb: jax.Array, train_emb: jax.Array, labels: jax.Array, k: int, *,
        query_idx: jax.Array | None = None) -> jax.Array:
  """round(mean of the labels of the k most cosine-similar training embeddings) (`knn_labels`)."""
  return _round_mean(knn_labels(emb, train_emb, labels, k, query_idx=query_idx))


def knn_median(emb: jax.Array, train_emb: jax.Array, labels: jax.Array, k: int, *,
               query_idx: jax.Array | None = None) -> jax.Array:
  """Lower median of the labels of the k most cosine-similar training embeddings (`knn_labels`)."""
  return _lower_median(knn_labels(emb, train_emb, labels, k, query_idx=query_idx))


def log_prior(labels: jax.Array, num_classes: int) -> jax.Array:
  """log of the label frequencies, [C]; −inf at ranks without labels."""
  counts = jnp.zeros((num_classes,), jnp.float32).at[labels].add(1.0)
  return jnp.where(counts > 0, jnp.log(jnp.maximum(counts, 1.0) / labels.shape[0]), -jnp.inf)


def posterior(dists: jax.Array, logp: jax.Array, kappa: jax.Array) -> jax.Array:
  """p(l | e) ∝ π_l exp(−κ d_l(e)), [B, C], from `masked_dists`; zero where d or the prior is infinite."""
  ok = jnp.isfinite(dists) & jnp.isfinite(logp)[None, :]
  logits = jnp.where(ok, -kappa * jnp.where(ok, dists, 0.0) + jnp.where(ok, logp[None, :], 0.0), -jnp.inf)
  return jax.nn.softmax(logits, -1)


def fit_kappa(dists: jax.Array, labels: jax.Array, logp: jax.Array, *, kappa0: float = 10.0,
              iters: int = 12, max_rows: int = 1024) -> jax.Array:
  """κ ≥ 0 maximising Σ_i log p(ỹ_i | e_i) over (an evenly strided subset of ≤ max_rows of) the training
  rows, `dists` from `masked_dists`. The objective is concave in κ (logits affine in κ): gradient
  Σ_i (E_p[d_i] − d_i,ỹ_i), curvature −Σ_i Var_p(d_i); Newton steps, each limited to a factor of 4."""
  stride = max(1, -(-dists.shape[0] // max_rows))
  dists, labels = dists[::stride], labels[::stride]
  s0 = jnp.where(jnp.isfinite(dists), dists, 0.0)
  s_y = jnp.take_along_axis(s0, labels[:, None], 1)[:, 0]

  def newton(_, kappa):
    p = posterior(dists, logp, kappa)
    m1 = jnp.sum(p * s0, -1)
    var = jnp.maximum(jnp.sum(p * s0 * s0, -1) - m1 * m1, 0.0)
    g, h = jnp.sum(m1 - s_y), jnp.sum(var)
    return jnp.clip(kappa + g / jnp.maximum(h, 1e-12), kappa / 4.0, kappa * 4.0)

  return jax.lax.fori_loop(0, iters, newton, jnp.asarray(kappa0, jnp.float32))


def posterior_median(dists: jax.Array, logp: jax.Array, kappa: jax.Array) -> jax.Array:
  """Smallest rank l with P(rank ≤ l | e) ≥ ½ under `posterior`, [B] int32."""
  cdf = jnp.cumsum(posterior(dists, logp, kappa), -1)
  return jnp.sum(cdf < 0.5 - 1e-6, -1).astype(jnp.int32)


def decode_all(emb: jax.Array, extra: dict, table: jax.Array, *, k: int, window: int,
               query_idx: jax.Array | None = None) -> jax.Array:
  """[len(DECODERS), B] predictions, rows in DECODERS order, from `extra` (centroids, valid, embeddings,
  labels, t_train: the training t̂ of the last refresh, log_prior and kappa of the last refresh)."""
  d = L.sq_dists(emb, extra["centroids"])
  valid = extra["valid"][None, :]
  prof = jnp.where(valid, d @ table.T, jnp.inf)                  # masked_profile, sharing d
  t = profile_position(prof, table, extra["valid"], window)
  neigh = knn_labels(emb, extra["embeddings"], extra["labels"], k, query_idx=query_idx)
  return jnp.stack([expectation(prof), profile(t, extra["t_train"], extra["labels"], extra["valid"]),
                    _round_mean(neigh), _lower_median(neigh),
                    posterior_median(jnp.where(valid, d, jnp.inf), extra["log_prior"], extra["kappa"])])
