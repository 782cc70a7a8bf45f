"""The optimizer settings reader: Adam when no name is given, an unknown key named in the error, and the built
optimizer against hand-computed first steps (weight decay, clipping, the lr override, the warm-up and cosine rates)."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.core import optim


def test_unnamed_optimizer_is_adam():
  params = {"w": jnp.array([1.0, -2.0, 3.0])}
  grads = {"w": jnp.array([0.5, 0.1, -4.0])}
  updates = []
  for cfg in ({"lr": 0.1}, {"name": "adam", "lr": 0.1}):
    opt = optim.make_optimizer(cfg)
    updates.append(np.asarray(opt.update(grads, opt.init(params), params)[0]["w"]))
  np.testing.assert_allclose(updates[0], updates[1], rtol=1e-6)
  np.testing.assert_allclose(updates[0], -0.1 * np.sign([0.5, 0.1, -4.0]), rtol=1e-4)   # Adam's first step: −lr·sign(g)


def test_unknown_optimizer_setting_names_the_optimizer_section():
  with pytest.raises(ValueError, match=r"^unknown optimizer setting\(s\) \['lrr'\]"):
    optim.make_optimizer({"lrr": 0.1})


def _updates(opt, grads, params, steps=1):
  """The updates of `steps` successive calls with the same gradients and parameters."""
  state, out = opt.init(params), []
  for _ in range(steps):
    u, state = opt.update(grads, state, params)
    out.append(np.asarray(u["w"]))
  return out


def test_weight_decay_is_added_to_the_sgd_gradient_and_decoupled_in_adam():
  params = {"w": jnp.array([1.0, -2.0])}
  grads = {"w": jnp.array([0.5, 0.1])}
  # SGD: -lr (g + wd p) = -0.1 ([0.5, 0.1] + 0.5 [1, -2]).
  sgd = optim.make_optimizer({"name": "sgd", "lr": 0.1, "weight_decay": 0.5})
  np.testing.assert_allclose(_updates(sgd, grads, params)[0], [-0.1, 0.09], rtol=1e-6)
  # Adam with a weight decay is AdamW: the first step is -lr (sign(g) + wd p) = -0.1 ([1, 1] + 0.5 [1, -3]).
  params = {"w": jnp.array([1.0, -3.0])}
  for name in ("adam", "adamw"):
    opt = optim.make_optimizer({"name": name, "lr": 0.1, "weight_decay": 0.5})
    np.testing.assert_allclose(_updates(opt, grads, params)[0], [-0.15, 0.05], rtol=1e-5, atol=1e-6)


def test_clip_norm_rescales_the_gradient_to_the_global_norm():
  params, grads = {"w": jnp.zeros(2)}, {"w": jnp.array([3.0, 4.0])}                  # norm 5
  opt = optim.make_optimizer({"name": "sgd", "lr": 1.0, "clip_norm": 1.0})
  np.testing.assert_allclose(_updates(opt, grads, params)[0], [-0.6, -0.8], rtol=1e-6)


def test_the_lr_argument_overrides_the_sections_rate():
  params, grads = {"w": jnp.zeros(2)}, {"w": jnp.array([1.0, -2.0])}
  opt = optim.make_optimizer({"name": "sgd", "lr": 0.1}, lr=0.5)
  np.testing.assert_allclose(_updates(opt, grads, params)[0], [-0.5, 1.0], rtol=1e-6)


def test_injected_rate_follows_the_warmup_and_cosine_schedule_by_hand():
  # Warm-up 2 steps (0, 1/2), then a cosine over max(6 - 2, 1) = 4 steps: (1 + cos(pi k / 4)) / 2, k = 0..3.
  params, grads = {"w": jnp.zeros(1)}, {"w": jnp.ones(1)}
  cfg = {"name": "sgd", "lr": 2.0, "schedule": "cosine", "total_steps": 6, "warmup_steps": 2}
  rates = [0.0, 0.5] + [(1 + np.cos(np.pi * k / 4)) / 2 for k in range(4)]
  for inject in (False, True):
    got = [-u[0] for u in _updates(optim.make_optimizer(cfg, inject_lr=inject), grads, params, steps=6)]
    np.testing.assert_allclose(got, 2.0 * np.array(rates), rtol=1e-5, atol=1e-7)
