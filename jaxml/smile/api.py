"""The ensemble ("E" of SMILE) as a `core.Method`: K independently initialised MAP members.

Parameters carry a leading member axis [K, ...]; a batch holds one minibatch per member (x: [K, b, p],
y: [K, b]). The loss Σ_k mean_i −log N(y_ki | μ_k(x_ki), σ_k²) does not couple members, so with a
per-parameter optimizer it equals K separate trainings. `eval_fn` gives each member's validation NLL."""

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxml import core
from jaxml.smile import targets

__all__ = ["make_method", "make_classifier_method", "make_model", "member_nll"]


def make_model(config: Any) -> targets.RegressionModel:
  """The regression net of a `smile` config section (hidden, noise)."""
  return targets.make_regression_model(tuple(config.hidden), noise=config.get("noise", "global"))


def member_nll(model: targets.RegressionModel, params: Any, x: jax.Array, y: jax.Array,
               fixed_sigma: bool = False) -> jax.Array:
  """Mean negative log-likelihood of one member: x [n, p], y [n] -> scalar. fixed_sigma: σ = 1 (the authors'
  member loss; a global log σ gets no gradient and stays at its initial 0, where sampling starts it)."""
  mu, log_sigma = model.apply(params, x)
  if fixed_sigma:
    log_sigma = jnp.zeros_like(log_sigma)
  return -jnp.mean(targets.gaussian_loglik(y, mu, log_sigma))


def _stacked_method(init_one: Callable, member_loss: Callable, k: int, metric: str) -> core.Method:
  """K stacked members: init_one(rng, x) -> params, member_loss(params, x, y) -> scalar; the loss sums the
  members' losses, `eval_fn` gives each member's on a batch x [n, ...], y [n] shared by all -> {metric: [K]}."""

  def init(rng: jax.Array, batch: dict) -> Any:
    x = jnp.asarray(batch["x"])[0]
    return jax.vmap(lambda r: init_one(r, x))(jax.random.split(rng, k))

  def loss_fn(params: Any, batch: dict, rng: jax.Array):
    del rng
    loss = jax.vmap(member_loss)(params, batch["x"], batch["y"])
    return jnp.sum(loss), {metric: jnp.mean(loss)}

  def eval_fn(params: Any, batch: dict) -> dict:
    return {metric: jax.vmap(lambda p: member_loss(p, batch["x"], batch["y"]))(params)}

  return core.Method(init, loss_fn, eval_fn)


def make_method(config: Any) -> core.Method:
  """config: ConfigDict-like with hidden (tuple), noise ('global'|'heteroscedastic'), num_members
  (and optionally member_fixed_sigma)."""
  model = make_model(config)
  fixed = bool(config.get("member_fixed_sigma", False))
  return _stacked_method(model.init, lambda p, x, y: member_nll(model, p, x, y, fixed), int(config.num_members),
                         "nll")


def make_classifier_method(apply_fn: Callable, init_fn: Callable, num_members: int) -> core.Method:
  """K stacked softmax classifiers (e.g. `jaxml.nn.resnet.ResNet`); batch x [K, b, ...], y [K, b]; init_fn(rng, x)
  -> params, apply_fn(params, x) -> logits. Loss Σ_k mean cross-entropy."""

  def member_ce(params, x, y):
    logp = jax.nn.log_softmax(apply_fn(params, x))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None].astype(jnp.int32), axis=-1))

  return _stacked_method(init_fn, member_ce, num_members, "ce")
