"""Readers on the shipped data (statistics from the data READMEs) and their error messages."""

import pathlib

import numpy as np
import pytest

from jaxml import core
from jaxml.data import offline, synthetic


def test_uci_standard_split_is_standardised_on_train_rows():
  d = offline.load_uci("energy", 0)
  assert d["x_train"].shape[1] == 8 and len(d["y_test"]) == 77
  assert len(d["y_train"]) + len(d["y_valid"]) == 691
  np.testing.assert_allclose(d["y_train"].mean(), 0.0, atol=1e-5)
  np.testing.assert_allclose(d["x_train"].std(0), 1.0, atol=1e-4)
  assert not set(d["index_train"]) & set(d["index_test"])


def test_uci_smile_protocol_and_naval_constant_columns():
  d = offline.load_uci("bikesharing", 1, protocol="smile")
  assert (len(d["y_train"]), len(d["y_valid"]), len(d["y_test"])) == (12165, 1738, 3476)
  assert d["x_train"].shape[1] == 11      # record-index column dropped
  naval = offline.load_uci("naval", 0)
  assert np.all(np.isfinite(naval["x_train"]))


def test_ordinal_partitions():
  d = offline.load_ordinal("abalone", bins=10, partition=4)
  assert d["x_train"].shape == (1000, 10) and d["num_classes"] == 10
  w = offline.load_ordinal("winequality", partition=0)
  assert w["num_classes"] == 6 and len(w["y_train"]) + len(w["y_test"]) == 1599
  b = offline.load_ordinal("bank32nh", bins=5, partition=1)
  assert b["x_train"].shape == (3000, 32) and set(np.unique(b["y_train"])) == set(range(5))


@pytest.mark.slow
def test_graphs_match_readme_statistics():
  cora = offline.load_graph("cora", fmt="planetoid")
  assert cora["features"].shape == (2708, 1433) and cora["edges"].shape[1] == 2 * 5278
  assert (cora["train_mask"].sum(), cora["val_mask"].sum(), cora["test_mask"].sum()) == (140, 500, 1000)
  citeseer = offline.load_graph("citeseer", fmt="planetoid")
  assert citeseer["edges"].shape[1] == 2 * 4552 and (citeseer["labels"] < 0).sum() == 15
  ml = offline.load_graph("cora_ml")
  assert ml["features"].shape == (2995, 2879) and ml["edges"].shape[1] == 16316
  np.testing.assert_allclose(ml["features"].sum(1), 1.0, atol=1e-5)
  e = ml["edges"]
  assert np.all(e[0] != e[1])
  assert {tuple(p) for p in e.T} == {tuple(p) for p in e[::-1].T}   # symmetric


def test_hh_rlhf_pairs_split_last_turn():
  pairs = offline.load_hh_rlhf(limit=20)
  assert len(pairs) == 20
  assert all(set(p) == {"context", "chosen", "rejected"} and "\n\nHuman:" in p["context"] for p in pairs)


def test_digits_and_mnist1d():
  d = offline.load_digits(seed=1)
  assert d["x_train"].shape[1:] == (8, 8) and d["x_train"].max() <= 1.0
  assert set(np.unique(d["y_test"])) == set(range(10))
  m = offline.load_mnist1d()
  assert m["x_train"].shape == (4000, 40) and m["x_test"].shape == (1000, 40)


def test_missing_root_and_bad_names_give_clear_errors(tmp_path, monkeypatch):
  with pytest.raises(offline.DataNotFoundError, match="does not exist.*data_dir"):
    offline.load_uci("energy", 0, root=str(tmp_path / "nowhere"))
  monkeypatch.setenv("JAXML_DATA_DIR", str(tmp_path / "also_nowhere"))
  with pytest.raises(offline.DataNotFoundError, match="JAXML_DATA_DIR"):
    offline.data_root()
  monkeypatch.setenv("JAXML_DATA_DIR", str(tmp_path))
  with pytest.raises(offline.DataNotFoundError, match="missing data file"):
    offline.load_ordinal("abalone")
  with pytest.raises(ValueError, match="unknown UCI dataset 'enrgy'"):
    offline.load_uci("enrgy", 0)


def test_epoch_batches_are_random_access_and_cover_each_epoch():
  arrays = {"x": np.arange(20), "y": np.arange(20) * 2}
  get = core.epoch_batches(arrays, 5, seed=3)
  epoch = np.concatenate([get(i)["x"] for i in range(4)])
  assert sorted(epoch) == list(range(20))
  np.testing.assert_array_equal(get(6)["x"], core.epoch_batches(arrays, 5, seed=3)(6)["x"])
  assert not np.array_equal(get(0)["x"], get(4)["x"])      # reshuffled next epoch
  np.testing.assert_array_equal(get(2)["y"], 2 * get(2)["x"])
  half = core.batches.process_slice(get(0), 1, 5)
  assert len(half["x"]) == 1


def test_synthetic_generators_recover_parameters():
  d = synthetic.linear_regression(4000, dim=3, noise=0.01, seed=2)
  design = np.c_[d["x"], np.ones(4000)]
  coef = np.linalg.lstsq(design, d["y"], rcond=None)[0]
  np.testing.assert_allclose(coef[:3], d["w"], atol=1e-2)
  blobs = synthetic.gaussian_blobs(3000, num_classes=3, scale=0.1, seed=1)
  for c in range(3):
    np.testing.assert_allclose(blobs["x"][blobs["y"] == c].mean(0), blobs["centres"][c], atol=0.02)


def test_default_data_root_is_the_checkouts_data_folder(monkeypatch):
  monkeypatch.delenv("JAXML_DATA_DIR", raising=False)
  checkout = pathlib.Path(offline.__file__).resolve().parents[2]
  assert offline.data_root() == checkout / "data"
  assert (checkout / "data" / "uci" / "energy" / "data.txt").is_file()
