"""A method's chains and rows do not depend on which other methods or groups run beside it.

Chains carry stable ids (method, ε₀, member) and groups a key folded from their name, so pSMILE-naive
run alone, beside SMILE-naive (same compiled group, more chains), or beside SMILE-naive and SGLD
(another group) gives the same positions and the same metrics, bit for bit.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import smile
from jaxml.smile import pipeline
from tests.smile.analytic import toy_regression_splits

_K = 2   # members
_ALL = ("smile_naive", "psmile_naive", "sgld")


def _config(methods):
  return {"protocol": "standard", "methods": methods, "hidden": (8,), "noise": "global", "prior_scale": 1.0,
          "num_members": _K, "batch_size": 0, "warmup_frac": 0.5, "num_samples": 8, "L": 1.0,
          "smile_step_size": (1e-2, 1e-3), "same_batch_energy": False, "p_reset": 0.98, "alpha": 0.1,
          "delta": 0.02, "beta": 0.01, "sgld_step_size": (1e-5, 1e-4), "sghmc_step_size": (1e-5,),
          "sghmc_momentum_decay": 0.05, "rhat_points": 10, "coverage_draws": 100}


def _members(cfg):
  model = smile.make_model(pipeline._c(cfg))
  return jax.vmap(lambda r: model.init(r, jnp.zeros((1, 3))))(jax.random.split(jax.random.key(0), _K))


@pytest.fixture(scope="module")
def setup():
  """(data, members, samplers of pSMILE-naive alone, samplers of SMILE-naive + pSMILE-naive + SGLD)."""
  data = toy_regression_splits()
  alone, full = _config(("psmile_naive",)), _config(_ALL)
  n = len(data["y_train"])
  return (data, _members(full), smile.make_samplers(alone, data_size=n, budget_epochs=4),
          smile.make_samplers(full, data_size=n, budget_epochs=4))


def _rows(samplers, groups, setup):
  """sample_split over `groups` of `samplers` (a subset of groups = the other groups not co-run)."""
  data, members = setup[:2]
  out = smile.sample_split(samplers._replace(groups=groups), _config(_ALL), members, data, jax.random.key(3),
                           np.random.default_rng(5))
  return {m: metrics for m, (metrics, _) in out.items()}


@pytest.mark.slow
def test_chain_positions_do_not_depend_on_the_other_combos(setup):
  """The same (method, ε₀) chains in a 2-combo and a 4-combo run of the SMILE family give equal positions."""
  data, members, small, big = setup
  train = {"x": jnp.asarray(data["x_train"]), "y": jnp.asarray(data["y_train"])}

  def run(combos, samplers, ids=True):
    hypers = pipeline.family_hypers(_config(_ALL), combos, _K)
    starts = jax.tree.map(lambda a: jnp.concatenate([a] * len(combos)), members)
    return samplers.runners["smile_family"](starts, train, jax.random.key(3), hypers,
                                            pipeline.combo_chain_ids(combos, _K) if ids else None)

  both = big.plans["smile_family"][1]
  assert [m for m, _ in both] == ["smile_naive"] * 2 + ["psmile_naive"] * 2
  r_both, r_alone = run(both, big), run(both[2:], small)
  sl = slice(2 * _K, 4 * _K)
  jax.tree.map(np.testing.assert_array_equal, jax.tree.map(lambda a: a[sl], r_both.positions), r_alone.positions)
  np.testing.assert_array_equal(r_both.logdensity[sl], r_alone.logdensity)
  # The ids matter: the same chains under the default ids 0..C-1 move differently.
  swapped = run(both, big, ids=False)
  assert not np.array_equal(np.asarray(swapped.logdensity[sl]), np.asarray(r_alone.logdensity))


@pytest.mark.slow
def test_method_rows_are_the_same_alone_and_co_run(setup):
  small, big = setup[2:]
  alone = _rows(small, ("smile_family",), setup)
  with_family = _rows(big, ("smile_family",), setup)
  with_groups = _rows(big, ("smile_family", "sgld"), setup)
  assert set(with_groups) == {"smile_naive", "psmile_naive", "sgld"}
  assert np.isfinite(alone["psmile_naive"]["lppd"])
  # assert_equal: exact, NaN == NaN (e.g. an undefined R-hat).
  np.testing.assert_equal(alone["psmile_naive"], with_family["psmile_naive"])
  np.testing.assert_equal(alone["psmile_naive"], with_groups["psmile_naive"])
  np.testing.assert_equal(with_family["smile_naive"], with_groups["smile_naive"])
  np.testing.assert_equal(_rows(big, ("sgld",), setup)["sgld"], with_groups["sgld"])


@pytest.mark.slow
def test_psmile_clamp_leaves_the_other_variants_rows_unchanged(setup):
  """Unclamped run (`precond_clamp=False`, the ref setting): adding `psmile_clamp` to the SMILE family (more chains
  of the same compile, each with its own r-clamp flag) leaves smile_naive's and psmile_naive's rows bit for bit."""
  data, members = setup[:2]
  n = len(data["y_train"])
  base, more = ("smile_naive", "psmile_naive"), ("smile_naive", "psmile_naive", "psmile_clamp")
  rows = {}
  for methods in (base, more):
    cfg = _config(methods) | {"precond_clamp": False}
    out = smile.sample_split(smile.make_samplers(cfg, data_size=n, budget_epochs=4), cfg, members, data,
                             jax.random.key(3), np.random.default_rng(5))
    rows[methods] = {m: metrics for m, (metrics, _) in out.items()}
  assert set(rows[more]) == set(more)
  for m in base:
    assert np.isfinite(rows[base][m]["lppd"])
    np.testing.assert_equal(rows[base][m], rows[more][m])


@pytest.mark.slow
def test_a_split_grid_gives_the_rows_of_the_whole_grid(setup):
  """`pipeline.extend_grid`'s premise: running ε₀ grid (a, b) at once, or (a,) and (b,) as two runs and choosing by
  validation LPPD, gives the same row per method (the coverage draws, from the method's generator after one
  validation pass per ε₀, aside)."""
  data, members = setup[:2]
  n = len(data["y_train"])
  methods = ("psmile_naive", "sgld")

  def rows(smile_eps, sgld_eps):
    cfg = _config(methods) | {"smile_step_size": smile_eps, "sgld_step_size": sgld_eps}
    out = smile.sample_split(smile.make_samplers(cfg, data_size=n, budget_epochs=4), cfg, members, data,
                             jax.random.key(3), np.random.default_rng(5))
    return [{"method": m, "dataset": "toy", "split": 0, "seed": 0, "metrics": met, "cost": cost}
            for m, (met, cost) in out.items()]

  whole = {r["method"]: r for r in rows((3e-2, 1e-2), (1e-4, 1e-5))}
  split = {r["method"]: r for r in smile.pipeline.extend_grid(rows((1e-2,), (1e-5,)), rows((3e-2,), (1e-4,)))}
  for m in methods:
    a, b = whole[m], split[m]
    assert np.isfinite(a["metrics"]["lppd"])
    for k in ("lppd", "rmse", "valid_lppd", "step_size0", "lppd_chain_mean", "nonfinite", "final_step_size"):
      assert a["metrics"][k] == b["metrics"][k], (m, k)
    assert a["cost"]["grid_peg"] == b["cost"]["grid_peg"] and a["cost"]["sampler_peg"] == b["cost"]["sampler_peg"]
