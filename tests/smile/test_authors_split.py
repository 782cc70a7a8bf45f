"""The SMILE authors' UCI rows (`smile.authors_row_order` into `offline.load_uci(row_order=...)`) and the `ref`
key `split_source` that picks them."""

import jax
import numpy as np
import pytest

from configs import smile_uci as cfg_module
from experiments import smile_uci
from jaxml import smile
from jaxml.data import offline


def _authors(name, seed, **kw):
  return offline.load_uci(name, seed, protocol="smile", row_order=lambda n: smile.authors_row_order(seed, n), **kw)


def test_authors_row_order_is_pinned_and_leaves_the_prng_mode_alone():
  before = jax.config.jax_threefry_partitionable
  perm = smile.authors_row_order(1, 768)
  assert jax.config.jax_threefry_partitionable == before
  # Regression pin: the first rows of seed 1 under the authors' pinned jax PRNG semantics (non-partitionable
  # threefry). A change here means the reconstruction no longer draws the authors' permutation.
  np.testing.assert_array_equal(perm[:5], [387, 500, 634, 285, 167])
  np.testing.assert_array_equal(np.sort(perm), np.arange(768))
  with jax.threefry_partitionable(not before):   # the function sets its own PRNG mode
    np.testing.assert_array_equal(smile.authors_row_order(1, 768), perm)
  assert not np.array_equal(smile.authors_row_order(2, 768), perm)


def test_authors_rows_floor_cuts_and_whole_table_standardisation():
  d = _authors("energy", 1)
  idx = [d[f"index_{k}"] for k in ("train", "valid", "test")]
  assert [len(i) for i in idx] == [537, 77, 154]            # int(0.7 n), int(0.8 n) - int(0.7 n), rest
  np.testing.assert_array_equal(np.concatenate(idx), smile.authors_row_order(1, 768))
  y_all = np.concatenate([d["y_train"], d["y_valid"], d["y_test"]]).astype(np.float64)
  assert abs(y_all.mean()) < 1e-5 and abs(y_all.std() - 1.0) < 1e-5     # statistics of the whole table
  raw = np.loadtxt(offline.data_root() / "uci" / "energy" / "data.txt")[:, 8]
  np.testing.assert_allclose(d["y_test"] * d["y_std"] + d["y_mean"], raw[d["index_test"]], rtol=1e-5)
  files = offline.load_uci("energy", 1, protocol="smile")
  assert len(set(files["index_test"]) & set(d["index_test"])) < 100         # other rows than our files


def test_test_batch_cuts_the_test_rows_like_the_authors_evaluation_loop():
  air = _authors("airfoil", 1, test_batch=256)
  assert len(air["y_test"]) == 256 and len(air["x_test"]) == 256           # 301 rows -> one batch of 256
  np.testing.assert_array_equal(air["index_test"], _authors("airfoil", 1)["index_test"][:256])
  assert len(_authors("energy", 1, test_batch=256)["y_test"]) == 154


def test_bad_row_orders_and_split_sources_are_rejected():
  with pytest.raises(ValueError, match="permutation"):
    offline.load_uci("energy", 1, protocol="smile", row_order=lambda n: np.zeros(n, int))
  with pytest.raises(ValueError, match="protocol='smile' only"):
    offline.load_uci("energy", 0, protocol="standard", row_order=np.arange)
  config = cfg_module.get_config("ref:datasets=energy,splits=1,methods=de")
  assert smile_uci.plan(config).pipeline["split_source"] == "authors"
  assert smile_uci.plan(cfg_module.get_config("smoke")).pipeline["split_source"] == "files"
  config.smile.split_source = "paper"
  with pytest.raises(ValueError, match="split source"):
    smile_uci.plan(config)
