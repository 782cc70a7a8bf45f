"""Best-of-N evaluation (spec section 3.3), numpy only.

M candidates per prompt split into M / N disjoint groups, picks averaged (unbiased, lower variance).
KL_BoN(N) = log N - (N - 1) / N (Stiennon et al. 2020); Gao et al. (2023): gold(d) - gold(0) = d (alpha - beta d)."""

from typing import Mapping, Sequence

import numpy as np

__all__ = ["kl_bon", "best_of_n", "fit_gao", "powers_of_two"]


def kl_bon(n: np.ndarray | int) -> np.ndarray:
  """log N - (N - 1) / N (zero at N = 1)."""
  n = np.asarray(n, np.float64)
  return np.log(n) - (n - 1.0) / n


def powers_of_two(max_n: int) -> list[int]:
  """[1, 2, 4, ..., max_n] (max_n a power of two)."""
  return [2 ** k for k in range(int(np.log2(max_n)) + 1)]


def best_of_n(proxy: np.ndarray, values: Mapping[str, np.ndarray], ns: Sequence[int]) -> dict[str, np.ndarray]:
  """Mean of each value at the proxy's pick, for every N.

  proxy [P, M] rewards of M candidates per prompt; values: name -> [P, M]; ns divide M. Returns "n", "kl"
  and, per value name and "proxy", an array [len(ns)] of means."""
  proxy = np.asarray(proxy)
  p, m = proxy.shape
  out: dict[str, list[float]] = {name: [] for name in ["proxy", *values]}
  for n in ns:
    if m % n:
      raise ValueError(f"N={n} does not divide the {m} candidates per prompt")
    grouped = proxy.reshape(p, m // n, n)
    pick = np.argmax(grouped, axis=-1)[..., None]
    out["proxy"].append(float(np.mean(np.take_along_axis(grouped, pick, axis=-1))))
    for name, v in values.items():
      vg = np.asarray(v, np.float64).reshape(p, m // n, n)
      out[name].append(float(np.mean(np.take_along_axis(vg, pick, axis=-1))))
  return {**{k: np.asarray(v) for k, v in out.items()}, "n": np.asarray(ns), "kl": kl_bon(ns)}


def fit_gao(kl: np.ndarray, gain: np.ndarray) -> tuple[float, float]:
  """Least-squares (alpha, beta) of gain = d (alpha - beta d), d = sqrt(kl)."""
  d = np.sqrt(np.asarray(kl, np.float64))
  x = np.stack([d, -d * d], axis=1)
  coef, *_ = np.linalg.lstsq(x, np.asarray(gain, np.float64), rcond=None)
  return float(coef[0]), float(coef[1])
