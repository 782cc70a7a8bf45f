"""Trained-model properties on the synthetic benchmark (through core.fit, like the experiment)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments import causal_reward as exp
from jaxml.causal_reward import api
from jaxml.data import spurious_prefs as sp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = {"trunk_hidden": 32, "trunk_out": 16, "d_c": 8, "d_n": 8, "adv_hidden": 16, "dec_hidden": 32}


def _accuracies(cfg, params, bench):
  reward = api.make_reward_fn(cfg)
  return {k: exp.pair_accuracy(exp.batched_apply(reward, params, bench[k]["h_w"]),
                               exp.batched_apply(reward, params, bench[k]["h_l"]))
          for k in ("test_id", "test_gold", "test_anti")}


def _train(name, bench, *, seed=0, epochs=3, extra=None, full=False):
  cfg = {**(exp.VARIANTS[name][1]), "kind": exp.VARIANTS[name][0], "dim": bench["train"]["h_w"].shape[1],
         "num_cues": 2, **({} if full else SMALL), **(extra or {})}
  train = bench["oracle_train"] if name == "oracle" else bench["train"]
  params, _, _ = exp.train_reward_model(cfg, train, seed=seed, epochs=epochs, batch_size=128, name=name,
                                        progress=False)
  return cfg, params


def test_all_methods_agree_when_there_is_no_spurious_correlation():
  """rho = 0.5: the cues carry no label information, so no method hacks and all rank alike.

  Tolerance 0.1 on T-gold: with this little training the factored models still pay a small
  price for their bottleneck and decorrelation terms (measured 0.03-0.08 below vanilla here).
  """
  bench = sp.make_benchmark(11, 0.5, n_train=3072, n_val=128, n_test=2000, dim=32, renderer="linear")
  accs = {name: _accuracies(*_train(name, bench, epochs=8, extra={"lr": 3e-3}), bench) for name in exp.MAIN}
  ref = accs["vanilla"]["test_gold"]
  assert ref > 0.8, accs
  for name, acc in accs.items():
    assert abs(acc["test_gold"] - ref) < 0.1, (name, accs)
    assert abs(acc["test_gold"] - acc["test_anti"]) < 0.06, (name, accs)   # no robustness gap


@pytest.mark.slow
def test_benchmark_induces_hacking_and_crm_n_fixes_it():
  """rho = 0.9, spec sizes (10 epochs): vanilla hacks, the oracle and CRM-N do not (2 seeds)."""
  gains = []
  for seed in (0, 1):
    bench = sp.make_benchmark(seed, 0.9)
    van = _accuracies(*_train("vanilla", bench, seed=seed, epochs=10, full=True), bench)
    assert van["test_anti"] < van["test_gold"] - 0.1
    ora = _accuracies(*_train("oracle", bench, seed=seed, epochs=10, full=True), bench)
    assert ora["test_anti"] > van["test_anti"] + 0.15
    crm_n = _accuracies(*_train("crm_n", bench, seed=seed, epochs=10, full=True), bench)
    gains.append(crm_n["test_anti"] - van["test_anti"])
  assert min(gains) >= 0.15, gains


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="prototype guard not met: a fresh MLP probe reads the preference from "
                   "CRM-U's z_n at 0.80-0.86 (T-id labels) with the 10x adversary rate (0.77 without adversary); "
                   "see docs/results/causal_reward.md")
def test_crm_u_adversary_removes_preference_from_z_n():
  probe_accs = []
  for seed in (0, 1):
    bench = sp.make_benchmark(seed, 0.9)
    cfg, params = _train("crm_u", bench, seed=seed, epochs=10, full=True)
    factors = api.make_factor_fn(cfg)
    zw_tr = exp.batched_apply(factors, params, bench["train"]["h_w"])[1]
    zl_tr = exp.batched_apply(factors, params, bench["train"]["h_l"])[1]
    zw_te = exp.batched_apply(factors, params, bench["test_id"]["h_w"])[1]
    zl_te = exp.batched_apply(factors, params, bench["test_id"]["h_l"])[1]
    probe_accs.append(exp.train_probe(zw_tr, zl_tr, zw_te, zl_te, seed=seed, steps=400))
  assert max(probe_accs) <= 0.70, probe_accs


@pytest.mark.slow
def test_crm_n_reward_is_insensitive_to_interventions():
  bench = sp.make_benchmark(2, 0.9)
  cfg, params = _train("crm_n", bench, seed=2, epochs=10, full=True)
  world = bench["world"]
  resp = sp.sample_responses(world, np.random.default_rng(5), 4000)
  reward = api.make_reward_fn(cfg)
  r = exp.batched_apply(reward, params, sp.render(world, resp))
  r_len = exp.batched_apply(reward, params, sp.render(world, sp.intervene(resp, ell_shift=1.0)))
  assert abs(np.mean(r_len - r)) / np.std(r) < 0.2


def test_experiment_smoke_writes_results(tmp_path):
  workdir = tmp_path / "cr"
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  overrides = ["--config.methods=('vanilla','crm_n')", "--config.synthetic.n_train=512",
               "--config.synthetic.n_val=128", "--config.synthetic.n_test=256", "--config.synthetic.pool_size=256",
               "--config.synthetic.bon_prompts=8", "--config.synthetic.bon_candidates=16",
               "--config.synthetic.probe_steps=4", "--config.epochs=1"]
  proc = subprocess.run([sys.executable, "-m", "experiments.causal_reward", "--config=configs/causal_reward.py:smoke",
                         f"--workdir={workdir}", *overrides], cwd=ROOT, capture_output=True, text=True, env=env,
                        timeout=240)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = json.load(open(workdir / "results.json"))
  assert results["experiment"] == "causal_reward" and results["preset"] == "smoke"
  methods = {r["method"] for r in results["rows"]}
  assert methods == {"vanilla", "crm_n", "rule_longer", "rule_sycophantic"}
  for r in results["rows"]:
    assert set(r) == {"method", "dataset", "split", "seed", "metrics", "cost"}
  crm = next(r for r in results["rows"] if r["method"] == "crm_n")["metrics"]
  for key in ("acc_id", "acc_gold", "acc_anti", "corr_len", "do_len", "do_syc", "zn_pref_acc", "zc_len_r2",
              "bon_gold_max", "bon_hack_max", "gao_alpha"):
    assert key in crm and crm[key] is not None, key
  rule = next(r for r in results["rows"] if r["method"] == "rule_longer")["metrics"]
  assert abs(rule["acc_train"] - 0.9) < 0.01
  assert (workdir / "bon_synthetic_rho0.9.png").exists()
  curves = json.load(open(workdir / "curves.json"))
  assert len(curves["bon_curves"]["synthetic_rho0.9"]["vanilla"][0]["gold"]) == 5   # N = 1..16
