"""The optimizer settings reader: Adam when no name is given, and an unknown key named in the error."""

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
