"""The gradient-reversal schedule keeps one output contract for both kinds: a Python float for a scalar step,
a float32 array of the step's shape for an array of steps."""

import math

import numpy as np
import pytest

from jaxml.causal_reward import model


def test_both_schedules_return_a_float_for_a_step_and_a_float32_array_for_steps():
  steps = np.array([[0, 5], [10, 20]])
  for kind in ("dann", "constant"):
    one = model.grl_schedule(5, 10, lam_max=0.7, kind=kind)
    assert type(one) is float
    many = model.grl_schedule(steps, 10, lam_max=0.7, kind=kind)
    assert many.dtype == np.float32 and many.shape == steps.shape
    np.testing.assert_allclose(many[0, 1], one, rtol=1e-6)
  np.testing.assert_array_equal(model.grl_schedule(steps, 10, lam_max=0.7, kind="constant"),
                                np.full((2, 2), 0.7, np.float32))
  # DANN by hand at p = 1/2: 0.7 (2 / (1 + e^{-5}) - 1)
  assert math.isclose(model.grl_schedule(5, 10, lam_max=0.7), 0.7 * (2 / (1 + math.exp(-5)) - 1), rel_tol=1e-12)


def test_layer_norm_normalises_the_last_axis_of_a_3d_input():
  x = np.random.default_rng(0).normal(2.0, 3.0, size=(2, 3, 4)).astype(np.float32)
  want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
  np.testing.assert_allclose(np.asarray(model.layer_norm(x)), want, rtol=1e-4, atol=1e-5)


def test_adversary_mlp_is_dense_gelu_dense():
  import jax
  import jax.numpy as jnp
  m = model.adversary_mlp(5, 2)
  x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
  p = m.init(jax.random.key(0), jnp.asarray(x))["params"]
  h = np.asarray(jax.nn.gelu(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]))
  want = h @ np.asarray(p["Dense_1"]["kernel"]) + np.asarray(p["Dense_1"]["bias"])
  np.testing.assert_allclose(np.asarray(m.apply({"params": p}, x)), want, rtol=1e-5, atol=1e-6)


def test_the_default_ramp_ends_at_one_and_an_unknown_kind_is_named():
  # lam_max defaults to 1 (DANN): the ramp at p = 1 is 2 / (1 + e^{-10}) - 1, the constant kind is exactly 1.
  assert math.isclose(model.grl_schedule(10, 10), 2 / (1 + math.exp(-10)) - 1, rel_tol=1e-12)
  assert model.grl_schedule(3, 10, kind="constant") == 1.0
  with pytest.raises(ValueError, match="unknown GRL schedule 'linear'; expected 'dann' or 'constant'"):
    model.grl_schedule(0, 10, kind="linear")
