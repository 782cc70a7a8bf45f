"""Meshes, shardings and placement: the only place arrays meet devices."""

import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

__all__ = ["DATA", "MODEL", "make_mesh", "replicated", "batch_sharding", "shard_batch",
           "replicate", "state_shardings", "compile_train_step"]

DATA = "data"
MODEL = "model"


def make_mesh(num_data: int | None = None, num_model: int = 1) -> Mesh:
  """A ('data',) or ('data', 'model') mesh over all devices, Auto axis types.

  jax's default axis type became Explicit, under which some optax losses reject
  batch-sharded integer labels; Auto keeps the single global view of `jit`.
  """
  n = num_data or jax.device_count() // num_model
  if num_model == 1:
    return jax.make_mesh((n,), (DATA,), axis_types=(AxisType.Auto,))
  return jax.make_mesh((n, num_model), (DATA, MODEL), axis_types=(AxisType.Auto,) * 2)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh, *, stacked: bool = False) -> NamedSharding:
  """Rows on the 'data' axis; with `stacked`, rows are axis 1 of [steps, rows, ...] arrays."""
  return NamedSharding(mesh, P(None, DATA) if stacked else P(DATA))


def shard_batch(batch: Any, mesh: Mesh, *, shard: bool = True, stacked: bool = False) -> Any:
  """Numpy batch (each process passes its own rows) -> global jax arrays, rows split on the 'data' axis.

  `shard=False` replicates every leaf (full-batch graphs; every process passes the same arrays).
  `stacked`: leaves are [steps, rows, ...]."""
  if not shard:
    sharding = replicated(mesh)
    if jax.process_count() == 1:
      return jax.device_put(batch, sharding)
    with jax.transfer_guard("allow"):
      return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x), np.shape(x)),
                          batch)
  sharding = batch_sharding(mesh, stacked=stacked)
  axis = 1 if stacked else 0
  n_data = mesh.shape[DATA]
  for x in jax.tree.leaves(batch):
    if np.shape(x)[axis] * jax.process_count() % n_data:
      raise ValueError(f"batch of {np.shape(x)[axis] * jax.process_count()} rows does not divide over {n_data} "
                       "data shards; pick a batch size that is a multiple of the device count")
  if jax.process_count() == 1:
    # One host: a single device_put of the whole tree is the cheapest placement.
    return jax.device_put(batch, sharding)

  def put(x):
    x = np.asarray(x)
    return jax.make_array_from_process_local_data(
        sharding, x, x.shape[:axis] + (x.shape[axis] * jax.process_count(),) + x.shape[axis + 1:])

  # Assembling a global array from per-process rows is an explicit placement, but jax runs
  # it through transfers the loop's guard would reject; allow them for this call only.
  with jax.transfer_guard("allow"):
    return jax.tree.map(put, batch)


def state_shardings(state: Any, mesh: Mesh, rules: list[tuple[str, P]] | None = None) -> Any:
  """NamedSharding per leaf: replicated unless a regex rule over the leaf path says otherwise.

  The hook for models that outgrow one device: e.g. `[(r"Dense_\\d+/kernel", P(None, "model"))]`
  on a ('data', 'model') mesh shards those kernels; no method code changes.
  """
  rules = rules or []

  def pick(path, _):
    name = "/".join(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path)
    for pattern, spec in rules:
      if re.search(pattern, name):
        return NamedSharding(mesh, spec)
    return NamedSharding(mesh, P())

  return jax.tree_util.tree_map_with_path(pick, state)


def replicate(tree: Any, mesh: Mesh, shardings: Any = None) -> Any:
  """Places a pytree with the given shardings (replicated by default); every process holds the same values.
  Never aliases the input: the loop donates its state, and the caller's arrays must survive that."""
  shardings = shardings if shardings is not None else jax.tree.map(lambda _: replicated(mesh), tree)

  def put(x, s):
    x = np.asarray(jax.device_get(x)) if jax.process_count() > 1 else x
    if jax.process_count() > 1:
      return jax.make_array_from_callback(x.shape, s, lambda idx: x[idx])
    # An explicit copy first: with several devices, device_put(may_alias=False) still lets
    # the device-0 shard alias the source buffer (seen on jax 0.12 CPU).
    return jax.device_put(jnp.copy(x) if isinstance(x, jax.Array) else x, s)

  return jax.tree.map(put, tree, shardings)


def compile_train_step(train_step: Callable, state_shardings_tree: Any, mesh: Mesh, *,
                       shard_batch_rows: bool = True, stacked: bool = False) -> Callable:
  """jit with explicit in/out shardings; the state is donated (updated in place).

  `stacked`: the step takes [steps, rows, ...] batches (a `make_multi_step` function).
  """
  data = batch_sharding(mesh, stacked=stacked) if shard_batch_rows else replicated(mesh)
  return jax.jit(train_step,
                 in_shardings=(state_shardings_tree, data),
                 out_shardings=(state_shardings_tree, replicated(mesh)),
                 donate_argnums=0)
