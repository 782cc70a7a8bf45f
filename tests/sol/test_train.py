"""SOL on the shared loop through `jaxml.sol`'s pipeline: a 1-D toy learns its ranks, the relabelling
schedule, validation selection, every method trains (the experiment's smoke run: tests/test_configs.py)."""


import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import core, sol
from jaxml.sol import baselines

C = 5


def _toy(n=80, seed=0):
  rng = np.random.default_rng(seed)
  y = np.repeat(np.arange(C), n // C).astype(np.int32)
  x = (y / (C - 1) + 0.03 * rng.normal(size=y.shape)).astype(np.float32)[:, None]
  return x, y


def _settings(**overrides):
  base = dict(num_classes=C, hidden=(16,), embed_dim=2, pairs_per_class=8, refresh_every=5, relabel_start=5,
              relabel_every=5)
  return {**base, **overrides}


def _train(steps=100, select_every=20, batch=8):
  return {"optim": {"name": "adam", "lr": 1e-2, "schedule": "constant"}, "steps": steps, "batch_size": batch,
          "select_every": select_every, "log_every": 10 ** 6}


@pytest.fixture(scope="module")
def experiment():
  from experiments import sol_ordinal
  return sol_ordinal


@pytest.mark.slow
def test_toy_learns_its_ranks_and_selection_picks_the_best_decoder():
  x, y = _toy()
  xv, yv = _toy(40, seed=1)
  trainer = sol.make_trainer("sol", _settings(relabel=False, sigma=0.5), _train())
  fitted = sol.fit(trainer, x, y, xv, yv, seed=0)
  assert fitted.val_mae[fitted.decoder] == min(fitted.val_mae.values())
  assert fitted.best_step % 20 == 0 and 0 < fitted.best_step <= 100
  assert np.mean(sol.predict(trainer, fitted, xv) == yv) > 0.9
  # embeddings of consecutive ranks are ordered along the circle: centroid cosines fall with distance
  cent = np.asarray(fitted.extra["centroids"])
  assert np.all(np.diff(cent @ cent[0]) < 0)


def test_relabel_schedule_is_in_steps_and_separate_from_the_refresh():
  s = sol.sol_settings(dict(refresh_every=100, relabel_start=1000, relabel_every=200))
  assert sol.relabel_steps(s, 1600) == [1000, 1200, 1400, 1600]
  assert sol.relabel_steps({**s, "relabel": False}, 1600) == []
  with pytest.raises(ValueError, match="multiple of refresh_every"):
    sol.sol_settings(dict(refresh_every=100, relabel_every=150))
  # a start off the refresh grid would match no refresh step: relabelling would silently never run
  assert sol.relabel_steps({**s, "relabel_start": 150}, 1600) == []
  with pytest.raises(ValueError, match="relabel_start must be a multiple of refresh_every"):
    sol.sol_settings(dict(refresh_every=100, relabel_start=150, relabel_every=100))
  assert sol.relabel_steps(sol.sol_settings(dict(refresh_every=50, relabel_start=150, relabel_every=100)), 600) == [
      150, 250, 350, 450, 550]
  with pytest.raises(ValueError, match=r"unknown SOL setting\(s\) \[.sigmaa.\]"):
    sol.sol_settings(dict(sigmaa=1.0))


@pytest.mark.slow
def test_relabelling_cleans_outliers_on_the_toy():
  x, y = _toy()
  y_noisy = y.copy()
  y_noisy[::8] = np.where(y[::8] < 2, 4, 0)       # 10 far outliers
  xv, yv = _toy(40, seed=1)
  trainer = sol.make_trainer("sol", _settings(sigma=0.5, relabel_start=60, relabel_every=10, eta=0.5),
                             _train(steps=100, select_every=100))
  fitted = sol.fit(trainer, x, y_noisy, xv, yv, seed=0)
  assert [r["step"] for r in fitted.refreshes] == [60, 70, 80, 90, 100]
  labels = np.asarray(fitted.extra["labels"])
  assert np.abs(labels - y).mean() < np.abs(y_noisy - y).mean()
  flagged = np.asarray(fitted.extra["flagged"])
  assert flagged[::8].mean() > 0.5                 # most outliers flagged


@pytest.mark.slow
@pytest.mark.parametrize("name", sol.ALL_METHODS)
def test_every_method_takes_finite_steps_and_decodes_in_range(name):
  x, y = _toy(32)
  trainer = sol.make_trainer(name, _settings(), _train(steps=4, select_every=2))
  fitted = sol.fit(trainer, x, y, x[:8], y[:8], seed=0)
  chex.assert_tree_all_finite(fitted.params)
  for dec in trainer.learner.decoders:
    pred = sol.predict(trainer, fitted, x, dec)
    assert pred.shape == (len(x),) and pred.min() >= 0 and pred.max() < C


def test_coral_biases_start_ordered():
  from jaxml.sol.model import RankNet
  x = jax.random.normal(jax.random.key(0), (8, 3))
  params = RankNet(num_classes=6, head="coral", hidden=(8,), embed_dim=4).init(jax.random.key(1), x)
  assert np.all(np.diff(np.asarray(params["params"]["coral_bias"])) < 0)


def _sigmoid(z):
  return 1.0 / (1.0 + np.exp(-np.asarray(z, np.float64)))


def test_corn_loss_and_decoder_by_hand():
  """CORN: task k sees the rows with r >= k (all rows for k = 0) with target 1[r > k], and the rank is the
  count of k with P(r > k) = prod_{j<=k} sigma(g_j) > 1/2. Here every sigma(g_k) = sigma(1) = 0.73 > 1/2 (a
  CORAL-style count would say 4), but the products 0.73, 0.53, 0.39, 0.29 give rank 2."""
  learner = sol.make_learner("corn", _settings())
  x = jnp.asarray([[0.1], [0.5], [0.9]], jnp.float32)
  y = np.array([0, 2, 4], np.int32)
  params = learner.method.init(jax.random.key(0), {"x": x, "y": y})
  loss, _ = learner.method.loss_fn(params, {"x": x, "y": jnp.asarray(y)}, jax.random.key(1))
  from jaxml.sol.model import RankNet
  net = RankNet(num_classes=C, head="corn", hidden=(16,), embed_dim=2)
  p = _sigmoid(net.apply({"params": params}, x)["logits"])               # [3, C - 1]
  terms = []                                                              # (row, task) pairs CORN trains on
  for i, r in enumerate(y):
    for k in range(C - 1):
      if r >= k:
        terms.append(-np.log(p[i, k]) if r > k else -np.log(1.0 - p[i, k]))
  assert len(terms) == 1 + 3 + 4
  np.testing.assert_allclose(float(loss), np.mean(terms), rtol=1e-5)
  logits = jnp.asarray([[1.0, 1.0, 1.0, 1.0], [3.0, -0.5, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0]])
  pred = baselines.decode_head("corn", {"logits": logits}, C)
  # Row 2: sigma(3) = 0.95, then 0.95 * sigma(-0.5) = 0.36 < 1/2 and every later product is smaller, so the
  # two confident tasks after the dip do not count (a CORAL count would say 3). Row 3: sigma(4)^4 = 0.93.
  np.testing.assert_array_equal(np.asarray(pred), [2, 1, 4])


def test_summary_of_a_run_without_sol_lists_the_baselines_and_compares_nothing(experiment):
  rows = [{"method": m, "dataset": "abalone/gaussian:0.1", "split": p, "seed": 0, "metrics": {"mae": v + p}}
          for m, v in (("l1", 1.0), ("corn", 0.5)) for p in range(3)]
  summary, text = experiment.summarise(rows, "gaussian:0.1")
  assert summary["datasets"] == {} and summary["wins"] == 0
  assert "| corn | 1.500 ± 0.816 |" in text and "| l1 | 2.000 ± 0.816 |" in text


def test_unknown_names_rejected(experiment):
  from configs import sol_ordinal as cfgmod
  with pytest.raises(ValueError, match="unknown method"):
    experiment.plan(cfgmod.get_config("smoke:methods=sol+bogus"))
  with pytest.raises(ValueError, match="unknown dataset"):
    experiment.plan(cfgmod.get_config("smoke:datasets=nope"))
  with pytest.raises(ValueError, match="unknown noise kind"):
    experiment.plan(cfgmod.get_config("smoke:noise=weird:0.2"))


@pytest.mark.slow
def test_countdots_cnn_path_runs(experiment, tmp_path):
  from configs import sol_ordinal as cfgmod
  config = cfgmod.get_config("countdots:methods=sol+l1,partitions=1,noise=gaussian:0.4")
  config.data.countdots.num_train, config.data.countdots.num_test = 64, 16
  config.train.steps, config.train.batch_size, config.train.select_every = 20, 16, 10
  config.sol.refresh_every = config.sol.relabel_every = config.sol.relabel_start = 10
  rows = experiment.run(config, str(tmp_path))
  assert {r["method"] for r in rows} == {"sol", "l1"} | {f"sol[{d}]" for d in sol.DECODERS}
  assert all(r["dataset"] == "countdots/gaussian:0.4" for r in rows)
