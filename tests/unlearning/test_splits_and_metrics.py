"""Forget/retain splits and the MIA / representation metrics."""

import numpy as np
import pytest

from jaxml.data import unlearning_splits as us
from jaxml.metrics import mia
from jaxml.metrics.representation import linear_cka, linear_probe_accuracy
from jaxml.unlearning import evaluate


def test_splits_are_disjoint_cover_and_seeded():
  y = np.arange(100) % 10
  c = us.class_split(y, 3)
  assert set(y[c.forget_idx]) == {3} and 3 not in set(y[c.retain_idx]) and c.forget_classes == (3,)
  s = us.subclass_split(y, 3)
  assert set(s.y[s.forget_idx]) == {0} and set(s.y.tolist()) == {0, 1} and s.forget_classes == ()
  r1, r2, r3 = (us.random_split(y, 0.1, seed=k) for k in (0, 0, 1))
  assert r1.forget_idx.size == 10
  np.testing.assert_array_equal(r1.forget_idx, r2.forget_idx)
  assert not np.array_equal(r1.forget_idx, r3.forget_idx)
  for sp in (c, s, r1):
    assert np.intersect1d(sp.retain_idx, sp.forget_idx).size == 0
    assert sp.retain_idx.size + sp.forget_idx.size == y.size
  with pytest.raises(ValueError):
    us.super_labels(np.array([0, 11]), ((0,), (1,)))


def test_linear_cka_invariances():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(50, 6))
  q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
  assert linear_cka(x, 3.0 * x @ q) == pytest.approx(1.0, abs=1e-9)
  assert linear_cka(x, rng.normal(size=(50, 6))) < 0.5


def test_probe_and_mia_on_known_cases():
  rng = np.random.default_rng(0)
  y = np.arange(80) % 2
  z = np.stack([y * 4.0 + rng.normal(size=80), rng.normal(size=80)], 1)
  assert linear_probe_accuracy(z[:40], y[:40], z[40:], y[40:]) > 95
  # Perfectly confident members vs uniform non-members: loss-MIA AUC = 1.
  members = np.tile([[10.0, -10.0]], (20, 1))
  outsiders = np.zeros((20, 2))
  assert mia.loss_mia_auc(members, np.zeros(20, int), outsiders, np.zeros(20, int)) == 1.0
  eff = mia.svc_mia_efficacy(members, np.zeros(20, int), outsiders, np.zeros(20, int), outsiders[:5], np.zeros(5, int))
  assert eff == 100.0


def test_avg_gap_definition():
  ref = {"UA": 5.0, "RA": 100.0, "TA": 90.0, "MIA": 10.0}
  assert evaluate.avg_gap({"UA": 7.0, "RA": 98.0, "TA": 90.0, "MIA": 14.0}, ref) == pytest.approx(2.0)
