"""The one run signature: plain-dict settings, every method through run_method, one compile per grid."""

import jax
import numpy as np
import pytest

from jaxml import unlearning
from jaxml.unlearning import model as model_lib
from jaxml.unlearning import runner
from tests.unlearning import fixtures
from tests.unlearning.fixtures import gaussian_task

MODEL = model_lib.MLPClassifier(3, (16, 8))


@pytest.mark.slow
def test_run_method_one_signature_and_a_grid_compiles_once():
  task = gaussian_task()
  cache: dict = {}
  orig = unlearning.run_method("original", {"epochs": 5.0, "batch_size": 16, "lr": 3e-3}, MODEL, None, task,
                               seed=0, cache=cache)
  ru = {"batch_size": 16, "min_steps": 4, "hidden": [8], "lr": 1e-2}       # a plain dict (list for a tuple)
  outs = {}
  for name, cfg in (("ru", ru), ("ru_zs", ru), ("grad_ascent", {"min_steps": 2}), ("neggrad_plus", {"epochs": 0.5})):
    outs[name] = unlearning.run_method(name, cfg, MODEL, orig.params, task, seed=0, cache=cache)
    logits, feats = outs[name].predict(task.x_test)
    assert logits.shape == (task.x_test.shape[0], 3) and np.isfinite(np.asarray(logits)).all()
    assert outs[name].num_steps >= 1
  n_trainers = len(cache)
  # a grid over float settings (beta, lr, alpha) reuses the same core.Trainer (hence its compiled step)
  for beta, lr in ((1e-3, 1e-3), (1.0, 3e-2)):
    out = unlearning.run_method("ru", ru | {"beta": beta, "lr": lr}, MODEL, orig.params, task, seed=0, cache=cache)
    assert not jax.tree.all(jax.tree.map(np.array_equal, out.params["transform"], outs["ru"].params["transform"]))
  unlearning.run_method("neggrad_plus", {"epochs": 0.5, "alpha": 0.5, "lr": 1e-2}, MODEL, orig.params, task, seed=0,
                        cache=cache)
  assert len(cache) == n_trainers


def test_knn_other_side_by_hand():
  # 1-D points 0, 1.1, 2 | 10, 11.5 with the third one forgotten; k = 1: row 1's nearest is row 2
  # (0.9 < 1.1) and row 2's is row 1, so exactly those two have a neighbour on the other side.
  z = np.array([[0.0], [1.1], [2.0], [10.0], [11.5]])
  side = np.array([False, False, True, False, False])
  for chunk in (2, 1024):   # chunks offset the self-exclusion
    np.testing.assert_array_equal(runner.knn_other_side(z, side, 1, chunk=chunk), [False, True, True, False, False])
  # k = 2: row 0's neighbours are rows 1 and 2 -> hit; row 3's are rows 4 and 2 -> hit; row 4's are 3 and 2 -> hit.
  np.testing.assert_array_equal(runner.knn_other_side(z, side, 2, chunk=2), [True, True, True, True, True])


def test_representation_overlap_in_percent():
  task, params = fixtures.trained_original()
  out = runner.representation_overlap(fixtures.MODEL, params, task, k=3)
  z = np.asarray(fixtures.MODEL.apply({"params": params}, task.x_train, method=lambda m, x: m.encoder(x)))
  side = np.isin(np.arange(task.x_train.shape[0]), task.forget_idx)
  hit = runner.knn_other_side(z, side, 3)
  assert out["retain_knn_forget"] == 100.0 * hit[task.retain_idx].mean()
  assert out["forget_knn_retain"] == 100.0 * hit[task.forget_idx].mean()


def test_knn_any_by_hand():
  ref = np.array([[0.0], [1.0], [5.0], [6.0]])
  mask = np.array([False, False, True, False])
  q = np.array([[0.2], [4.6], [5.8]])
  np.testing.assert_array_equal(runner.knn_any(q, ref, mask, 1, chunk=2), [False, True, False])
  np.testing.assert_array_equal(runner.knn_any(q, ref, mask, 2), [False, True, True])


def test_retained_flips_counts_rows_by_hand():
  from jaxml.unlearning import evaluate as ev
  from jaxml.unlearning.task import UnlearningTask
  # Train z: class 0 at 0 and 1, class 2 (forgotten) at 10, class 1 at 20. Test: class 0 at 0.1 and 9
  # (nearest train row: the forget row), class 1 at 20 and 21, class 2 (forgotten, not counted) at 10.
  x_tr, y_tr = np.zeros((4, 1), np.float32), np.array([0, 0, 2, 1])
  y_te = np.array([0, 0, 1, 1, 2])
  task = UnlearningTask(x_tr, y_tr, np.array([0, 1, 3]), np.array([2]), np.zeros((5, 1), np.float32), y_te, 3, (2,),
                        y_te == 2, y_tr)
  z_tr, z_te = np.array([[0.0], [1.0], [10.0], [20.0]]), np.array([[0.1], [9.0], [20.0], [21.0], [10.0]])
  onehot = lambda p: np.eye(3)[p]  # noqa: E731
  orig = ev.Outputs(onehot(y_tr), z_tr, onehot([0, 0, 1, 2, 2]), z_te)          # right on 3 of 4 retained rows
  new = ev.Outputs(onehot(y_tr), z_tr, onehot([0, 1, 0, 1, 0]), z_te)           # breaks rows 1, 2; fixes row 3
  out = runner.retained_flips(orig, new, task, mean_class=1.0, k=1)
  assert out == {"flip_r": 50.0, "fix_r": 25.0, "flip_to_mean_cls": 50.0, "flip_near_forget": 50.0,
                 "near_forget_r": 25.0}


def test_masked_head_shift_by_hand():
  from jaxml.unlearning import evaluate as ev
  from jaxml.unlearning.task import UnlearningTask
  # Class 2 forgotten. Retained test rows (labels 0, 0, 1, 1): the original predicts 0, 2, 2, 1 (2 of 4 right);
  # with class 2 masked, row 1 falls to its next logit (0, right) and row 2 to 0 (wrong): 3 of 4 -> +25 points.
  # Train: retained rows all right and never second to class 2; the forget row's next class is 1.
  y_tr = np.array([0, 1, 2])
  task = UnlearningTask(np.zeros((3, 1), np.float32), y_tr, np.array([0, 1]), np.array([2]), np.zeros((5, 1), np.float32),
                        np.array([0, 0, 1, 1, 2]), 3, (2,), np.array([False] * 4 + [True]), y_tr)
  lg_tr = np.array([[3.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 1.0, 3.0]])
  lg_te = np.array([[3.0, 0.0, 1.0], [2.0, 1.0, 3.0], [2.0, 1.0, 3.0], [0.0, 3.0, 1.0], [0.0, 0.0, 3.0]])
  orig = ev.Outputs(lg_tr, np.zeros((3, 1)), lg_te, np.zeros((5, 1)))
  assert runner.masked_head_shift(orig, task) == {"mask_FA": 0.0, "mask_dRA": 0.0, "mask_dTA_r": 25.0}
  assert runner.masked_head_shift(orig, task._replace(forget_classes=())) == {}


@pytest.mark.slow
def test_ru_val_takes_its_target_from_its_settings():
  task, params = fixtures.trained_original()
  ru = {"batch_size": 16, "min_steps": 3, "hidden": [8], "lr": 1e-2}
  run = lambda name, cfg: unlearning.run_method(name, cfg, fixtures.MODEL, params, task, seed=0)  # noqa: E731
  same = lambda a, b: jax.tree.all(jax.tree.map(np.array_equal, a.params["transform"], b.params["transform"]))  # noqa: E731
  uniform, mean = run("ru_uniform", ru), run("ru", ru)
  assert same(run("ru_val", ru | {"target": "uniform"}), uniform) and same(run("ru_val", ru), mean)
  assert not same(uniform, mean)
  assert same(run("ru", ru | {"target": "uniform"}), mean)          # other names keep their own target
