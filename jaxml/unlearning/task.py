"""The unlearning problem handed to the method, the baselines and the evaluation."""

from typing import NamedTuple

import numpy as np

__all__ = ["UnlearningTask"]


class UnlearningTask(NamedTuple):
  """Training rows split into retain / forget by index, plus a test set: x_train [n, ...], y_train [n];
  retain_idx / forget_idx disjoint, covering [0, n); x_test, y_test; num_classes; forget_classes (or
  empty); test_forget_mask [n_test] (test rows of the forgotten kind); y_probe_train [n] probe labels."""

  x_train: np.ndarray
  y_train: np.ndarray
  retain_idx: np.ndarray
  forget_idx: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int
  forget_classes: tuple[int, ...] = ()
  test_forget_mask: np.ndarray | None = None
  y_probe_train: np.ndarray | None = None
