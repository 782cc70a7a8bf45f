"""Shared analytic target for SMILE tests: anisotropic Gaussian with injected gradient noise."""

import jax
import jax.numpy as jnp
import numpy as np


def rotated_gaussian(dim: int = 10, condition: float = 100.0, seed: int = 0):
  """Covariance Σ = Q diag(κ²) Qᵀ, κ log-spaced with κ_max/κ_min = sqrt(condition)... squared = condition."""
  kappa = np.logspace(0.0, 0.5 * np.log10(condition), dim)
  q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, dim)))
  cov = q @ np.diag(kappa ** 2) @ q.T
  return jnp.asarray(kappa, jnp.float32), jnp.asarray(np.linalg.inv(cov), jnp.float32), cov


def noisy_logdensity(precision):
  """log p̂(θ; ξ) = −½ θᵀPθ + ξ·θ, so ∇ = −Pθ + ξ (the 'minibatch' is the noise draw ξ)."""
  def logdensity_fn(theta, minibatch):
    return -0.5 * theta @ precision @ theta + minibatch @ theta
  return logdensity_fn


def bias_squared(samples: np.ndarray, cov: np.ndarray) -> float:
  """b² = mean_j (Ê[θ_j²] − Σ_jj)² / (2 Σ_jj²); samples [n, d]."""
  second = np.mean(np.asarray(samples, np.float64) ** 2, axis=0)
  diag = np.diag(cov)
  return float(np.mean((second - diag) ** 2 / (2 * diag ** 2)))


def run_noisy_chains(sampler, precision, noise_sd, *, num_chains, num_steps, burn_in, thin, seed=0):
  """Runs vmapped chains with ξ ~ N(0, diag(noise_sd²)) each step; returns kept samples [n, d] and infos."""
  dim = precision.shape[0]

  def one_chain(key):
    init_key, run_key = jax.random.split(key)
    pos = jax.random.normal(init_key, (dim,)) * 0.1
    state = sampler.init(pos, jnp.zeros((dim,)), init_key)

    def body(state, k):
      nk, sk = jax.random.split(k)
      xi = noise_sd * jax.random.normal(nk, (dim,))
      state, info = sampler.step(sk, state, xi)
      return state, (state.position, info.reset, info.step_size)

    _, (pos, resets, eps) = jax.lax.scan(body, state, jax.random.split(run_key, num_steps))
    return pos[burn_in::thin], resets, eps

  pos, resets, eps = jax.jit(jax.vmap(one_chain))(jax.random.split(jax.random.key(seed), num_chains))
  return np.asarray(pos).reshape(-1, dim), np.asarray(resets), np.asarray(eps)
