"""Metric averaging across steps and the host-side writer (process 0 only)."""

import json
import math
import os
from typing import Any, Mapping

import jax
import numpy as np

__all__ = ["mean_metrics", "MetricWriter", "to_python"]


def mean_metrics(history: list[Mapping[str, Any]]) -> dict[str, float]:
  """Fetches a list of per-step device metric dicts once and averages each key."""
  if not history:
    return {}
  host = jax.device_get(history)
  keys = host[0].keys()
  return {k: float(np.mean([np.asarray(h[k], np.float64) for h in host])) for k in keys}


def to_python(tree: Any) -> Any:
  """Device/numpy scalars -> JSON-friendly floats and ints (NaN kept as float)."""
  def conv(x):
    if isinstance(x, (np.ndarray, jax.Array)):
      x = np.asarray(x)
      return x.item() if x.ndim == 0 else x.tolist()
    if isinstance(x, (np.floating, np.integer)):
      return x.item()
    return x
  return jax.tree.map(conv, tree)


class MetricWriter:
  """Appends one JSON object per logged step to `<workdir>/metrics.jsonl` on process 0."""

  def __init__(self, workdir: str | None, *, filename: str = "metrics.jsonl", prefix: str = ""):
    self.path = os.path.join(workdir, filename) if workdir else None
    self.prefix = prefix
    self.enabled = self.path is not None and jax.process_index() == 0
    if self.enabled:
      os.makedirs(workdir, exist_ok=True)

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    if not self.enabled:
      return
    row = {"step": int(step)}
    for k, v in to_python(dict(metrics)).items():
      row[f"{self.prefix}{k}"] = None if isinstance(v, float) and not math.isfinite(v) else v
    with open(self.path, "a") as f:
      f.write(json.dumps(row) + "\n")
