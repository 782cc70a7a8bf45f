"""Sample-quality metrics (numpy, seeded projections) of generated samples `a` against held-out real ones `b`;
report each next to its real-vs-real floor (the same metric between two disjoint real sets of the same size)."""

import numpy as np

__all__ = ["sliced_wasserstein", "energy_distance", "mmd_rbf", "frechet_distance", "kid", "mode_coverage",
           "box_coverage", "classifier_two_sample",
           "covariance_error", "periodogram_l1", "chamfer_matrix", "point_cloud_scores"]


def _flat(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x, np.float64)
  return x.reshape(len(x), -1)


def sliced_wasserstein(a: np.ndarray, b: np.ndarray, *, num_projections: int = 512, seed: int = 0) -> float:
  """Sliced 2-Wasserstein distance: sqrt(mean over random unit directions of W2^2 of the 1-D projections).
  Unequal sizes are compared through 1000 quantiles of each projection."""
  a, b = _flat(a), _flat(b)
  dirs = np.random.default_rng(seed).normal(size=(a.shape[1], num_projections))
  dirs /= np.linalg.norm(dirs, axis=0, keepdims=True)
  pa, pb = np.sort(a @ dirs, axis=0), np.sort(b @ dirs, axis=0)
  if len(pa) != len(pb):
    q = (np.arange(1000) + 0.5) / 1000
    pa, pb = np.quantile(pa, q, axis=0), np.quantile(pb, q, axis=0)
  return float(np.sqrt(np.mean((pa - pb) ** 2)))


def _sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Squared Euclidean distances [len(a), len(b)], clipped at 0."""
  return np.maximum(np.sum(a ** 2, 1)[:, None] + np.sum(b ** 2, 1)[None, :] - 2 * a @ b.T, 0.0)


def _mmd2_unbiased(kaa: np.ndarray, kbb: np.ndarray, kab: np.ndarray) -> float:
  """Unbiased MMD^2 from the Gram matrices within a, within b and across (within-set diagonals left out)."""
  n, m = len(kaa), len(kbb)
  return float((kaa.sum() - np.trace(kaa)) / (n * (n - 1)) + (kbb.sum() - np.trace(kbb)) / (m * (m - 1))
               - 2 * kab.mean())


def _pdist_mean(a: np.ndarray, b: np.ndarray, *, same: bool, chunk: int = 1024) -> float:
  total = 0.0
  for i in range(0, len(a), chunk):
    ai = a[i:i + chunk]
    d = np.sqrt(_sq_dists(ai, b))
    if same:
      d[np.arange(len(ai)), np.arange(i, i + len(ai))] = 0.0
    total += d.sum()
  count = len(a) * len(b) - (len(a) if same else 0)
  return total / count


def energy_distance(a: np.ndarray, b: np.ndarray) -> float:
  """2 E|X - Y| - E|X - X'| - E|Y - Y'| (unbiased within-set terms); zero iff the laws agree."""
  a, b = _flat(a), _flat(b)
  return float(2 * _pdist_mean(a, b, same=False) - _pdist_mean(a, a, same=True) - _pdist_mean(b, b, same=True))


def mmd_rbf(a: np.ndarray, b: np.ndarray, *, scales=(0.5, 1.0, 2.0), max_rows: int = 4000, seed: int = 0) -> float:
  """Unbiased MMD^2 with a sum of RBF kernels, bandwidths = scales x median pairwise distance of b."""
  a, b = _flat(a)[:max_rows], _flat(b)[:max_rows]
  sub = b[np.random.default_rng(seed).permutation(len(b))[:1000]]
  med = np.sqrt(np.median(_sq_dists(sub, sub)[np.triu_indices(len(sub), 1)]))
  def k(x, y):
    d2 = _sq_dists(x, y)
    return sum(np.exp(-d2 / (2 * (s * med) ** 2)) for s in scales)
  return _mmd2_unbiased(k(a, a), k(b, b), k(a, b))


def _sqrtm_psd(c: np.ndarray) -> np.ndarray:
  w, v = np.linalg.eigh((c + c.T) / 2)
  return (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def frechet_distance(fa: np.ndarray, fb: np.ndarray) -> float:
  """|mu_a - mu_b|^2 + tr(C_a + C_b - 2 (C_a^1/2 C_b C_a^1/2)^1/2) between feature sets [n, d]."""
  fa, fb = _flat(fa), _flat(fb)
  mu_a, mu_b = fa.mean(0), fb.mean(0)
  ca, cb = np.cov(fa, rowvar=False), np.cov(fb, rowvar=False)
  sa = _sqrtm_psd(ca)
  cross = _sqrtm_psd(sa @ cb @ sa)
  return float(np.sum((mu_a - mu_b) ** 2) + np.trace(ca) + np.trace(cb) - 2 * np.trace(cross))


def kid(fa: np.ndarray, fb: np.ndarray) -> float:
  """Kernel inception distance: unbiased MMD^2 with the cubic kernel (x.y / d + 1)^3."""
  fa, fb = _flat(fa), _flat(fb)
  d = fa.shape[1]
  k = lambda x, y: (x @ y.T / d + 1) ** 3
  return _mmd2_unbiased(k(fa, fa), k(fb, fb), k(fa, fb))


def mode_coverage(x: np.ndarray, centers: np.ndarray, std: float, *, min_share: float = 0.01
                  ) -> tuple[float, float]:
  """(fraction of modes with at least `min_share` of the samples within 3 std, fraction of samples near no mode)."""
  d = np.linalg.norm(np.asarray(x)[:, None, :] - centers[None], axis=-1)
  near = d < 3 * std
  covered = np.mean(near.mean(0) >= min_share)
  return float(covered), float(np.mean(~near.any(1)))


def box_coverage(x: np.ndarray, lows: np.ndarray, size: np.ndarray, *, min_share: float = 0.01
                 ) -> tuple[float, float]:
  """Modes that are axis-aligned boxes `[lows[k], lows[k] + size)` (e.g. checkerboard cells):
  (fraction of boxes holding at least `min_share` of the samples, fraction of samples in no box)."""
  x = np.asarray(x, np.float64)
  rel = (x[:, None, :] - np.asarray(lows)[None]) / np.asarray(size)
  inside = np.all((rel >= 0) & (rel < 1), axis=-1)                         # [n, modes]
  return float(np.mean(inside.mean(0) >= min_share)), float(np.mean(~inside.any(1)))


def classifier_two_sample(a: np.ndarray, b: np.ndarray, *, num_features: int = 512, scales=(0.1, 0.3, 1.0),
                          ridge: float = 1e-3, max_rows: int = 5000, seed: int = 0) -> float:
  """Classifier two-sample test: held-out accuracy (0.5 = indistinguishable, 1.0 = separated) of a closed-form
  ridge classifier on random Fourier features (bandwidths = scales x median distance of b), on pooled halves."""
  rng = np.random.default_rng(seed)
  n = min(len(a), len(b), max_rows)
  a = _flat(a)[rng.permutation(len(a))[:n]]
  b = _flat(b)[rng.permutation(len(b))[:n]]
  sub = b[:min(n, 1000)]
  med = np.sqrt(np.median(_sq_dists(sub, sub)[np.triu_indices(len(sub), 1)]))
  k = num_features // len(scales)
  w = np.concatenate([rng.normal(size=(a.shape[1], k)) / (s * med) for s in scales], axis=1)
  phase = rng.uniform(0, 2 * np.pi, w.shape[1])
  x = np.cos(np.concatenate([a, b]) @ w + phase)
  x = np.concatenate([x, np.ones((2 * n, 1))], axis=1)
  y = np.concatenate([-np.ones(n), np.ones(n)])
  perm = rng.permutation(2 * n)
  tr, te = perm[:n], perm[n:]
  gram = x[tr].T @ x[tr] + ridge * len(tr) * np.eye(x.shape[1])
  coef = np.linalg.solve(gram, x[tr].T @ y[tr])
  return float(np.mean(np.sign(x[te] @ coef) == y[te]))


def covariance_error(x: np.ndarray, cov: np.ndarray) -> tuple[float, float]:
  """(relative Frobenius error of the empirical covariance, RMS of the empirical mean) vs a zero-mean law."""
  x = _flat(x)
  emp = np.cov(x, rowvar=False)
  return float(np.linalg.norm(emp - cov) / np.linalg.norm(cov)), float(np.sqrt(np.mean(x.mean(0) ** 2)))


def periodogram_l1(a: np.ndarray, b: np.ndarray) -> float:
  """L1 distance between the averaged periodograms of two sets of 1-D signals (normalised by b's mass)."""
  pa = np.mean(np.abs(np.fft.rfft(_flat(a), axis=1)) ** 2, 0)
  pb = np.mean(np.abs(np.fft.rfft(_flat(b), axis=1)) ** 2, 0)
  return float(np.sum(np.abs(pa - pb)) / np.sum(pb))


def chamfer_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Symmetric Chamfer distances between clouds a [n, p, 3] and b [m, q, 3]: [n, m]."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  out = np.empty((len(a), len(b)))
  bb = np.sum(b ** 2, -1)
  for i in range(len(a)):
    d2 = np.maximum(np.sum(a[i] ** 2, -1)[None, :, None] + bb[:, None, :] - 2 * np.einsum("pd,mqd->mpq", a[i], b), 0)
    out[i] = d2.min(2).mean(1) + d2.min(1).mean(1)
  return out


def point_cloud_scores(gen: np.ndarray, ref: np.ndarray) -> dict[str, float]:
  """PointFlow-protocol scores with the Chamfer distance: MMD-CD (lower better), COV-CD (higher better)
  and 1-NNA-CD (accuracy of a 1-NN two-sample classifier; 0.5 is ideal)."""
  d_gr = chamfer_matrix(gen, ref)
  d_gg = chamfer_matrix(gen, gen)
  d_rr = chamfer_matrix(ref, ref)
  mmd = float(d_gr.min(0).mean())
  cov = float(len(np.unique(d_gr.argmin(1))) / len(ref))
  n, m = len(gen), len(ref)
  np.fill_diagonal(d_gg, np.inf)
  np.fill_diagonal(d_rr, np.inf)
  gen_correct = d_gg.min(1) < d_gr.min(1)
  ref_correct = d_rr.min(1) < d_gr.min(0)
  nna = float((gen_correct.sum() + ref_correct.sum()) / (n + m))
  return {"mmd_cd": mmd, "cov_cd": cov, "nna_cd": nna}
