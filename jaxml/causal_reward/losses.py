"""Pure loss terms for pairwise reward models. Pairwise losses take rewards of the chosen (w) and rejected (l)
response of each pair; an optional soft label y in [0, 1] is P(w beats l) (1 for ordinary preference data)."""

import jax
import jax.numpy as jnp

__all__ = ["bt_loss", "pearson", "cross_cov_fro2", "reconstruction", "gaussian_kl", "pairwise_accuracy"]


def bt_loss(r_w: jax.Array, r_l: jax.Array, label: jax.Array | None = None) -> jax.Array:
  """Bradley-Terry: mean of -[y log s(r_w - r_l) + (1 - y) log s(r_l - r_w)]; y = 1 if omitted. Equals log 2
  when r_w == r_l, and is unchanged when (r_w, r_l, y) -> (r_l, r_w, 1 - y)."""
  d = r_w - r_l
  if label is None:
    return -jnp.mean(jax.nn.log_sigmoid(d))
  return -jnp.mean(label * jax.nn.log_sigmoid(d) + (1.0 - label) * jax.nn.log_sigmoid(-d))


def pearson(x: jax.Array, y: jax.Array, eps: float = 1e-6) -> jax.Array:
  """Batch Pearson correlation of two [N] vectors (eps keeps it finite for constant inputs)."""
  xc, yc = x - jnp.mean(x), y - jnp.mean(y)
  return jnp.sum(xc * yc) / jnp.sqrt(jnp.sum(xc * xc) * jnp.sum(yc * yc) + eps)


def cross_cov_fro2(a: jax.Array, b: jax.Array) -> jax.Array:
  """||Cov_batch(a, b)||_F^2 / (d_a d_b) for a [N, d_a], b [N, d_b] (centred, 1/N)."""
  ac, bc = a - jnp.mean(a, axis=0), b - jnp.mean(b, axis=0)
  cov = ac.T @ bc / a.shape[0]
  return jnp.sum(cov * cov) / (a.shape[1] * b.shape[1])


def reconstruction(h: jax.Array, h_hat: jax.Array) -> jax.Array:
  """mean_rows ||h - h_hat||^2 / D for rows that stack chosen and rejected responses ([2B, D]): the spec's mean
  over pairs of 0.5 (||h_w - h^_w||^2 + ||h_l - h^_l||^2) / D."""
  return jnp.mean(jnp.sum((h - h_hat) ** 2, axis=-1)) / h.shape[-1]


def gaussian_kl(mu: jax.Array, logvar: jax.Array) -> jax.Array:
  """Mean over rows of KL(N(mu, diag exp(logvar)) || N(0, I)) (summed over dims)."""
  return jnp.mean(0.5 * jnp.sum(jnp.exp(logvar) + mu * mu - 1.0 - logvar, axis=-1))


def pairwise_accuracy(r_w: jax.Array, r_l: jax.Array, label: jax.Array | None = None) -> jax.Array:
  """Fraction of pairs ordered like the label (ties count 1/2); y >= 0.5 means w preferred."""
  d = r_w - r_l
  correct = jnp.where(d > 0, 1.0, jnp.where(d < 0, 0.0, 0.5))
  if label is not None:
    correct = jnp.where(label >= 0.5, correct, 1.0 - correct)
  return jnp.mean(correct)
