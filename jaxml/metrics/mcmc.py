"""MCMC convergence diagnostics (numpy): split-R-hat and effective sample size.

Inputs are arrays [chains, draws, ...] (extra trailing axes are independent quantities).

- `split_rhat`: each chain is cut into two halves, giving 2C pseudo-chains of n = ⌊draws/2⌋;
  with W the mean within-chain variance and B/n the variance of the chain means,
  R̂ = sqrt(((n−1)/n · W + B/n) / W).  With C = 1 it is the within-chain diagnostic.
- `ess`: C·n / (1 + 2 Σ_t ρ̂_t), ρ̂_t = 1 − (W − mean_c γ̂_c(t)) / var⁺ (var⁺ = (n−1)/n · W + B/n),
  with Geyer's initial positive and monotone sequence truncation over lag pairs.
- `rank_normalize` turns draws into normal scores of their pooled ranks; `bulk_ess` and
  `rank_split_rhat` apply the two diagnostics to them (Vehtari et al. 2021).
"""

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata

__all__ = ["split_rhat", "ess", "rank_normalize", "bulk_ess", "rank_split_rhat", "split_chains"]


def split_chains(x: np.ndarray) -> np.ndarray:
  """[C, n, ...] -> [2C, ⌊n/2⌋, ...] (the middle draw of an odd chain is dropped)."""
  x = np.asarray(x, np.float64)
  half = x.shape[1] // 2
  return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def _rhat(x: np.ndarray) -> np.ndarray:
  n = x.shape[1]
  means = x.mean(axis=1)
  w = x.var(axis=1, ddof=1).mean(axis=0)
  b_over_n = means.var(axis=0, ddof=1)
  var_plus = (n - 1) / n * w + b_over_n
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.sqrt(var_plus / w)


def split_rhat(x: np.ndarray) -> np.ndarray:
  """Split-R̂ of x [C, n, ...] over 2C half-chains; shape x.shape[2:]."""
  return _rhat(split_chains(x))


def _autocov(x: np.ndarray) -> np.ndarray:
  """Biased autocovariance along axis 1 via FFT: [C, n, ...] -> [C, n, ...]."""
  n = x.shape[1]
  xc = x - x.mean(axis=1, keepdims=True)
  size = 2 ** int(np.ceil(np.log2(2 * n)))
  f = np.fft.rfft(xc, n=size, axis=1)
  acov = np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :n]
  return acov / n


def ess(x: np.ndarray) -> np.ndarray:
  """Effective sample size of x [C, n, ...] (Geyer initial monotone sequence); shape x.shape[2:]."""
  x = np.asarray(x, np.float64)
  c, n = x.shape[:2]
  if n < 4:
    raise ValueError("need at least 4 draws per chain")
  acov = _autocov(x)
  w = (acov[:, 0] * n / (n - 1)).mean(axis=0)
  b_over_n = x.mean(axis=1).var(axis=0, ddof=1) if c > 1 else np.zeros_like(w)
  var_plus = (n - 1) / n * w + b_over_n
  with np.errstate(divide="ignore", invalid="ignore"):
    rho = 1.0 - (w - acov.mean(axis=0)) / var_plus          # [n, ...]
  rho[0] = 1.0
  pairs = (n - 1) // 2 if n % 2 == 0 else n // 2
  pair_sums = rho[0:2 * pairs:2] + rho[1:2 * pairs:2]          # P_k = ρ_2k + ρ_2k+1
  positive = np.cumprod(pair_sums > 0, axis=0).astype(bool)    # initial positive sequence
  monotone = np.minimum.accumulate(np.where(positive, pair_sums, np.inf), axis=0)
  monotone = np.where(positive, monotone, 0.0)
  tau = -1.0 + 2.0 * monotone.sum(axis=0)
  tau = np.maximum(tau, 1.0 / np.log10(c * n))
  return c * n / tau


def rank_normalize(x: np.ndarray) -> np.ndarray:
  """Normal scores Φ⁻¹((r − 3/8)/(S + 1/4)) of pooled ranks r over chains and draws."""
  x = np.asarray(x, np.float64)
  c, n = x.shape[:2]
  flat = x.reshape(c * n, -1)
  ranks = rankdata(flat, axis=0, method="average")
  z = ndtri((ranks - 0.375) / (c * n + 0.25))
  return z.reshape(x.shape)


def bulk_ess(x: np.ndarray) -> np.ndarray:
  """ESS of the rank-normalised split chains."""
  return ess(rank_normalize(split_chains(x)))


def rank_split_rhat(x: np.ndarray) -> np.ndarray:
  """Split-R̂ of the rank-normalised split chains."""
  return _rhat(rank_normalize(split_chains(x)))
