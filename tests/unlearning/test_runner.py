"""The one run signature: plain-dict settings, every method through run_method, one compile per grid."""

import jax
import numpy as np

from jaxml import unlearning
from jaxml.unlearning import model as model_lib
from tests.unlearning.helpers import gaussian_task

MODEL = model_lib.MLPClassifier(3, (16, 8))


def test_run_method_one_signature_and_a_grid_compiles_once():
  task = gaussian_task()
  cache: dict = {}
  orig = unlearning.run_method("original", {"epochs": 5.0, "batch_size": 16, "lr": 3e-3}, MODEL, None, task,
                               seed=0, cache=cache)
  ru = {"batch_size": 16, "min_steps": 4, "hidden": [8], "lr": 1e-2}       # a plain dict (list for a tuple)
  outs = {}
  for name, cfg in (("ru", ru), ("ru_zs", ru), ("grad_ascent", {"min_steps": 2}), ("neggrad_plus", {"epochs": 0.5})):
    outs[name] = unlearning.run_method(name, cfg, MODEL, orig.params, task, seed=0, cache=cache)
    logits, feats = outs[name].predict(task.x_test)
    assert logits.shape == (task.x_test.shape[0], 3) and np.isfinite(np.asarray(logits)).all()
    assert outs[name].num_steps >= 1
  n_trainers = len(cache)
  # a grid over float settings (beta, lr, alpha) reuses the same core.Trainer (hence its compiled step)
  for beta, lr in ((1e-3, 1e-3), (1.0, 3e-2)):
    out = unlearning.run_method("ru", ru | {"beta": beta, "lr": lr}, MODEL, orig.params, task, seed=0, cache=cache)
    assert not jax.tree.all(jax.tree.map(np.array_equal, out.params["transform"], outs["ru"].params["transform"]))
  unlearning.run_method("neggrad_plus", {"epochs": 0.5, "alpha": 0.5, "lr": 1e-2}, MODEL, orig.params, task, seed=0,
                        cache=cache)
  assert len(cache) == n_trainers
