"""Shared encoder + heads for SOL and its baselines (same backbone, different heads)."""

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxml.nn.cnn import SmallCNN
from jaxml.nn.mlp import MLP

__all__ = ["HEADS", "RankNet", "l2_normalize"]

HEADS = ("embed", "gol", "logits", "scalar", "coral", "corn", "poe")


def l2_normalize(x: jax.Array, eps: float = 1e-12) -> jax.Array:
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), eps)


class RankNet(nn.Module):
  """Encoder (MLP `hidden` -> `embed_dim`, or SmallCNN) plus one head; outputs always include "embedding".

  embed: unit-norm embedding (SOL). gol: + learnable unit reference points "centroids" [C, d].
  logits: Dense(C) (CE). scalar: Dense(1) "value" (L1 / L2). coral: shared weight, C−1 ordered biases.
  corn: Dense(C−1) conditional logits. poe: N(μ, diag σ²) "mu", "logvar", classifier on a sample (train) or μ."""

  num_classes: int
  head: str = "embed"
  backbone: str = "mlp"
  hidden: Sequence[int] = (128, 128)
  embed_dim: int = 32

  @nn.compact
  def __call__(self, x: jax.Array, *, sample: bool = False) -> dict[str, jax.Array]:
    if self.backbone == "mlp":
      h = MLP(tuple(self.hidden) + (self.embed_dim,), name="encoder")(x.reshape((x.shape[0], -1)))
    elif self.backbone == "cnn":
      h = SmallCNN(features=self.embed_dim, name="encoder")(x)
    else:
      raise ValueError(f"unknown backbone {self.backbone!r}; expected 'mlp' or 'cnn'")
    c = self.num_classes
    if self.head == "embed":
      return {"embedding": l2_normalize(h)}
    if self.head == "gol":
      refs = self.param("ref_points", nn.initializers.normal(1.0), (c, self.embed_dim))
      return {"embedding": l2_normalize(h), "centroids": l2_normalize(refs)}
    if self.head == "logits":
      return {"embedding": h, "logits": nn.Dense(c, name="head")(nn.relu(h))}
    if self.head == "scalar":
      return {"embedding": h, "value": nn.Dense(1, name="head")(nn.relu(h))[:, 0]}
    if self.head == "coral":
      score = nn.Dense(1, use_bias=False, name="head")(nn.relu(h))
      bias = self.param("coral_bias", lambda _, s: jnp.linspace(1.0, -1.0, s[0]), (c - 1,))
      return {"embedding": h, "logits": score + bias[None, :]}
    if self.head == "corn":
      return {"embedding": h, "logits": nn.Dense(c - 1, name="head")(nn.relu(h))}
    if self.head == "poe":
      mu = nn.Dense(self.embed_dim, name="mu")(nn.relu(h))
      logvar = jnp.clip(nn.Dense(self.embed_dim, name="logvar")(nn.relu(h)), -8.0, 4.0)
      z = mu
      if sample:
        z = mu + jnp.exp(0.5 * logvar) * jax.random.normal(self.make_rng("sample"), mu.shape)
      return {"embedding": mu, "mu": mu, "logvar": logvar, "logits": nn.Dense(c, name="head")(z)}
    raise ValueError(f"unknown head {self.head!r}; expected one of {HEADS}")
