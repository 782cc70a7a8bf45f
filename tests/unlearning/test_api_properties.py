"""The unlearning method as `core` sees it: its loss at the identity transform against the closed form, and the
settings reader's error naming the section."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.unlearning import api, targets
from jaxml.unlearning import model as model_lib

CONFIG = {"transform": "linear", "beta": 0.5}


def test_method_loss_at_the_identity_is_beta_times_the_pairwise_forget_distance():
  model = model_lib.MLPClassifier(3, (6, 4))
  x = jax.random.normal(jax.random.key(0), (4, 5))
  mparams = model.init(jax.random.key(1), x)["params"]
  stats = targets.class_statistics(np.array([0, 1, 2]), 3, (1,), 1.0)
  method = api.make_method(CONFIG, model, mparams, stats)
  rng = np.random.default_rng(0)
  zr, zf, zref = (rng.normal(size=(3, 4)).astype(np.float32) for _ in range(3))
  wf = np.array([1.0, 1.0, 0.0], np.float32)
  batch = {"zr": zr, "yr": np.zeros(3, np.int32), "zf": zf, "wf": wf, "zref": zref,
           **{f"hp_{k}": np.full((1,), v, np.float32) for k, v in api.batch_values(CONFIG).items()}}
  params = method.init(jax.random.key(2), batch)
  loss, aux = method.loss_fn(params, batch, jax.random.key(3))
  # T = identity at init: L_r = 0, L_f = mean over the two weighted forget rows and the 3 references of ||z_f - z_ref||²
  pair = ((zf[:2, None, :] - zref[None]) ** 2).sum(-1).mean(1).mean()
  np.testing.assert_allclose(float(aux["retain_loss"]), 0.0, atol=1e-6)
  np.testing.assert_allclose(float(aux["forget_loss"]), pair, rtol=1e-5)
  np.testing.assert_allclose(float(loss), 0.5 * pair, rtol=1e-5)
  assert set(method.eval_fn(params, {"x": x, "y": jnp.zeros(4, jnp.int32)})) == {"accuracy", "loss"}


def test_unknown_setting_is_an_error_naming_the_unlearning_section():
  with pytest.raises(ValueError, match=r"^unknown unlearning setting\(s\) \[.betta.\]"):
    api.make_loss_fn({"betta": 0.1}, model_lib.MLPClassifier(3, (6, 4)))
