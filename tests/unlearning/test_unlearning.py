"""Behavioural properties of Representation Unlearning, the Retrain baseline and the MIAs."""

import jax
import numpy as np
import pytest

from jaxml import core
from jaxml.metrics import mia
from jaxml.unlearning import api, baselines, targets
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.sampling import with_values
from tests.unlearning.fixtures import MODEL, TRAIN, trained_original


@pytest.fixture(scope="module")
def trained():
  return trained_original()


def _predict(params, x):
  return np.asarray(MODEL.apply({"params": params}, x))


@pytest.mark.parametrize("zero_shot", [False, True])
def test_empty_forget_set_leaves_model_unchanged(trained, zero_shot):
  task, params = trained
  empty = np.zeros(0, np.int64)
  cfg = {"zero_shot": zero_shot, "batch_size": 16, "min_steps": 5, "hidden": (8,), "lr": 1e-2}
  out = api.unlearn(cfg, MODEL, params, task.x_train, task.y_train, np.arange(task.x_train.shape[0]), empty,
                    num_classes=3, seed=0)
  assert out.fit.num_steps == 5
  logits, _ = api.make_predict_fn(cfg, MODEL)(out.params, task.x_test)
  np.testing.assert_array_equal(np.asarray(logits), _predict(params, task.x_test))


def test_standard_unlearning_moves_forget_features_to_the_mean_and_keeps_retain(trained):
  task, params = trained
  cfg = {"batch_size": 16, "min_steps": 80, "hidden": (16,), "lr": 1e-2, "beta": 0.1}
  out = api.unlearn(cfg, MODEL, params, task.x_train, task.y_train, task.retain_idx, task.forget_idx,
                    num_classes=3, forget_classes=task.forget_classes, seed=0)
  logits, z_new = api.make_predict_fn(cfg, MODEL)(out.params, task.x_train)
  z_old = np.asarray(model_lib.encode(MODEL, params, task.x_train))
  target = z_old.mean(axis=0)           # minimiser of L_f: the mean representation of D
  f, r = task.forget_idx, task.retain_idx
  before = np.linalg.norm(z_old[f] - target, axis=-1).mean()
  after = np.linalg.norm(np.asarray(z_new)[f] - target, axis=-1).mean()
  assert after < 0.3 * before, (before, after)
  agree = np.mean(np.argmax(np.asarray(logits)[r], -1) == np.argmax(_predict(params, task.x_train[r]), -1))
  assert agree > 0.95, agree


def test_retrain_never_sees_forget_rows(trained, monkeypatch):
  task, params = trained
  x = task.x_train.copy()
  x[task.forget_idx] = np.nan          # any forget row reaching the model would make it non-finite
  task = task._replace(x_train=x)
  seen = []
  real_train = core.train

  def recording_train(trainer, batches, config, **kw):
    for step in range(int(config["num_steps"])):
      seen.append(np.asarray(batches(step)["ir"]))
    return real_train(trainer, batches, config, **kw)

  monkeypatch.setattr(core, "train", recording_train)
  out = baselines.run_baseline("retrain", MODEL, params, task, seed=1, overrides=TRAIN)
  rows = np.concatenate(seen)
  assert np.intersect1d(rows, task.forget_idx).size == 0
  assert set(rows.tolist()) == set(task.retain_idx.tolist())
  assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(out.params))


@pytest.mark.slow
def test_mia_near_chance_for_model_trained_without_forget_set():
  # Random labels: a member is recognisable only through memorisation.
  rng = np.random.default_rng(0)
  n, n_test, dim = 320, 320, 24
  x = rng.normal(size=(n + n_test, dim)).astype(np.float32)
  y = rng.integers(0, 3, size=n + n_test).astype(np.int32)
  forget = rng.choice(n, 32, replace=False)
  retain = np.setdiff1d(np.arange(n), forget)
  from jaxml.unlearning.task import UnlearningTask
  task = UnlearningTask(x[:n], y[:n], retain, forget, x[n:], y[n:], 3)
  model = model_lib.MLPClassifier(3, (64, 32))
  hp = baselines.hyperparameters("retrain", {"epochs": 150.0, "batch_size": 32, "lr": 3e-3})
  fit = baselines.train_classifier(hp, model, task, retain, seed=0)      # never sees D_f
  logits_train = np.asarray(model.apply({"params": fit.params}, task.x_train))
  logits_test = np.asarray(model.apply({"params": fit.params}, task.x_test))
  # The attack works: retained members are separable from test rows ...
  assert mia.loss_mia_auc(logits_train[retain], y[retain], logits_test, task.y_test) > 0.8
  # ... but the forget rows (never trained on) look like test rows.
  auc = mia.loss_mia_auc(logits_train[forget], y[forget], logits_test, task.y_test)
  assert abs(auc - 0.5) < 0.15, auc
  eff_f = mia.svc_mia_efficacy(logits_train[retain], y[retain], logits_test, task.y_test, logits_train[forget], y[forget])
  eff_t = mia.svc_mia_efficacy(logits_train[retain], y[retain], logits_test, task.y_test, logits_test, task.y_test)
  assert abs(eff_f - eff_t) < 20.0, (eff_f, eff_t)
  assert eff_f > 60.0


def test_zero_shot_never_reads_retained_inputs(trained):
  task, params = trained
  x = task.x_train.copy()
  x[task.retain_idx] = np.nan          # only forget rows (and class counts) may be used
  cfg = {"zero_shot": True, "batch_size": 16, "min_steps": 5, "hidden": (8,), "lr": 1e-2, "beta": 0.1}
  out = api.unlearn(cfg, MODEL, params, x, task.y_train, task.retain_idx, task.forget_idx, num_classes=3,
                    forget_classes=task.forget_classes, seed=0)
  assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(out.params))
  assert out.fit.num_steps == 10          # max(min_steps=5, 5 epochs * 32 forget rows / 16)


@pytest.mark.slow
def test_extensions_rescaled_prototypes_and_label_term(trained):
  task, params = trained
  stats = targets.class_statistics(task.y_train, 3, (1,), 7.0)
  np.testing.assert_allclose(stats["pi_retain"], [0.5, 0.0, 0.5])
  p = api.init_params({"prototypes": "rescaled"}, jax.random.key(0), params, 8, stats)
  w = np.asarray(api._prototypes(api._cfg({"prototypes": "rescaled"}), p))
  np.testing.assert_allclose(np.linalg.norm(w, axis=-1), 7.0, rtol=1e-5)
  loss_fn = api.make_loss_fn({"label_weight": 0.5}, MODEL)
  z = np.asarray(model_lib.encode(MODEL, params, task.x_train[:8]))
  batch = {"zr": z, "yr": task.y_train[:8], "zf": z, "wf": np.ones(8, np.float32), "zref": z}
  batch = with_values(lambda step: batch, 8, **api.batch_values({"label_weight": 0.5}))(0)
  loss, aux = loss_fn(p, batch, jax.random.key(0))
  assert float(aux["retain_loss"]) == 0.0          # T = identity at init
  np.testing.assert_allclose(float(loss), float(0.01 * aux["forget_loss"] + 0.5 * aux["label_ce"]), rtol=1e-5)


def test_identity_anchor_is_zero_at_identity_and_measures_the_departure(trained):
  task, params = trained
  stats = targets.class_statistics(task.y_train, 3, (1,), 5.0)
  cfg = {"zero_shot": True, "transform": "linear", "identity_weight": 2.0}
  p = api.init_params(cfg, jax.random.key(0), params, 8, stats)
  z = np.asarray(model_lib.encode(MODEL, params, task.x_train[:64]))
  batch = with_values(lambda step: {"zf": z, "wf": np.ones(64, np.float32)}, 64, **api.batch_values(cfg))(0)
  loss_fn, plain_fn = api.make_loss_fn(cfg, MODEL), api.make_loss_fn(cfg | {"identity_weight": 0.0}, MODEL)
  loss, aux = loss_fn(p, batch, jax.random.key(1))
  assert float(aux["identity_anchor"]) == 0.0                     # T = identity at init
  np.testing.assert_allclose(float(loss), float(plain_fn(p, batch, jax.random.key(1))[0]), rtol=1e-6)
  # T = 1.3 I: the anchor is 0.09 E||u||^2 = 0.09 r^2 (r = 5), up to the Monte-Carlo error of 64 probes.
  scaled = p | {"transform": jax.tree.map(lambda a: 1.3 * a if a.ndim == 2 else a, p["transform"])}
  _, aux = loss_fn(scaled, batch, jax.random.key(1))
  np.testing.assert_allclose(float(aux["identity_anchor"]), 0.09 * 25.0, rtol=0.15)


def _recorded_batches(monkeypatch, cfg, task, params, x=None):
  """(the batches `unlearn` trains on, one per step (core.train recorded); its output)."""
  seen = []
  real_train = core.train

  def recording_train(trainer, batches, config, **kw):
    seen.extend(batches(step) for step in range(int(config["num_steps"])))
    return real_train(trainer, batches, config, **kw)

  monkeypatch.setattr(core, "train", recording_train)
  out = api.unlearn(cfg, MODEL, params, task.x_train if x is None else x, task.y_train, task.retain_idx,
                    task.forget_idx, num_classes=3, forget_classes=task.forget_classes, seed=0)
  return seen, out


def _rows_of(z_batch, z_all):
  """Row index of every feature row of a batch in the full feature table (rows are distinct)."""
  d = ((np.asarray(z_batch)[:, None, :] - z_all[None]) ** 2).sum(-1)
  assert np.allclose(d.min(1), 0.0, atol=1e-8)
  return d.argmin(1)


def test_standard_batches_sample_every_row_of_each_set_with_its_label(trained, monkeypatch):
  task, params = trained
  # 12 steps x 16 rows = 192 positions: 3 passes over D_r (64 rows), 6 over D_f (32), 2 over D (96).
  cfg = {"batch_size": 16, "min_steps": 12, "epochs": 0.0, "hidden": (8,), "lr": 1e-2}
  seen, _ = _recorded_batches(monkeypatch, cfg, task, params)
  z = np.asarray(model_lib.encode(MODEL, params, task.x_train))
  count = lambda key: np.bincount(np.concatenate([_rows_of(b[key], z) for b in seen]), minlength=96)  # noqa: E731
  np.testing.assert_array_equal(count("zr"), np.where(np.isin(np.arange(96), task.retain_idx), 3, 0))
  np.testing.assert_array_equal(count("zf"), np.where(np.isin(np.arange(96), task.forget_idx), 6, 0))
  np.testing.assert_array_equal(count("zref"), np.full(96, 2))
  r = np.concatenate([_rows_of(b["zr"], z) for b in seen])
  np.testing.assert_array_equal(np.concatenate([b["yr"] for b in seen]), task.y_train[r])
  assert all(np.all(b["wf"] == 1.0) for b in seen)


@pytest.mark.parametrize("target", ["mean", "uniform"])
def test_reference_rows_average_to_the_forget_target(trained, monkeypatch, target):
  # L_f's minimiser is the mean of the reference rows: over whole passes of D it must be the target, the
  # mean representation of D itself or `targets.uniform_target` at that mean (computed here in numpy).
  task, params = trained
  cfg = {"batch_size": 16, "min_steps": 6, "epochs": 0.0, "hidden": (8,), "lr": 1e-2, "target": target}
  seen, out = _recorded_batches(monkeypatch, cfg, task, params)
  z = np.asarray(model_lib.encode(MODEL, params, task.x_train), np.float64)
  want = z.mean(0)
  if target == "uniform":
    want = targets.uniform_target(params["head"]["kernel"], params["head"]["bias"], want, task.forget_classes, 4.0)
  got = np.concatenate([b["zref"] for b in seen]).mean(0)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
  info, probs = out.target_info, targets.head_probs(MODEL, params, z.mean(0))
  assert info["mean_argmax"] == np.argmax(probs) and abs(info["mean_pmax"] - probs.max()) < 1e-5


def test_zero_shot_batches_sample_every_forget_row(trained, monkeypatch):
  task, params = trained
  x = task.x_train.copy()
  x[task.retain_idx] = np.nan
  cfg = {"zero_shot": True, "batch_size": 16, "min_steps": 2, "epochs": 0.0, "hidden": (8,), "lr": 1e-2}
  seen, _ = _recorded_batches(monkeypatch, cfg, task, params, x)
  z = np.asarray(model_lib.encode(MODEL, params, task.x_train))
  f = np.concatenate([_rows_of(b["zf"], z) for b in seen])
  assert sorted(f.tolist()) == sorted(task.forget_idx.tolist())          # 2 x 16 = the 32 forget rows, once each
  assert set(seen[0]) == {"zf", "wf", "hp_beta", "hp_noise_scale", "hp_label_weight", "hp_identity_weight"}
