"""Known-posterior suite: ten cheap targets (`checks.Check`s) with exact or cached-NUTS reference moments.

The four of `checks` plus: `uci_logistic` (boston, concrete; binarised at the median, minibatches of 32,
NUTS references in `<root>/posteriors/<name>.npz`, `write_references`), `eight_schools` (centred, the classic
funnel; moments by quadrature over log τ), `correlated_gaussian` (ρ = 0.95), `banana` and `ar1_latent` (d = 40,
minibatches over time points), all exact. `suite(root)` builds them; `root` holds `uci/` and `posteriors/`."""

import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.smile import checks
from jaxml.smile.checks import Check

__all__ = ["uci_logistic", "synthetic_logistic", "eight_schools", "correlated_gaussian", "banana", "ar1_latent",
           "suite", "SUITE", "FAST", "write_references", "reference_path"]

SUITE = ("linreg", "logreg", "gauss", "funnel", "logreg_boston", "logreg_concrete", "eight_schools", "corr_gauss",
         "banana", "ar1")
FAST = ("linreg", "corr_gauss", "banana", "ar1")    # exact references, no data files: the test subset
UCI_LOGISTIC = {"boston": 14, "concrete": 9}         # name -> dimension (inputs + intercept)


def reference_path(root: str, name: str) -> str:
  return os.path.join(root, "posteriors", f"{name}.npz")


def _load_reference(root: str, name: str) -> tuple[np.ndarray, np.ndarray]:
  path = reference_path(root, name)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} missing: `python -m benchmarks.smile_posteriors --write-references` makes it")
  ref = np.load(path)
  return np.asarray(ref["mean"], np.float64), np.asarray(ref["std"], np.float64)


def _uci_design(root: str, name: str) -> tuple[np.ndarray, np.ndarray]:
  """All rows of data/uci/<name>: standardised inputs with an intercept column, y = 1[target > median]."""
  folder = os.path.join(root, "uci", name)
  data = np.loadtxt(os.path.join(folder, "data.txt"))
  features = np.atleast_1d(np.loadtxt(os.path.join(folder, "index_features.txt"), dtype=int))
  target = int(np.loadtxt(os.path.join(folder, "index_target.txt"), dtype=int))
  x = data[:, features]
  x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1.0)
  x = np.concatenate([np.ones((x.shape[0], 1)), x], axis=1).astype(np.float32)
  y = (data[:, target] > np.median(data[:, target])).astype(np.float32)
  return x, y


def uci_logistic(root: str, name: str, *, batch_size: int = 32, reference: bool = True) -> Check:
  """Logistic regression on data/uci/<name> (binarised target); NUTS reference from <root>/posteriors."""
  x, y = _uci_design(root, name)
  mean, std = _load_reference(root, f"logreg_{name}") if reference else (np.zeros(x.shape[1]), np.ones(x.shape[1]))
  return Check(f"logreg_{name}", checks.logistic_logdensity(x.shape[0], 1.0), {"x": jnp.asarray(x), "y": jnp.asarray(y)},
               batch_size, mean, std, 0.1)


def synthetic_logistic(root: str, *, reference: bool = True) -> Check:
  """`checks.logistic_regression()`'s target (n = 512, p = 6, seed 0) with its reference from <root>/posteriors."""
  n, p = 512, 6
  x, y = checks.logistic_data(n, p, 0)
  mean, std = _load_reference(root, "logreg_synthetic") if reference else (np.zeros(p), np.ones(p))
  return Check("logreg", checks.logistic_logdensity(n, 1.0), {"x": jnp.asarray(x), "y": jnp.asarray(y)}, 32, mean, std, 0.1)


_SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
_SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def _eight_schools_moments(mu_scale: float, tau_scale: float) -> tuple[np.ndarray, np.ndarray]:
  """Exact posterior moments of (μ, log τ, θ) by quadrature over log τ (μ, θ | τ, y are Gaussian)."""
  y, s2 = _SCHOOLS_Y, _SCHOOLS_SIGMA ** 2
  log_tau = np.linspace(-20.0, 8.0, 40001)
  tau2 = np.exp(2 * log_tau)[:, None]
  w = 1.0 / (s2 + tau2)                                                  # [G, 8]
  prec_mu = 1.0 / mu_scale ** 2 + w.sum(1)
  mean_mu = (w * y).sum(1) / prec_mu
  # log p(y | τ) with μ integrated out, plus the half-Cauchy prior on τ and the Jacobian of log τ
  log_marg = (0.5 * np.log(w).sum(1) - 0.5 * np.log(prec_mu * mu_scale ** 2)
              - 0.5 * ((w * y ** 2).sum(1) - prec_mu * mean_mu ** 2))
  log_post = log_marg - np.log1p(tau2[:, 0] / tau_scale ** 2) + log_tau
  p = np.exp(log_post - log_post.max())
  p /= p.sum()
  v = 1.0 / (1.0 / s2 + 1.0 / tau2)                                      # Var θ | μ, τ
  a = v / tau2                                                           # θ = a μ + v y/σ² + noise
  mean_th = a * mean_mu[:, None] + v * y / s2
  var_th = v + a ** 2 / prec_mu[:, None]
  cond_mean = np.concatenate([mean_mu[:, None], log_tau[:, None], mean_th], 1)
  cond_var = np.concatenate([1.0 / prec_mu[:, None], np.zeros_like(log_tau)[:, None], var_th], 1)
  mean = p @ cond_mean
  var = p @ (cond_var + cond_mean ** 2) - mean ** 2
  return mean, np.sqrt(var)


def eight_schools(mu_scale: float = 5.0, tau_scale: float = 5.0) -> Check:
  """Centred eight schools: μ ~ N(0, 5²), τ ~ half-Cauchy(5), θ_j ~ N(μ, τ²), y_j ~ N(θ_j, σ_j²); θ = (μ, log τ, θ_1..8)."""
  y, sigma = jnp.asarray(_SCHOOLS_Y, jnp.float32), jnp.asarray(_SCHOOLS_SIGMA, jnp.float32)

  def logdensity_fn(theta):
    mu, log_tau, th = theta[0], theta[1], theta[2:]
    tau = jnp.exp(log_tau)
    return (-0.5 * mu ** 2 / mu_scale ** 2 - jnp.log1p(tau ** 2 / tau_scale ** 2) + log_tau
            - 0.5 * jnp.sum((th - mu) ** 2) / tau ** 2 - th.shape[0] * log_tau
            - 0.5 * jnp.sum((y - th) ** 2 / sigma ** 2))

  mean, std = _eight_schools_moments(mu_scale, tau_scale)
  return checks.full_batch("eight_schools", logdensity_fn, mean, std, 1.0)


def correlated_gaussian(dim: int = 8, rho: float = 0.95) -> Check:
  """N(0, Σ), Σ = ρ 11ᵀ + (1 − ρ) I (unit variances); full batch."""
  cov = rho * np.ones((dim, dim)) + (1.0 - rho) * np.eye(dim)
  prec = jnp.asarray(np.linalg.inv(cov), jnp.float32)
  return checks.full_batch("corr_gauss", lambda theta: -0.5 * theta @ prec @ theta, np.zeros(dim), np.ones(dim), 1.0)


def banana(a: float = 2.0, b: float = 0.25) -> Check:
  """x₁ ~ N(0, a²), x₂ | x₁ ~ N(b(x₁² − a²), 1); full batch."""

  def logdensity_fn(theta):
    x1, x2 = theta[0], theta[1]
    return -0.5 * x1 ** 2 / a ** 2 - 0.5 * (x2 - b * (x1 ** 2 - a ** 2)) ** 2

  std = np.array([a, np.sqrt(1.0 + 2.0 * b ** 2 * a ** 4)])
  return checks.full_batch("banana", logdensity_fn, np.zeros(2), std, 1.0)


def ar1_latent(length: int = 40, phi: float = 0.9, sigma: float = 0.5, noise: float = 0.5, batch_size: int = 8,
               seed: int = 0) -> Check:
  """z_1 ~ N(0, σ²/(1 − φ²)), z_t = φ z_{t−1} + N(0, σ²), y_t = z_t + N(0, noise²); posterior of z given y.
  Data rows are time points (x = the index t as a float, y_t): a minibatch sees b of the T observations."""
  rng = np.random.default_rng(seed)
  z = np.zeros(length)
  z[0] = rng.normal(0.0, sigma / np.sqrt(1 - phi ** 2))
  for t in range(1, length):
    z[t] = phi * z[t - 1] + rng.normal(0.0, sigma)
  y = (z + rng.normal(0.0, noise, length)).astype(np.float32)
  # prior precision of the stationary AR(1): tridiagonal
  q = np.zeros((length, length))
  idx = np.arange(length)
  q[idx, idx] = (1 + phi ** 2) / sigma ** 2
  q[0, 0] = q[-1, -1] = 1.0 / sigma ** 2
  q[idx[:-1], idx[1:]] = q[idx[1:], idx[:-1]] = -phi / sigma ** 2
  post_prec = q + np.eye(length) / noise ** 2
  cov = np.linalg.inv(post_prec)
  mean = cov @ (y.astype(np.float64) / noise ** 2)
  prior_prec = jnp.asarray(q, jnp.float32)

  def logdensity_fn(theta, batch):
    t = batch["x"][:, 0].astype(jnp.int32)
    scale = length / batch["y"].shape[0]
    return -0.5 * theta @ prior_prec @ theta - 0.5 * scale * jnp.sum((batch["y"] - theta[t]) ** 2) / noise ** 2

  data = {"x": jnp.asarray(idx[:, None], jnp.float32), "y": jnp.asarray(y)}
  return Check("ar1", logdensity_fn, data, batch_size, mean, np.sqrt(np.diag(cov)), 0.5)


def suite(root: str, names: tuple[str, ...] = SUITE) -> list[Check]:
  """The named targets (default: all ten), in order."""
  build = {"linreg": checks.linear_regression, "logreg": lambda: synthetic_logistic(root),
           "gauss": checks.anisotropic_gaussian, "funnel": checks.funnel,
           "logreg_boston": lambda: uci_logistic(root, "boston"),
           "logreg_concrete": lambda: uci_logistic(root, "concrete"),
           "eight_schools": eight_schools, "corr_gauss": correlated_gaussian, "banana": banana, "ar1": ar1_latent}
  return [build[name]() for name in names]


def write_references(root: str, *, num_chains: int = 4, num_warmup: int = 2000, num_samples: int = 5000,
                     seed: int = 0) -> dict[str, float]:
  """Multi-chain NUTS references of the three logistic regressions -> <root>/posteriors/*.npz; name -> R-hat."""
  targets = {"logreg_synthetic": synthetic_logistic(root, reference=False),
             **{f"logreg_{name}": uci_logistic(root, name, reference=False) for name in UCI_LOGISTIC}}
  os.makedirs(os.path.join(root, "posteriors"), exist_ok=True)
  rhats = {}
  for name, check in targets.items():
    full = lambda th, c=check: c.logdensity_fn(th, c.data)
    dim = int(check.data["x"].shape[1])
    mean, std, rhat = checks.nuts_reference(jax.jit(full), dim, num_chains=num_chains, num_warmup=num_warmup,
                                            num_samples=num_samples, seed=seed)
    np.savez(reference_path(root, name), mean=mean, std=std, rhat=rhat, num_chains=num_chains,
             num_warmup=num_warmup, num_samples=num_samples, seed=seed)
    rhats[name] = rhat
  return rhats
