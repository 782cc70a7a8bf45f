"""Your own data, by path, in the documented formats (data/README.md): the readers and a tiny
smoke run of the experiment that uses each kind (ordinal folder, UCI-style folder, graph npz,
preferences JSONL)."""

import importlib

import numpy as np
import pytest

from experiments import common
from jaxml.data import offline, verify
from tests.data import own_data



def _run(experiment: str, preset: str, workdir, **overrides) -> dict:
  """Runs `experiments.<experiment>.run` in-process on `configs/<experiment>.py:<preset>` with dotted
  overrides (the command line's `--config.a.b=v`); returns {"rows": rows} like results.json. In-process: the
  worker's compiled programs and imports are reused (the launcher's own contract is tested elsewhere)."""
  config = importlib.import_module(f"configs.{experiment}").get_config(preset)
  for key, value in overrides.items():
    *path, leaf = key.split(".")
    section = config
    for part in path:
      section = section[part]
    section[leaf] = value
  workdir.mkdir(parents=True)
  return {"rows": importlib.import_module(f"experiments.{experiment}").run(config, str(workdir))}


def _finite_metrics(rows, *names):
  for r in rows:
    for name in names:
      assert r["metrics"][name] is not None and np.isfinite(r["metrics"][name]), r


@pytest.mark.slow
def test_ordinal_folder_reader_and_sol_smoke(tmp_path):
  folder = own_data.make_ordinal_folder(tmp_path / "my_ordinal", partitions=2)
  d = offline.load_ordinal(str(folder), bins=5, partition=1)
  assert d["x_train"].shape == (48, 4) and d["num_classes"] == 5
  assert abs(d["x_train"].mean()) < 1e-5                         # standardised on the train rows
  assert set(np.unique(d["y_train"])) <= set(range(5))
  with pytest.raises(ValueError, match="partitions 0..1"):
    offline.load_ordinal(str(folder), partition=2)
  # One cheap method: reading the folder does not depend on the method (SOL runs end to end in test_configs).
  results = _run("sol_ordinal", f"smoke:datasets={folder},methods=ce", tmp_path / "run", **{"train.steps": 10})
  assert {r["dataset"] for r in results["rows"]} == {f"{folder}/gaussian:0.4"}
  assert {r["method"] for r in results["rows"]} >= {"ce"}
  _finite_metrics(results["rows"], "mae")


@pytest.mark.slow
def test_uci_folder_reader_and_smile_smoke(tmp_path):
  folder = own_data.make_uci_folder(tmp_path / "my_uci")
  d = offline.load_uci(str(folder), 1)
  assert d["x_train"].shape[1] == 3 and len(d["y_train"]) + len(d["y_valid"]) + len(d["y_test"]) == 80
  s = offline.load_uci(str(folder), 2, protocol="smile")
  assert (len(s["y_train"]), len(s["y_valid"]), len(s["y_test"])) == (56, 8, 16)
  results = _run("smile_uci", f"smoke:datasets={folder},methods=map+smile,members=1,budget_epochs=10",
                 tmp_path / "run")
  assert {(r["dataset"], r["method"]) for r in results["rows"]} == {(str(folder), "map"), (str(folder), "smile")}
  _finite_metrics(results["rows"], "lppd", "rmse")


@pytest.mark.slow
def test_graph_npz_reader_and_eviprobe_smoke(tmp_path):
  path = own_data.make_graph_npz(tmp_path / "my_graph.npz")
  g = offline.load_graph(path=str(path))
  assert g["features"].shape == (160, 24) and g["num_classes"] == 4
  assert np.allclose(g["features"].sum(1)[g["features"].sum(1) > 0], 1.0)   # row-normalised
  edges = set(map(tuple, g["edges"].T))
  assert all((v, u) in edges for u, v in edges) and all(u != v for u, v in edges)
  results = _run("eviprobe_graphs", f"smoke:path={path}", tmp_path / "run",
                 **{"baselines": ("entropy",), "ablations": (), "train.max_epochs": 10})
  assert results["rows"] and all(r["dataset"].startswith("npz:") for r in results["rows"])
  _finite_metrics(results["rows"], "ood_auroc")


@pytest.mark.parametrize("dialogue", [False, True])
def test_preferences_jsonl_reader(tmp_path, dialogue):
  path = own_data.make_preferences_jsonl(tmp_path / "prefs.jsonl", n=5, dialogue=dialogue)
  pairs = offline.load_hh_rlhf(path=str(path))
  assert len(pairs) == 5
  assert pairs[2]["context"].startswith("\n\nHuman: Tell me something about rain")
  assert pairs[2]["chosen"].startswith("Here is") and pairs[2]["rejected"].startswith("I do not know")
  with open(path, "a") as f:
    f.write('{"chosen": "only one side"}\n')
  with pytest.raises(ValueError, match=r"prefs.jsonl:6: not a preference pair"):
    offline.load_hh_rlhf(path=str(path))


@pytest.mark.slow
def test_preferences_jsonl_causal_reward_text_smoke(tmp_path):
  # 24 pairs and a 64-token window: MiniLM compiles one program per padded batch length, the run's main cost.
  path = own_data.make_preferences_jsonl(tmp_path / "prefs.jsonl", n=24)
  results = _run("causal_reward", "text", tmp_path / "run",
                 **{"text.path": str(path), "text.methods": ("vanilla",), "text.epochs": 2, "text.num_seeds": 1,
                    "text.batch_size": 8, "text.cache_dir": str(tmp_path / "cache"), "text.max_len": 64,
                    "text.prompt_tokens": 16})
  methods = {r["method"] for r in results["rows"]}
  assert "vanilla" in methods and not methods & {"crm_u", "crm_n"}       # text.methods was honoured
  _finite_metrics([r for r in results["rows"] if r["method"] == "vanilla"], "acc_id", "acc_anti")


def test_own_data_with_its_own_manifest_is_checked(tmp_path):
  folder = own_data.make_ordinal_folder(tmp_path / "my_ordinal")
  assert verify.write_manifest(folder) == 2
  offline.load_ordinal(str(folder))
  with open(folder / "chu_10bins.npz", "ab") as f:
    f.write(b"x")
  with pytest.raises(offline.DataIntegrityError, match="chu_10bins.npz is longer than expected"):
    offline.load_ordinal(str(folder))


def test_a_path_that_does_not_exist_is_a_config_error():
  with pytest.raises(common.ConfigError, match="path /no/such/folder does not exist"):
    common.validate_dataset("/no/such/folder", ("abalone",), "dataset")
  common.validate_dataset("abalone", ("abalone",), "dataset")
  with pytest.raises(offline.DataNotFoundError, match="your data /no/such/folder does not exist"):
    offline.load_uci("/no/such/folder", 0)
