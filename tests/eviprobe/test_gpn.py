"""GPN baseline: flow densities normalise, UCE gradients point the right way, a tiny run learns."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import core
from jaxml.data import csbm, graph_shift
from jaxml.eviprobe import gpn, pipeline
from jaxml.metrics import ood
from jaxml.nn.gnn import SparseFeatures

CFG = dict(hidden=32, latent=2, flow_layers=6, dropout=0.0, k_prop=10, teleport=0.1, entropy_reg=1e-4, l2=1e-3,
           latent_norm=False)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_radial_flow_density_integrates_to_one_in_2d(seed):
  flows = gpn.RadialFlows(num_flows=3, dim=2, layers=6)
  params = flows.init(jax.random.key(seed), jnp.zeros((1, 2)))
  g = jnp.linspace(-12.0, 12.0, 801)
  xx, yy = jnp.meshgrid(g, g)
  pts = jnp.stack([xx.ravel(), yy.ravel()], -1)
  dens = jnp.exp(flows.apply(params, pts))                  # [P, 3]
  mass = np.asarray(dens, np.float64).sum(0) * float(g[1] - g[0]) ** 2
  np.testing.assert_allclose(np.asarray(mass), 1.0, atol=1e-2)
  gauss = jnp.exp(-0.5 * jnp.sum(pts ** 2, -1)) / (2 * jnp.pi)
  assert float(jnp.max(jnp.abs(dens[:, 0] - gauss))) > 1e-2   # the flow changed the density


def test_radial_flow_density_integrates_to_one_in_1d():
  flows = gpn.RadialFlows(num_flows=4, dim=1, layers=8)
  params = flows.init(jax.random.key(5), jnp.zeros((1, 1)))
  g = jnp.linspace(-20.0, 20.0, 40001)
  mass = np.asarray(jnp.exp(flows.apply(params, g[:, None])), np.float64).sum(0) * float(g[1] - g[0])
  np.testing.assert_allclose(np.asarray(mass), 1.0, atol=2e-3)


def test_radial_log_det_matches_autodiff_jacobian():
  flows = gpn.RadialFlows(num_flows=1, dim=3, layers=1)
  params = flows.init(jax.random.key(2), jnp.zeros((1, 3)))
  p = params["params"]
  a = jax.nn.softplus(p["a_raw"][0, 0])
  b = -a + jax.nn.softplus(p["b_raw"][0, 0])
  c = p["centre"][0, 0]

  def f(x):
    d = x - c
    return x + b * d / (a + jnp.linalg.norm(d))

  x = jnp.array([0.3, -1.2, 0.7])
  y = f(x)
  expected = jnp.linalg.slogdet(jax.jacfwd(f)(x))[1] - 0.5 * jnp.sum(y ** 2) - 1.5 * jnp.log(2 * jnp.pi)
  assert float(flows.apply(params, x[None])[0, 0]) == pytest.approx(float(expected), abs=1e-4)


def test_uce_gradient_lowers_loss_along_true_class_only():
  alpha = jnp.array([[2.0, 3.0, 1.5], [1.2, 1.1, 4.0]])
  labels = jnp.array([0, 2])
  mask = jnp.ones(2)
  grad = jax.grad(gpn.uce_loss)(alpha, labels, mask)
  onehot = jax.nn.one_hot(labels, 3) > 0
  assert bool(jnp.all(grad[onehot] < 0)) and bool(jnp.all(grad[~onehot] > 0))
  # masked-out rows get no gradient
  grad_m = jax.grad(gpn.uce_loss)(alpha, labels, jnp.array([1.0, 0.0]))
  assert bool(jnp.all(grad_m[1] == 0))


def test_dirichlet_entropy_matches_uniform_case():
  # Dir(1, 1, 1) is uniform on the simplex of volume 1/2: entropy = −log 2
  assert float(gpn.dirichlet_entropy(jnp.ones(3))) == pytest.approx(-np.log(2.0), abs=1e-5)


def test_gpn_encoder_reuses_the_shared_first_layer_with_the_same_formula():
  # GPN's first layer is nn.gnn.FirstLinear (params enc_in/kernel [F, H], enc_bias [H]); the forward must
  # equal the formula GPN used before the reuse: log q = flows(ReLU(x W_in + b_in) W_out + b_out)
  f, hid, lat, k, n = 12, 8, 4, 3, 30
  x = (np.random.default_rng(0).random((n, f)) < 0.3).astype(np.float32) * np.float32(0.5)
  model = gpn.GPN(num_classes=k, num_features=f, hidden=hid, latent=lat, layers=3, dropout=0.0)
  params = model.init(jax.random.key(0), x, n)
  p = jax.tree.map(lambda a: a + 0.1, params)["params"]      # non-zero biases, so a dropped term shows
  assert p["enc_in"]["kernel"].shape == (f, hid) and p["enc_bias"].shape == (hid,)
  h = jax.nn.relu(x @ p["enc_in"]["kernel"] + p["enc_bias"])
  z = h @ p["enc_out"]["kernel"] + p["enc_out"]["bias"]
  expected = gpn.RadialFlows(k, lat, 3).apply({"params": p["flows"]}, z)
  got = model.apply({"params": p}, x, n)
  np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)
  rows, cols = np.nonzero(x)
  sparse = SparseFeatures(jnp.asarray(rows, jnp.int32), jnp.asarray(cols, jnp.int32), jnp.asarray(x[rows, cols]))
  np.testing.assert_allclose(np.asarray(model.apply({"params": p}, sparse, n)), np.asarray(expected), rtol=1e-5, atol=1e-5)


def _tiny_graph():
  g = csbm.make_csbm(num_nodes=240, num_classes=3, num_features=16, p_in=0.06, p_out=0.004, mean_scale=4.0, seed=3)
  masks = graph_shift.gpn_split(g["labels"], 0, train=0.1, val=0.2)
  batch = {"x": g["features"], "edges": g["edges"], "labels": g["labels"],
           "train_mask": masks["train_mask"].astype(np.float32), "val_mask": masks["val_mask"].astype(np.float32)}
  return g, masks, batch


@pytest.mark.slow
def test_tiny_gpn_run_beats_chance_and_flags_noise():
  g, masks, batch = _tiny_graph()
  cfg = dict(CFG, latent=4, lr=0.01, max_epochs=80, patience=80, warmup_epochs=0)

  class _Model:            # fit_gpn reads the feature count from the backbone module
    num_features = 16

  (model, params, counts), _, _ = pipeline.fit_gpn({"gpn": cfg}, batch, _Model.num_features, 3, seed=0)
  s = gpn.gpn_scores(cfg, model, params, batch, counts)
  test = masks["test_mask"]
  acc = float(np.mean(np.asarray(s["pred"])[test] == g["labels"][test]))
  assert acc > 0.6                                  # chance is 1/3
  assert np.all(np.asarray(s["alpha"]) >= 1.0)
  # far-off feature rows get more vacuity than clean ones from the node-own flow densities (scored
  # without propagation: APPNP refills a lone noisy node from its neighbours, as for X-EviProbe's linear rule)
  x = g["features"].copy()
  noisy = np.flatnonzero(test)[:20]
  x[noisy] = 8.0 * np.random.default_rng(0).normal(size=(20, 16))
  s2 = gpn.gpn_scores(dict(cfg, teleport=1.0), model, params, dict(batch, x=x), counts)
  clean = np.flatnonzero(test)[20:]
  u = np.asarray(s2["ood"])
  assert ood.auroc(np.r_[u[noisy], u[clean]], np.r_[np.ones(20), np.zeros(clean.size)]) > 0.8


@pytest.mark.slow
def test_gpn_method_trains_through_core():
  _, _, batch = _tiny_graph()
  batch = dict(batch, class_counts=np.bincount(batch["labels"][batch["train_mask"] > 0], minlength=3).astype(np.float32))
  method, _ = gpn.make_gpn_method(CFG, 16, 3)
  res = core.train(method, lambda _s: batch, {"optim": {"name": "adam", "lr": 0.01}, "num_steps": 30, "eval_every": 1,
                                              "log_every": 30}, eval_batches=[batch], shard_batch_rows=False,
                   select=core.Selection("val_uce", "min", every=1), progress=False)
  first = method.eval_fn(method.init(jax.random.key(0), batch), batch)["val_uce"]
  best = method.eval_fn(res.params, batch)["val_uce"]
  assert float(best) < float(first)


def _tiny_gpn_batch():
  _, _, batch = _tiny_graph()
  return dict(batch, class_counts=np.bincount(batch["labels"][batch["train_mask"] > 0], minlength=3).astype(np.float32))


def _leaves_by_path(params) -> dict[str, np.ndarray]:
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return {jax.tree_util.keystr(path): np.asarray(x) for path, x in flat}


@pytest.mark.slow
def test_flow_warmup_updates_only_the_flows():
  batch = _tiny_gpn_batch()
  warm, _ = gpn.make_gpn_method(CFG, 16, 3, phase="warmup")
  start = warm.init(jax.random.key(0), batch)
  res = core.train(warm, lambda _s: batch, {"optim": {"name": "adam", "lr": 0.01}, "num_steps": 5, "log_every": 5},
                   init_params=start, shard_batch_rows=False, progress=False)
  before, after = _leaves_by_path(start), _leaves_by_path(res.params)
  flow = [k for k in before if "'flows'" in k]
  assert flow and len(flow) < len(before)
  for k in before:
    if k in flow:
      assert not np.array_equal(before[k], after[k]), k
    else:
      np.testing.assert_array_equal(before[k], after[k], err_msg=k)


@pytest.mark.slow
def test_gpn_options_off_reproduce_the_one_phase_training():
  batch = _tiny_gpn_batch()
  cfg = dict(CFG, lr=0.01, max_epochs=15, patience=15, warmup_epochs=0)
  (_, params, _), _, info = pipeline.fit_gpn({"gpn": cfg}, batch, 16, 3, seed=3)
  method, _ = gpn.make_gpn_method(CFG, 16, 3)
  ref = core.train(method, lambda _s: batch, {"optim": {"name": "adam", "lr": 0.01}, "num_steps": 15, "eval_every": 1,
                                              "log_every": 15}, seed=3 + 31, eval_batches=[batch],
                   shard_batch_rows=False, select=core.Selection("val_uce", "min", every=1, patience=15),
                   progress=False)
  assert set(params) == {"params"} and "latent_norm" not in params["params"]
  jax.tree.map(np.testing.assert_array_equal, params, ref.params)
  assert 0.0 <= info["val_acc"] <= 1.0 and info["best_epoch"] >= 1
  # and the warm-up changes the result (it is not a no-op)
  (_, warmed, _), _, _ = pipeline.fit_gpn({"gpn": dict(cfg, warmup_epochs=3)}, batch, 16, 3, seed=3)
  assert not np.array_equal(np.asarray(warmed["params"]["flows"]["centre"]), np.asarray(params["params"]["flows"]["centre"]))


@pytest.mark.parametrize("typo", ["warmup_epoch", "latent_batchnorm"])
def test_gpn_config_typo_fails(typo):
  cfg = dict(CFG, lr=0.01, max_epochs=2, patience=2, warmup_epochs=0, **{typo: 1})
  with pytest.raises(ValueError, match=typo):
    pipeline.fit_gpn({"gpn": cfg}, _tiny_gpn_batch(), 16, 3, seed=0)
  with pytest.raises(KeyError, match="latent_norm"):       # a model key is required, not defaulted
    gpn.make_gpn_method({k: v for k, v in CFG.items() if k != "latent_norm"}, 16, 3)
  with pytest.raises(ValueError, match="phase"):
    gpn.make_gpn_method(CFG, 16, 3, phase="flow")


@pytest.mark.slow
def test_latent_norm_freezes_the_clean_graph_statistics():
  batch = _tiny_gpn_batch()
  cfg = dict(CFG, latent_norm=True, lr=0.01, max_epochs=10, patience=10, warmup_epochs=2)
  (model, params, counts), _, _ = pipeline.fit_gpn({"gpn": cfg}, batch, 16, 3, seed=0)
  stats = params["latent_stats"]["latent_norm"]
  z_free = {"params": params["params"]}
  # on the clean graph the frozen statistics are the graph's own: same α as the batch-statistics path
  a_frozen = gpn.gpn_scores(cfg, model, params, batch, counts)["alpha"]
  a_batch = gpn.gpn_scores(cfg, model, z_free, batch, counts)["alpha"]
  np.testing.assert_allclose(np.asarray(a_frozen), np.asarray(a_batch), rtol=1e-4)
  # on a shifted graph the frozen path does not renormalise the shift away
  shifted = dict(batch, x=batch["x"] + 5.0)
  a_shift = gpn.gpn_scores(cfg, model, params, shifted, counts)["alpha"]
  a_shift_batch = gpn.gpn_scores(cfg, model, z_free, shifted, counts)["alpha"]
  assert not np.allclose(np.asarray(a_shift), np.asarray(a_shift_batch))
  assert stats["mean"].shape == (CFG["latent"],) and np.all(np.asarray(stats["var"]) > 0)
