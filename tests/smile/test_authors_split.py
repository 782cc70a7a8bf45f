"""The SMILE authors' UCI rows (`offline.load_uci(..., split_source="authors")`) and the `ref` key that picks them."""

import jax
import numpy as np
import pytest

from configs import smile_uci as cfg_module
from experiments import smile_uci
from jaxml.data import offline


def test_authors_permutation_is_pinned_and_leaves_the_prng_mode_alone():
  before = jax.config.jax_threefry_partitionable
  perm = offline.smile_authors_permutation(1, 768)
  assert jax.config.jax_threefry_partitionable == before
  # Regression pin: the first rows of seed 1 under the authors' pinned jax PRNG semantics (non-partitionable
  # threefry). A change here means the reconstruction no longer draws the authors' permutation.
  np.testing.assert_array_equal(perm[:5], [387, 500, 634, 285, 167])
  np.testing.assert_array_equal(np.sort(perm), np.arange(768))
  with jax.threefry_partitionable(not before):   # the function sets its own PRNG mode
    np.testing.assert_array_equal(offline.smile_authors_permutation(1, 768), perm)
  assert not np.array_equal(offline.smile_authors_permutation(2, 768), perm)


def test_authors_rows_floor_cuts_and_whole_table_standardisation():
  d = offline.load_uci("energy", 1, protocol="smile", split_source="authors")
  idx = [d[f"index_{k}"] for k in ("train", "valid", "test")]
  assert [len(i) for i in idx] == [537, 77, 154]            # int(0.7 n), int(0.8 n) - int(0.7 n), rest
  np.testing.assert_array_equal(np.sort(np.concatenate(idx)), np.arange(768))
  np.testing.assert_array_equal(np.concatenate(idx), offline.smile_authors_permutation(1, 768))
  y_all = np.concatenate([d["y_train"], d["y_valid"], d["y_test"]]).astype(np.float64)
  assert abs(y_all.mean()) < 1e-5 and abs(y_all.std() - 1.0) < 1e-5     # statistics of the whole table
  raw = np.loadtxt(offline.data_root() / "uci" / "energy" / "data.txt")[:, 8]
  np.testing.assert_allclose(d["y_test"] * d["y_std"] + d["y_mean"], raw[d["index_test"]], rtol=1e-5)
  files = offline.load_uci("energy", 1, protocol="smile")
  assert len(set(files["index_test"]) & set(d["index_test"])) < 100         # other rows than our files


def test_test_batch_cuts_the_test_rows_like_the_authors_evaluation_loop():
  air = offline.load_uci("airfoil", 1, protocol="smile", split_source="authors", test_batch=256)
  assert len(air["y_test"]) == 256 and len(air["x_test"]) == 256           # 301 rows -> one batch of 256
  full = offline.load_uci("airfoil", 1, protocol="smile", split_source="authors")
  np.testing.assert_array_equal(air["index_test"], full["index_test"][:256])
  assert len(offline.load_uci("energy", 1, protocol="smile", split_source="authors", test_batch=256)["y_test"]) == 154


def test_bad_split_sources_are_rejected():
  with pytest.raises(ValueError, match="split_source"):
    offline.load_uci("energy", 1, protocol="smile", split_source="paper")
  with pytest.raises(ValueError, match="protocol='smile' only"):
    offline.load_uci("energy", 0, protocol="standard", split_source="authors")
  config = cfg_module.get_config("ref:datasets=energy,splits=1,methods=de")
  assert smile_uci.plan(config).pipeline["split_source"] == "authors"
  assert smile_uci.plan(cfg_module.get_config("A")).pipeline["split_source"] == "files"
  config.smile.split_source = "paper"
  with pytest.raises(ValueError, match="split source"):
    smile_uci.plan(config)
