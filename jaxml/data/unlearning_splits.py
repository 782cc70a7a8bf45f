"""Forget / retain index splits for machine-unlearning benchmarks (numpy only, seeded): class (every row of
the forgotten classes), sub-class (one fine class under coarse super-class labels), random (a fraction of rows)."""

from typing import NamedTuple, Sequence

import numpy as np

__all__ = ["UnlearningSplit", "class_split", "subclass_split", "random_split", "super_labels"]


class UnlearningSplit(NamedTuple):
  """retain_idx, forget_idx: sorted, disjoint int64 row indices whose union is all rows; `y`: the labels to train
  on (super-labels in the sub-class regime); `forget_classes`: in `y`'s label space (empty unless whole classes)."""

  retain_idx: np.ndarray
  forget_idx: np.ndarray
  y: np.ndarray
  forget_classes: tuple[int, ...]


def _checked(retain: np.ndarray, forget: np.ndarray, y: np.ndarray, classes: tuple[int, ...]) -> UnlearningSplit:
  retain, forget = np.sort(retain).astype(np.int64), np.sort(forget).astype(np.int64)
  assert not np.intersect1d(retain, forget).size, "retain and forget overlap"
  assert retain.size + forget.size == y.shape[0], "retain and forget do not cover all rows"
  return UnlearningSplit(retain, forget, y, classes)


def class_split(y: np.ndarray, forget_classes: int | Sequence[int]) -> UnlearningSplit:
  """Forget every row whose label is in `forget_classes` (deterministic)."""
  y = np.asarray(y)
  classes = (int(forget_classes),) if np.isscalar(forget_classes) else tuple(int(c) for c in forget_classes)
  is_forget = np.isin(y, classes)
  return _checked(np.flatnonzero(~is_forget), np.flatnonzero(is_forget), y, classes)


def super_labels(y: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
  """Maps fine labels to the index of the group that contains them, e.g. {0-4} -> 0, {5-9} -> 1."""
  y = np.asarray(y)
  out = np.full(y.shape, -1, np.int32)
  for g, members in enumerate(groups):
    out[np.isin(y, list(members))] = g
  if (out < 0).any():
    raise ValueError(f"labels {sorted(set(y[out < 0].tolist()))} belong to no group")
  return out


def subclass_split(y_fine: np.ndarray, forget_subclass: int,
                   groups: Sequence[Sequence[int]] = ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9))) -> UnlearningSplit:
  """Train on super-labels; forget every row of fine class `forget_subclass` (deterministic)."""
  y_fine = np.asarray(y_fine)
  is_forget = y_fine == int(forget_subclass)
  return _checked(np.flatnonzero(~is_forget), np.flatnonzero(is_forget), super_labels(y_fine, groups), ())


def random_split(y: np.ndarray, fraction: float, *, seed: int) -> UnlearningSplit:
  """Forget round(fraction * n) rows drawn uniformly without replacement (seeded)."""
  y = np.asarray(y)
  if not 0.0 <= fraction < 1.0:
    raise ValueError(f"forget fraction must be in [0, 1), got {fraction}")
  n = y.shape[0]
  perm = np.random.default_rng([seed, 7]).permutation(n)
  k = int(round(fraction * n))
  return _checked(perm[k:], perm[:k], y, ())
