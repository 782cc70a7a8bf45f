"""Baselines and shared pieces: AUROC, hop distances, GNNSafe, sample averages, EPN, ensembles."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import core
from jaxml.eviprobe import backbone as bb, baselines
from jaxml.metrics import ood


def _mann_whitney(scores, labels):
  pos = [s for s, y in zip(scores, labels) if y]
  neg = [s for s, y in zip(scores, labels) if not y]
  wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
  return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("scores,labels", [
    ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]),
    ([1, 1, 1, 1], [0, 1, 0, 1]),                      # all tied -> 0.5
    ([0.2, 0.2, 0.5, 0.5, 0.9, 0.1], [0, 1, 0, 1, 1, 0]),
])
def test_auroc_equals_mann_whitney_with_average_ranks(scores, labels):
  assert ood.auroc(scores, labels) == pytest.approx(_mann_whitney(scores, labels))


def test_auroc_hand_case():
  assert ood.auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)


def _path_edges(n):
  src = np.arange(n - 1)
  return jnp.asarray(np.stack([np.r_[src, src + 1], np.r_[src + 1, src]]), jnp.int32)


def test_hop_distances_on_a_path_and_cutoff():
  d = np.asarray(baselines.hop_distances(_path_edges(8), jnp.asarray([0, 5]), 8, max_hops=3))
  np.testing.assert_array_equal(d[0], [0, 1, 2, 3, 4, 4, 4, 4])
  np.testing.assert_array_equal(d[1], [4, 4, 3, 2, 1, 0, 1, 2])


@pytest.mark.slow
def test_gkde_prior_counts():
  edges = _path_edges(5)
  logits = jnp.zeros((5, 2))
  out = baselines.gkde_prior(edges, jnp.asarray([0, 0, 0, 0, 1]), jnp.asarray([0, 4]), 2, 5, logits, max_hops=10)
  g = lambda d: np.exp(-d ** 2 / 2) / np.sqrt(2 * np.pi)   # noqa: E731
  np.testing.assert_allclose(out["alpha"][2], [1 + g(2), 1 + g(2)], rtol=1e-6)
  np.testing.assert_allclose(out["alpha"][0], [1 + g(0), 1 + g(4)], rtol=1e-6)


def test_gnnsafe_constant_energy_is_fixed_point_and_energy_sign():
  edges = _path_edges(6)
  logits = jnp.tile(jnp.asarray([[2.0, 0.0, -1.0]]), (6, 1))
  out = baselines.gnnsafe(logits, edges)
  np.testing.assert_allclose(out["ood"], -jax.nn.logsumexp(logits, -1), rtol=1e-6)
  e = baselines.energy(jnp.asarray([[10.0, 0.0], [0.1, 0.0]]))["ood"]
  assert e[0] < e[1]          # a confident node has lower energy (less OOD)


def test_sample_average_identical_samples_have_no_epistemic_part():
  logits = jax.random.normal(jax.random.key(0), (1, 7, 3))
  out = baselines.sample_average(jnp.repeat(logits, 5, 0))
  np.testing.assert_allclose(out["mi"], 0.0, atol=1e-5)
  np.testing.assert_allclose(out["var"], 0.0, atol=1e-7)
  np.testing.assert_allclose(out["probs"], jax.nn.softmax(logits[0]), rtol=1e-6)


def test_temperature_fit_recovers_scaling():
  rng = np.random.default_rng(0)
  true_logits = rng.normal(size=(4000, 4)) * 2
  labels = np.array([rng.choice(4, p=np.exp(l) / np.exp(l).sum()) for l in true_logits])
  t = baselines.fit_temperature(jnp.asarray(true_logits * 3.0, jnp.float32), jnp.asarray(labels))
  assert 2.5 < float(t) < 3.6


@pytest.mark.slow
def test_epn_probe_trains_through_core_fit():
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 3, 60).astype(np.int32)
  z = (np.eye(3)[labels] * 3 + rng.normal(size=(60, 3))).astype(np.float32)
  batch = {"z": z, "labels": labels, "train_mask": (np.arange(60) < 40).astype(np.float32),
           "val_mask": (np.arange(60) >= 40).astype(np.float32)}
  method = baselines.make_epn_method(3, hidden=8)
  opt = core.make_optimizer({"name": "adam", "lr": 0.05})
  state = core.create_train_state(method.init(jax.random.key(0), batch), opt, 0)
  before = float(method.loss_fn(state.params, batch, None)[1]["uce"])
  res = core.fit(state, core.make_train_step(method.loss_fn, opt), lambda s: batch, num_steps=60,
                 shard_batch_rows=False, log_every=60, progress=False)
  after = float(method.loss_fn(res.state.params, batch, None)[1]["uce"])
  assert after < 0.5 * before
  out = baselines.epn_scores(res.state.params, jnp.asarray(z), jnp.asarray(np.eye(3)[labels]), 3, hidden=8)
  assert np.all(np.asarray(out["alpha"]) >= 1.0)
  far = baselines.epn_scores(res.state.params, jnp.asarray(z * 0), jnp.zeros((60, 3)), 3, hidden=8)
  assert float(far["ood"].mean()) > float(out["ood"].mean())     # less evidence away from the data


@pytest.mark.slow
def test_stacked_ensemble_gradient_equals_members_alone():
  rng = np.random.default_rng(0)
  n, f = 12, 5
  a = np.triu(rng.random((n, n)) < 0.3, 1)
  src, dst = np.nonzero(a | a.T)
  batch = {"x": rng.normal(size=(n, f)).astype(np.float32), "edges": np.stack([src, dst]).astype(np.int32),
           "labels": rng.integers(0, 3, n).astype(np.int32), "train_mask": (np.arange(n) < 6).astype(np.float32),
           "val_mask": (np.arange(n) >= 6).astype(np.float32)}
  model = bb.make_backbone({"name": "gcn", "hidden": 4, "dropout": 0.5}, f, 3)
  stacked = bb.make_backbone_method(model, num_members=3)
  single = bb.make_backbone_method(model)
  params = stacked.init(jax.random.key(0), batch)
  rng_step = jax.random.key(7)
  grads = jax.jit(jax.grad(lambda p: stacked.loss_fn(p, batch, rng_step)[0]))(params)
  keys = bb.member_keys(rng_step, 3)     # member 0 gets rng_step itself, as the single model
  single_grad = jax.jit(jax.grad(lambda p, k: single.loss_fn(p, batch, k)[0]))
  for i in range(3):
    g_i = single_grad(bb.member(params, i), keys[i])
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), bb.member(grads, i), g_i)
  val = stacked.eval_fn(params, batch)["val_ce"]
  assert val.shape == (3,)
