"""X-EviProbe: closed-form evidential probe of a frozen GNN (no gradients, no new parameters).

Fit (once, on the clean graph, from train nodes L and validation nodes V):
  μ_c = mean_{i∈L_c} q_i;  C = (1/N_L) Σ_{i∈L} (q_i − μ_{y_i})(q_i − μ_{y_i})ᵀ
  Σ = (1 − ρ) C + ρ (tr C / d) I  with ρ the OAS shrinkage (Chen et al. 2010, sklearn's form)
  m_ic = (q_i − μ_c)ᵀ Σ⁻¹ (q_i − μ_c) via the Cholesky factor;  s_c = d / mean_{j∈V_c} m_jc
  ν_ref = sorted logsumexp(l_j) over j ∈ V  (output typicality reference)
Score (any graph, possibly shifted):
  π_ic = exp(−s_c m_ic / 2d)                   latent typicality ('rbf'; chi2/conformal/cosine variants)
  τ_i = (1 + #{j ∈ V : ν_j ≤ ν_i}) / (|V| + 1)   output typicality (ECDF of negative energy)
  e_ic = N_L p_ic π_ic;  E_i = Σ_c e_ic;  r_ic = e_ic / E_i        (log space, clamped to [−30, 30])
  S = E τ;  S^{(k+1)} = (1 − a) P S^{(k)} + a S  (K_prop steps, P = D̃⁻¹(A + I));  Ẽ = S^{(K_prop)}
  α_ic = 1 + Ẽ_i r_ic
then `readouts.dirichlet_readouts`. Ablations (spec A1–A9) are fields of `ProbeConfig`.

Own-evidence guard (`own_guard` γ_o, `centre_guard` γ_c > 0; beyond the paper; docs/methods/eviprobe.md): Ẽ_i
shrinks where node i's own latent is too far from every class centre (f_i = min_c s_c m_ic / d) or too close to
the train mean q̄ (g_i = ‖W(q_i − q̄)‖² / d), each a log-normal tail fitted on V;  γ = 0: off.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaincc, log_ndtr

from jaxml.eviprobe.defaults import MISC_READOUTS
from jaxml.eviprobe.readouts import dirichlet_readouts
from jaxml.nn.gnn import gcn_norm_weights, propagate, row_norm_weights

__all__ = ["ProbeConfig", "LatentProbe", "ProbeState", "oas_shrink", "fit_latent_probe", "sq_mahalanobis",
           "sq_mahalanobis_whitened", "latent_log_typicality", "fit_temperature", "fit_probe", "propagate_scalar",
           "output_typicality", "score", "LOG_CLAMP", "MISC_READOUTS"]

LOG_CLAMP = 30.0
TYPICALITIES = ("rbf", "chi2", "conformal", "cosine")
FUSIONS = ("product", "latent", "output")
PROPAGATIONS = ("strength", "tau", "classwise", "log", "none")
LATENTS = ("q", "z", "both")


class ProbeConfig(NamedTuple):
  """Static switches (hashable, so the config can be a static jit argument).

  typicality: rbf (default) | chi2 | conformal | cosine            (A6)
  fusion: product e = N_L p π (default) | latent e = N_c π (A1) | output e = N_L p (A2)
  propagation: strength S = Eτ (default) | tau (A3b) | classwise with Â (A4) | log (A9) | none
  teleport: a; a = 1 (or propagation='none') disables propagation (A3)
  norm: row P = D̃⁻¹(A+I) (default) | sym Â (A5)
  temperature: use the validation-fitted temperature in p (A7)
  latent: q (default) | z | both (product of typicalities) (A8)
  misc_readout: the misclassification score: u_alea 1 − ᾱ_ŷ (spec default) | class_split 1 − r_ŷ (the evidence
    split alone, no vacuity) | total_entropy H(ᾱ) | expected_entropy | dissonance | msp 1 − max p (the backbone's)
  own_guard, centre_guard: γ_o, γ_c of the own-evidence guard (module docstring); 0 = off (the paper's probe)
  """

  typicality: str = "rbf"
  fusion: str = "product"
  propagation: str = "strength"
  teleport: float = 0.1
  k_prop: int = 10
  norm: str = "row"
  temperature: bool = False
  latent: str = "q"
  misc_readout: str = "u_alea"
  own_guard: float = 0.0
  centre_guard: float = 0.0

  def validate(self) -> "ProbeConfig":
    for value, allowed, what in ((self.typicality, TYPICALITIES, "typicality"), (self.fusion, FUSIONS, "fusion"),
                                 (self.propagation, PROPAGATIONS, "propagation"), (self.norm, ("row", "sym"), "norm"),
                                 (self.latent, LATENTS, "latent"), (self.misc_readout, MISC_READOUTS, "misc_readout")):
      if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of {allowed}")
    if not (0.0 <= self.own_guard < 1.0 and 0.0 <= self.centre_guard < 1.0):
      raise ValueError(f"guards must be in [0, 1), got {self.own_guard}, {self.centre_guard}")
    if not 0.0 < self.teleport <= 1.0:
      raise ValueError(f"teleport must be in (0, 1], got {self.teleport}")
    return self


class LatentProbe(NamedTuple):
  """Fitted class-conditional Gaussian probe of one latent space."""

  mu: jax.Array          # [K, d] class means
  chol: jax.Array        # [d, d] lower Cholesky factor L of the shrunk tied covariance
  whiten: jax.Array      # [d, d] L⁻¹ (scoring multiplies by it: triangular solves are slow on CPU)
  scale: jax.Array       # [K] s_c = d / mean validation m_ic
  val_m: jax.Array       # [n_val, K] m of validation nodes (conformal reference)
  val_onehot: jax.Array  # [n_val, K] their labels
  shrinkage: jax.Array   # scalar ρ
  centre: jax.Array      # [d] train mean q̄ (own-evidence guard)
  tails: jax.Array       # [4] mean and std of log f and of log g over validation nodes (own-evidence guard)


class ProbeState(NamedTuple):
  latents: tuple         # (LatentProbe,) or (q-probe, z-probe) for latent='both'
  nu_ref: jax.Array      # [n_val] sorted validation logsumexp(logits)
  n_train: jax.Array     # scalar N_L
  class_counts: jax.Array  # [K] N_c on the train set
  temperature: jax.Array   # scalar, validation NLL minimiser (used only with config.temperature)


def class_means(x: jax.Array, onehot: jax.Array) -> jax.Array:
  """μ_c = Σ_i onehot_ic x_i / Σ_i onehot_ic for x [n, d], onehot [n, K] -> [K, d]."""
  return (onehot.T @ x) / jnp.maximum(onehot.sum(0), 1.0)[:, None]


def tied_scatter(x: jax.Array, onehot: jax.Array, mu: jax.Array) -> jax.Array:
  """C = (1/n) Σ_i (x_i − μ_{y_i})(x_i − μ_{y_i})ᵀ -> [d, d]."""
  centred = x - onehot @ mu
  return centred.T @ centred / x.shape[0]


def oas_shrink(emp_cov: jax.Array, n_samples: int | jax.Array) -> tuple[jax.Array, jax.Array]:
  """Oracle-approximating shrinkage towards (tr C / d) I, in scikit-learn's form: (shrunk covariance, ρ)."""
  d = emp_cov.shape[0]
  mu = jnp.trace(emp_cov) / d
  alpha = jnp.mean(emp_cov ** 2)
  num = alpha + mu ** 2
  den = (n_samples + 1.0) * (alpha - mu ** 2 / d)
  rho = jnp.where(den == 0, 1.0, jnp.minimum(num / jnp.where(den == 0, 1.0, den), 1.0))
  return (1.0 - rho) * emp_cov + rho * mu * jnp.eye(d, dtype=emp_cov.dtype), rho


def _safe_cholesky(cov: jax.Array) -> jax.Array:
  """Cholesky factor, retried with jitter 1e-6 · tr/d on the diagonal if it fails (NaN)."""
  d = cov.shape[0]
  chol = jnp.linalg.cholesky(cov)
  jittered = jnp.linalg.cholesky(cov + 1e-6 * jnp.trace(cov) / d * jnp.eye(d, dtype=cov.dtype))
  return jnp.where(jnp.all(jnp.isfinite(chol)), chol, jittered)


def sq_mahalanobis(x: jax.Array, mu: jax.Array, chol: jax.Array) -> jax.Array:
  """m_ic = ‖L⁻¹(x_i − μ_c)‖² for x [N, d], mu [K, d] -> [N, K] (L lower Cholesky factor)."""
  return sq_mahalanobis_whitened(x, mu, _inverse_lower(chol))


def sq_mahalanobis_whitened(x: jax.Array, mu: jax.Array, whiten: jax.Array) -> jax.Array:
  """m_ic = ‖W(x_i − μ_c)‖² with W = L⁻¹ precomputed -> [N, K]."""
  wx, wm = x @ whiten.T, mu @ whiten.T
  return jnp.sum((wx[:, None, :] - wm[None, :, :]) ** 2, -1)


def _inverse_lower(chol: jax.Array) -> jax.Array:
  return jax.scipy.linalg.solve_triangular(chol, jnp.eye(chol.shape[0], dtype=chol.dtype), lower=True)


def fit_latent_probe(x: jax.Array, labels: jax.Array, train_idx: jax.Array, val_idx: jax.Array,
                     num_classes: int) -> LatentProbe:
  """Class means, OAS tied covariance, Cholesky and validation scale for latent x [N, d]."""
  d = x.shape[1]
  oh_tr = jax.nn.one_hot(labels[train_idx], num_classes)
  oh_va = jax.nn.one_hot(labels[val_idx], num_classes)
  mu = class_means(x[train_idx], oh_tr)
  cov, rho = oas_shrink(tied_scatter(x[train_idx], oh_tr, mu), train_idx.shape[0])
  chol = _safe_cholesky(cov)
  whiten = _inverse_lower(chol)
  m_tr = sq_mahalanobis_whitened(x[train_idx], mu, whiten)
  m_va = sq_mahalanobis_whitened(x[val_idx], mu, whiten)
  n_va = oh_va.sum(0)
  mean_va = (oh_va * m_va).sum(0) / jnp.maximum(n_va, 1.0)
  mean_tr = (oh_tr * m_tr).sum(0) / jnp.maximum(oh_tr.sum(0), 1.0)
  mean_m = jnp.where(n_va > 0, mean_va, mean_tr)
  scale = d / jnp.maximum(mean_m, 1e-12)
  centre = x[train_idx].mean(0)
  log_f, log_g = _guard_distances(x[val_idx], mu, whiten, scale, centre)
  tails = jnp.stack([log_f.mean(), jnp.maximum(log_f.std(), 1e-6), log_g.mean(), jnp.maximum(log_g.std(), 1e-6)])
  return LatentProbe(mu, chol, whiten, scale, m_va, oh_va, rho, centre, tails)


def _guard_distances(x, mu, whiten, scale, centre) -> tuple[jax.Array, jax.Array]:
  """log f = log min_c s_c m_ic / d and log g = log ‖W(x − q̄)‖² / d for x [N, d] -> ([N], [N])."""
  d = x.shape[1]
  far = (scale[None, :] * sq_mahalanobis_whitened(x, mu, whiten)).min(-1) / d
  near = jnp.sum(((x - centre) @ whiten.T) ** 2, -1) / d
  return jnp.log(jnp.maximum(far, 1e-30)), jnp.log(jnp.maximum(near, 1e-30))


def own_guard_log_factor(probe: LatentProbe, x: jax.Array, own_guard: float, centre_guard: float) -> jax.Array:
  """log min(1, p^far / γ_o) + log min(1, p^ctr / γ_c) for latent x [N, d] -> [N] (≤ 0; a γ of 0 adds 0)."""
  log_f, log_g = _guard_distances(x, probe.mu, probe.whiten, probe.scale, probe.centre)
  out = jnp.zeros(x.shape[0], x.dtype)
  if own_guard > 0:
    out += jnp.minimum(0.0, log_ndtr(-(log_f - probe.tails[0]) / probe.tails[1]) - jnp.log(own_guard))
  if centre_guard > 0:
    out += jnp.minimum(0.0, log_ndtr((log_g - probe.tails[2]) / probe.tails[3]) - jnp.log(centre_guard))
  return out


def latent_log_typicality(probe: LatentProbe, x: jax.Array, kind: str = "rbf") -> jax.Array:
  """log π_ic for latent x [N, d] -> [N, K] (NaN replaced by log 0 = −inf, clamped later)."""
  d = x.shape[1]
  m = sq_mahalanobis_whitened(x, probe.mu, probe.whiten)
  sm = probe.scale[None, :] * m
  if kind == "rbf":
    log_pi = -sm / (2.0 * d)
  elif kind == "chi2":
    log_pi = jnp.log(gammaincc(d / 2.0, sm / 2.0))
  elif kind == "conformal":
    # (1 + #{j ∈ V_c : m_jc ≥ m_ic}) / (|V_c| + 1)
    ge = (probe.val_m[None, :, :] >= m[:, None, :]) * probe.val_onehot[None, :, :]
    log_pi = jnp.log((1.0 + ge.sum(1)) / (1.0 + probe.val_onehot.sum(0))[None, :])
  elif kind == "cosine":
    centre = probe.mu.mean(0)
    wx = (x - centre) @ probe.whiten.T
    wm = (probe.mu - centre) @ probe.whiten.T
    cos = (wx @ wm.T) / (jnp.linalg.norm(wx, axis=-1, keepdims=True) * jnp.linalg.norm(wm, axis=-1)[None, :] + 1e-12)
    log_pi = jnp.log(jnp.maximum((1.0 + cos) / 2.0, 0.0))
  else:
    raise ValueError(f"unknown typicality {kind!r}; expected one of {TYPICALITIES}")
  return jnp.where(jnp.isnan(log_pi), -jnp.inf, log_pi)


def fit_temperature(logits: jax.Array, labels: jax.Array, *, num_grid: int = 200) -> jax.Array:
  """Temperature T minimising validation NLL of softmax(l / T): a log-spaced grid on [0.05, 20]."""
  temps = jnp.exp(jnp.linspace(jnp.log(0.05), jnp.log(20.0), num_grid))

  def nll(t):
    logp = jax.nn.log_softmax(logits / t, -1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], -1))

  return temps[jnp.argmin(jax.vmap(nll)(temps))]


def _spaces(config: ProbeConfig, q: jax.Array, z: jax.Array | None) -> tuple:
  """The latent spaces `config.latent` probes: (q,), (z,) or (q, z)."""
  return {"q": (q,), "z": (z,)}.get(config.latent, (q, z))


def fit_probe(q: jax.Array, z: jax.Array | None, logits: jax.Array, labels: jax.Array,
              train_idx: jax.Array, val_idx: jax.Array, config: ProbeConfig = ProbeConfig()) -> ProbeState:
  """Fits X-EviProbe on the clean graph. Index arrays are int [n_train], [n_val]; jit-able."""
  k = logits.shape[-1]
  latents = tuple(fit_latent_probe(x, labels, train_idx, val_idx, k) for x in _spaces(config, q, z))
  nu_ref = jnp.sort(jax.nn.logsumexp(logits[val_idx], -1))
  counts = jax.nn.one_hot(labels[train_idx], k).sum(0)
  temp = fit_temperature(logits[val_idx], labels[val_idx])
  return ProbeState(latents, nu_ref, jnp.asarray(train_idx.shape[0], jnp.float32), counts, temp)


def output_typicality(state: ProbeState, logits: jax.Array) -> jax.Array:
  """τ_i = (1 + #{j ∈ V : ν_j ≤ ν_i}) / (|V| + 1), ν = logsumexp(l) -> [N] in (0, 1]."""
  nu = jax.nn.logsumexp(logits, -1)
  rank = jnp.searchsorted(state.nu_ref, nu, side="right")
  return (1.0 + rank) / (state.nu_ref.shape[0] + 1.0)


def _operator(edges: jax.Array, num_nodes: int, norm: str):
  return row_norm_weights(edges, num_nodes) if norm == "row" else gcn_norm_weights(edges, num_nodes)


def propagate_scalar(s: jax.Array, edges: jax.Array, *, teleport: float, steps: int, norm: str = "row") -> jax.Array:
  """Personalised PageRank x^{(k+1)} = (1 − a) M x^{(k)} + a s from x^{(0)} = s, `steps` times; s [N] or [N, K],
  M = D̃⁻¹(A + I) ('row') or Â ('sym'). a = 1 returns s exactly."""
  n = s.shape[0]
  send, recv, w = _operator(edges, n, norm)

  def body(x, _):
    return (1.0 - teleport) * propagate(x, send, recv, w, n) + teleport * s, None

  out = jax.lax.scan(body, s, None, length=steps)[0]
  return s if teleport == 1.0 else out


def evidence(state: ProbeState, latents: tuple, logits: jax.Array, config: ProbeConfig) -> dict:
  """Class-wise log-evidence and its clamped total: log e_ic, log E_i (∈ [−30, 30]), r_ic."""
  logits_p = logits / state.temperature if config.temperature else logits
  log_p = jax.nn.log_softmax(logits_p, -1)
  log_pi = sum(latent_log_typicality(probe, x, config.typicality) for probe, x in zip(state.latents, latents))
  if config.fusion == "product":
    log_e = jnp.log(state.n_train) + log_p + log_pi
  elif config.fusion == "latent":
    log_e = jnp.log(jnp.maximum(state.class_counts, 1.0))[None, :] + log_pi
  else:
    log_e = jnp.log(state.n_train) + log_p
  log_e_total = jax.nn.logsumexp(log_e, -1)
  # r = e / E; where every e_ic underflowed (E = 0) fall back to p.
  finite = jnp.isfinite(log_e_total)
  r = jnp.where(finite[:, None], jnp.exp(log_e - jnp.where(finite, log_e_total, 0.0)[:, None]), jnp.exp(log_p))
  clamped = (~finite) | (log_e_total < -LOG_CLAMP) | (log_e_total > LOG_CLAMP)
  log_e_total = jnp.clip(jnp.where(jnp.isnan(log_e_total), -jnp.inf, log_e_total), -LOG_CLAMP, LOG_CLAMP)
  return {"log_e": log_e, "log_E": log_e_total, "r": r, "log_p": log_p, "n_clamped": clamped.sum()}


def score(state: ProbeState, q: jax.Array, z: jax.Array | None, logits: jax.Array, edges: jax.Array,
          config: ProbeConfig = ProbeConfig()) -> dict:
  """X-EviProbe scores on a (possibly shifted) graph: alpha [N, K], evidence (Ẽ), tau, u_epi, u_alea, class_split,
  msp, expected_entropy, total_entropy, mutual_info, dissonance, neg_log_evidence, mean_probs, n_clamped and
  misc (the read-out named by config.misc_readout). Predictions stay argmax p."""
  latents = _spaces(config, q, z)
  ev = evidence(state, latents, logits, config)
  tau = output_typicality(state, logits)
  energy = jnp.exp(ev["log_E"])
  a = 1.0 if config.propagation == "none" else config.teleport
  prop = lambda s: propagate_scalar(s, edges, teleport=a, steps=config.k_prop, norm=config.norm)  # noqa: E731
  r = ev["r"]
  if config.propagation in ("strength", "none"):
    total = prop(energy * tau)
  elif config.propagation == "tau":
    total = energy * prop(tau)
  elif config.propagation == "log":
    total = jnp.exp(prop(ev["log_E"] + jnp.log(tau)))
  else:  # classwise pseudo-counts with Â (GPN style); the class split follows the propagated counts
    counts = propagate_scalar((energy * tau)[:, None] * r, edges, teleport=a, steps=config.k_prop, norm="sym")
    total = counts.sum(-1)
    r = counts / jnp.maximum(total, 1e-30)[:, None]
  if config.own_guard > 0 or config.centre_guard > 0:
    total = total * jnp.exp(own_guard_log_factor(state.latents[0], latents[0], config.own_guard, config.centre_guard))
  alpha = 1.0 + total[:, None] * r
  pred = jnp.argmax(logits, -1)
  out = dirichlet_readouts(alpha, pred)
  out.update(alpha=alpha, evidence=total, tau=tau, neg_log_evidence=-jnp.log(jnp.maximum(total, 1e-30)),
             n_clamped=ev["n_clamped"], class_split=1.0 - jnp.take_along_axis(r, pred[:, None], -1)[:, 0],
             msp=1.0 - jnp.exp(jnp.max(jax.nn.log_softmax(logits, -1), -1)))
  out["misc"] = out[config.misc_readout]
  return out
