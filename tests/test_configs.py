"""Every config builds for every preset; every config leaf is read; every experiment runs end to end.

`test_smoke_run_reads_every_config_leaf` is the suite's one end-to-end run of each experiment's smoke preset
(the preset `make demo` runs, with the shorter run lengths of `SHORTER`): a subprocess with JAXML_CONFIG_READS
set (the launcher then dumps the leaves and the leaves read) that must write a well-formed results.json and
read every leaf. One case per experiment: `pytest tests/test_configs.py -k sol_ordinal`.
Experiments with a `plan(config)` are also checked for every preset, in-process.
"""

import importlib
import json
import os
import pathlib
import subprocess
import sys

import ml_collections
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted(p.stem for p in (ROOT / "configs").glob("*.py") if p.stem not in ("__init__", "common"))
EXPERIMENTS = ("mlp_digits", "smile_uci", "emf_generate", "sol_ordinal", "unlearning", "eviprobe_graphs",
               "causal_reward")
LAUNCHER_READS = {"preset", "tensorboard"}   # read by experiments.common.launch itself


@pytest.mark.parametrize("name", CONFIGS)
def test_config_builds_for_every_preset(name):
  module = importlib.import_module(f"configs.{name}")
  assert f"experiments.{name}" in (module.__doc__ or ""), "docstring must hold the launch command"
  for preset in module.PRESETS:
    config = module.get_config(preset)
    assert isinstance(config, ml_collections.ConfigDict)
    assert config.preset == preset
    assert "seed" in config and "optim" in config


@pytest.mark.parametrize("name", CONFIGS)
def test_docstring_launch_commands_parse(name):
  """Every `--config=configs/<name>.py:<arg>` shown in the docstring builds (e.g. eviprobe's
  `:smoke:path=…`, once written `:smoke,path=…`, which the parser rejects)."""
  import re
  module = importlib.import_module(f"configs.{name}")
  args = re.findall(rf"--config=configs/{name}\.py(?::(\S+))?", module.__doc__ or "")
  assert args, "docstring must show a --config=configs/<name>.py command"
  for arg in args:
    config = module.get_config(arg or None)
    assert config.preset == (arg or module.PRESETS[0]).split(":")[0]


def test_parse_arg_rejects_unknown_presets_and_keys():
  from configs import common
  preset, arg = common.parse_arg("small:dataset=x,steps=5", ("smoke", "small"), dataset="a", steps=1)
  assert preset == "small" and arg.dataset == "x" and arg.steps == 5
  with pytest.raises(ValueError, match="unknown preset"):
    common.parse_arg("big", ("smoke", "small"))
  with pytest.raises(ValueError, match="unknown config argument"):
    common.parse_arg("smoke:colour=red", ("smoke",), dataset="a")


def test_read_tracking_records_leaves_through_every_access_path():
  from experiments import common
  config = ml_collections.ConfigDict({"a": 1, "b": {"c": 2, "d": 3, "e": {"f": 4}}, "g": (1, 2), "h": 5})
  reads = common.track_reads(config)
  assert sorted(common.config_leaves(config)) == ["a", "b.c", "b.d", "b.e.f", "g", "h"]
  _ = config.a, config["b"]["c"], config.b.get("d"), config.get("missing", 0)
  assert reads == {"a", "b.c", "b.d"}
  _ = config.b.e                     # reaching a section is not reading its leaves
  assert "b.e.f" not in reads
  assert common.override_keys(["--config=x.py", "--config.b.c=3", "--noconfig.flag", "--workdir=w"]) == ["b.c", "flag"]


# Shorter runs of the smoke presets: only run lengths and data sizes, never a method, data set or section, so the
# smoke run takes the same code paths and reads the same leaves (an override is itself checked: a leaf the run
# never reads makes the launcher fail). A shortened run can only read fewer leaves, never more.
SHORTER = {
    "eviprobe_graphs": ("train.max_epochs=4", "gpn.max_epochs=4", "gpn.warmup_epochs=2", "epn.steps=4",
                        "ensemble_size=2", "mc_samples=2"),
    "emf_generate": ("num_steps=4", "classifier.steps=4"),
    "causal_reward": ("epochs=1", "synthetic.n_train=512", "synthetic.n_val=128", "synthetic.n_test=256",
                      "synthetic.pool_size=256", "synthetic.bon_prompts=8", "synthetic.bon_candidates=16",
                      "synthetic.probe_steps=4"),
    "smile_uci": ("smile.member_epochs=2", "smile.budget_epochs=6", "smile.member_max_steps=16", "smile.num_samples=4"),
    "sol_ordinal": ("train.steps=40",),
    "unlearning": ("train.epochs=2.0",),
}


def _smoke_reads(name: str, tmp_path: pathlib.Path) -> dict:
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(JAXML_CONFIG_READS=str(tmp_path / "reads.json"), JAXML_COMPILATION_CACHE="0")
  shorter = [f"--config.{o}" for o in SHORTER.get(name, ())]
  proc = subprocess.run([sys.executable, "-m", f"experiments.{name}", f"--config=configs/{name}.py:smoke",
                         f"--workdir={tmp_path / 'run'}", *shorter], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads((tmp_path / "reads.json").read_text())


def _check_emf_generate(rows: list[dict], run: pathlib.Path) -> None:
  """EMF's table: floors, every trained variant at every NFE, and headlines chosen on validation only."""
  from jaxml.emf import evaluate
  config = importlib.import_module("configs.emf_generate").get_config("smoke")
  by = {r["method"]: r["metrics"] for r in rows}
  dataset, = config.datasets
  primary = evaluate.PRIMARY[dataset]
  assert {"floor_real", "floor_mean", "floor_noise"} <= set(by)
  assert by["floor_real"][primary] < by["floor_mean"][primary] and by["floor_real"][primary] < by["floor_noise"][primary]
  families = {"fm": "flow", "ct": "consistency"}
  for head in config.methods:
    ks = config.nfe[families.get(head, "flow_map")]
    ps = (0,) if head == "fm" else tuple(int(p) for p in config.weightings)
    assert all(f"{head}/p{p}@{k}" in by and f"{head}@{k}" in by for p in ps for k in ks), head
    # The headline copies the weighting whose validation score is best (never the test score), at every NFE.
    chosen = int(by[f"{head}@1"]["chosen_p"])
    val = {p: by[f"{head}/p{p}@1"][f"val_{primary}"] for p in ps}
    assert val[chosen] == min(val.values()), head
    for k in ks:
      assert by[f"{head}@{k}"][primary] == by[f"{head}/p{chosen}@{k}"][primary], (head, k)
  # CT@2's re-noise time is one of the candidates, kept per trained variant, and copied by the headline.
  for p in config.weightings:
    row = by[f"ct/p{int(p)}@2"]
    assert row["chosen_t_mid"] in config.ct_t_mid and row[f"val_{primary}"] != row[primary]   # chosen on validation
  assert by["ct@2"]["chosen_t_mid"] == by[f"ct/p{int(by['ct@2']['chosen_p'])}@2"]["chosen_t_mid"]
  assert "chosen_t_mid" not in by["ct@1"] and "chosen_t_mid" not in by["emf_u@2"]
  for m, r in by.items():
    if not m.startswith("floor"):
      assert r["not_learned"] == float(r[primary] >= by["floor_noise"][primary]), m
  assert (run / f"{dataset}_samples.png").exists() and "floor_noise" in (run / "summary.md").read_text()


def _check_sol_ordinal(rows: list[dict], run: pathlib.Path) -> None:
  """SOL's table: every decoder's row, the headline decoder chosen on validation, relabelling diagnostics, the
  summary against the best baseline, and a rerun that reads the finished runs back instead of training."""
  from experiments import sol_ordinal
  from jaxml import sol
  config = importlib.import_module("configs.sol_ordinal").get_config("smoke")
  for o in SHORTER["sol_ordinal"]:
    key, value = o.split("=")
    config.train[key.split(".")[1]] = int(value)
  methods = {r["method"] for r in rows}
  assert set(config.methods) | {f"sol[{d}]" for d in sol.DECODERS} <= methods
  for r in rows:
    assert 0 <= r["metrics"]["mae"] <= 9 and r["metrics"]["corruption"] > 0, r
  sol_row = next(r for r in rows if r["method"] == "sol")
  assert {"flag_precision", "flag_recall", "label_mae_after", "decoder"} <= set(sol_row["metrics"])
  chosen = sol.DECODERS[int(sol_row["metrics"]["decoder"])]
  assert next(r for r in rows if r["method"] == f"sol[{chosen}]")["metrics"]["mae"] == sol_row["metrics"]["mae"]
  summary, = json.loads((run / "summary.json").read_text())
  assert summary["datasets"]["machinecpu"]["best_baseline"] in set(config.methods) & set(sol.BASELINES)
  again = sol_ordinal.run(config, str(run))
  assert [r["metrics"]["mae"] for r in again] == [r["metrics"]["mae"] for r in rows]


def _check_smile_uci(rows: list[dict], run: pathlib.Path) -> None:
  """SMILE's table: a row per method plus the validation-chosen smile_best and psmile_best, the predictive metrics,
  and the sampling cost (equal per-chain PEG for the minibatch samplers on the same budget; pSMILE costs more than
  DE)."""
  config = importlib.import_module("configs.smile_uci").get_config("smoke")
  assert {r["method"] for r in rows} == set(config.smile.methods) | {"smile_best", "psmile_best"}
  for r in rows:
    assert r["metrics"]["lppd"] is not None and r["cost"]["peg"] > 0, r
    assert {"rmse", "coverage_80", "coverage_90", "coverage_95", "cal_error"} <= set(r["metrics"]), r
  by = {r["method"]: r for r in rows}
  assert by["psmile"]["cost"]["sampler_peg"] == pytest.approx(by["sgld"]["cost"]["sampler_peg"], rel=0.1)
  assert by["psmile"]["cost"]["peg"] > by["de"]["cost"]["peg"]
  assert (run / "lppd_vs_peg.png").exists()


def _check_causal_reward(rows: list[dict], run: pathlib.Path) -> None:
  """Causal reward's table: every method and the two rule rewards, CRM-N's full metric set, the length rule's
  training accuracy (the benchmark's rho = 0.9), and the best-of-N curves for N = 1..16 (SHORTER's 16 candidates)."""
  config = importlib.import_module("configs.causal_reward").get_config("smoke")
  assert {r["method"] for r in rows} == set(config.methods) | {"rule_length", "rule_sycophancy"}
  crm_row = next(r for r in rows if r["method"] == "crm_n")["metrics"]
  for key in ("acc_id", "acc_gold", "acc_anti", "corr_length", "do_length", "do_sycophancy", "zn_pref_id",
              "zn_pref_gold", "zn_pref_anti", "zc_pref_gold", "zc_length_r2", "zn_sycophancy_r2", "bon_gold_max",
              "bon_hack_max", "gao_alpha"):
    assert key in crm_row and crm_row[key] is not None, key
  rule = next(r for r in rows if r["method"] == "rule_length")["metrics"]
  assert abs(rule["acc_train"] - 0.9) < 0.01
  assert (run / "bon_synthetic_rho0.9.png").exists()
  curves = json.loads((run / "curves.json").read_text())
  assert len(curves["bon_curves"]["synthetic_rho0.9"]["vanilla"][0]["gold"]) == 5   # N = 1..16


# Extra checks of one experiment's smoke results.json rows (and its run folder).
ROW_CHECKS = {"emf_generate": _check_emf_generate, "sol_ordinal": _check_sol_ordinal, "smile_uci": _check_smile_uci,
              "causal_reward": _check_causal_reward}


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_smoke_run_reads_every_config_leaf(name, tmp_path):
  got = _smoke_reads(name, tmp_path)
  results = json.loads((tmp_path / "run" / "results.json").read_text())     # the one end-to-end run of `name`
  assert results["experiment"] == name and results["preset"] == "smoke" and results["rows"]
  for r in results["rows"]:
    assert set(r) == {"method", "dataset", "split", "seed", "metrics", "cost"}, r
    assert all(v is None or isinstance(v, float) for v in r["metrics"].values()), r
  if name in ROW_CHECKS:
    ROW_CHECKS[name](results["rows"], tmp_path / "run")
  unread = sorted(set(got["leaves"]) - set(got["read"]))
  assert not unread, f"{name}: config leaves never read by the smoke run: {unread}"
  module = importlib.import_module(f"experiments.{name}")
  if hasattr(module, "plan"):   # the plan (run before anything is written) must cover what the run reads
    from experiments import common
    config = importlib.import_module(f"configs.{name}").get_config("smoke")
    reads = common.track_reads(config)
    module.plan(config)
    assert set(got["read"]) <= reads | LAUNCHER_READS, sorted(set(got["read"]) - reads - LAUNCHER_READS)


@pytest.mark.parametrize("name", [n for n in EXPERIMENTS
                                  if hasattr(importlib.import_module(f"experiments.{n}"), "plan")])
def test_plan_reads_every_leaf_for_every_preset(name):
  from experiments import common
  module = importlib.import_module(f"configs.{name}")
  for preset in module.PRESETS:
    config = module.get_config(preset)
    reads = common.track_reads(config)
    importlib.import_module(f"experiments.{name}").plan(config)
    unread = sorted(set(common.config_leaves(config)) - reads - LAUNCHER_READS)
    assert not unread, f"{name}:{preset}: leaves the plan never reads: {unread}"


def _launch(tmp_path, *overrides):
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  return subprocess.run([sys.executable, "-m", "experiments.mlp_digits", "--config=configs/mlp_digits.py:smoke",
                         f"--workdir={tmp_path / 'out'}", *overrides], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=240)


@pytest.mark.slow
def test_unread_override_fails_before_writing_like_an_unknown_key(tmp_path):
  """With only the linear model, model.dropout is never used: setting it is an error, not a no-op."""
  unread = _launch(tmp_path, "--config.methods=('linear',)", "--config.model.dropout=0.5")
  unknown = _launch(tmp_path, "--config.model.dropoutt=0.5")
  for proc in (unread, unknown):
    assert proc.returncode == 2
    line, = proc.stderr.strip().splitlines()[:1]
    assert line.startswith("error: bad --config override or config file (")
    assert line.endswith("); check the key against the config file")
  assert "model.dropout" in unread.stderr
  assert not (tmp_path / "out").exists()
