"""MCMC convergence diagnostics from `blackjax.diagnostics`: inputs [chains, draws, ...], float64 outputs of shape
x.shape[2:] (blackjax runs under a scoped `jax.enable_x64`: log densities of ~1e3 lose digits in float32);
`bulk_ess` and `rank_split_rhat` work on `rank_normalize`d draws (Vehtari et al. 2021)."""

import jax
import jax.numpy as jnp
import numpy as np
from blackjax import diagnostics
from scipy.special import ndtri
from scipy.stats import rankdata

__all__ = ["split_rhat", "ess", "rank_normalize", "bulk_ess", "rank_split_rhat", "split_chains"]


def split_chains(x: np.ndarray) -> np.ndarray:
  """[C, n, ...] -> [2C, ⌊n/2⌋, ...] (the middle draw of an odd chain is dropped)."""
  x = np.asarray(x, np.float64)
  half = x.shape[1] // 2
  return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


# Jitted: one compile per input shape instead of one per array operation inside blackjax.
_potential_scale_reduction = jax.jit(diagnostics.potential_scale_reduction)
_effective_sample_size = jax.jit(diagnostics.effective_sample_size)


def _x64(diagnostic, x: np.ndarray) -> np.ndarray:
  """A jitted blackjax diagnostic of x [C, n, ...] under float64; shape x.shape[2:]."""
  with jax.enable_x64(True):
    out = diagnostic(jnp.asarray(x, jnp.float64))
  return np.asarray(out, np.float64).reshape(x.shape[2:])     # blackjax squeezes trailing axes of size 1 too


def split_rhat(x: np.ndarray) -> np.ndarray:
  """Split-R̂ of x [C, n, ...] over 2C half-chains; shape x.shape[2:]."""
  return _x64(_potential_scale_reduction, split_chains(x))


def ess(x: np.ndarray) -> np.ndarray:
  """Effective sample size of x [C, n, ...] (Geyer initial monotone sequence); shape x.shape[2:]."""
  x = np.asarray(x, np.float64)
  if x.shape[1] < 4:
    raise ValueError("need at least 4 draws per chain")
  return _x64(_effective_sample_size, x)


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
  return _x64(_potential_scale_reduction, rank_normalize(split_chains(x)))
