"""Type aliases and the one `Method` contract shared by every gradient-trained method."""

from typing import Any, Callable, NamedTuple, Sequence

import jax

__all__ = ["PRNGKey", "Params", "Batch", "Metrics", "LossFn", "EvalFn", "PredictFn", "Method"]

PRNGKey = jax.Array
Params = Any
Batch = dict[str, Any]
Metrics = dict[str, jax.Array]
LossFn = Callable[..., tuple[jax.Array, Metrics]]
EvalFn = Callable[[Params, Batch], Metrics]
PredictFn = Callable[[Params, Batch], Any]


class Method(NamedTuple):
  """Everything `core.train` needs from a method, as pure functions (optax/blackjax style).

  init(rng, example_batch) -> params
  loss_fn(params, batch, rng[, extra]) -> (loss, aux)   aux: dict of scalars; `extra` when init_extra is set
  eval_fn(params, batch[, extra]) -> metrics             dict of arrays; `extra` with `eval_uses_extra`
  predict_fn(params, batch) -> predictions               optional
  init_extra(rng, params) -> extra                       optional non-trainable state, changed by hooks
  hooks(ctx) -> sequence of core.Hook                    optional host callbacks built from `core.TrainContext`
  frozen: regexes over '/'-joined parameter paths whose leaves get exactly zero updates"""

  init: Callable[[PRNGKey, Batch], Params]
  loss_fn: LossFn
  eval_fn: EvalFn | None = None
  predict_fn: PredictFn | None = None
  init_extra: Callable[[PRNGKey, Params], Any] | None = None
  hooks: Callable[[Any], Sequence[Any]] | None = None
  frozen: tuple[str, ...] = ()
  eval_uses_extra: bool = False
