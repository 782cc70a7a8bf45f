"""A softmax classifier over flat features as a `core.Method`: mean cross-entropy -1/B Σ_i log softmax(f_θ(x_i))[y_i],
f_θ an MLP (`kind="mlp"`) or a single linear layer (`kind="linear"`, multinomial logistic regression)."""

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxml import core
from jaxml.nn.mlp import MLP

__all__ = ["KINDS", "make_model", "make_method"]

KINDS = ("mlp", "linear")


def make_model(config: Mapping[str, Any]) -> nn.Module:
  """`config`: kind ("mlp" | "linear"), num_classes, and for "mlp" hidden (widths) and dropout."""
  kind = config["kind"]
  if kind not in KINDS:
    raise ValueError(f"unknown classifier kind {kind!r}; expected one of {', '.join(KINDS)}")
  if kind == "linear":
    return MLP((config["num_classes"],))
  return MLP(tuple(config["hidden"]) + (config["num_classes"],), dropout=config.get("dropout", 0.0))


def make_method(config: Mapping[str, Any]) -> core.Method:
  """Batches are {"x": [B, D] float32, "y": [B] int32}; `config` as in `make_model`. eval_fn gives the mean NLL
  and accuracy of a batch, predict_fn the class probabilities [B, C]."""
  model = make_model(config)

  def init(rng: jax.Array, batch: Mapping[str, Any]) -> Any:
    return model.init(rng, batch["x"])["params"]

  def logits(params: Any, x: jax.Array, rng: jax.Array | None = None) -> jax.Array:
    if rng is None:
      return model.apply({"params": params}, x)
    return model.apply({"params": params}, x, train=True, rngs={"dropout": rng})

  def loss_fn(params: Any, batch: Mapping[str, Any], rng: jax.Array | None) -> tuple[jax.Array, dict]:
    out = logits(params, batch["x"], rng)
    loss = optax.softmax_cross_entropy_with_integer_labels(out, batch["y"]).mean()
    return loss, {"accuracy": jnp.mean(out.argmax(-1) == batch["y"])}

  def eval_fn(params: Any, batch: Mapping[str, Any]) -> dict[str, jax.Array]:
    nll, metrics = loss_fn(params, batch, None)   # rng None: no dropout
    return {"nll": nll, **metrics}

  def predict_fn(params: Any, batch: Mapping[str, Any]) -> jax.Array:
    return jax.nn.softmax(logits(params, batch["x"]))

  return core.Method(init, loss_fn, eval_fn, predict_fn=predict_fn)
