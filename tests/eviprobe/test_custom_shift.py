"""User-defined graph shifts: the builder's contract, and the pipeline seeing a rewired graph."""

import jax
import numpy as np
import pytest

from jaxml.data import csbm, graph_shift as gs
from jaxml.eviprobe import backbone as bb
from jaxml.eviprobe import baselines as bl
from jaxml.eviprobe import pipeline as pl


def scale_features(features, graph, rng):
  """A feature-scale shift: 20% of the test nodes get their rows multiplied by 10."""
  test = np.flatnonzero(graph["test_mask"])
  chosen = rng.choice(test, size=max(1, test.size // 5), replace=False)
  mask = np.zeros(features.shape[0], bool)
  mask[chosen] = True
  features[mask] *= 10.0
  return features, graph, mask


def rewire(features, graph, rng):
  """A structural shift: every edge of 30% of the test nodes is redirected to a random node."""
  test = np.flatnonzero(graph["test_mask"])
  mask = np.zeros(features.shape[0], bool)
  mask[rng.choice(test, size=max(1, int(0.3 * test.size)), replace=False)] = True
  src, dst = graph["edges"]
  hit = mask[src]
  new_dst = np.where(hit, rng.integers(0, features.shape[0], size=src.size), dst)
  edges = np.concatenate([np.stack([src, new_dst]), np.stack([new_dst, src])], axis=1)
  return features, dict(graph, edges=edges), mask


def _graph():
  g = csbm.make_csbm(num_nodes=120, num_classes=3, num_features=6, p_in=0.1, p_out=0.01, seed=1)
  masks = gs.gpn_split(g["labels"], 0)
  return g, masks


def _backbone():
  """The CSBM graph with an untrained 8-unit GCN on it: (graph, masks, classes, model, batch, params)."""
  g, masks = _graph()
  k = int(g["num_classes"])
  model = bb.make_backbone({"name": "gcn", "hidden": 8, "dropout": 0.5}, g["features"].shape[1], k)
  batch = dict(x=g["features"], edges=g["edges"], labels=g["labels"])
  return g, masks, k, model, batch, bb.make_backbone_method(model).init(jax.random.key(0), batch)


def test_apply_shift_runs_a_user_function_without_touching_the_inputs():
  g, masks = _graph()
  x0, e0 = g["features"].copy(), g["edges"].copy()
  out = gs.apply_shift(scale_features, g["features"], dict(masks, edges=g["edges"]), seed=3)
  np.testing.assert_array_equal(g["features"], x0)          # caller's arrays unchanged
  np.testing.assert_array_equal(g["edges"], e0)
  m = out["mask"]
  assert m.any() and not (m & ~masks["test_mask"]).any()
  np.testing.assert_allclose(out["features"][m], 10.0 * x0[m], rtol=1e-6)
  np.testing.assert_array_equal(out["features"][~m], x0[~m])
  again = gs.apply_shift(scale_features, g["features"], dict(masks, edges=g["edges"]), seed=3)
  np.testing.assert_array_equal(again["mask"], m)            # seeded
  with pytest.raises(ValueError, match="bool mask"):
    gs.apply_shift(lambda x, gr, r: (x, gr, np.zeros(3)), g["features"], dict(masks, edges=g["edges"]), 0)
  with pytest.raises(ValueError, match="edges"):
    gs.apply_shift(lambda x, gr, r: (x, dict(gr, edges=gr["edges"] + 1000), np.zeros(x.shape[0], bool)),
                   g["features"], dict(masks, edges=g["edges"]), 0)


def test_builtin_shift_is_a_shift_function():
  g, masks = _graph()
  out = gs.apply_shift(gs.feature_shift("bernoulli", budget=0.2), g["features"], dict(masks, edges=g["edges"]), 0)
  m = out["mask"]
  assert m.sum() == round(0.2 * (~masks["train_mask"]).sum()) and not (m & masks["train_mask"]).any()
  np.testing.assert_allclose(out["features"][m].sum(1)[out["features"][m].sum(1) > 0], 1.0, rtol=1e-5)
  np.testing.assert_array_equal(out["graph"]["edges"], g["edges"])


@pytest.mark.slow
def test_pipeline_refits_gkde_on_a_rewired_graph():
  g, masks, k, model, batch, params = _backbone()
  config = {"eviprobe": {}, "ablations": (), "baselines": ("msp", "gkde", "gnnsafe"),
            "gnnsafe": {"steps": 2, "alpha": 0.5}, "gkde": {"sigma": 1.0, "max_hops": 4}}
  tr, va = np.flatnonzero(masks["train_mask"]), np.flatnonzero(masks["val_mask"])
  fitted = pl.fit_posthoc(config, model, params, batch, tr, va, k)
  clean = pl.score_all(config, fitted, model, params, batch, rng=jax.random.key(1))
  shifted = gs.apply_shift(rewire, g["features"], dict(masks, edges=g["edges"]), seed=0)
  b = dict(batch, edges=shifted["graph"]["edges"])
  scores = pl.score_all(config, fitted, model, params, b, rng=jax.random.key(1))
  assert set(scores) == {"xeviprobe", "msp", "gkde", "gnnsafe"}
  expect = bl.gkde_prior(b["edges"], g["labels"], tr, k, g["labels"].shape[0],
                         bb.forward(model, params, b)["logits"], sigma=1.0, max_hops=4)
  np.testing.assert_allclose(scores["gkde"][0]["ood"], np.asarray(expect["ood"]), rtol=1e-6)
  assert not np.allclose(scores["gkde"][0]["ood"], clean["gkde"][0]["ood"])
  # the GCN and the propagated scores see the new edges too
  assert not np.allclose(scores["msp"][0]["ood"], clean["msp"][0]["ood"])
  assert not np.allclose(scores["xeviprobe"][0]["ood"], clean["xeviprobe"][0]["ood"])
  # every post-hoc row predicts with the one frozen backbone
  for name in ("xeviprobe", "gkde", "gnnsafe"):
    np.testing.assert_array_equal(scores[name][0]["pred"], scores["msp"][0]["pred"])


def test_isolated_scores_equal_scoring_the_graph_with_one_node_perturbed():
  """isolated_scores (one jitted lax.map over nodes) gives each node the score it gets when it alone is perturbed."""
  g, masks, k, model, batch, params = _backbone()
  config = {"eviprobe": {}, "ablations": (), "baselines": ("msp",), "gnnsafe": {"steps": 2, "alpha": 0.5}}
  fitted = pl.fit_posthoc(config, model, params, batch, np.flatnonzero(masks["train_mask"]),
                          np.flatnonzero(masks["val_mask"]), k)
  nodes = gs.isolated_nodes(masks["test_mask"], 2, 0)
  rows = gs.perturb_features(g["features"], nodes, "normal", 0, scale=3.0)[nodes]
  iso = pl.isolated_scores(config, fitted, model, params, batch, nodes, rows)["scores"]
  assert set(iso) == {"xeviprobe", "msp"}
  for j, i in enumerate(nodes):
    x = g["features"].copy()
    x[i] = rows[j]
    one = pl.score_all(config, fitted, model, params, dict(batch, x=x), rng=jax.random.key(1))
    for m in iso:
      np.testing.assert_allclose(iso[m][j], one[m][0]["ood"][i], rtol=1e-4, atol=1e-6)
