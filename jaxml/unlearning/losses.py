"""Representation Unlearning objectives (pure functions of a transform `t_fn`).

z = g(x) in R^D frozen features, T = `t_fn`, z~ = z + eps, eps ~ N(0, s^2 I), M samples per row.

Standard regime (Algorithm 1 of the reference code):
    L_r = mean_{b, m, d} (T(z~_{r,b,m}) - z_{r,b})_d^2                  elementwise MSE
    L_f = mean_{f, m, j} ||T(z~_{f,m}) - z_ref,j||^2                     squared norm over d
    L   = L_r + beta * L_f
Zero-shot regime (forget data only; head rows w_c as retained-class proxies):
    L_r^zs = sum_{c in R} pi^R_c E_eps ||T(w_c + eps) - w_c||^2
    L_f^zs = E_{f, eps} sum_c pi_c ||T(z~_f) - w_c||^2
    L^zs   = L_r^zs + beta * L_f^zs
L_r averages over D and L_f sums over D, as the reference code does (beta grids assume it). Forget
rows carry weights w_f in {0, 1}, so a batch may hold padding."""

from typing import Callable

import jax
import jax.numpy as jnp

__all__ = ["perturb", "retain_loss", "forget_loss", "zero_shot_retain_loss", "zero_shot_forget_loss",
           "standard_objective", "zero_shot_objective", "weighted_mean"]

TransformFn = Callable[[jax.Array], jax.Array]


def perturb(z: jax.Array, rng: jax.Array, num_samples: int, noise_scale: float) -> jax.Array:
  """z [B, D] -> z~ [B, M, D] (exact copies when noise_scale == 0)."""
  z = jnp.broadcast_to(z[:, None, :], (z.shape[0], num_samples, z.shape[1]))
  if noise_scale == 0.0:
    return z
  return z + noise_scale * jax.random.normal(rng, z.shape, z.dtype)


def weighted_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
  """sum(w v) / max(sum w, 1): zero when every weight is zero."""
  return jnp.sum(weights * values) / jnp.maximum(jnp.sum(weights), 1.0)


def retain_loss(t_fn: TransformFn, z_r: jax.Array, rng: jax.Array, *, num_samples: int = 1,
                noise_scale: float = 0.0) -> jax.Array:
  """L_r: elementwise MSE between T(z~_r) and z_r. z_r: [B, D] -> scalar."""
  zt = perturb(z_r, rng, num_samples, noise_scale)
  out = t_fn(zt.reshape(-1, zt.shape[-1])).reshape(zt.shape)
  return jnp.mean((out - z_r[:, None, :]) ** 2)


def forget_loss(t_fn: TransformFn, z_f: jax.Array, w_f: jax.Array, z_ref: jax.Array, rng: jax.Array, *,
                num_samples: int = 1, noise_scale: float = 0.0) -> jax.Array:
  """L_f: mean over forget and reference rows of ||T(z~_f) - z_ref||^2, in O(B D) by the exact identity
  mean_j ||a - r_j||^2 = ||a - rbar||^2 + mean_j ||r_j - rbar||^2. z_f: [B, D], w_f: [B], z_ref: [B_ref, D]."""
  zt = perturb(z_f, rng, num_samples, noise_scale)
  out = t_fn(zt.reshape(-1, zt.shape[-1])).reshape(zt.shape)          # [B, M, D]
  ref_mean = jnp.mean(z_ref, axis=0)
  spread = jnp.mean(jnp.sum((z_ref - ref_mean) ** 2, axis=-1))
  per_row = jnp.mean(jnp.sum((out - ref_mean) ** 2, axis=-1), axis=1) + spread    # [B]
  return weighted_mean(per_row, w_f)


def zero_shot_retain_loss(t_fn: TransformFn, prototypes: jax.Array, pi_retain: jax.Array, rng: jax.Array, *,
                          num_samples: int = 1, noise_scale: float = 0.0) -> jax.Array:
  """L_r^zs = sum_c pi^R_c E||T(w_c + eps) - w_c||^2. prototypes: [C, D]; pi_retain: [C] (0 off R)."""
  zt = perturb(prototypes, rng, num_samples, noise_scale)
  out = t_fn(zt.reshape(-1, zt.shape[-1])).reshape(zt.shape)          # [C, M, D]
  per_class = jnp.mean(jnp.sum((out - prototypes[:, None, :]) ** 2, axis=-1), axis=1)
  return jnp.sum(pi_retain * per_class)


def zero_shot_forget_loss(t_fn: TransformFn, z_f: jax.Array, w_f: jax.Array, prototypes: jax.Array,
                          pi: jax.Array, rng: jax.Array, *, num_samples: int = 1,
                          noise_scale: float = 0.0) -> jax.Array:
  """L_f^zs = mean_f E_eps sum_c pi_c ||T(z~_f) - w_c||^2. z_f: [B, D]; prototypes [C, D]; pi [C]."""
  zt = perturb(z_f, rng, num_samples, noise_scale)
  out = t_fn(zt.reshape(-1, zt.shape[-1])).reshape(zt.shape)          # [B, M, D]
  sq = jnp.sum((out[:, :, None, :] - prototypes[None, None]) ** 2, axis=-1)   # [B, M, C]
  per_row = jnp.mean(jnp.sum(pi * sq, axis=-1), axis=1)
  return weighted_mean(per_row, w_f)


def standard_objective(t_fn: TransformFn, z_r: jax.Array, z_f: jax.Array, w_f: jax.Array, z_ref: jax.Array,
                       rng: jax.Array, *, beta: float, num_samples: int = 1,
                       noise_scale: float = 0.0) -> tuple[jax.Array, dict[str, jax.Array]]:
  """L = L_r + beta L_f, with both terms in aux."""
  r_rng, f_rng = jax.random.split(rng)
  l_r = retain_loss(t_fn, z_r, r_rng, num_samples=num_samples, noise_scale=noise_scale)
  l_f = forget_loss(t_fn, z_f, w_f, z_ref, f_rng, num_samples=num_samples, noise_scale=noise_scale)
  return l_r + beta * l_f, {"retain_loss": l_r, "forget_loss": l_f}


def zero_shot_objective(t_fn: TransformFn, z_f: jax.Array, w_f: jax.Array, prototypes: jax.Array,
                        pi: jax.Array, pi_retain: jax.Array, rng: jax.Array, *, beta: float,
                        num_samples: int = 1, noise_scale: float = 0.0,
                        target_shift: jax.Array | None = None) -> tuple[jax.Array, dict[str, jax.Array]]:
  """L^zs = L_r^zs + beta L_f^zs, with both terms in aux. `target_shift` s [D] (None: 0) moves the
  prototypes of L_f^zs only, so its minimiser moves from sum_c pi_c w_c to that point + s (sum pi = 1)."""
  r_rng, f_rng = jax.random.split(rng)
  l_r = zero_shot_retain_loss(t_fn, prototypes, pi_retain, r_rng, num_samples=num_samples,
                              noise_scale=noise_scale)
  forget_protos = prototypes if target_shift is None else prototypes + target_shift
  l_f = zero_shot_forget_loss(t_fn, z_f, w_f, forget_protos, pi, f_rng, num_samples=num_samples,
                              noise_scale=noise_scale)
  return l_r + beta * l_f, {"retain_loss": l_r, "forget_loss": l_f}
