"""The transform built by default is the documented one: residual, hidden width 256, the identity at init."""

import jax
import numpy as np

from jaxml.unlearning.transform import ResidualTransform, make_transform


def test_default_transform_is_the_identity_initialised_residual():
  t = make_transform()
  assert isinstance(t, ResidualTransform) and tuple(t.hidden) == (256,)
  z = jax.random.normal(jax.random.key(0), (3, 4))
  params = t.init(jax.random.key(1), z)["params"]
  np.testing.assert_array_equal(np.asarray(t.apply({"params": params}, z)), np.asarray(z))
