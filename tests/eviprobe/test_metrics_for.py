"""pipeline.aurc and metrics_for's common-error-set columns, on hand-computed cases."""

import numpy as np
import pytest

from jaxml.eviprobe import pipeline as pl


def test_aurc_hand_computed_and_order_of_ties_free():
  # most certain first: wrong pattern [0, 1, 0, 1] -> risks 0, 1/2, 1/3, 2/4 -> mean 1/3
  assert pl.aurc(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0, 1, 0, 1])) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
  # a perfect ranking has the lowest AURC; its reverse the highest
  wrong = np.array([0, 0, 0, 1, 1])
  best, worst = pl.aurc(np.arange(5.0), wrong), pl.aurc(-np.arange(5.0), wrong)
  assert best < pl.aurc(np.array([0.0, 3.0, 1.0, 2.0, 4.0]), wrong) < worst
  # all tied: every prefix carries the mean error rate, whatever the input order
  assert pl.aurc(np.zeros(5), wrong) == pytest.approx(0.4)
  assert pl.aurc(np.zeros(5), wrong[::-1]) == pytest.approx(0.4)


def test_metrics_for_scores_the_same_misc_against_other_error_sets():
  labels = np.array([0, 1, 1, 0, 2, 2])
  own = np.array([0, 1, 0, 0, 2, 1])            # wrong on nodes 2, 5
  other = np.array([1, 1, 1, 0, 2, 2])          # wrong on node 0
  s = {"ood": np.zeros(6), "misc": np.array([0.9, 0.1, 0.8, 0.2, 0.3, 0.7]), "pred": own,
       "probs": np.full((6, 3), 1.0 / 3)}
  ids = np.arange(6)
  m = pl.metrics_for(s, np.array([], int), ids, labels, ref_preds={"self": own, "other": other})
  assert m["misc_auroc_self"] == pytest.approx(m["misc_auroc"]) == pytest.approx(6 / 8)   # node 0 (0.9) outranks both errors
  assert m["misc_auroc_other"] == pytest.approx(1.0)                                             # node 0 has the top score
  assert m["acc"] == pytest.approx(4 / 6) and "aurc" in m
