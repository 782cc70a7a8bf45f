"""The gradient-reversal schedule keeps one output contract for both kinds: a Python float for a scalar step,
a float32 array of the step's shape for an array of steps."""

import math

import numpy as np

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
