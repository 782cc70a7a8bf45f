"""Host-side batch builders for unlearning: fixed-size batches drawn from index sets, and the float settings
that travel in the batch (`with_values` / `value`) so one compiled step serves a grid."""

from typing import Any, Callable, Mapping

import numpy as np

__all__ = ["feature_batches", "index_stream", "steps_for_epochs", "structure", "with_values", "value"]


def steps_for_epochs(num_rows: int, batch_size: int, epochs: float, *, minimum: int = 1) -> int:
  """ceil(epochs * num_rows / batch_size), at least `minimum`."""
  return max(int(minimum), int(np.ceil(epochs * num_rows / batch_size)))


def index_stream(idx: np.ndarray, batch_size: int, seed: int,
                 stream: int = 0) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
  """rows_at(step) -> (rows [B], weights [B]) of `idx` over endless seeded permutations (random access keeps
  resume exact; an empty set gives weight 0)."""
  idx = np.asarray(idx, np.int64)
  n = idx.shape[0]

  def rows_at(step: int) -> tuple[np.ndarray, np.ndarray]:
    if n == 0:
      return np.zeros(batch_size, np.int64), np.zeros(batch_size, np.float32)
    pos = int(step) * batch_size + np.arange(batch_size)
    epochs, offsets = np.divmod(pos, n)
    rows = np.empty(batch_size, np.int64)
    for e in np.unique(epochs):
      perm = np.random.default_rng([seed, stream, int(e)]).permutation(n)
      sel = epochs == e
      rows[sel] = idx[perm[offsets[sel]]]
    return rows, np.ones(batch_size, np.float32)

  return rows_at


def feature_batches(z: np.ndarray, retain_idx: np.ndarray, forget_idx: np.ndarray, batch_size: int, seed: int, *,
                    y: np.ndarray | None = None, shift: np.ndarray | None = None) -> Callable[[int], dict]:
  """Batches of cached features z [n, D]: zr from D_r (labels yr from `y` when given), zf with weights wf
  from D_f, and reference rows zref from D_r and D_f together (moved by `shift` when given)."""
  r_rows, f_rows = index_stream(retain_idx, batch_size, seed, 2), index_stream(forget_idx, batch_size, seed, 1)
  all_rows = index_stream(np.concatenate([retain_idx, forget_idx]), batch_size, seed, 3)

  def batch(step: int) -> dict:
    (rr, _), (rf, wf), (ra, _) = r_rows(step), f_rows(step), all_rows(step)
    out = {"zr": z[rr], "zf": z[rf], "wf": wf, "zref": z[ra] if shift is None else z[ra] + shift}
    return out if y is None else out | {"yr": y[rr]}

  return batch


def structure(hp: Mapping[str, Any]) -> tuple:
  """The part of a run's settings that shapes its compiled step: every non-float value (sizes, step counts, flags);
  floats ride in the batch (`with_values`) or the optimizer state (learning rates)."""
  return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in hp.items() if not isinstance(v, float)))


def with_values(batch_fn: Callable[[int], dict], rows: int, **values: float) -> Callable[[int], dict]:
  """Adds float hyper-parameters to every batch as `hp_<name>` [rows] (repeated, so a row-sharded batch stays
  valid); a loss reads them with `value(batch, name)`."""
  consts = {f"hp_{k}": np.full(rows, v, np.float32) for k, v in values.items()}
  return lambda step: batch_fn(step) | consts


def value(batch: Mapping[str, Any], name: str) -> Any:
  """The float hyper-parameter `name` that `with_values` put in the batch (a scalar)."""
  return batch[f"hp_{name}"][0]
