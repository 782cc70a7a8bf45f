"""Baselines on the same frozen backbone and split (spec section 5); every scorer returns `ood` [N]
(higher = more OOD), `misc` [N] (higher = more likely misclassified) and `probs` [N, K]."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxml import core
from jaxml.eviprobe.backbone import l2_penalty
from jaxml.eviprobe.gpn import uce_loss
from jaxml.eviprobe.probe import LatentProbe, fit_temperature, sq_mahalanobis_whitened
from jaxml.eviprobe.readouts import dirichlet_readouts
from jaxml.nn.gnn import propagate, row_norm_weights
from jaxml.nn.mlp import MLP

__all__ = ["msp", "entropy_score", "temperature_scaled", "energy", "gnnsafe", "mahalanobis", "hop_distances",
           "gkde_prior", "sample_average", "EPNProbe", "make_epn_method", "epn_scores", "fit_temperature"]


def _entropy(p: jax.Array) -> jax.Array:
  return -jnp.sum(p * jnp.log(jnp.maximum(p, 1e-30)), -1)


def msp(logits: jax.Array) -> dict:
  """Maximum softmax probability (Hendrycks & Gimpel 2017): 1 − max p for both detection tasks."""
  return temperature_scaled(logits, 1.0)


def entropy_score(logits: jax.Array) -> dict:
  """Predictive entropy H(p) (Hendrycks & Gimpel 2017) for both detection tasks."""
  p = jax.nn.softmax(logits, -1)
  h = _entropy(p)
  return {"ood": h, "misc": h, "probs": p}


def temperature_scaled(logits: jax.Array, temperature: jax.Array) -> dict:
  """MSP after temperature scaling (Guo et al. 2017; T fitted on validation NLL): scores and probs of softmax(l / T)."""
  p = jax.nn.softmax(logits / temperature, -1)
  u = 1.0 - p.max(-1)
  return {"ood": u, "misc": u, "probs": p}


def energy(logits: jax.Array, temperature: float = 1.0) -> dict:
  """Energy score E = −T logsumexp(l / T) (Liu et al. 2020; higher = more OOD), used for both detection tasks."""
  e = -temperature * jax.nn.logsumexp(logits / temperature, -1)
  p = jax.nn.softmax(logits, -1)
  return {"ood": e, "misc": e, "probs": p}


def gnnsafe(logits: jax.Array, edges: jax.Array, *, steps: int = 2, alpha: float = 0.5) -> dict:
  """GNNSafe without regularisation (Wu et al. 2023): energy propagated `steps` times, e ← α e + (1 − α) D⁻¹A e."""
  n = logits.shape[0]
  s, r, w = row_norm_weights(edges, n, self_loops=False)
  e = -jax.nn.logsumexp(logits, -1)

  def body(x, _):
    return alpha * x + (1.0 - alpha) * propagate(x, s, r, w, n), None

  e = jax.lax.scan(body, e, None, length=steps)[0]
  return {"ood": e, "misc": e, "probs": jax.nn.softmax(logits, -1)}


def mahalanobis(probe: LatentProbe, latent: jax.Array, logits: jax.Array) -> dict:
  """min_c m_ic (Lee et al. 2018) with a fitted tied-covariance probe."""
  m = sq_mahalanobis_whitened(latent, probe.mu, probe.whiten).min(-1)
  return {"ood": m, "misc": m, "probs": jax.nn.softmax(logits, -1)}


def hop_distances(edges: jax.Array, sources: jax.Array, num_nodes: int, max_hops: int = 10) -> jax.Array:
  """Shortest-path hop counts [n_sources, N] (max_hops + 1 where farther or unreachable): breadth-first
  frontiers as `max_hops` sparse propagations of a reachability indicator."""
  reach = jax.nn.one_hot(sources, num_nodes)                         # [S, N]
  dist = jnp.where(reach > 0, 0.0, float(max_hops + 1))

  def body(carry, k):
    reach, dist = carry
    nxt = jax.ops.segment_sum(reach.T[edges[0]], edges[1], num_nodes).T
    nxt = jnp.maximum(reach, (nxt > 0).astype(reach.dtype))
    dist = jnp.where((nxt > 0) & (reach == 0), k.astype(dist.dtype), dist)
    return (nxt, dist), None

  (_, dist), _ = jax.lax.scan(body, (reach, dist), jnp.arange(1, max_hops + 1))
  return dist


def gkde_prior(edges: jax.Array, labels: jax.Array, train_idx: jax.Array, num_classes: int, num_nodes: int,
               logits: jax.Array, *, sigma: float = 1.0, max_hops: int = 10) -> dict:
  """Graph-kernel Dirichlet prior (Zhao et al. 2020): α_ic = 1 + Σ_{j ∈ L_c, hop ≤ max_hops} N(hop(i, j); 0, σ²)."""
  dist = hop_distances(edges, train_idx, num_nodes, max_hops)        # [N_L, N]
  kern = jnp.where(dist <= max_hops, jnp.exp(-dist ** 2 / (2 * sigma ** 2)) / (sigma * math.sqrt(2 * math.pi)), 0.0)
  alpha = 1.0 + kern.T @ jax.nn.one_hot(labels[train_idx], num_classes)
  out = dirichlet_readouts(alpha, jnp.argmax(logits, -1))
  return {"ood": out["u_epi"], "misc": 1.0 - out["mean_probs"].max(-1), "probs": out["mean_probs"],
          "alpha": alpha}


def sample_average(logits_samples: jax.Array) -> dict:
  """MC dropout / deep ensemble read-outs from logits [S, N, K]: ood = misc = 1 − max p̄, probs p̄,
  `mi` = H(p̄) − mean_s H(p_s) and `var` = Σ_c Var_s p_sc."""
  p = jax.nn.softmax(logits_samples, -1)
  pbar = p.mean(0)
  u = 1.0 - pbar.max(-1)
  mi = _entropy(pbar) - _entropy(p).mean(0)
  var = p.var(0).sum(-1)
  return {"ood": u, "misc": u, "probs": pbar, "mi": mi, "var": var}


class EPNProbe(nn.Module):
  """Evidence head on frozen latents: α = 1 + softplus(MLP(z))."""

  num_classes: int
  hidden: int = 64

  @nn.compact
  def __call__(self, z: jax.Array) -> jax.Array:
    return 1.0 + nn.softplus(MLP((self.hidden, self.num_classes), name="mlp")(z))


def make_epn_method(num_classes: int, *, hidden: int = 64, l2: float = 1e-4) -> core.Method:
  """core.Method for the EPN-style probe (Yu et al. 2025) on batch = {z [N, d], labels [N], train_mask, val_mask}:
  UCE (`gpn.uce_loss`) + (l2 / 2)‖θ‖²; EPN-reg's entropy, ICE and PCL terms are not used."""
  model = EPNProbe(num_classes, hidden)

  def init(rng, batch):
    return model.init(rng, batch["z"])

  def loss_fn(params, batch, rng):
    del rng
    uce = uce_loss(model.apply(params, batch["z"]), batch["labels"], batch["train_mask"])
    return uce + l2_penalty(params, l2), {"uce": uce}

  def eval_fn(params, batch):
    return {"val_uce": uce_loss(model.apply(params, batch["z"]), batch["labels"], batch["val_mask"])}

  return core.Method(init, loss_fn, eval_fn)


def epn_scores(params, z: jax.Array, logits: jax.Array, num_classes: int, hidden: int = 64) -> dict:
  """Vacuity of the learned evidence for OOD, 1 − α_ŷ/α_0 for misclassification (ŷ = argmax p)."""
  alpha = EPNProbe(num_classes, hidden).apply(params, z)
  out = dirichlet_readouts(alpha, jnp.argmax(logits, -1))
  return {"ood": out["u_epi"], "misc": out["u_alea"], "probs": jax.nn.softmax(logits, -1), "alpha": alpha}

