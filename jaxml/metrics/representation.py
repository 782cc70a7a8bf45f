"""Representation comparisons: linear CKA and a linear-probe accuracy (numpy / scikit-learn).

Linear CKA (Kornblith et al., 2019) of column-centred X [n, p], Y [n, q]:
CKA(X, Y) = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F), 1 up to orthogonal maps and isotropic scaling."""

import numpy as np

__all__ = ["linear_cka", "linear_probe_accuracy"]


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
  """Linear CKA of x [n, p] and y [n, q]; NaN when either is constant."""
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.float64)
  if x.shape[0] != y.shape[0]:
    raise ValueError(f"need the same rows, got {x.shape[0]} and {y.shape[0]}")
  x = x - x.mean(axis=0)
  y = y - y.mean(axis=0)
  cross = np.linalg.norm(y.T @ x) ** 2
  norm = np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)
  return float(cross / norm) if norm > 0 else float("nan")


def linear_probe_accuracy(z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, y_test: np.ndarray,
                          *, c: float = 1.0, max_iter: int = 200) -> float:
  """% test accuracy of a multinomial logistic regression fitted on standardised (z_train, y_train); a single
  training class is predicted everywhere."""
  from sklearn.linear_model import LogisticRegression  # lazy import

  z_train = np.asarray(z_train, np.float64)
  z_test = np.asarray(z_test, np.float64)
  y_train, y_test = np.asarray(y_train), np.asarray(y_test)
  classes = np.unique(y_train)
  if classes.size == 1:
    return float(100.0 * np.mean(y_test == classes[0]))
  mu, sd = z_train.mean(axis=0), z_train.std(axis=0) + 1e-6
  clf = LogisticRegression(C=c, max_iter=max_iter)
  clf.fit((z_train - mu) / sd, y_train)
  return float(100.0 * np.mean(clf.predict((z_test - mu) / sd) == y_test))
