"""The SMILE pipeline as a package API: array step sizes (one compile for a grid), the PEG schedule,
plain-dict configs, and a tiny ensemble → sampling run without experiments/."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxml import smile
from tests.smile.analytic import toy_regression_splits


def _gaussian(x, minibatch):
  del minibatch
  return -0.5 * jnp.sum((x - 1.0) ** 2 / jnp.linspace(0.5, 2.0, x.shape[0]) ** 2)


@pytest.mark.slow
@pytest.mark.parametrize("factory", [smile.kernel.psmile, smile.smile,
                                     lambda f, **kw: smile.kernel.psmile(f, tuner=smile.virial_tuner(adapt_steps=4), **kw),
                                     lambda f, **kw: smile.kernel.psmile(f, tuner=smile.fixed_tuner(halve_nonfinite=False),
                                                                  **kw)],
                         ids=["psmile", "smile", "psmile_virial", "psmile_naive_ref"])
def test_step_size_and_L_grid_under_vmap_compiles_once(factory):
  def chain(eps, L, key):
    sampler = factory(_gaussian, step_size=eps, L=L)
    state = sampler.init(jnp.zeros(4), None, key)
    state, info = jax.lax.scan(lambda s, k: sampler.step(k, s, None), state, jax.random.split(key, 5))
    return state.initial_step_size, info.step_size[-1], state.position

  chex.clear_trace_counter()
  run = jax.jit(jax.vmap(chex.assert_max_traces(chain, n=1)))
  keys = jax.random.split(jax.random.key(0), 3)
  eps0, eps, pos = run(jnp.asarray([1e-2, 1e-1, 3e-1]), jnp.asarray([jnp.inf] * 3), keys)
  run(jnp.asarray([2e-2, 2e-1, 5e-1]), jnp.asarray([1.0, 2.0, 4.0]), keys)    # new grid values: no retrace
  np.testing.assert_allclose(eps0, [1e-2, 1e-1, 3e-1], rtol=1e-6)
  chex.assert_tree_all_finite((eps, pos))
  # A traced ε₀ gives the same chain as the same ε₀ as a Python float.
  ref = jax.jit(lambda key: chain(1e-1, jnp.inf, key))(keys[1])
  chex.assert_trees_all_close(jax.tree.map(lambda a: a[1], (eps0, eps, pos)), ref, rtol=1e-6)


def test_schedule_spends_the_budget():
  for budget, peg, warm_frac, n in [(60 * 622, 128, 0.5, 10), (1000, 64, 0.0, 1), (10_000, 32, 1 / 3, 100)]:
    total, warm, kept, thin = smile.schedule(budget, peg, warm_frac, n)
    assert warm + kept * thin == total and kept <= n and thin >= 1 and warm >= 0
    assert total == max(budget // peg, 2)


def _config(**over):
  cfg = {"protocol": "standard", "methods": ("map", "de", "smile_naive", "psmile", "sgld"), "hidden": (8,),
         "noise": "global", "prior_scale": 1.0, "num_members": 2, "member_batch": 16, "member_epochs": 2,
         "member_max_steps": 8, "batch_size": 0, "warmup_frac": 0.5, "num_samples": 4,
         "smile_step_size": (1e-3, 1e-4), "L": 0.0, "same_batch_energy": False, "p_reset": 0.98, "alpha": 0.1,
         "delta": 0.02, "beta": 0.01, "sgld_step_size": (1e-5,), "rhat_points": 10, "coverage_draws": 100}
  return cfg | over


@pytest.mark.slow
def test_run_split_with_a_plain_dict_config(tmp_path, capsys):
  cfg, data = _config(), toy_regression_splits()
  n = len(data["y_train"])
  b, per_epoch, steps = smile.member_plan(cfg, n)
  assert (b, per_epoch, steps) == (16, 6, 8)
  samplers = smile.make_samplers(cfg, data_size=n, budget_epochs=8)
  assert samplers.groups == ("smile_family", "sgld") and samplers.batch_size == 32

  def batches(m):
    return lambda step: {k: data[f"{k}_train"][np.random.default_rng([m, step]).permutation(n)[:b]]
                         for k in ("x", "y")}

  train_cfg = {"optim": {"name": "adamw", "lr": 1e-2, "weight_decay": 5e-3}, "num_steps": steps, "log_every": steps}
  out = smile.run_split(cfg, train_cfg, samplers, data, [batches(0), batches(1)], seed=0,
                        chain_key=jax.random.key(1), rng=np.random.default_rng(0), steps_per_epoch=per_epoch,
                        workdir=str(tmp_path), name="m", progress=True)
  assert list(out) == ["map", "de", "smile_naive", "psmile", "sgld"]
  lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("[m] sampler group")]
  assert len(lines) == 4 and lines[0].startswith("[m] sampler group smile_family: ") and "done in" in lines[1]
  for method, (metrics, cost) in out.items():
    assert np.isfinite(metrics["lppd"]) and np.isfinite(metrics["rmse"]) and cost["peg"] > 0, method
  assert out["de"][1]["peg"] == 2 * steps * b and out["map"][1]["peg"] == steps * b
  assert out["psmile"][0]["step_size0"] in (1e-3, 1e-4)
  # Equal per-chain PEG for the minibatch samplers (SMILE takes 2 gradients per step, SGLD 1).
  assert out["psmile"][1]["sampler_peg"] == pytest.approx(out["sgld"][1]["sampler_peg"], rel=0.1)
  # Test metrics come back in original units for the standard protocol.
  assert out["de"][0]["rmse"] == pytest.approx(2.0 * out["de"][0]["rmse_std"])


def test_eps_drift_is_the_largest_ratio_over_the_second_half_of_warmup():
  trace = np.array([[1.0, 1.0], [0.1, 1.0], [0.5, 1.0], [1.0, 1.5], [0.25, 1.5], [0.5, 3.0]])   # [W, C]
  assert smile.eps_drift(trace) == pytest.approx(4.0)     # chain 0: 1.0 / 0.25 over rows 3-5
  assert smile.eps_drift(np.full((4, 3), 1e-3)) == pytest.approx(1.0)


@pytest.mark.slow
def test_ref_protocol_options_reach_the_samplers():
  """⌊N/b⌋ likelihood scale, σ = 1 member loss, budget in SMILE steps (baselines at equal PEG)."""
  from jaxml.smile import api, targets
  model = targets.make_regression_model((4,))
  params = model.init(jax.random.key(0), jnp.zeros((1, 3)))
  params["log_sigma"] = jnp.asarray(0.7)
  batch = {"x": jnp.ones((4, 3)), "y": jnp.zeros((4,))}
  prior = targets.log_prior(params)
  lik = lambda floor: targets.make_minibatch_logdensity(model.apply, data_size=10, floor_scale=floor)(params, batch)
  np.testing.assert_allclose((lik(True) - prior) / (lik(False) - prior), 2 / 2.5, rtol=1e-5)   # ⌊10/4⌋ vs 10/4
  cfg = {"hidden": (4,), "noise": "global", "num_members": 1}
  fixed = api.make_method(ml_collections.ConfigDict(cfg | {"member_fixed_sigma": True}))
  free = api.make_method(ml_collections.ConfigDict(cfg))
  stacked = jax.tree.map(lambda a: a[None], params)
  mb = {"x": batch["x"][None], "y": batch["y"][None]}
  g_fixed = jax.grad(lambda p: fixed.loss_fn(p, mb, None)[0])(stacked)["log_sigma"]
  g_free = jax.grad(lambda p: free.loss_fn(p, mb, None)[0])(stacked)["log_sigma"]
  assert float(jnp.abs(g_fixed).sum()) == 0.0 and float(jnp.abs(g_free).sum()) > 0.0
  n = 96
  steps = _config(batch_size=32, budget_steps=10, likelihood_scale="floor", methods=("psmile_naive", "sgld"))
  samplers = smile.make_samplers(steps, data_size=n, budget_epochs=1)
  assert samplers.budget == 10 * 2 * 32
  assert samplers.plans["smile_family"][2] == 2 and samplers.plans["sgld"][2] == 1


def _run_group(method: str, members: int, eps0: float, **keys):
  """One tuned-pSMILE group through its runner on the toy regression, one chain per (untrained) member at ε₀:
  (ChainResult, batch gradients per step)."""
  cfg, data = _config(methods=(method,), num_members=members, num_samples=4, warmup_frac=0.5, **keys), \
      toy_regression_splits()
  samplers = smile.make_samplers(cfg, data_size=len(data["y_train"]), budget_epochs=60)
  model = smile.make_model(ml_collections.ConfigDict(cfg))
  params = jax.vmap(lambda r: model.init(r, jnp.zeros((1, 3))))(jax.random.split(jax.random.key(0), members))
  res = samplers.runners[method](params, {"x": jnp.asarray(data["x_train"]), "y": jnp.asarray(data["y_train"])},
                                 jax.random.key(1), {"step_size": jnp.full((members,), eps0)})
  return res, samplers.plans[method][2]


@pytest.mark.slow
def test_psmile_vt_tunes_over_the_warmup_pooled_and_freezes_for_sampling():
  """`psmile_vt` (the virial rule) gets adapt_steps = the runner's warmup: ε moves in warmup, the runner's named
  chain axis makes the chains share one ε, and it is constant, at the warmup's last value, in the sampling phase;
  2 batch gradients per step."""
  res, grads = _run_group("psmile_vt", 2, 1e-2, vt_step_size=(1e-2,), vt_target=1.1, vt_gain=0.05,
                          vt_settle_frac=0.0)
  assert grads == 2
  warm = np.asarray(res.warmup_step_size)
  assert np.any(warm != np.float32(1e-2))
  np.testing.assert_array_equal(np.asarray(res.step_size), warm[-1])
  np.testing.assert_array_equal(warm[:, 0], warm[:, 1])
