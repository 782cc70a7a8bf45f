"""Shared SMILE test targets: an anisotropic Gaussian with injected gradient noise, and a toy regression split."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.smile import adaptation


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


def toy_regression_splits(n: int = 96, p: int = 3, seed: int = 0) -> dict:
  """Train/valid/test splits of y = x₀ + 0.1·noise (valid and test 32 rows), in the pipeline's data layout."""
  rng = np.random.default_rng(seed)
  out = {}
  for part, m in (("train", n), ("valid", 32), ("test", 32)):
    x = rng.standard_normal((m, p)).astype(np.float32)
    out[f"x_{part}"], out[f"y_{part}"] = x, (x[:, 0] + 0.1 * rng.standard_normal(m)).astype(np.float32)
  out["y_std"] = 2.0
  return out


def trace_chains(sampler, check, starts, steps: int, batch: int | None = None, *, record):
  """Per-step records of chains vmapped with CHAIN_AXIS (so chain-pooled tuners see every chain).

  A check with data: `batch` None (or ≥ N) steps on the full data, else on minibatches of `batch` rows drawn
  with replacement (the chain starts on the first `batch` rows). `record(state, info, start)` returns the
  per-step pytree to keep; the result is that pytree with leading axes [chain, step], as numpy.
  """
  n = check.data["y"].shape[0]
  full = batch is None or batch >= n
  rows = lambda idx: {"x": check.data["x"][idx], "y": check.data["y"][idx]}

  def one(start, key):
    state = sampler.init(start, check.data if full else rows(jnp.arange(batch)), key)
    idx = jax.random.randint(jax.random.fold_in(key, 1), (steps, 1 if full else batch), 0, n)

    def body(st, inp):
      k, i = inp
      st, info = sampler.step(k, st, check.data if full else rows(i))
      return st, record(st, info, start)

    return jax.lax.scan(body, state, (jax.random.split(key, steps), idx))[1]

  keys = jax.random.split(jax.random.key(2), starts.shape[0])
  out = jax.jit(jax.vmap(one, axis_name=adaptation.CHAIN_AXIS))(starts, keys)
  return jax.tree_util.tree_map(np.asarray, out)
