"""Every unlearning baseline runs once on a tiny problem and shows the property that defines it;
UA/RA/TA/MIA assembly on hand-made outputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.metrics import mia
from jaxml.unlearning import baselines, evaluate
from jaxml.unlearning.task import UnlearningTask
from tests.unlearning.fixtures import MODEL, gaussian_task, trained_original

@pytest.fixture(scope="module")
def setup():
  task, params = trained_original()
  return task, params, {}


def _acc(params, x, y):
  return 100.0 * float(np.mean(np.argmax(np.asarray(MODEL.apply({"params": params}, x)), -1) == y))


def _fa_ra(task, params):
  f, r = task.forget_idx, task.retain_idx
  return (_acc(params, task.x_train[f], task.y_train[f]), _acc(params, task.x_train[r], task.y_train[r]))


def _run(setup, name, **overrides):
  task, params0, cache = setup
  if name not in baselines.ZERO_SHOT_BASELINES or name == "jit":
    overrides = {"batch_size": 16, **overrides}
  out = baselines.run_baseline(name, MODEL, params0, task, seed=0, overrides=overrides,
                               cache=cache)
  assert out.num_steps > 0
  return out.params


def _leaves(p):
  return jax.tree.leaves(p)


def test_original_model_is_accurate(setup):
  task, params0, _ = setup
  assert _fa_ra(task, params0) == (100.0, 100.0)


def test_finetune_keeps_retain_accuracy_and_neggrad_plus_forgets_more(setup):
  task, params0, _ = setup
  ft = _run(setup, "finetune", epochs=3.0, lr=3e-3)
  ng = _run(setup, "neggrad_plus", epochs=3.0, lr=3e-3, alpha=0.6)
  fa_ft, ra_ft = _fa_ra(task, ft)
  fa_ng, ra_ng = _fa_ra(task, ng)
  assert ra_ft == 100.0 and ra_ng >= 90.0
  assert fa_ng < fa_ft - 25.0, (fa_ng, fa_ft)


def test_grad_ascent_destroys_forget_accuracy(setup):
  task, _, _ = setup
  fa, _ = _fa_ra(task, _run(setup, "grad_ascent", epochs=5.0, lr=1e-2))
  assert fa < 20.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["random_labels", "scrub"])
def test_forgetting_baselines_lower_forget_accuracy_and_keep_retain(setup, name):
  task, _, _ = setup
  over = {"random_labels": dict(epochs=5.0, lr=3e-3), "scrub": dict(lr=1e-2, max_epochs=3, min_epochs=4)}[name]
  fa, ra = _fa_ra(task, _run(setup, name, **over))
  assert fa < 50.0 and ra >= 90.0, (fa, ra)


def test_l1_sparse_shrinks_the_weights_relative_to_finetune(setup):
  ft = _run(setup, "finetune", epochs=3.0, lr=3e-3)
  l1 = _run(setup, "l1_sparse", epochs=3.0, lr=3e-3, gamma_l1=0.05)
  norm = lambda p: sum(float(jnp.sum(jnp.abs(x))) for x in _leaves(p))
  assert norm(l1) < 0.9 * norm(ft)


@pytest.mark.slow
def test_salun_only_moves_salient_weights(setup):
  task, params0, _ = setup
  frac = 0.2
  p = _run(setup, "salun", epochs=3.0, lr=3e-3, mask_fraction=frac)
  mask = baselines.saliency_mask(MODEL, params0, task.x_train[task.forget_idx], task.y_train[task.forget_idx], frac)
  moved = [np.asarray(a != b) for a, b in zip(_leaves(p), _leaves(params0))]
  outside = sum(int(np.sum(mv & (np.asarray(m) == 0))) for mv, m in zip(moved, _leaves(mask)))
  assert outside == 0
  total = sum(m.size for m in moved)
  assert 0.05 * total < sum(int(mv.sum()) for mv in moved) <= frac * total + 1
  fa, _ = _fa_ra(task, p)
  assert fa < 100.0


def test_boundary_shrink_fits_the_fgsm_neighbour_labels(setup):
  task, params0, _ = setup
  x_f, y_f = task.x_train[task.forget_idx], task.y_train[task.forget_idx]
  eps = 3.0
  y_b = baselines.fgsm_labels(MODEL, params0, x_f, y_f, eps)
  assert np.mean(y_b != y_f) > 0.5                           # the neighbours lie across the boundary
  p = _run(setup, "boundary_shrink", epochs=10.0, lr=1e-2, eps=eps)
  pred = np.argmax(np.asarray(MODEL.apply({"params": p}, x_f)), -1)
  assert np.mean(pred == y_b) > 0.8


def test_bad_teacher_moves_forget_outputs_towards_the_incompetent_teacher(setup):
  task, params0, _ = setup
  p = _run(setup, "bad_teacher", epochs=10.0, lr=3e-3)
  fa, ra = _fa_ra(task, p)
  assert fa < 60.0 and ra >= 90.0, (fa, ra)


def test_head_only_leaves_the_encoder_untouched(setup):
  task, params0, _ = setup
  p = _run(setup, "head_only", lr=1e-2, beta=1.0, min_steps=300)
  for a, b in zip(_leaves(p["encoder"]), _leaves(params0["encoder"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert any(not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(_leaves(p["head"]),
                                                                              _leaves(params0["head"])))
  fa, ra = _fa_ra(task, p)
  assert fa < 80.0 and ra >= 90.0, (fa, ra)


@pytest.mark.slow
def test_emmn_is_class_level_and_forgets_the_class(setup):
  task, params0, cache = setup
  random_task = gaussian_task(forget_rows=np.arange(0, 96, 7))
  with pytest.raises(baselines.NotApplicable):
    baselines.run_baseline("emmn", MODEL, params0, random_task, seed=0, cache=cache)
  p = _run(setup, "emmn", noise_steps=100, impair_steps=20, impair_lr=0.02, repair_steps=10, repair_lr=0.01)
  fa, ra = _fa_ra(task, p)
  assert fa < 80.0 and ra >= 80.0, (fa, ra)        # from 100 / 100


@pytest.mark.slow
def test_jit_makes_the_model_smoother_around_forget_inputs(setup):
  task, params0, _ = setup
  p = _run(setup, "jit", epochs=20.0, lr=3e-3, sigma=0.5)
  x = task.x_train[task.forget_idx]
  xi = 0.5 * np.random.default_rng(0).normal(size=(8,) + x.shape).astype(np.float32)

  def roughness(params):
    sm = lambda z: jax.nn.softmax(MODEL.apply({"params": params}, z))
    diff = np.linalg.norm(np.asarray(sm(x)[None] - jax.vmap(sm)(x[None] + xi)), axis=-1)
    return float(np.mean(diff / np.linalg.norm(xi, axis=-1)))

  assert roughness(p) < 0.8 * roughness(params0)


# --------------------------------------------------------------------------- metric assembly
def test_unlearning_metrics_assemble_ua_ra_ta_on_the_right_rows():
  # 6 training rows: forget = {0, 1} (label 0), retain = {2..5}; 4 test rows, 2 of the forgotten kind.
  y = np.array([0, 0, 1, 1, 2, 2])
  yt = np.array([0, 0, 1, 2])
  onehot = lambda labels: 5.0 * np.eye(3)[labels]
  pred_train = np.array([0, 1, 1, 1, 2, 0])      # forget: 1 / 2 right; retain: 3 / 4 right
  pred_test = np.array([1, 1, 1, 2])             # forgotten-kind rows 0, 1 wrong; others right
  task = UnlearningTask(np.zeros((6, 2), np.float32), y, np.arange(2, 6), np.arange(2), np.zeros((4, 2), np.float32),
                        yt, 3, (0,), np.array([True, True, False, False]), y)
  out = evaluate.Outputs(onehot(pred_train), np.zeros((6, 2)), onehot(pred_test), np.zeros((4, 2)))
  m = evaluate.unlearning_metrics(out, task)
  assert m["UA"] == pytest.approx(50.0)
  assert m["RA"] == pytest.approx(75.0)
  assert m["TA"] == pytest.approx(50.0)
  assert m["TA_f"] == pytest.approx(0.0)
  assert m["TA_r"] == pytest.approx(100.0)
  assert m["MIA_AUC"] == pytest.approx(mia.loss_mia_auc(onehot(pred_train)[:2], y[:2], onehot(pred_test), yt))
  assert 0.0 <= m["MIA"] <= 100.0
  ref = {"UA": 40.0, "RA": 75.0, "TA": 60.0, "MIA": m["MIA"] + 4.0}
  assert evaluate.avg_gap(m, ref) == pytest.approx((10.0 + 0.0 + 10.0 + 4.0) / 4)
