"""The training state: pure data, so it can be checkpointed, sharded and donated."""

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from jaxml.core.types import Params

__all__ = ["TrainState", "create_train_state"]


@flax.struct.dataclass
class TrainState:
  """step: int32 scalar; rng: raw uint32 key data (orbax stores it like any array).

  `ema_params`: moving average of `params` (or None); `extra`: method-owned non-trainable state changed
  only by host hooks; `best`: the selection record (`core.SelectionState`), checkpointed with the state."""

  step: jax.Array
  params: Params
  opt_state: optax.OptState
  rng: jax.Array
  ema_params: Params | None = None
  extra: Any = None
  best: Any = None


def create_train_state(params: Params, optimizer: optax.GradientTransformation, seed: int, *,
                       ema: bool = False, extra: Any = None) -> TrainState:
  """Builds a fresh state at step 0 with its own root key derived from `seed`."""
  return TrainState(
      step=jnp.zeros((), jnp.int32),
      params=params,
      opt_state=optimizer.init(params),
      rng=jax.random.key_data(jax.random.key(seed)),
      ema_params=jax.tree.map(jnp.copy, params) if ema else None,
      extra=extra,
  )
