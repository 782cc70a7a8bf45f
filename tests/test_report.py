"""The shared report library: paired matching, sign test, tables, the one formatter, plot."""

import math

import pytest

from experiments import report


def _row(method, dataset, split, value):
  return {"method": method, "dataset": dataset, "split": split, "seed": 0, "metrics": {"acc": value}, "cost": {}}


ROWS = [_row("ours", "a", s, 0.9 + 0.01 * s) for s in range(6)] + \
       [_row("base", "a", s, 0.8) for s in range(5)] + [_row("base", "b", 0, 0.5)]


def test_paired_matches_runs_and_sign_test_counts():
  a, b = report.paired(ROWS, "ours", "base", "acc")
  assert len(a) == len(b) == 5                       # split 5 of ours and dataset b of base have no partner
  st = report.sign_test(a, b)
  assert (st.wins, st.losses, st.ties) == (5, 0, 0)
  assert st.p == pytest.approx(2 * 0.5 ** 5)         # exact two-sided binomial
  assert report.sign_test(a, b, higher_is_better=False)[:2] == (0, 5)
  assert math.isnan(report.sign_test([1.0], [1.0]).p)


def test_compare_and_tables(tmp_path):
  out = report.compare(ROWS, "ours", "base", "acc")
  assert out["n"] == 5 and out["wins"] == 5 and out["mean_diff"] == pytest.approx(0.12)
  assert out["se_diff"] == pytest.approx(math.sqrt(0.00025 / 5))   # differences 0.10..0.14: sample var 2.5e-4
  assert math.isnan(report.compare(ROWS[:1] + ROWS[6:7], "ours", "base", "acc")["se_diff"])   # one pair
  assert 0 < out["wilcoxon_p"] < 0.1
  table = report.pivot_table(ROWS, "acc", higher_is_better=True)
  assert "**0.9250 ± 0.0171**" in table and "| base | 0.8000 ± 0.0000 | **0.5000** |" in table
  assert report.fmt_mean_std([None, 1.0]) == "1.0000" and report.fmt_mean_std([]) == "n/a"
  # A line per dataset, chosen methods in the given order, ± s.e. (sample std of 0.90..0.95 / sqrt 6 = 0.0076).
  table = report.pivot_table(ROWS, "acc", se=True, by_dataset=True, methods=("base", "ours"))
  assert table.splitlines()[0] == "| dataset | base | ours |"
  assert "| a | 0.8000 ± 0.0000 | 0.9250 ± 0.0076 |" in table and "| b | 0.5000 | – |" in table
  path = report.bar_plot(ROWS, "acc", str(tmp_path), "acc.png")
  assert (tmp_path / "acc.png").stat().st_size > 0 and path.endswith("acc.png")


def test_best_by_picks_on_validation_and_paired_summary_counts_datasets():
  rows = []
  for s in range(3):   # x: better validation, worse test on every split; y: the reverse
    rows += [{"method": "x", "dataset": "a", "split": s, "seed": 0, "metrics": {"val": 1.0, "acc": 0.1}, "cost": {}},
             {"method": "y", "dataset": "a", "split": s, "seed": 0, "metrics": {"val": 0.5, "acc": 0.9}, "cost": {}},
             {"method": "base", "dataset": "a", "split": s, "seed": 0, "metrics": {"acc": 0.5}, "cost": {}}]
  rows[3]["metrics"]["val"] = rows[4]["metrics"]["val"] = 0.7     # split 1: a tie goes to the earlier candidate
  best = report.best_by(rows, ("y", "x"), name="best", select="val")
  assert [r["metrics"]["chosen"] for r in best] == [1.0, 0.0, 1.0]
  assert [r["metrics"]["acc"] for r in best] == [0.1, 0.9, 0.1]
  assert all(r["method"] == "best" for r in best) and rows[0]["method"] == "x"   # inputs untouched
  text = report.paired_summary(rows + best, "best", ("base",), "acc")
  assert "on 0 of 1 datasets" in text                               # mean 0.367 < 0.5
  assert "on 1 of 1 datasets" in report.paired_summary(rows + best, "best", ("base",), "acc", higher_is_better=False)


def test_ours_vs_best_pairs_on_split_and_seed_not_row_order():
  """The per-cell sign test matches runs on (split, seed): merged runs may list a baseline in another order or
  without one of ours' runs. Ours wins on every split here; pairing by position would count losses."""
  def row(method, split, seed, v):
    return {"method": method, "dataset": "g:loc", "split": split, "seed": seed, "metrics": {"ood_auroc": v}, "cost": {}}
  ours = [row("ours", s, i, 0.60 + 0.1 * s) for s in range(3) for i in range(2)]
  base = [row("base", s, i, 0.55 + 0.1 * s) for s in reversed(range(3)) for i in (1, 0)][:-1]   # (0, 0) missing
  text = report.ours_vs_best(ours + base, ours="ours", baselines=("base",), settings=("loc",))
  assert "5 wins / 0 losses" in text


def test_frame_and_the_one_formatter():
  df = report.frame(ROWS[:2] + [dict(ROWS[0], metrics={"acc": None, "nll": 2.0})])
  assert list(df.columns) == ["method", "dataset", "split", "seed", "acc", "nll"]
  assert df["acc"].isna().tolist() == [False, False, True] and df["nll"].isna().sum() == 2
  # Non-finite values are skipped like None; population std; scale applies before formatting.
  assert report.fmt_mean_std([0.1, float("nan"), 0.3, None], 1, scale=100.0) == "20.0 ± 10.0"
  assert report.fmt_mean_std([1.0, 3.0], 2, se=True) == "2.00 ± 1.00"      # sample std sqrt(2) / sqrt(2)
  cells = report.method_cell_table(ROWS, ["a"], ["base", "ours"], [("acc", "acc %", 1, "metrics", 100.0)],
                                   {"ours": "Ours"})
  assert "| base | 80.0 ± 0.0 |" in cells and "| Ours | 92.5 ± 1.7 |" in cells and "### a (1 seed)" in cells
