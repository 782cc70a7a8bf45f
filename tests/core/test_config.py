"""core.reject_unknown (the one strict-section check shared by the optimizer and the method configs) and
core.fold_in_each (per-stream keys that do not depend on the other streams)."""

import re

import jax
import ml_collections
import numpy as np
import pytest

from jaxml import core


def test_reject_unknown_names_the_unknown_and_the_allowed_keys():
  allowed = ("lr", "name", "b1")
  with pytest.raises(ValueError) as err:
    core.reject_unknown({"lr": 1.0, "lrr": 2.0, "bb1": 0.9}, allowed, "optimizer")
  # unknown keys sorted, allowed keys in the caller's order
  assert str(err.value) == "unknown optimizer setting(s) ['bb1', 'lrr']; allowed: lr, name, b1"


@pytest.mark.parametrize("section", [{}, {"lr": 1.0}, {"lr": 1.0, "name": "adam", "b1": 0.9}])
def test_reject_unknown_accepts_any_subset_of_the_allowed_keys(section):
  assert core.reject_unknown(section, ("lr", "name", "b1"), "optimizer") is None


def test_reject_unknown_reads_config_dicts_and_one_shot_iterables():
  config = ml_collections.ConfigDict({"lr": 1.0, "nested": {"x": 1}})
  core.reject_unknown(config, iter(["lr", "nested"]), "train")   # a generator is consumed once, still both checks
  with pytest.raises(ValueError, match=re.escape("unknown train setting(s) ['nested']; allowed: lr")):
    core.reject_unknown(config, (k for k in ["lr"]), "train")


def test_each_config_reader_uses_it():
  from jaxml import sol
  from jaxml.eviprobe import gpn, pipeline
  with pytest.raises(ValueError, match=re.escape("unknown optimizer setting(s) ['lrr']; allowed: name, lr,")):
    core.make_optimizer({"name": "adam", "lrr": 1e-3})
  with pytest.raises(ValueError, match=re.escape("unknown SOL setting(s) ['sigmaa']; allowed: ")):
    sol.sol_settings({"sigmaa": 1.0})
  allowed = ", ".join(gpn.MODEL_KEYS + pipeline.GPN_TRAIN_KEYS)
  with pytest.raises(ValueError, match=re.escape(f"unknown gpn setting(s) ['lrr']; allowed: {allowed}")):
    pipeline.fit_gpn({"gpn": {"lrr": 0.1}}, {}, 4, 2, seed=0)


def test_fold_in_each_gives_each_id_its_own_key_whatever_runs_beside_it():
  key = jax.random.key(7)
  both = jax.random.key_data(core.fold_in_each(key, [3, 11]))
  alone = jax.random.key_data(core.fold_in_each(key, [11]))
  np.testing.assert_array_equal(both[1], alone[0])
  np.testing.assert_array_equal(both[0], jax.random.key_data(jax.random.fold_in(key, 3)))
  assert not np.array_equal(both[0], both[1])


def test_cache_dir_is_one_root_from_the_environment(monkeypatch, tmp_path):
  from jaxml import core
  monkeypatch.setenv("JAXML_CACHE_DIR", str(tmp_path / "mine"))
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  assert core.cache_dir("jax_cache") == str(tmp_path / "mine" / "jax_cache")
  monkeypatch.delenv("JAXML_CACHE_DIR")
  assert core.cache_dir() == str(tmp_path / "xdg" / "jaxml")
  monkeypatch.delenv("XDG_CACHE_HOME")
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  assert core.cache_dir("smile_checks") == str(tmp_path / "home" / ".cache" / "jaxml" / "smile_checks")
