"""Baselines on the SOL encoder: CE, L2/L1 regression, soft-label CE, CORAL, CORN, POE-style.

Each returns (core.Method, predict_fn(params, extra, x) -> [B] int32 ranks); batches are
{"x": [B, ...], "y": [B] int32 noisy ranks}."""

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from jaxml import core
from jaxml.sol import losses as L
from jaxml.sol.model import RankNet

__all__ = ["BASELINES", "RULES", "decode_head", "make_baseline"]

BASELINES = ("ce", "l2", "l1", "soft_ce", "coral", "corn", "poe")
# The decoding rule of each baseline (its name in result rows).
RULES = {"ce": "argmax", "soft_ce": "argmax", "poe": "argmax", "l2": "round", "l1": "round",
         "coral": "threshold", "corn": "threshold"}
_HEADS = {"ce": "logits", "soft_ce": "logits", "l2": "scalar", "l1": "scalar", "coral": "coral",
          "corn": "corn", "poe": "poe"}


def _poe_ordinal(mu: jax.Array, logvar: jax.Array, y: jax.Array, rng: jax.Array, margin: float) -> jax.Array:
  """Ordinal constraint between Gaussian embeddings: for anchor a and two random partners b, c
  with |y_a − y_b| < |y_a − y_c|, require W2²(a, b) + margin ≤ W2²(a, c) (hinge)."""
  n = y.shape[0]
  rb, rc = jax.random.split(rng)
  b, c = jax.random.permutation(rb, n), jax.random.permutation(rc, n)
  sd = jnp.exp(0.5 * logvar)
  w2 = lambda i, j: jnp.sum(jnp.square(mu[i] - mu[j]) + jnp.square(sd[i] - sd[j]), -1)
  a = jnp.arange(n)
  gap_b, gap_c = jnp.abs(y - y[b]), jnp.abs(y - y[c])
  closer_b = gap_b < gap_c
  closer_c = gap_c < gap_b
  d_ab, d_ac = w2(a, b), w2(a, c)
  viol = jnp.where(closer_b, jax.nn.relu(d_ab - d_ac + margin), 0.0) + \
      jnp.where(closer_c, jax.nn.relu(d_ac - d_ab + margin), 0.0)
  return jnp.sum(viol) / jnp.maximum(jnp.sum(closer_b | closer_c), 1)


def decode_head(name: str, out: dict[str, jax.Array], num_classes: int) -> jax.Array:
  """Ranks [B] int32 from a baseline head's outputs (pure, so each rule is testable by hand):
  argmax (ce, soft_ce, poe); round (l1, l2: nearest rank, clipped to 0..C−1); threshold: CORAL
  counts the thresholds k with σ(g_k) > ½; CORN counts those with P(r > k) = Π_{j≤k} σ(g_j) > ½."""
  if name in ("ce", "soft_ce", "poe"):
    return jnp.argmax(out["logits"], -1).astype(jnp.int32)
  if name in ("l2", "l1"):
    return jnp.clip(jnp.round(out["value"]), 0, num_classes - 1).astype(jnp.int32)
  if name == "coral":
    return jnp.sum(jax.nn.sigmoid(out["logits"]) > 0.5, -1).astype(jnp.int32)
  if name == "corn":
    return jnp.sum(jnp.cumprod(jax.nn.sigmoid(out["logits"]), -1) > 0.5, -1).astype(jnp.int32)
  raise ValueError(f"unknown baseline {name!r}; expected one of {BASELINES}")


def make_baseline(name: str, s: Mapping[str, Any]) -> tuple[core.Method, Callable]:
  """One baseline from SOL settings `s` (num_classes, backbone, hidden, embed_dim, ...):
  ce: softmax CE, argmax. l2 / l1: (ŷ − r)² / |ŷ − r| on a scalar, rounded. soft_ce: CE to g_r (DLDL-style).
  coral: BCE on 1[r > k], shared weight, ordered biases; r̂ = Σ_k 1[σ(g_k) > ½].
  corn: task k on rows with r ≥ k; P(r > k) = Π_{j≤k} σ(g_j); r̂ = Σ_k 1[P(r > k) > ½].
  poe: Gaussian embedding, CE on a sample + poe_kl · KL + poe_weight · ordinal W2 hinge; predicts from μ."""
  if name not in BASELINES:
    raise ValueError(f"unknown baseline {name!r}; expected one of {BASELINES}")
  c = s["num_classes"]
  net = RankNet(num_classes=c, head=_HEADS[name], backbone=s["backbone"], hidden=s["hidden"],
                embed_dim=s["embed_dim"])
  ks = jnp.arange(c - 1)

  def init(rng, batch):
    return net.init({"params": rng, "sample": rng}, jnp.asarray(batch["x"]), sample=name == "poe")["params"]

  def loss_fn(params, batch, rng):
    y = batch["y"].astype(jnp.int32)
    above = (y[:, None] > ks[None, :]).astype(jnp.float32)   # 1[r > k], the CORAL / CORN targets
    sample_rng, pair_rng = jax.random.split(rng)   # POE only: the embedding sample and its pairs
    out = net.apply({"params": params}, batch["x"], sample=name == "poe", rngs={"sample": sample_rng})
    if name == "ce":
      loss = optax.softmax_cross_entropy_with_integer_labels(out["logits"], y).mean()
    elif name == "soft_ce":
      loss = optax.softmax_cross_entropy(out["logits"], L.gaussian_rows(y, c, s["soft_sigma"])).mean()
    elif name == "l2":
      loss = jnp.mean(jnp.square(out["value"] - y))
    elif name == "l1":
      loss = jnp.mean(jnp.abs(out["value"] - y))
    elif name == "coral":
      loss = optax.sigmoid_binary_cross_entropy(out["logits"], above).sum(-1).mean()
    elif name == "corn":
      mask = (y[:, None] >= ks[None, :]).astype(jnp.float32)   # k = 0 keeps every row
      per = optax.sigmoid_binary_cross_entropy(out["logits"], above) * mask
      loss = per.sum() / jnp.maximum(mask.sum(), 1.0)
    else:  # poe
      mu, logvar = out["mu"], out["logvar"]
      ce = optax.softmax_cross_entropy_with_integer_labels(out["logits"], y).mean()
      kl = 0.5 * jnp.mean(jnp.sum(jnp.exp(logvar) + jnp.square(mu) - 1.0 - logvar, -1))
      ordn = _poe_ordinal(mu, logvar, y, pair_rng, s["poe_margin"])
      loss = ce + s["poe_kl"] * kl + s["poe_weight"] * ordn
      return loss, {"ce": ce, "kl": kl, "ordinal": ordn}
    return loss, {}

  def predict_fn(params, extra, x):
    del extra
    return decode_head(name, net.apply({"params": params}, x), c)

  def eval_fn(params, batch):
    pred = predict_fn(params, None, batch["x"])
    err = jnp.abs(pred - batch["y"])
    return {"mae": err.mean(), "zero_one": (err > 0).mean()}

  return core.Method(init, loss_fn, eval_fn), predict_fn
