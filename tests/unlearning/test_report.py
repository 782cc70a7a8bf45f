"""The unlearning reports from result rows: cell order, the class sweep and the collision split."""

import numpy as np

from jaxml.unlearning import report


def _row(cell, method, seed=0, **metrics):
  return {"dataset": cell, "method": method, "seed": seed, "metrics": metrics, "cost": {}}


def _sweep_rows():
  rows = []
  for c, hit in ((10, 0.0), (2, 1.0), (0, 0.0)):
    cell = f"d/class/{c}"
    rows.append(_row(cell, "original", head_mean_argmax=2.0, head_mean_pmax=0.7, mean_is_forget_class=hit, FA=100.0))
    rows += [_row(cell, "ru", s, FA=60.0 + s if hit else 0.0 + s) for s in (0, 2)]   # mean over seeds: 61 / 1
  return rows + [_row("d/random", "ru", FA=5.0)]


def test_cells_sort_regimes_then_classes_numerically():
  assert report.cells(_sweep_rows()) == ["d/class/0", "d/class/2", "d/class/10", "d/random"]
  assert report.sweep_cells(_sweep_rows()) == ["d/class/0", "d/class/2", "d/class/10"]
  assert report.first_sweep_cells(_sweep_rows()) == ["d/class/0"]


def test_sweep_series_marks_the_colliding_class_and_averages_seeds():
  xs, hit, fa = report.sweep_series(_sweep_rows(), "d", ("ru", "ru_uniform"))
  assert xs == [0, 2, 10] and hit == [False, True, False]
  assert list(fa) == ["ru"]                     # a method without rows is left out
  np.testing.assert_allclose(fa["ru"], [1.0, 61.0, 1.0])
  _, _, pmax = report.sweep_series(_sweep_rows(), "d", ("original", "ru"), key="head_mean_pmax")   # another key
  assert list(pmax) == ["original"] and pmax["original"] == [0.7, 0.7, 0.7]     # ru's rows have no such metric


def test_forget_acc_table_splits_colliding_and_other_classes():
  lines = report.forget_acc_tables(_sweep_rows(), ["original", "ru", "gkt"]).splitlines()
  ru = next(line for line in lines if line.startswith("| RU (ours)"))
  assert [c.strip() for c in ru.split("|")[1:-1]] == ["RU (ours)", "1.0", "61.0", "1.0", "21.0", "61.0", "1.0"]
  assert any(line.startswith("| argmax h(mean z) (p) | 2 (0.70)") for line in lines)
  assert not any("GKT" in line for line in lines)
  assert not any("z-neighbours" in line for line in lines)     # rows without the overlap: no such row
  # Seeds whose heads disagree on the class at the mean are listed per seed, not averaged into a class.
  rows = _sweep_rows() + [_row("d/class/0", "original", 1, head_mean_argmax=7.0, head_mean_pmax=0.5,
                               mean_is_forget_class=0.0, FA=100.0)]
  arg = next(line for line in report.forget_acc_tables(rows, ["ru"]).splitlines() if line.startswith("| argmax"))
  assert [c.strip() for c in arg.split("|")[2:5]] == ["2/7 (0.60)", "2 (0.70)", "2 (0.70)"]
  rows = [r | {"metrics": r["metrics"] | {"retain_knn_forget": 10.0 * i}} if r["method"] == "original" else r
          for i, r in enumerate(_sweep_rows())]
  near = next(line for line in report.forget_acc_tables(rows, ["ru"]).splitlines() if "z-neighbours" in line)
  # original rows of classes 10, 2, 0 are rows 0, 3, 6 -> 0, 30, 60; in class order 0, 2, 10: 60, 30, 0
  assert [c.strip() for c in near.split("|")[2:6]] == ["60.0", "30.0", "0.0", "30.0"]


def test_must_reach_checks_forget_gap_to_retrain_and_accuracy_gaps_to_original():
  rows = []
  for c, (fa, ra, ta) in {0: (1.5, 99.5, 80.5), 1: (3.0, 100.0, 80.0), 2: (0.0, 98.0, 80.0)}.items():
    cell = f"d/class/{c}"
    rows += [_row(cell, "original", FA=100.0, RA=100.0, TA_r=80.0), _row(cell, "retrain", FA=0.0, RA=100.0, TA_r=79.0),
             _row(cell, "ru", FA=fa, RA=ra, TA_r=ta)]
  res = report.must_reach(rows, "d", "ru")
  assert {c: d["ok"] for c, d in res.items()} == {0: 1.0, 1: 0.0, 2: 0.0}   # FA 3 > 2 off; RA 2 points off
  assert res[0]["dTA_r"] == 0.5 and res[2]["dRA"] == -2.0
  assert report.must_reach(rows, "d", "gkt") == {}
  table = report.must_reach_table(rows, ["retrain", "ru"])
  assert "| RU (ours) | 1/3 |" in table and "| Retrain | 3/3 |" in table
  assert report.LABELS[report.MASKED] not in table                 # rows without the masked original: no row
  # The masked original (recorded on the original's rows): TA_r shifts of +0.5, +1.5, -0.2 -> classes 0 and 2 met.
  shifts = {"d/class/0": 0.5, "d/class/1": 1.5, "d/class/2": -0.2}
  rows = [r | {"metrics": r["metrics"] | {"mask_FA": 0.0, "mask_dRA": 0.0, "mask_dTA_r": shifts[r["dataset"]]}}
          if r["method"] == "original" else r for r in rows]
  res = report.must_reach(rows, "d", report.MASKED)
  assert {c: d["ok"] for c, d in res.items()} == {0: 1.0, 1: 0.0, 2: 1.0} and res[1]["dTA_r"] == 1.5
  assert f"| {report.LABELS[report.MASKED]} | 2/3 |" in report.must_reach_table(rows, ["ru"])


def test_pooled_sweep_puts_every_class_of_a_dataset_in_one_cell():
  pooled, cells = report.pooled_sweep(_sweep_rows())
  assert cells == ["d/class: mean ± std over 3 forgotten classes x seeds"]
  assert len(pooled) == 9 and {r["dataset"] for r in pooled} == set(cells)   # d/random left out


def test_gap_summary_picks_the_best_baseline_per_cell_by_mean_gap():
  def row(cell, method, seed, gap, rte=None):
    return {"dataset": cell, "method": method, "seed": seed, "metrics": {"avg_gap": gap},
            "cost": {} if rte is None else {"rte": rte}}
  rows = [row("d/class", "ru", s, g, 0.03) for s, g in ((0, 1.0), (1, 3.0))]           # 2.00 ± 1.00, RTE 3 %
  rows += [row("d/class", "finetune", s, g) for s, g in ((0, 0.5), (1, 4.5))]          # mean 2.5: not the best
  rows += [row("d/class", "scrub", s, 2.2) for s in (0, 1)]                              # best, 2.2 > RU's 2.0
  rows += [row("d/class", "ru_zs", s, 5.0) for s in (0, 1)] + [row("d/class", "jit", s, 4.0) for s in (0, 1)]
  rows += [row("d/random", "ru", 0, 9.0), row("d/random", "scrub", 0, 1.0)]
  rows += [row("d/class/3", "ru", 0, 0.0)]                                               # a sweep cell: left out
  lines = report.gap_summary(rows, ["finetune", "scrub", "emmn"], ["emmn", "jit"]).splitlines()
  assert len(lines) == 4
  cls = [c.strip() for c in lines[2].split("|")[1:-1]]
  assert cls == ["d/class", "2.00 ± 1.00", "n/a", "SCRUB (2.20)", "yes", "3.0 ± 0.0", "5.00 ± 0.00",
                 "JiT (zero-shot) (4.00)", "no"]
  rnd = [c.strip() for c in lines[3].split("|")[1:-1]]
  assert rnd[0] == "d/random" and rnd[3:5] == ["SCRUB (1.00)", "no"] and rnd[6:] == ["n/a", "n/a", "n/a"]
