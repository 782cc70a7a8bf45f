"""Known-posterior checks for samplers: a `Check` is a minibatch log density `logdensity_fn(θ, batch)` over a flat
θ ∈ R^d, the data it walks (x [N, p], y [N]; full batch: N = batch size) and the reference mean / std: linear
regression (closed form), logistic regression (cached NUTS), an anisotropic Gaussian and Neal's funnel.
`spread_errors` scores samples in reference-std units; `jaxml.smile.posteriors` builds its suite on these."""

import hashlib
import os
from typing import Callable, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

from jaxml import core

__all__ = ["Check", "linear_regression", "logistic_regression", "anisotropic_gaussian", "funnel",
           "nuts_reference", "logistic_data", "logistic_logdensity", "full_batch", "spread_errors"]


class Check(NamedTuple):
  name: str
  logdensity_fn: Callable[[jax.Array, dict], jax.Array]   # minibatch log posterior (scaled by N/b)
  data: dict                                                # x [N, p], y [N]
  batch_size: int                                           # = N for a full-batch target
  ref_mean: np.ndarray
  ref_std: np.ndarray
  init_scale: float                                         # chains start at N(0, init_scale²)


def _synthetic(n: int, p: int, seed: int, correlation: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((n, p))
  # features 0 and 1 correlated: a rotated posterior and non-diagonal gradient noise
  x[:, 1] = correlation * x[:, 0] + np.sqrt(1.0 - correlation ** 2) * x[:, 1]
  w = rng.standard_normal(p)
  return x.astype(np.float32), w


def logistic_data(n: int = 512, p: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  """`logistic_regression`'s seeded synthetic set: x [n, p] float32 (features 0, 1 correlated), y [n] in {0, 1}."""
  x, w = _synthetic(n, p, seed)
  prob = 1.0 / (1.0 + np.exp(-(x @ w)))
  return x, (np.random.default_rng(seed + 1).uniform(size=n) < prob).astype(np.float32)


def linear_regression(n: int = 512, p: int = 6, noise: float = 0.5, prior: float = 1.0, batch_size: int = 32,
                      seed: int = 0) -> Check:
  """y = x·w + N(0, noise²), prior w ~ N(0, prior²): posterior N(Λ⁻¹ xᵀy/σ², Λ⁻¹), Λ = xᵀx/σ² + I/prior²."""
  x, w = _synthetic(n, p, seed)
  y = (x @ w + noise * np.random.default_rng(seed + 1).standard_normal(n)).astype(np.float32)
  x64 = x.astype(np.float64)
  prec = x64.T @ x64 / noise ** 2 + np.eye(p) / prior ** 2
  cov = np.linalg.inv(prec)
  mean = cov @ (x64.T @ y.astype(np.float64)) / noise ** 2

  def logdensity_fn(theta, batch):
    resid = batch["y"] - batch["x"] @ theta
    scale = n / batch["y"].shape[0]
    return -0.5 * jnp.sum(theta ** 2) / prior ** 2 - 0.5 * scale * jnp.sum(resid ** 2) / noise ** 2

  return Check("linreg", logdensity_fn, {"x": jnp.asarray(x), "y": jnp.asarray(y)}, batch_size, mean,
               np.sqrt(np.diag(cov)), 0.1)


def logistic_logdensity(n: int, prior: float) -> Callable[[jax.Array, dict], jax.Array]:
  """Minibatch log posterior of logistic regression with prior N(0, prior²) on n rows."""
  def logdensity_fn(theta, batch):
    logits = batch["x"] @ theta
    ll = batch["y"] * logits - jnp.logaddexp(0.0, logits)
    return -0.5 * jnp.sum(theta ** 2) / prior ** 2 + n / batch["y"].shape[0] * jnp.sum(ll)
  return logdensity_fn


def nuts_reference(logdensity_fn: Callable[[jax.Array], jax.Array], dim: int, *, num_chains: int = 4,
                   num_warmup: int = 1000, num_samples: int = 2000, seed: int = 0,
                   max_rhat: float = 1.01) -> tuple[np.ndarray, np.ndarray, float]:
  """Multi-chain blackjax NUTS (window adaptation per chain): (mean, std, max R-hat); raises if R-hat > max_rhat."""

  def one_chain(key):
    init_key, warm_key, run_key = jax.random.split(key, 3)
    pos = 0.1 * jax.random.normal(init_key, (dim,))
    warmup = blackjax.window_adaptation(blackjax.nuts, logdensity_fn)
    (state, params), _ = warmup.run(warm_key, pos, num_steps=num_warmup)
    kernel = blackjax.nuts(logdensity_fn, **params).step

    def body(st, k):
      st, _ = kernel(k, st)
      return st, st.position

    _, samples = jax.lax.scan(body, state, jax.random.split(run_key, num_samples))
    return samples

  samples = np.asarray(jax.jit(jax.vmap(one_chain))(jax.random.split(jax.random.key(seed), num_chains)))
  rhat = float(np.max(np.asarray(blackjax.diagnostics.potential_scale_reduction(jnp.asarray(samples)))))
  if not rhat <= max_rhat:
    raise RuntimeError(f"NUTS reference did not converge: max R-hat {rhat:.4f} > {max_rhat}")
  flat = samples.reshape(-1, dim).astype(np.float64)
  return flat.mean(0), flat.std(0), rhat


def logistic_regression(n: int = 512, p: int = 6, prior: float = 1.0, batch_size: int = 32, seed: int = 0) -> Check:
  """Bayesian logistic regression on a seeded synthetic set; NUTS reference (cached by settings)."""
  x, y = logistic_data(n, p, seed)
  logdensity_fn = logistic_logdensity(n, prior)
  data = {"x": jnp.asarray(x), "y": jnp.asarray(y)}
  key = hashlib.sha256(f"logreg-v1-{n}-{p}-{prior}-{seed}".encode()).hexdigest()[:16]
  path = os.path.join(core.cache_dir("smile_checks"), f"logreg_{key}.npz")
  if os.path.exists(path):
    ref = np.load(path)
    mean, std = ref["mean"], ref["std"]
  else:
    mean, std, rhat = nuts_reference(lambda th: logdensity_fn(th, data), p, seed=seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, mean=mean, std=std, rhat=rhat)
  return Check("logreg", logdensity_fn, data, batch_size, np.asarray(mean), np.asarray(std), 0.1)


def full_batch(name: str, logdensity_fn: Callable[[jax.Array], jax.Array], ref_mean: np.ndarray,
               ref_std: np.ndarray, init_scale: float) -> Check:
  """A full-batch target from `logdensity_fn(θ)`: its batch is a one-row placeholder that the density ignores."""
  placeholder = {"x": jnp.zeros((1, 1), jnp.float32), "y": jnp.zeros((1,), jnp.float32)}
  return Check(name, lambda theta, batch: logdensity_fn(theta), placeholder, 1, ref_mean, ref_std, init_scale)


def anisotropic_gaussian(dim: int = 8, max_scale: float = 10.0) -> Check:
  """N(0, diag(σ²)), σ log-spaced in [1, max_scale]; full batch (no gradient noise)."""
  scales = np.logspace(0.0, np.log10(max_scale), dim)
  inv_var = jnp.asarray(1.0 / scales ** 2, jnp.float32)
  return full_batch("gauss", lambda theta: -0.5 * jnp.sum(inv_var * theta ** 2), np.zeros(dim), scales, 1.0)


def funnel(dim: int = 5, sigma_v: float = 1.0) -> Check:
  """θ = (v, x_1..x_{d-1}); v ~ N(0, σ_v²), x_i | v ~ N(0, e^v); full batch."""

  def logdensity_fn(theta):
    v, x = theta[0], theta[1:]
    return -0.5 * v ** 2 / sigma_v ** 2 - 0.5 * (dim - 1) * v - 0.5 * jnp.sum(x ** 2) * jnp.exp(-v)

  std = np.full(dim, np.exp(sigma_v ** 2 / 4.0))
  std[0] = sigma_v
  return full_batch("funnel", logdensity_fn, np.zeros(dim), std, 0.5)


def spread_errors(samples: np.ndarray, check: Check) -> tuple[float, float]:
  """samples [n, d] -> (rms standardized mean error, rms relative std error); inf if non-finite."""
  s = np.asarray(samples, np.float64)
  if not np.all(np.isfinite(s)):
    return float("inf"), float("inf")
  mean_err = (s.mean(0) - check.ref_mean) / check.ref_std
  std_err = (s.std(0) - check.ref_std) / check.ref_std
  return float(np.sqrt(np.mean(mean_err ** 2))), float(np.sqrt(np.mean(std_err ** 2)))

