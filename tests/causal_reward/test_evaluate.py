"""Paired differences between variants over seeds, and the accuracy readout."""

import numpy as np

from jaxml.causal_reward import evaluate


def _row(method, seed, value, dataset="d"):
  return {"method": method, "dataset": dataset, "seed": seed, "metrics": {"acc": value}}


def test_paired_differences_pair_by_seed_and_leave_out_diverged_runs():
  rows = [_row("base", s, v) for s, v in enumerate([0.5, 0.6, 0.7, 0.8])]
  rows += [_row("var", s, v) for s, v in enumerate([0.6, 0.6, 0.9, None])]   # seed 3 diverged (null)
  rows += [_row("var", 9, 0.1)]                                              # no base for seed 9
  out = evaluate.paired_differences(rows, base="base", variant="var", metrics=("acc", "missing"))
  d = np.array([0.1, 0.0, 0.2])
  assert set(out["d"]) == {"acc"}
  got = out["d"]["acc"]
  np.testing.assert_allclose([got["mean"], got["se"]], [d.mean(), d.std(ddof=1) / np.sqrt(3)])
  assert (got["n"], got["diverged"]) == (3, 1)


def test_paired_differences_of_a_method_with_itself_are_zero_and_skip_other_datasets():
  rows = [_row("a", s, s * 0.1) for s in range(3)] + [_row("b", 0, 1.0, dataset="other")]
  out = evaluate.paired_differences(rows, base="a", variant="a", metrics=("acc",))
  assert out["d"]["acc"]["mean"] == 0.0 and "other" not in out


def test_corr_is_zero_for_constants():
  assert evaluate.corr(np.ones(5), np.arange(5.0)) == 0.0
  np.testing.assert_allclose(evaluate.corr(np.arange(5.0), 2 * np.arange(5.0)), 1.0)


def test_one_pair_has_no_standard_error():
  rows = [_row("a", 0, 0.5), _row("b", 0, 0.7)]
  got = evaluate.paired_differences(rows, base="a", variant="b", metrics=("acc",))["d"]["acc"]
  assert got["se"] is None and abs(got["mean"] - 0.2) < 1e-12


def test_ablation_pairs_match_each_removed_term_to_its_base():
  rows = [_row(m, s, v + s) for m, v in (("m", 0.5), ("m_noa", 0.4), ("m_nob", 0.7), ("other", 0.0)) for s in range(2)]
  out = evaluate.ablation_pairs(rows, ("acc",))
  assert set(out) == {"m_noa - m", "m_nob - m"}
  np.testing.assert_allclose(out["m_noa - m"]["d"]["acc"]["mean"], -0.1)
