"""Type aliases and the `Method` tuple shared by every gradient-trained method."""

from typing import Any, Callable, NamedTuple

import jax

__all__ = ["PRNGKey", "Params", "Batch", "Metrics", "LossFn", "EvalFn", "Method"]

PRNGKey = jax.Array
Params = Any
Batch = dict[str, Any]
Metrics = dict[str, jax.Array]
LossFn = Callable[..., tuple[jax.Array, Metrics]]
EvalFn = Callable[[Params, Batch], Metrics]


class Method(NamedTuple):
  """What a method hands to the shared loop.

  init(rng, example_batch) -> params
  loss_fn(params, batch, rng) -> (loss, aux)     aux: dict of scalar arrays
  eval_fn(params, batch) -> metrics              dict of arrays, no host sync
  """

  init: Callable[[PRNGKey, Batch], Params]
  loss_fn: LossFn
  eval_fn: EvalFn | None = None
