"""Tiny synthetic unlearning problems shared by the tests."""

import numpy as np

from jaxml.unlearning import baselines
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.task import UnlearningTask

# The tiny classifier and the recipe of its original (and Retrain) model, shared by the behavioural tests.
MODEL = model_lib.MLPClassifier(3, (16, 8))
TRAIN = {"epochs": 20.0, "batch_size": 16, "lr": 3e-3}


def gaussian_task(*, n: int = 96, n_test: int = 48, dim: int = 6, classes: int = 3, forget_class: int | None = 1,
                  forget_rows: np.ndarray | None = None, seed: int = 0) -> UnlearningTask:
  """Well-separated Gaussian blobs; forget one class (or the given rows)."""
  rng = np.random.default_rng(seed)
  means = 3.0 * rng.normal(size=(classes, dim))
  y = np.arange(n) % classes
  yt = np.arange(n_test) % classes
  x = (means[y] + rng.normal(size=(n, dim))).astype(np.float32)
  xt = (means[yt] + rng.normal(size=(n_test, dim))).astype(np.float32)
  if forget_rows is None:
    forget = np.flatnonzero(y == forget_class) if forget_class is not None else np.zeros(0, np.int64)
  else:
    forget = np.asarray(forget_rows, np.int64)
  retain = np.setdiff1d(np.arange(n), forget)
  classes_forgotten = (forget_class,) if forget_rows is None and forget_class is not None else ()
  return UnlearningTask(x, y.astype(np.int32), retain, forget, xt, yt.astype(np.int32), classes,
                        classes_forgotten, np.isin(yt, classes_forgotten), y.astype(np.int32))


def trained_original(task: UnlearningTask | None = None):
  """(task, params): `MODEL` trained on all of the task's training rows with `TRAIN`."""
  task = gaussian_task() if task is None else task
  fit = baselines.train_classifier(baselines.hyperparameters("retrain", TRAIN), MODEL, task,
                                   np.arange(task.x_train.shape[0]), seed=0)
  return task, fit.params
