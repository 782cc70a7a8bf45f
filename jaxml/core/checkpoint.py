"""Orbax CheckpointManager wrapper: save, latest step, restore-or-init."""

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

__all__ = ["make_manager", "save", "latest_step", "restore", "restore_or_init"]


def make_manager(directory: str, *, max_to_keep: int = 2) -> ocp.CheckpointManager:
  return ocp.CheckpointManager(os.path.abspath(directory),
                               options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True))


def save(manager: ocp.CheckpointManager, step: int, state: Any) -> None:
  """Every process calls this (orbax coordinates multi-host writes); returns once the write is finished."""
  manager.save(int(step), args=ocp.args.StandardSave(state))
  manager.wait_until_finished()


def latest_step(manager: ocp.CheckpointManager) -> int | None:
  return manager.latest_step()


def restore(manager: ocp.CheckpointManager, step: int, like: Any) -> Any:
  """Restores into the structure, dtypes and shardings of `like` (a concrete or abstract state)."""
  abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
  return manager.restore(int(step), args=ocp.args.StandardRestore(abstract))


def restore_or_init(manager: ocp.CheckpointManager | None, state: Any) -> tuple[Any, bool]:
  """(latest checkpoint if there is one, else `state`; whether it resumed)."""
  step = manager.latest_step() if manager is not None else None
  if step is None:
    return state, False
  return restore(manager, step, state), True
