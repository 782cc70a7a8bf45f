"""experiments.smile_uci.merge: several runs' results.json as one table, paired comparison and figure."""

import json
import os
import subprocess
import sys

import pytest

from experiments import common, smile_uci

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
  rows = smile_uci.merge([a, b], out)
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
  assert smile_uci.summarize(single, str(tmp_path / "one"), {"airfoil"}) == rows


def test_merge_rejects_a_row_in_two_runs(tmp_path):
  _fake_run(str(tmp_path / "a"), "yacht", (0, 1))
  _fake_run(str(tmp_path / "b"), "yacht", (1, 2))
  with pytest.raises(ValueError, match="more than one of the merged runs"):
    smile_uci.merge([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out"))


def test_anchor_line_only_on_the_authors_splits():
  assert smile_uci.data_protocol("auto", "airfoil") == "smile"
  assert smile_uci.data_protocol("auto", "energy") == "standard"
  assert smile_uci.data_protocol("smile", "energy") == "smile"


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
