"""BNN regression targets (log densities over Flax params) and posterior-predictive metrics.

Model: an MLP f_θ(x). With `noise="global"` the net outputs μ(x) and a scalar parameter
log σ is shared by all inputs; with `noise="heteroscedastic"` the net outputs (μ(x), log σ(x)).
Likelihood  y | x, θ ~ N(μ(x), σ²);  prior θ ~ N(0, prior_scale²) on every parameter.
Minibatch log posterior  log p̂_B(θ) = log p(θ) + (N/b) Σ_{i∈B} log N(y_i | μ(x_i), σ_i²).
"""

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from jaxml.nn.mlp import MLP

__all__ = ["RegressionModel", "make_regression_model", "gaussian_loglik", "log_prior", "make_minibatch_logdensity",
           "make_full_logdensity", "predict", "predictive_metrics", "LOG_SIGMA_RANGE", "make_classification_logdensity",
           "classification_metrics"]

LOG_SIGMA_RANGE = (-12.0, 8.0)   # numerical safety only; never active at sensible parameters


class RegressionModel(NamedTuple):
  """init(rng, x) -> params;  apply(params, x [n, p]) -> (mu [n], log_sigma [n])."""

  init: Callable[[jax.Array, jax.Array], Any]
  apply: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]


def make_regression_model(hidden: Sequence[int], *, noise: str = "global") -> RegressionModel:
  """MLP regression net with a global or input-dependent noise scale."""
  if noise not in ("global", "heteroscedastic"):
    raise ValueError(f"noise must be 'global' or 'heteroscedastic', got {noise!r}")
  out = 1 if noise == "global" else 2
  net = MLP(features=tuple(hidden) + (out,))

  def init(rng: jax.Array, x: jax.Array) -> Any:
    params = {"net": net.init(rng, x)["params"]}
    if noise == "global":
      params["log_sigma"] = jnp.zeros((), jnp.float32)
    return params

  def apply(params: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    h = net.apply({"params": params["net"]}, x)
    mu = h[..., 0]
    log_sigma = jnp.broadcast_to(params["log_sigma"], mu.shape) if noise == "global" else h[..., 1]
    return mu, jnp.clip(log_sigma, *LOG_SIGMA_RANGE)

  return RegressionModel(init, apply)


def gaussian_loglik(y: jax.Array, mu: jax.Array, log_sigma: jax.Array) -> jax.Array:
  """Elementwise log N(y | mu, exp(log_sigma)²)."""
  return -0.5 * jnp.log(2 * jnp.pi) - log_sigma - 0.5 * ((y - mu) * jnp.exp(-log_sigma)) ** 2


def log_prior(params: Any, prior_scale: float = 1.0) -> jax.Array:
  """Σ log N(θ_j | 0, prior_scale²) over every parameter."""
  leaves = jax.tree.leaves(params)
  d = sum(x.size for x in leaves)
  sq = sum(jnp.sum(x ** 2) for x in leaves)
  return -0.5 * sq / prior_scale ** 2 - d * (jnp.log(prior_scale) + 0.5 * jnp.log(2 * jnp.pi))


def make_minibatch_logdensity(apply_fn: Callable, *, data_size: int, prior_scale: float = 1.0,
                              floor_scale: bool = False) -> Callable[[Any, dict], jax.Array]:
  """logdensity_fn(params, minibatch{"x": [b, p], "y": [b]}) = log p(θ) + (N/b) Σ_B log-lik (`floor_scale`: ⌊N/b⌋,
  the authors' code)."""

  def logdensity_fn(params: Any, minibatch: dict) -> jax.Array:
    mu, log_sigma = apply_fn(params, minibatch["x"])
    b = minibatch["y"].shape[0]
    scale = float(data_size // b) if floor_scale else data_size / b
    return log_prior(params, prior_scale) + scale * jnp.sum(gaussian_loglik(minibatch["y"], mu, log_sigma))

  return logdensity_fn


def make_full_logdensity(apply_fn: Callable, x: jax.Array, y: jax.Array, *,
                         prior_scale: float = 1.0) -> Callable[[Any], jax.Array]:
  """Full-batch log posterior θ -> log p(θ) + Σ_i log N(y_i | μ(x_i), σ_i²): the minibatch one with b = N."""
  logdensity_fn = make_minibatch_logdensity(apply_fn, data_size=y.shape[0], prior_scale=prior_scale)
  return lambda params: logdensity_fn(params, {"x": x, "y": y})


def predict(apply_fn: Callable, samples: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """samples: params with leading axes [C, S]; returns mu, log_sigma [C, S, n]."""
  return jax.vmap(jax.vmap(lambda p: apply_fn(p, x)))(samples)


def predictive_metrics(mu: np.ndarray, log_sigma: np.ndarray, y: np.ndarray, *, rng: np.random.Generator,
                       levels: Sequence[float] = (0.8, 0.9, 0.95), min_draws: int = 1000) -> dict[str, float]:
  """Metrics of the equal-weight Gaussian mixture of M samples (mu, log_sigma [M, n]; y [n]): lppd, rmse of
  the mixture mean, coverage_<p> and width_<p> of central intervals from ⌈min_draws / M⌉ draws per sample,
  cal_error = sqrt(mean_p (p − coverage_p)²)."""
  mu, log_sigma, y = (np.asarray(a, np.float64) for a in (mu, log_sigma, y))
  m = mu.shape[0]
  ll = -0.5 * np.log(2 * np.pi) - log_sigma - 0.5 * ((y[None] - mu) * np.exp(-log_sigma)) ** 2
  lppd = float(np.mean(np.asarray(logsumexp(jnp.asarray(ll), axis=0)) - np.log(m)))
  rmse = float(np.sqrt(np.mean((mu.mean(0) - y) ** 2)))
  reps = max(1, int(np.ceil(min_draws / m)))
  draws = (mu[None] + np.exp(log_sigma)[None] * rng.standard_normal((reps,) + mu.shape)).reshape(reps * m, -1)
  out = {"lppd": lppd, "rmse": rmse}
  errs = []
  for p in levels:
    lo, hi = np.quantile(draws, [(1 - p) / 2, (1 + p) / 2], axis=0)
    cov = float(np.mean((y >= lo) & (y <= hi)))
    out[f"coverage_{int(round(p * 100))}"] = cov
    out[f"width_{int(round(p * 100))}"] = float(np.mean(hi - lo))
    errs.append((p - cov) ** 2)
  out["cal_error"] = float(np.sqrt(np.mean(errs)))
  return out


def make_classification_logdensity(apply_fn: Callable, *, data_size: int,
                                   prior_scale: float = 1.0) -> Callable[[Any, dict], jax.Array]:
  """logdensity_fn(params, {"x": [b, ...], "y": int [b]}) = log p(θ) + (N/b) Σ_B log softmax(f_θ(x))_y."""

  def logdensity_fn(params: Any, minibatch: dict) -> jax.Array:
    logp = jax.nn.log_softmax(apply_fn(params, minibatch["x"]))
    ll = jnp.take_along_axis(logp, minibatch["y"][:, None].astype(jnp.int32), axis=-1)[:, 0]
    return log_prior(params, prior_scale) + data_size / minibatch["y"].shape[0] * jnp.sum(ll)

  return logdensity_fn


def classification_metrics(log_probs: np.ndarray, y: np.ndarray) -> dict[str, float]:
  """log_probs: [M, n, classes] per-sample log predictive; y: [n] int. Mixture LPPD and accuracy."""
  log_probs = np.asarray(log_probs, np.float64)
  mix = np.asarray(logsumexp(jnp.asarray(log_probs), axis=0)) - np.log(log_probs.shape[0])   # [n, classes]
  y = np.asarray(y, np.int64)
  return {"lppd": float(np.mean(mix[np.arange(len(y)), y])), "accuracy": float(np.mean(mix.argmax(-1) == y))}
