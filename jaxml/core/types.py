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
  loss_fn(params, batch, rng) -> (loss, aux)             aux: dict of scalar arrays; when
      `init_extra` is set: loss_fn(params, batch, rng, extra) -> (loss, aux), where `extra`
      is non-trainable state that only host hooks change (e.g. SOL's class centroids)
  eval_fn(params, batch) -> metrics                      dict of arrays, no host sync; with
      `eval_uses_extra`: eval_fn(params, batch, extra) (e.g. decoders that read centroids)
  predict_fn(params, batch) -> predictions               optional, for users of the trained model
  init_extra(rng, params) -> extra                       optional non-trainable state
  hooks(ctx) -> sequence of core.Hook                    optional host callbacks the method needs,
      built from the `core.TrainContext` (config, batches, mesh, ...) of the run
  frozen: regexes over '/'-joined parameter paths whose leaves get exactly zero updates

  The first three fields keep their positions, so `Method(init, loss_fn, eval_fn)` still works.
  """

  init: Callable[[PRNGKey, Batch], Params]
  loss_fn: LossFn
  eval_fn: EvalFn | None = None
  predict_fn: PredictFn | None = None
  init_extra: Callable[[PRNGKey, Params], Any] | None = None
  hooks: Callable[[Any], Sequence[Any]] | None = None
  frozen: tuple[str, ...] = ()
  eval_uses_extra: bool = False
