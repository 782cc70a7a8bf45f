"""CSBM generator and GPN-style shift settings (numpy only)."""

import numpy as np
import pytest

from jaxml.data import csbm, graph_shift as gs


def test_csbm_seeded_symmetric_and_homophilous():
  g = csbm.make_csbm(num_nodes=400, num_classes=4, num_features=8, p_in=0.05, p_out=0.005, seed=3)
  g2 = csbm.make_csbm(num_nodes=400, num_classes=4, num_features=8, p_in=0.05, p_out=0.005, seed=3)
  np.testing.assert_array_equal(g["edges"], g2["edges"])
  np.testing.assert_array_equal(g["features"], g2["features"])
  src, dst = g["edges"]
  assert not np.any(src == dst)
  pairs = set(zip(src.tolist(), dst.tolist()))
  assert all((d, s) in pairs for s, d in pairs)
  same = np.mean(g["labels"][src] == g["labels"][dst])
  # expected share of intra-class edges: p_in / K / (p_in / K + p_out (K - 1) / K) ≈ 0.77
  assert 0.65 < same < 0.9
  # class-conditional feature means recover the generator's means
  for c in range(4):
    np.testing.assert_allclose(g["features"][g["labels"] == c].mean(0), g["means"][c], atol=0.35)


def test_gpn_split_is_stratified_and_disjoint():
  labels = np.repeat(np.arange(3), [100, 60, 40]).astype(np.int32)
  labels[:5] = -1
  m = gs.gpn_split(labels, seed=0)
  total = m["train_mask"].astype(int) + m["val_mask"] + m["test_mask"]
  assert total.max() == 1 and np.all(total[labels >= 0] == 1) and np.all(total[labels < 0] == 0)
  for c, n in zip(range(3), [95, 60, 40]):
    assert m["train_mask"][labels == c].sum() == max(1, round(0.05 * n))
    assert m["val_mask"][labels == c].sum() == max(1, round(0.15 * n))
  assert not np.array_equal(m["train_mask"], gs.gpn_split(labels, seed=1)["train_mask"])


def test_leave_out_classes_removes_last_classes():
  labels = np.repeat(np.arange(7), 30).astype(np.int32)
  m = gs.gpn_split(labels, seed=0)
  loc = gs.leave_out_classes(labels, 7, m)
  assert loc["num_classes"] == 4
  assert np.all(loc["labels"][labels >= 4] == -1) and np.all(loc["labels"][labels < 4] == labels[labels < 4])
  assert not np.any(loc["train_mask"] & (labels >= 4)) and not np.any(loc["val_mask"] & (labels >= 4))
  np.testing.assert_array_equal(loc["ood_test_mask"], m["test_mask"] & (labels >= 4))


@pytest.mark.parametrize("kind", ["normal", "bernoulli"])
def test_perturb_features(kind):
  rng = np.random.default_rng(0)
  x = rng.random((50, 20)).astype(np.float32)
  x /= x.sum(1, keepdims=True)
  m = {"train_mask": np.arange(50) < 10}
  nodes = gs.select_perturbed(m, seed=0)
  assert nodes.sum() == 4 and not np.any(nodes & m["train_mask"])
  out = gs.perturb_features(x, nodes, kind, seed=0)
  np.testing.assert_array_equal(out[~nodes], x[~nodes])
  assert not np.allclose(out[nodes], x[nodes])
  if kind == "bernoulli":
    np.testing.assert_allclose(out[nodes].sum(1), 1.0, rtol=1e-6)
    assert set(np.unique(np.round(out[nodes] * out[nodes].astype(bool).sum(1, keepdims=True), 5))) <= {0.0, 1.0}
  with pytest.raises(ValueError, match="unknown perturbation"):
    gs.perturb_features(x, nodes, "uniform", seed=0)
