"""Member 0 of a backbone trained stacked with deep-ensemble members is the backbone trained alone.

X-EviProbe reads member 0 of the stack; if the stack changed it (other init / dropout keys, or a stopping
point shared with the other members), X-EviProbe's rows would depend on whether ensemble baselines run.
"""

import jax
import numpy as np
import pytest

from configs import eviprobe_graphs as cfg_module
from experiments import eviprobe_graphs
from jaxml.data import graph_shift as gs
from jaxml.eviprobe import backbone as bb
from jaxml.eviprobe import pipeline as pl

TOL = dict(rtol=1e-5, atol=1e-5)   # float noise of the vmapped matmuls only, after every training step


def _config():
  config = cfg_module.get_config("smoke:dataset=csbm")
  config.data.csbm.update(num_nodes=200, num_features=8, p_in=0.08, p_out=0.01)
  # patience short enough that early stopping ends member 0 while another member still trains
  config.train.update(max_epochs=80, patience=3)
  config.baselines, config.ablations = ("msp", "maha_q"), ()
  return config


def _graph_batch(config):
  g = eviprobe_graphs.load(config, "csbm")
  masks = gs.gpn_split(g["labels"], 0, train=float(config.shift.train), val=float(config.shift.val))
  batch = dict(x=g["features"], edges=g["edges"], labels=g["labels"], train_mask=masks["train_mask"].astype(np.float32),
               val_mask=masks["val_mask"].astype(np.float32))
  model = bb.make_backbone(dict(config.backbone), g["features"].shape[1], int(g["num_classes"]))
  return model, batch, masks, int(g["num_classes"])


def test_member_keys_start_with_the_single_models_key():
  key = jax.random.key(3)
  keys = bb.member_keys(key, 4)
  data = np.asarray(jax.random.key_data(keys))
  assert data.shape[0] == 4
  np.testing.assert_array_equal(data[0], np.asarray(jax.random.key_data(key)))
  assert len({tuple(row) for row in data}) == 4


@pytest.mark.slow
def test_stacked_member_zero_equals_backbone_trained_alone():
  config = _config()
  model, batch, masks, k = _graph_batch(config)
  single, _, params_1, _ = eviprobe_graphs.train_backbone(config, model, batch, seed=2, num_members=1)
  stack, stacked, params_0, _ = eviprobe_graphs.train_backbone(config, model, batch, seed=2, num_members=3)
  best = np.asarray(stack.best.step)
  # the case that matters: member 0 stopped improving while the stack kept training other members
  assert int(stack.state.step) > int(single.state.step) and best.max() > best[0]
  assert int(np.asarray(single.best.step)) == int(best[0])
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), params_1, params_0)
  assert not np.allclose(bb.member(stacked, 1)["params"]["conv2"]["kernel"], params_0["params"]["conv2"]["kernel"])

  posthoc = eviprobe_graphs.plan(config)["posthoc"]
  tr, va = np.flatnonzero(masks["train_mask"]), np.flatnonzero(masks["val_mask"])
  scores = []
  for params in (params_1, params_0):
    fitted = pl.fit_posthoc(posthoc, model, params, batch, tr, va, k, seed=2)
    scores.append(pl.score_all(posthoc, fitted, model, params, batch, rng=jax.random.key(0)))
  for method in (pl.OURS, "maha_q"):
    for field in ("ood", "misc"):
      np.testing.assert_allclose(scores[0][method][0][field], scores[1][method][0][field], **TOL)
