"""Train and eval step factories: a loss and an optimizer in, a pure step out."""

from typing import Callable

import jax
import jax.numpy as jnp
import optax

from jaxml.core.train_state import TrainState
from jaxml.core.types import Batch, EvalFn, LossFn, Metrics

__all__ = ["make_train_step", "make_eval_step", "make_multi_step", "step_rng"]


def step_rng(state: TrainState) -> jax.Array:
  """A fresh key per step that is reproducible after a restart: fold_in(root, step)."""
  return jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)


def make_train_step(loss_fn: LossFn, optimizer: optax.GradientTransformation, *,
                    ema_decay: float | None = None,
                    uses_extra: bool = False) -> Callable[[TrainState, Batch], tuple[TrainState, Metrics]]:
  """Returns `train_step(state, batch) -> (state, metrics)`; pure and un-jitted.

  `loss_fn(params, batch, rng) -> (loss, aux dict of scalars)`, or with `uses_extra` also `extra`
  (`state.extra`); `ema_decay` keeps `state.ema_params = decay * ema + (1 - decay) * params`."""
  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

  def train_step(state: TrainState, batch: Batch) -> tuple[TrainState, Metrics]:
    rng = step_rng(state)
    args = (state.params, batch, rng) + ((state.extra,) if uses_extra else ())
    (loss, aux), grads = grad_fn(*args)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    ema = state.ema_params
    if ema_decay is not None:
      ema = jax.tree.map(lambda e, p: ema_decay * e + (1.0 - ema_decay) * p, ema, params)
    state = state.replace(step=state.step + 1, params=params, opt_state=opt_state, ema_params=ema)
    metrics = {"loss": loss, "grad_norm": optax.tree.norm(grads), **aux}
    return state, jax.tree.map(jnp.asarray, metrics)

  return train_step


def make_eval_step(eval_fn: EvalFn, *, use_ema: bool = False,
                   uses_extra: bool = False) -> Callable[[TrainState, Batch], Metrics]:
  """Returns `eval_step(state, batch) -> metrics` evaluating params (or the EMA copy); with
  `uses_extra`, `eval_fn(params, batch, state.extra)`."""

  def eval_step(state: TrainState, batch: Batch) -> Metrics:
    params = state.ema_params if use_ema else state.params
    return eval_fn(params, batch, state.extra) if uses_extra else eval_fn(params, batch)

  return eval_step


class _MultiStep:
  """K train steps in one call: a `lax.scan` of the step, or (`unroll`) the K steps written out one
  after another. Equal (and hashed) by the step it wraps and the mode, so every fit() of the same
  train_step hits jax's compilation cache instead of tracing a new closure."""

  def __init__(self, train_step: Callable[[TrainState, Batch], tuple[TrainState, Metrics]], unroll: bool = False):
    self.train_step = train_step
    self.unroll = bool(unroll)

  def __call__(self, state: TrainState, batches: Batch) -> tuple[TrainState, Metrics]:
    if not self.unroll:
      return jax.lax.scan(self.train_step, state, batches)
    metrics = []
    for i in range(jax.tree.leaves(batches)[0].shape[0]):   # K is static: a shape
      state, m = self.train_step(state, jax.tree.map(lambda a, i=i: a[i], batches))
      metrics.append(m)
    return state, jax.tree.map(lambda *a: jnp.stack(a), *metrics)

  def __eq__(self, other: object) -> bool:
    return (isinstance(other, _MultiStep) and other.train_step is self.train_step
            and other.unroll == self.unroll)

  def __hash__(self) -> int:
    return hash((self.train_step, self.unroll))


def make_multi_step(train_step: Callable[[TrainState, Batch], tuple[TrainState, Metrics]], *,
                    unroll: bool = False) -> Callable[[TrainState, Batch], tuple[TrainState, Metrics]]:
  """K steps in one call, `(state, batches) -> (state, metrics)` with a leading K axis (a `lax.scan`).

  Each step is exactly `train_step` (same step RNG). `unroll=True` writes the K steps out: XLA:CPU runs
  convolutions inside a while loop ~20x slower, so convolutional models train unrolled there. Equal
  `train_step` and mode compare equal, so repeated fits compile once."""
  return _MultiStep(train_step, unroll)
