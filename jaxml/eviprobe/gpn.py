"""Graph Posterior Network (Stadler et al., NeurIPS 2021) as a trained baseline, written for jaxml.

  z_i = MLP(x_i) ∈ R^d                              (node-own latent, no message passing)
  log q_c(z) = log N(f_c(z); 0, I) + Σ_l log|det J_l|   (per-class radial flow f_c, L layers)
  log β_ic = log N_c + log q_c(z_i) + ½ d log 4π     (evidence = N_c · density), clamped to [−30, 30]
  β̃ = APPNP(β)  (K_prop steps, teleport a, Â = D̃^{-1/2}(A + I)D̃^{-1/2});  α = 1 + β̃
Loss on train nodes: UCE = mean_i [ψ(α_i0) − ψ(α_{i y_i})] − λ · mean_i H(Dir(α_i)) + (l2 / 2)‖θ‖².

Options (off: the one-phase model): a flow-only warm-up (`phase="warmup"`, GPN's pre_train_mode flow) and
`latent_norm` (batch norm of z before the flows; `latent_stats` freezes the clean graph's statistics).

Radial layer (Rezende & Mohamed 2015), density direction x → f(x):
  f(x) = x + b h(r) (x − x₀),  r = ‖x − x₀‖,  h = 1 / (a + r),  a = softplus(â), b = −a + softplus(b̂)
  log|det J| = (d − 1) log(1 + b h) + log(1 + b h − b h² r);  b ≥ −a keeps f invertible.
"""

import math
from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.scipy.special import digamma, gammaln

from jaxml import core
from jaxml.eviprobe.backbone import batch_features, l2_penalty, masked_mean
from jaxml.eviprobe.probe import LOG_CLAMP, propagate_scalar
from jaxml.eviprobe.readouts import dirichlet_readouts
from jaxml.nn.gnn import FirstLinear, SparseFeatures

__all__ = ["RadialFlows", "LatentNorm", "GPN", "MODEL_KEYS", "latent_stats", "uce_loss", "dirichlet_entropy",
           "make_gpn_method", "gpn_scores"]


class RadialFlows(nn.Module):
  """`num_flows` independent stacks of `layers` radial layers on R^dim; log densities [N, num_flows]."""

  num_flows: int
  dim: int
  layers: int = 10

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    centre = self.param("centre", nn.initializers.normal(1.0), (self.layers, self.num_flows, self.dim))
    a_raw = self.param("a_raw", nn.initializers.normal(1.0), (self.layers, self.num_flows))
    b_raw = self.param("b_raw", nn.initializers.normal(1.0), (self.layers, self.num_flows))
    y = jnp.broadcast_to(x[:, None, :], (x.shape[0], self.num_flows, self.dim))
    log_det = jnp.zeros(y.shape[:2], y.dtype)
    for layer in range(self.layers):
      a = jax.nn.softplus(a_raw[layer])
      b = -a + jax.nn.softplus(b_raw[layer])
      diff = y - centre[layer]
      r = jnp.linalg.norm(diff, axis=-1)
      h = 1.0 / (a + r)
      bh = b * h
      log_det += (self.dim - 1) * jnp.log1p(bh) + jnp.log1p(bh - b * h ** 2 * r)
      y = y + bh[..., None] * diff
    base = -0.5 * jnp.sum(y ** 2, -1) - 0.5 * self.dim * math.log(2 * math.pi)
    return base + log_det


class LatentNorm(nn.Module):
  """Batch norm over nodes: (z − mean) / sqrt(var + eps) · scale + shift. Uses the frozen statistics in the
  `latent_stats` collection when present, else the statistics of this call's nodes (sown as `stats`)."""

  eps: float = 1e-5

  @nn.compact
  def __call__(self, z: jax.Array) -> jax.Array:
    scale = self.param("scale", nn.initializers.ones, (z.shape[-1],))
    shift = self.param("shift", nn.initializers.zeros, (z.shape[-1],))
    if self.has_variable("latent_stats", "mean"):
      mean, var = self.get_variable("latent_stats", "mean"), self.get_variable("latent_stats", "var")
    else:
      mean, var = jnp.mean(z, 0), jnp.var(z, 0)
      self.sow("intermediates", "stats", (mean, var))
    return (z - mean) * jax.lax.rsqrt(var + self.eps) * scale + shift


class GPN(nn.Module):
  """Encoder MLP -> per-class radial-flow log densities [N, K] (no propagation; see `gpn_alpha`); the encoder's
  `x W_in` is the backbones' shared `nn.gnn.FirstLinear`."""

  num_classes: int
  num_features: int
  hidden: int = 64
  latent: int = 16
  layers: int = 10
  dropout: float = 0.5
  latent_norm: bool = False

  @nn.compact
  def __call__(self, x: jax.Array | SparseFeatures, num_nodes: int, train: bool = False) -> jax.Array:
    q = FirstLinear(self.hidden, self.num_features, name="enc_in")(x, num_nodes)
    h = nn.relu(q + self.param("enc_bias", nn.initializers.zeros, (self.hidden,)))
    h = nn.Dropout(self.dropout, deterministic=not train)(h)
    z = nn.Dense(self.latent, name="enc_out")(h)
    if self.latent_norm:
      z = LatentNorm(name="latent_norm")(z)
    return RadialFlows(self.num_classes, self.latent, self.layers, name="flows")(z)


def gpn_alpha(log_q: jax.Array, class_counts: jax.Array, edges: jax.Array, *, latent: int, teleport: float,
              k_prop: int) -> jax.Array:
  """α = 1 + APPNP(β), log β = log N_c + log q + ½ d log 4π (clamped)."""
  log_beta = jnp.log(jnp.maximum(class_counts, 1.0))[None, :] + log_q + 0.5 * latent * math.log(4 * math.pi)
  log_beta = jnp.clip(jnp.nan_to_num(log_beta, nan=-LOG_CLAMP), -LOG_CLAMP, LOG_CLAMP)
  beta = propagate_scalar(jnp.exp(log_beta), edges, teleport=teleport, steps=k_prop, norm="sym")
  return 1.0 + beta


def uce_loss(alpha: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
  """Uncertainty cross-entropy E_{Dir(α)}[−log π_y] = ψ(α_0) − ψ(α_y), masked mean."""
  a0 = alpha.sum(-1)
  ay = jnp.take_along_axis(alpha, jnp.maximum(labels, 0)[:, None], -1)[:, 0]
  return masked_mean(digamma(a0) - digamma(ay), mask)


def dirichlet_entropy(alpha: jax.Array) -> jax.Array:
  """Differential entropy of Dir(α) [..., K] -> [...]."""
  a0 = alpha.sum(-1)
  k = alpha.shape[-1]
  log_b = jnp.sum(gammaln(alpha), -1) - gammaln(a0)
  return log_b + (a0 - k) * digamma(a0) - jnp.sum((alpha - 1.0) * digamma(alpha), -1)


# The model/loss keys `make_gpn_method` reads (training keys are `pipeline.fit_gpn`'s).
MODEL_KEYS = ("hidden", "latent", "flow_layers", "dropout", "k_prop", "teleport", "entropy_reg", "l2", "latent_norm")
# Parameters the warm-up trains: the radial flows only (regex over '/'-joined paths; the rest is frozen).
FLOW_ONLY_FROZEN = (r"^params/(?!flows/)",)


def make_gpn_method(cfg: Mapping[str, Any], num_features: int, num_classes: int, *,
                    phase: str = "full") -> tuple[core.Method, GPN]:
  """core.Method for GPN on a full-graph batch (features, edges, labels, train_mask, val_mask and
  `class_counts` [K], the train-set N_c). cfg keys: `MODEL_KEYS`. Eval reports `val_uce`, `val_ce` (of ᾱ)
  and `val_acc`. phase "warmup": only the flows train (`frozen`), loss without the l2 term."""
  if phase not in ("full", "warmup"):
    raise ValueError(f"unknown GPN phase {phase!r}; expected 'full' or 'warmup'")
  model = GPN(num_classes, num_features, hidden=int(cfg["hidden"]), latent=int(cfg["latent"]),
              layers=int(cfg["flow_layers"]), dropout=float(cfg["dropout"]), latent_norm=bool(cfg["latent_norm"]))
  lam, l2 = float(cfg["entropy_reg"]), (float(cfg["l2"]) if phase == "full" else 0.0)
  prop = dict(latent=int(cfg["latent"]), teleport=float(cfg["teleport"]), k_prop=int(cfg["k_prop"]))

  def alpha_of(params, batch, train=False, rng=None):
    n = batch["labels"].shape[0]
    log_q = model.apply(params, batch_features(batch), n, train=train, rngs=None if rng is None else {"dropout": rng})
    return gpn_alpha(log_q, batch["class_counts"], batch["edges"], **prop)

  def init(rng, batch):
    return model.init({"params": rng}, batch_features(batch), batch["labels"].shape[0])

  def loss_fn(params, batch, rng):
    alpha = alpha_of(params, batch, train=True, rng=rng)
    mask = batch["train_mask"]
    uce = uce_loss(alpha, batch["labels"], mask)
    ent = masked_mean(dirichlet_entropy(alpha), mask)
    return uce - lam * ent + l2_penalty(params, l2), {"uce": uce, "entropy": ent}

  def eval_fn(params, batch):
    alpha = alpha_of(params, batch)
    mask, labels = batch["val_mask"], batch["labels"]
    logp = jnp.log(alpha / alpha.sum(-1, keepdims=True))
    ce = -jnp.take_along_axis(logp, jnp.maximum(labels, 0)[:, None], -1)[:, 0]
    acc = (jnp.argmax(alpha, -1) == labels).astype(jnp.float32)
    return {"val_uce": uce_loss(alpha, labels, mask), "val_ce": masked_mean(ce, mask),
            "val_acc": masked_mean(acc, mask)}

  frozen = FLOW_ONLY_FROZEN if phase == "warmup" else ()
  return core.Method(init, loss_fn, eval_fn, predict_fn=lambda params, batch: alpha_of(params, batch),
                     frozen=frozen), model


def latent_stats(model: GPN, params: Any, batch: Mapping[str, Any]) -> Any:
  """Variables with the clean graph's latent batch-norm statistics frozen in (eval mode, no dropout);
  unchanged when the model has no `latent_norm`."""
  if not model.latent_norm:
    return params
  _, state = model.apply(params, batch_features(batch), batch["labels"].shape[0], mutable=["intermediates"])
  mean, var = state["intermediates"]["latent_norm"]["stats"][0]
  return dict(params, latent_stats={"latent_norm": {"mean": mean, "var": var}})


def _scores(model: GPN, params: Any, batch: Mapping[str, Any], class_counts: jax.Array, latent: int, teleport: float,
            k_prop: int) -> dict:
  log_q = model.apply(params, batch_features(batch), batch["labels"].shape[0])
  alpha = gpn_alpha(log_q, class_counts, batch["edges"], latent=latent, teleport=teleport, k_prop=k_prop)
  pred = jnp.argmax(alpha, -1)
  out = dirichlet_readouts(alpha, pred)
  return {"ood": out["u_epi"], "misc": out["u_alea"], "probs": out["mean_probs"], "pred": pred, "alpha": alpha}


_scores_jit = jax.jit(_scores, static_argnums=(0, 4, 5, 6))


def gpn_scores(cfg: Mapping[str, Any], model: GPN, params: Any, batch: Mapping[str, Any],
               class_counts: jax.Array, *, jit: bool = True) -> dict:
  """GPN read-outs on a (possibly shifted) graph: ood = K / α_0, misc = 1 − ᾱ_ŷ, probs = ᾱ, pred = argmax α,
  alpha. `jit=False` inside an outer trace (e.g. `lax.map`)."""
  fn = _scores_jit if jit else _scores
  return fn(model, params, dict(batch), class_counts, int(cfg["latent"]), float(cfg["teleport"]), int(cfg["k_prop"]))
