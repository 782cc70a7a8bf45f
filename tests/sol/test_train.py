"""SOL on the shared loop: a 1-D toy learns its ranks, resume is exact, every method trains,
and the experiment's smoke path writes results.json."""

import json

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxml import core, sol
from jaxml.sol import losses as L

C = 5


def _toy(n=80, seed=0):
  rng = np.random.default_rng(seed)
  y = np.repeat(np.arange(C), n // C).astype(np.int32)
  x = (y / (C - 1) + 0.03 * rng.normal(size=y.shape)).astype(np.float32)[:, None]
  return x, y


def _config(epochs=20, batch=8, **sol_overrides):
  cfg = ml_collections.ConfigDict()
  cfg.train = dict(epochs=epochs, max_steps=0, batch_size=batch, checkpoints=False)
  cfg.optim = dict(name="adam", lr=1e-2, weight_decay=0.0, clip_norm=0.0, schedule="constant", warmup_steps=0)
  cfg.log_every = 1000
  cfg.checkpoint_every = 0
  cfg.sol = dict(sol.DEFAULTS, num_classes=C, hidden=(16,), embed_dim=2, pairs_per_class=8, **sol_overrides)
  return cfg


@pytest.fixture(scope="module")
def experiment():
  from experiments import sol_ordinal
  return sol_ordinal


def test_toy_learns_minimal_profile_at_label(experiment):
  x, y = _toy()
  cfg = _config(relabel=False, sigma=0.5)
  learner = sol.make_learner("sol", cfg.sol)
  state, _ = experiment.fit_learner(learner, x, y, cfg, seed=0, name="toy", progress=False)
  pred = experiment.predict(learner, state, x)
  assert np.mean(pred == y) > 0.9
  # embeddings of consecutive ranks are ordered along the circle: centroid cosines fall with distance
  cent = np.asarray(state.extra["centroids"])
  cos0 = cent @ cent[0]
  assert np.all(np.diff(cos0) < 0)


def test_resume_is_exact_with_relabelling_hook(experiment, tmp_path):
  x, y = _toy(40)
  y_noisy = y.copy()
  y_noisy[::7] = (y_noisy[::7] + 3) % C          # some outliers so relabelling has work
  cfg = _config(epochs=4, batch=8, start_epoch=-1, relabel_step="half_delta")
  cfg.checkpoint_every = 10                       # 5 steps/epoch: checkpoints on refresh steps
  learner = sol.make_learner("sol", cfg.sol)
  full, _ = experiment.fit_learner(learner, x, y_noisy, cfg, seed=1, name="full", progress=False,
                                   ckpt_dir=str(tmp_path / "full"))
  cfg.train.epochs = 2                            # an "interrupted" run: stops after step 10 ...
  experiment.fit_learner(learner, x, y_noisy, cfg, seed=1, name="cut", progress=False,
                         ckpt_dir=str(tmp_path / "cut"))
  cfg.train.epochs = 4                            # ... and resumes to step 20
  resumed, _ = experiment.fit_learner(learner, x, y_noisy, cfg, seed=1, name="cut", progress=False,
                                      ckpt_dir=str(tmp_path / "cut"))
  assert int(resumed.step) == 20
  chex.assert_trees_all_close(resumed.params, full.params, rtol=1e-6, atol=1e-7)
  chex.assert_trees_all_close(resumed.extra, full.extra, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sol.ALL_METHODS)
def test_every_method_takes_finite_steps(name):
  x, y = _toy(32)
  cfg = _config()
  learner = sol.make_learner(name, cfg.sol)
  if learner.batch_kind == "pairs":
    batch = {"x": x[:16], "idx": np.arange(16, dtype=np.int32)}
  else:
    batch = {"x": x[:16], "y": y[:16]}
  params = learner.method.init(jax.random.key(0), batch)
  opt = core.make_optimizer(cfg.optim, 10)
  extra = sol.init_extra(cfg.sol, params, x, y, variant=name) if learner.uses_extra else None
  state = core.create_train_state(params, opt, 0, extra=extra)
  step = jax.jit(core.make_train_step(learner.method.loss_fn, opt, uses_extra=learner.uses_extra))
  for _ in range(2):
    state, metrics = step(state, batch)
  chex.assert_tree_all_finite(state.params)
  assert np.isfinite(float(metrics["loss"]))
  for fn in learner.predictors.values():
    pred = np.asarray(fn(state.params, state.extra, jnp.asarray(x)))
    assert pred.shape == (len(x),) and pred.min() >= 0 and pred.max() < C


def test_coral_and_corn_cumulative_probabilities_are_monotone():
  from jaxml.sol.model import RankNet
  x = jax.random.normal(jax.random.key(0), (8, 3))
  for head in ("coral", "corn"):
    net = RankNet(num_classes=6, head=head, hidden=(8,), embed_dim=4)
    params = net.init(jax.random.key(1), x)
    logits = net.apply(params, x)["logits"]
    probs = jax.nn.sigmoid(logits) if head == "coral" else jnp.cumprod(jax.nn.sigmoid(logits), -1)
    if head == "coral":   # shared weight + ordered biases
      params = jax.tree.map(lambda p: p, params)
      assert np.all(np.diff(np.asarray(params["params"]["coral_bias"])) <= 0)
    assert np.all(np.diff(np.asarray(probs), axis=-1) <= 1e-7)


def test_experiment_smoke_writes_results(experiment, tmp_path):
  from configs import sol_ordinal as cfgmod
  config = cfgmod.get_config("smoke:methods=sol+ce")
  config.train.epochs = 1
  config.noise.sweep_rates = ()
  rows = experiment.run(config, str(tmp_path))
  assert {r["method"] for r in rows} == {"sol", "sol_knn", "ce"}
  for r in rows:
    assert set(r) == {"method", "dataset", "split", "seed", "metrics", "cost"}
    assert 0 <= r["metrics"]["mae"] <= 9 and r["metrics"]["corruption"] > 0
  sol_row = next(r for r in rows if r["method"] == "sol")
  assert {"flag_precision", "flag_recall", "label_mae_after"} <= set(sol_row["metrics"])
  summary = json.load(open(tmp_path / "summary.json"))
  assert summary[0]["datasets"]["machinecpu"]["best_baseline"] == "ce"
  # a rerun reads the cached runs instead of training again
  again = experiment.run(config, str(tmp_path))
  assert [r["metrics"]["mae"] for r in again] == [r["metrics"]["mae"] for r in rows]


def test_unknown_names_rejected(experiment):
  from configs import sol_ordinal as cfgmod
  with pytest.raises(ValueError, match="unknown method"):
    experiment.validate(cfgmod.get_config("smoke:methods=sol+bogus"))
  with pytest.raises(ValueError, match="unknown dataset"):
    experiment.validate(cfgmod.get_config("smoke:datasets=nope"))
  with pytest.raises(ValueError, match="unknown noise kind"):
    experiment.validate(cfgmod.get_config("smoke:noise=weird:0.2"))


@pytest.mark.slow
def test_countdots_cnn_path_runs(experiment, tmp_path):
  from configs import sol_ordinal as cfgmod
  config = cfgmod.get_config("countdots:methods=sol+ce")
  config.data.countdots.num_train, config.data.countdots.num_test = 64, 16
  config.train.epochs, config.train.batch_size = 1, 16
  rows = experiment.run(config, str(tmp_path))
  assert {r["method"] for r in rows} == {"sol", "sol_knn", "ce"}
  assert all(r["dataset"] == "countdots/gaussian:0.4" for r in rows)
