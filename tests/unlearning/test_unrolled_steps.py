"""`train_config["unroll"]` reaches core.train: the K steps of a dispatch without a loop give what the rolled
scan gives (the multi-step itself is tested in tests/core/test_train.py)."""

import jax
import numpy as np

from jaxml.unlearning import baselines
from tests.unlearning import fixtures


def _fit(unroll: bool, k: int):
  task = fixtures.gaussian_task()
  return baselines.train_classifier(baselines.hyperparameters("retrain", fixtures.TRAIN | {"epochs": 2.0}),
                                    fixtures.MODEL, task, task.retain_idx, seed=0, cache={},
                                    train_config={"unroll": unroll, "steps_per_dispatch": k})


def test_unrolled_training_matches_the_scan():
  rolled, unrolled = _fit(False, 2), _fit(True, 2)
  assert rolled.num_steps == unrolled.num_steps == 8
  for a, b in zip(jax.tree.leaves(rolled.params), jax.tree.leaves(unrolled.params)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
  # ... and both trained: the parameters moved away from the initialisation.
  init = fixtures.MODEL.init(jax.random.key(0), fixtures.gaussian_task().x_train[:1])["params"]
  moved = [np.abs(np.asarray(a) - np.asarray(b)).max() for a, b in zip(jax.tree.leaves(init),
                                                                        jax.tree.leaves(unrolled.params))]
  assert min(moved) > 1e-3
