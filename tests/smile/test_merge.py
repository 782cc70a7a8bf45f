"""experiments.smile_report.merge: several runs' results.json as one table, paired comparison and figure."""

import json
import os
import subprocess
import sys

import pytest

from experiments import common, smile_report
from jaxml.smile import pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Per (dataset): method -> (valid LPPD, test LPPD) on every split; split s adds 0.01 * s to both.
# yacht: psmile wins validation and beats both baselines; airfoil: psmile_naive wins validation, loses to SGHMC.
TABLE = {"yacht": {"smile_naive": (-1.2, -1.3), "psmile_naive": (-1.1, -1.25), "psmile": (-1.0, -1.0),
                   "sgld": (None, -1.2), "sghmc": (None, -1.1)},
         "airfoil": {"smile_naive": (0.5, 0.4), "psmile_naive": (0.6, 0.1), "psmile": (0.2, 0.3),
                     "sgld": (None, 0.05), "sghmc": (None, 0.2)}}


def _fake_run(workdir, dataset: str, splits, protocol: str = "auto") -> None:
  """A results.json + config.json as `common.launch` writes them, with a stale chosen row in it."""
  rows = []
  for split in splits:
    for m, (valid, test) in TABLE[dataset].items():
      metrics = {"lppd": test + 0.01 * split, "rmse": 1.0}
      if valid is not None:
        metrics["valid_lppd"] = valid + 0.01 * split
      rows.append(common.row(method=m, dataset=dataset, split=split, seed=0, metrics=metrics,
                             cost={"peg": 1e5, "wall_s": 1.0}))
  rows.append(dict(rows[0], method="smile_best"))     # wrong on purpose: a merge recomputes chosen rows
  os.makedirs(workdir)
  common.write_json(os.path.join(workdir, "results.json"),
                    {"experiment": "smile_uci", "preset": "uci11", "rows": rows, "wall_s": 10.0, "env": {}})
  common.write_json(os.path.join(workdir, "config.json"), {"smile": {"protocol": protocol, "datasets": [dataset]}})


def test_merge_recomputes_choices_and_counts_paired_wins(tmp_path):
  a, b, out = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "out")
  _fake_run(a, "yacht", (0, 1, 2))
  _fake_run(b, "airfoil", (1, 2, 3))
  rows = smile_report.merge([a, b], out)
  by = {(r["method"], r["dataset"], r["split"]): r["metrics"] for r in rows}
  assert len(rows) == 2 * 3 * (5 + 2)       # 5 methods + smile_best + psmile_best per (set, split)
  for split in (0, 1, 2):
    assert by["smile_best", "yacht", split]["lppd"] == by["psmile", "yacht", split]["lppd"]
    assert by["psmile_best", "yacht", split]["chosen"] == 1.0       # index of psmile in (psmile_naive, psmile)
  for split in (1, 2, 3):
    assert by["smile_best", "airfoil", split]["lppd"] == by["psmile_naive", "airfoil", split]["lppd"]
    assert by["psmile_best", "airfoil", split]["chosen"] == 0.0
  text = open(os.path.join(out, "summary.md")).read()
  # psmile_best vs SGLD: +0.2 (yacht), +0.05 (airfoil); vs SGHMC: +0.1, -0.1 -> both at once on 1 of 2.
  assert "`psmile_best` ≥ `sgld` on 2 of 2 datasets; `psmile_best` ≥ `sghmc` on 1 of 2 datasets; " \
         "≥ every one of them on 1 of 2 datasets" in text
  assert "`psmile` ≥ `sgld` on 2 of 2 datasets" in text and "### smile_best (SMILE variant" in text
  assert "| dataset | smile_naive | psmile_naive | psmile | sgld | sghmc | smile_best | psmile_best |" in text
  assert "| airfoil | 0.420 ± 0.006 | 0.120 ± 0.006 | 0.320 ± 0.006 | 0.070 ± 0.006 | 0.220 ± 0.006 | 0.120 ± 0.006 " \
         "| 0.120 ± 0.006 |" in text
  assert os.path.getsize(os.path.join(out, "lppd_vs_peg.png")) > 0
  res = json.load(open(os.path.join(out, "results.json")))
  assert res["sources"] == [a, b] and res["wall_s"] == 20.0 and len(res["rows"]) == len(rows)
  assert all(set(r) == {"method", "dataset", "split", "seed", "metrics", "cost"} for r in res["rows"])
  # The same rows summarised as one run give the same chosen rows.
  single = json.load(open(os.path.join(a, "results.json")))["rows"] + json.load(open(os.path.join(b, "results.json")))["rows"]
  os.makedirs(tmp_path / "one")
  assert smile_report.summarize(single, str(tmp_path / "one"), {"airfoil"}) == rows


def test_merge_rejects_a_row_in_two_runs(tmp_path):
  _fake_run(str(tmp_path / "a"), "yacht", (0, 1))
  _fake_run(str(tmp_path / "b"), "yacht", (1, 2))
  with pytest.raises(ValueError, match="more than one of the merged runs"):
    smile_report.merge([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out"))


def test_anchor_line_only_on_the_authors_splits():
  assert smile_report.data_protocol("auto", "airfoil") == "smile"
  assert smile_report.data_protocol("auto", "energy") == "standard"
  assert smile_report.data_protocol("smile", "energy") == "smile"


@pytest.mark.slow
def test_merge_command_line(tmp_path):
  _fake_run(str(tmp_path / "a"), "yacht", (0,))
  _fake_run(str(tmp_path / "b"), "airfoil", (1,))
  out = str(tmp_path / "out")
  cmd = [sys.executable, "-m", "experiments.smile_uci", f"--merge={tmp_path / 'a'},{tmp_path / 'b'}", f"--workdir={out}"]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  assert {r["dataset"] for r in json.load(open(os.path.join(out, "results.json")))["rows"]} == {"yacht", "airfoil"}
  bad = subprocess.run(cmd[:-2] + [f"--merge={tmp_path / 'missing'}", f"--workdir={out}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  assert bad.returncode == 2 and "error:" in bad.stderr


def _grid_row(method, split, valid, test, grid_peg=3.0, eps=1e-2):
  return common.row(method=method, dataset="yacht", split=split, seed=0,
                    metrics={"lppd": test, "rmse": 1.0, "valid_lppd": valid, "step_size0": eps},
                    cost={"peg": 1e5, "sampler_peg": 1.0, "grid_peg": grid_peg, "wall_s": 2.0})


def test_extend_grid_chooses_by_validation_over_the_union_grid():
  de = common.row(method="de", dataset="yacht", split=0, seed=0, metrics={"lppd": -3.0, "rmse": 2.0},
                  cost={"peg": 1e4, "wall_s": 1.0})
  base = [de, _grid_row("psmile_clamp", 0, -1.0, -1.1), _grid_row("sgld", 0, -0.5, -0.6),
          _grid_row("psmile", 0, 0.0, 0.0),                     # tuned pSMILE: not extended, dropped
          dict(de, split=1), _grid_row("sgld", 1, -0.5, -0.6)]  # split 1: not in the extension, dropped
  extra = [_grid_row("psmile_clamp", 0, -0.9, -1.5, grid_peg=1.0, eps=3e-2),   # higher validation: chosen
           _grid_row("sgld", 0, -0.7, 0.5, grid_peg=1.0, eps=3e-4)]            # better test, lower validation
  out = pipeline.extend_grid(base, extra)
  rows = {r["method"]: r for r in out}
  assert len(out) == 3 and set(rows) == {"de", "psmile_clamp", "sgld"} and rows["de"] == de
  assert rows["psmile_clamp"]["metrics"] == extra[0]["metrics"]     # chosen on validation, not on test
  assert rows["sgld"]["metrics"] == base[2]["metrics"]
  assert rows["psmile_clamp"]["cost"]["grid_peg"] == rows["sgld"]["cost"]["grid_peg"] == 4.0
  assert rows["psmile_clamp"]["cost"]["wall_s"] == 4.0 and rows["psmile_clamp"]["cost"]["sampler_peg"] == 1.0
  assert base[1]["cost"]["grid_peg"] == 3.0                        # inputs untouched
  diverged = _grid_row("sgld", 0, float("-inf"), float("nan"), grid_peg=1.0, eps=3e-4)   # all chains diverged: nulls
  assert {r["method"]: r for r in pipeline.extend_grid(base, [diverged])}["sgld"]["metrics"] == base[2]["metrics"]
  with pytest.raises(ValueError, match="without a base row"):
    pipeline.extend_grid(base, [_grid_row("sgld", 2, 0.0, 0.0)])
  with pytest.raises(ValueError, match="no ε₀ grid"):
    pipeline.extend_grid(base, [de])


def test_check_extension_needs_the_same_protocol_and_new_step_sizes():
  base = {"protocol": "auto", "budget_steps": 1200, "datasets": ["yacht"], "methods": ["de", "sgld"],
          "smile_step_size": [1e-2, 1e-3], "sgld_step_size": [1e-5]}
  pipeline.check_extension(base, base | {"datasets": ["boston"], "methods": ["sgld"], "smile_step_size": [3e-2],
                                          "sgld_step_size": [3e-4]})
  with pytest.raises(ValueError, match="repeats"):
    pipeline.check_extension(base, base | {"smile_step_size": [3e-2, 1e-2]})
  with pytest.raises(ValueError, match="budget_steps"):
    pipeline.check_extension(base, base | {"smile_step_size": [3e-2], "sgld_step_size": [3e-4],
                                            "budget_steps": 2400})


def test_merge_extend_recomputes_the_chosen_rows(tmp_path):
  base, ext, out = str(tmp_path / "base"), str(tmp_path / "ext"), str(tmp_path / "out")
  cfg = {"protocol": "auto", "datasets": ["yacht"], "smile_step_size": [1e-2]}
  for w, rows, c in ((base, [_grid_row("smile_naive", 0, -2.0, -2.0), _grid_row("psmile_naive", 0, -1.0, -1.0),
                             _grid_row("psmile_clamp", 0, -0.8, -2.0), _grid_row("sgld", 0, 0.0, -1.5)], cfg),
                     (ext, [_grid_row("smile_naive", 0, -3.0, 0.0, eps=3e-2),
                            _grid_row("psmile_naive", 0, -0.5, -1.2, eps=3e-2),
                            _grid_row("psmile_clamp", 0, -0.9, 0.0, eps=3e-2)], cfg | {"smile_step_size": [3e-2]})):
    os.makedirs(w)
    common.write_json(os.path.join(w, "results.json"), {"experiment": "smile_uci", "rows": rows, "wall_s": 5.0})
    common.write_json(os.path.join(w, "config.json"), {"smile": c})
  rows = {r["method"]: r for r in smile_report.merge([base], out, extend=[ext])}
  # psmile_naive's 3e-2 row now wins validation over psmile_clamp's 1e-2 row (-0.5 > -0.8): it is psmile_best.
  assert rows["psmile_naive"]["metrics"]["step_size0"] == 3e-2 and rows["psmile_clamp"]["metrics"]["step_size0"] == 1e-2
  assert rows["psmile_best"]["metrics"]["lppd"] == rows["smile_best"]["metrics"]["lppd"] == -1.2
  assert "sgld" not in rows and rows["smile_naive"]["metrics"]["lppd"] == -2.0     # sgld: grid not extended
  res = json.load(open(os.path.join(out, "results.json")))
  assert res["sources"] == [base, ext] and res["wall_s"] == 10.0
  with pytest.raises(ValueError, match="repeats"):
    smile_report.merge([base], str(tmp_path / "out2"), extend=[base])


def test_plot_survives_a_data_set_where_every_row_diverged(tmp_path):
  """A run whose only sampler diverged on every chain (lppd null) still gets its figure (an empty panel)."""
  rows = [_grid_row("sgld", 0, float("-inf"), float("nan"), eps=1e-3), _grid_row("sgld", 1, -1.0, -1.1)]
  assert rows[0]["metrics"]["lppd"] is None
  rows[1] = dict(rows[1], dataset="airfoil")
  smile_report.make_plot(rows, str(tmp_path), anchored=set())
  assert os.path.getsize(tmp_path / "lppd_vs_peg.png") > 0


def test_plot_marks_points_below_the_panel_range(tmp_path, monkeypatch):
  """The y-range starts near the 15th percentile of the panel's LPPDs; a method below it (DE's σ = 1 members)
  gets a labelled arrow at the bottom edge instead of vanishing from the figure."""
  figs = []
  monkeypatch.setattr(smile_report.common, "save_plot", lambda fig, workdir, name: figs.append(fig))
  de = common.row(method="de", dataset="yacht", split=0, seed=0, metrics={"lppd": -3.5, "rmse": 2.0},
                  cost={"peg": 1e4, "wall_s": 1.0})
  rows = [de] + [_grid_row(m, 0, -1.0, lppd) for m, lppd in (("psmile_naive", -1.0), ("psmile_clamp", -1.05),
                                                              ("sgld", -1.2), ("sghmc", -1.1), ("smile_naive", -1.15))]
  smile_report.make_plot(rows, str(tmp_path), anchored=set())
  ax = figs[0].axes[0]
  lo = ax.get_ylim()[0]
  assert -3.5 < lo < -1.2
  assert [t.get_text() for t in ax.texts] == ["de -3.50"]   # only the point below the range is marked
  assert ax.texts[0].xy[1] == pytest.approx(lo)
