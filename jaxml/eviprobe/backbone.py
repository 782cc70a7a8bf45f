"""Frozen-backbone side of X-EviProbe: the GNN as a `core.Method`, its selection rule, forwards.

A batch is the whole graph: COO features feat_rows / feat_cols / feat_vals, edges [2, E] int32, labels
[N] int32 (−1 = unknown), train_mask, val_mask [N] float32. Loss: masked cross-entropy + (l2 / 2) ‖θ‖²
(coupled, as torch Adam's weight_decay); early stopping on validation cross-entropy via `core.Selection`."""

import functools
import time
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml import core
from jaxml.nn.gnn import APPNP, GAT, GCN, SparseFeatures

__all__ = ["BACKBONES", "sparse_features", "batch_features", "make_backbone", "make_backbone_method",
           "selection", "train_backbone", "member_keys", "member", "forward", "forward_eval",
           "ensemble_logits", "mc_logits", "masked_mean", "l2_penalty"]

BACKBONES = ("gcn", "gat", "appnp")


def sparse_features(features: np.ndarray, *, bucket: int = 4096) -> dict[str, np.ndarray]:
  """Dense [N, F] -> COO arrays padded (value 0 at (0, 0)) to a multiple of `bucket` entries, so that
  perturbations which change the count compile few shapes."""
  rows, cols = np.nonzero(features)
  coo = {"feat_rows": rows.astype(np.int32), "feat_cols": cols.astype(np.int32),
         "feat_vals": features[rows, cols].astype(np.float32)}
  return {k: np.concatenate([v, np.zeros((-rows.size) % bucket, v.dtype)]) for k, v in coo.items()}


def batch_features(batch: Mapping[str, Any]) -> SparseFeatures | jax.Array:
  """The node features of `batch`: COO `SparseFeatures` when it has feat_rows, else dense `x`."""
  if "feat_rows" in batch:
    return SparseFeatures(batch["feat_rows"], batch["feat_cols"], batch["feat_vals"])
  return batch["x"]


def make_backbone(cfg: Mapping[str, Any], num_features: int, num_classes: int) -> nn.Module:
  """cfg keys: name (gcn|gat|appnp), hidden, dropout, and heads (gat) / k_steps, teleport (appnp)."""
  name = cfg.get("name", "gcn")
  if name == "gcn":
    return GCN(num_classes, num_features, hidden=int(cfg.get("hidden", 64)), dropout=float(cfg.get("dropout", 0.8)))
  if name == "gat":
    return GAT(num_classes, num_features, hidden=int(cfg.get("hidden", 8)), heads=int(cfg.get("heads", 8)),
               dropout=float(cfg.get("dropout", 0.6)))
  if name == "appnp":
    return APPNP(num_classes, num_features, hidden=int(cfg.get("hidden", 64)), dropout=float(cfg.get("dropout", 0.5)),
                 k_steps=int(cfg.get("k_steps", 10)), teleport=float(cfg.get("teleport", 0.1)))
  raise ValueError(f"unknown backbone {name!r}; expected one of {BACKBONES}")


def masked_mean(values: jax.Array, mask: jax.Array) -> jax.Array:
  """Mean of `values` [N] over the nodes of a 0/1 `mask` (0 when the mask is empty)."""
  return jnp.sum(values * mask) / jnp.maximum(mask.sum(), 1.0)


def l2_penalty(params: Any, l2: float) -> jax.Array:
  """(l2 / 2) ‖θ‖², the coupled weight decay of every eviprobe loss."""
  return 0.5 * l2 * sum(jnp.sum(p ** 2) for p in jax.tree.leaves(params))


def _masked_ce_acc(logits: jax.Array, labels: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  ce = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(labels, 0))
  return masked_mean(ce, mask), masked_mean(jnp.argmax(logits, -1) == labels, mask)


def _call(fn: Callable, variables: Any, batch: Mapping[str, Any], **kwargs: Any) -> Any:
  """`fn` (a module's apply or init) on the whole graph of `batch`."""
  return fn(variables, batch_features(batch), batch["edges"], num_nodes=batch["labels"].shape[0], **kwargs)


def make_backbone_method(model: nn.Module, *, l2: float = 1e-4, num_members: int = 1) -> core.Method:
  """core.Method for full-batch node classification with masked cross-entropy. With `num_members` > 1 the
  parameters are a stack of independent models (keys from `member_keys`) and the loss is the members' sum, so each
  trains exactly as alone (a deep ensemble at ~1 model's cost); member 0 is the model `num_members=1` trains."""

  def init_one(rng, batch):
    return _call(model.init, {"params": rng}, batch)

  def loss_one(params, batch, rng):
    logits = _call(model.apply, params, batch, train=True, rngs={"dropout": rng})["logits"]
    ce, acc = _masked_ce_acc(logits, batch["labels"], batch["train_mask"])
    return ce + l2_penalty(params, l2), {"ce": ce, "train_acc": acc}

  def eval_one(params, batch):
    ce, acc = _masked_ce_acc(_call(model.apply, params, batch)["logits"], batch["labels"], batch["val_mask"])
    return {"val_ce": ce, "val_acc": acc}

  if num_members == 1:
    return core.Method(init_one, loss_one, eval_one)

  def init(rng, batch):
    return jax.vmap(lambda k: init_one(k, batch))(member_keys(rng, num_members))

  def loss_fn(params, batch, rng):
    loss, aux = jax.vmap(lambda p, k: loss_one(p, batch, k))(params, member_keys(rng, num_members))
    return loss.sum(), jax.tree.map(jnp.mean, aux)

  def eval_fn(params, batch):
    return jax.vmap(lambda p: eval_one(p, batch))(params)        # per member [M]

  return core.Method(init, loss_fn, eval_fn)


def member_keys(rng: jax.Array, num_members: int) -> jax.Array:
  """Keys [M] of a stack's members: member 0 gets `rng` itself, member i > 0 `fold_in(rng, i)`; unlike
  `split(rng, M)`, member 0 is then the model trained alone, whatever the ensemble size."""
  rest = core.fold_in_each(rng, jnp.arange(1, num_members))
  return jnp.concatenate([rng[None], rest])


def member(params: Any, index: int) -> Any:
  """Parameters of one member of a stacked ensemble."""
  return jax.tree.map(lambda x: x[index], params)


def selection(patience: int, eval_every: int = 1) -> core.Selection:
  """Early stopping on validation cross-entropy for `core.train`: the best parameters (per member of a stacked
  ensemble) are kept; training ends once every member has gone `patience` epochs (checked every `eval_every`)."""
  return core.Selection("val_ce", "min", every=int(eval_every), patience=-(-int(patience) // int(eval_every)))


def train_backbone(model: nn.Module, batch: Mapping[str, Any], train_cfg: Mapping[str, Any], *, l2: float,
                   patience: int, seed: int, num_members: int = 1, workdir: str | None = None,
                   name: str = "backbone", writer: core.MetricWriter | None = None,
                   progress: bool = False) -> tuple[core.TrainResult, Any, Any, float]:
  """Trains the backbone (stacked with `num_members` - 1 deep-ensemble members) through core.train with
  validation selection; `train_cfg` is what core.train reads (its eval_every also paces the selection).
  Returns (result, stacked params, member-0 params, seconds). Member 0 is the model a single run trains, so the
  probe's backbone does not depend on the ensemble."""
  t0 = time.perf_counter()
  res = core.train(make_backbone_method(model, l2=l2, num_members=num_members), lambda _step: batch, train_cfg,
                   workdir=workdir, seed=seed, name=name, writer=writer,
                   init_rng=jax.random.split(jax.random.key(seed))[0], eval_batches=[batch],
                   select=selection(patience, int(train_cfg["eval_every"])), shard_batch_rows=False, progress=progress)
  params = member(res.params, 0) if num_members > 1 else res.params
  return res, res.params, params, time.perf_counter() - t0


def forward_eval(model: nn.Module, params: Any, batch: Mapping[str, Any]) -> dict:
  """{logits, q, z} of the whole graph with dropout off; `forward` is its jitted form."""
  return _call(model.apply, params, batch)


# Module-level jits keyed on the (hashable) Flax module: equal backbones share compiled code.
forward = jax.jit(forward_eval, static_argnums=0)


@functools.partial(jax.jit, static_argnums=0)
def ensemble_logits(model: nn.Module, params: Any, batch: Mapping[str, Any]) -> jax.Array:
  """Logits [M, N, K] of every member of the stacked `params` (jitted)."""
  return jax.vmap(lambda p: forward_eval(model, p, batch)["logits"])(params)


@functools.partial(jax.jit, static_argnums=(0, 4))
def mc_logits(model: nn.Module, params: Any, batch: Mapping[str, Any], rng: jax.Array, num_samples: int) -> jax.Array:
  """Logits [S, N, K] of `num_samples` forwards with dropout on (jitted)."""
  one = lambda key: _call(model.apply, params, batch, train=True, rngs={"dropout": key})["logits"]  # noqa: E731
  return jax.lax.map(one, jax.random.split(rng, num_samples))
