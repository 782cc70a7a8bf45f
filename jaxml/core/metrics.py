"""Metric averaging across steps and the host-side writer (process 0 only): `metrics.jsonl` plus
TensorBoard event files in the same folder (point `tensorboard --logdir` at a workdir)."""

import json
import math
import os
import struct
import time
from typing import Any, Iterator, Mapping

import jax
import numpy as np

__all__ = ["MetricWriter", "to_python", "read_events", "TENSORBOARD_ENV"]

# Process-wide off switch for the event files ("0" turns them off); the launcher sets it from the
# config key `tensorboard`, so writers built deep inside a pipeline follow the experiment's config.
TENSORBOARD_ENV = "JAXML_TENSORBOARD"
FLUSH_SECONDS = 10.0   # event files reach the disk at least this often while a run logs, and at close()


def to_python(tree: Any) -> Any:
  """Device/numpy scalars -> JSON-friendly floats and ints (NaN kept as float)."""
  def conv(x):
    if not isinstance(x, (np.ndarray, jax.Array, np.floating, np.integer)):
      return x
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x.tolist()
  return jax.tree.map(conv, tree)


class MetricWriter:
  """Appends one JSON object per logged step to `<workdir>/metrics.jsonl` on process 0 and, unless
  `tensorboard` is False or $JAXML_TENSORBOARD is 0, the scalar values as TensorBoard events
  (tensorboardX's synchronous event-file writer: one file per writer, one event per write, flushed
  every FLUSH_SECONDS and at close(); no background thread)."""

  def __init__(self, workdir: str | None, *, tensorboard: bool = True):
    self.workdir = workdir
    self.path = os.path.join(workdir, "metrics.jsonl") if workdir else None
    self.enabled = self.path is not None and jax.process_index() == 0
    off = os.environ.get(TENSORBOARD_ENV, "1").strip().lower() in ("0", "false", "no", "off")
    self.tensorboard = self.enabled and tensorboard and not off
    self._events = None   # the event writer, opened at the first write (no empty event files)
    self._flushed = time.monotonic()
    if self.enabled:
      os.makedirs(workdir, exist_ok=True)

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    if not self.enabled:
      return
    row = {"step": int(step)} | {k: None if isinstance(v, float) and not math.isfinite(v) else v
                                 for k, v in to_python(dict(metrics)).items()}
    with open(self.path, "a") as f:
      f.write(json.dumps(row) + "\n")
    if self.tensorboard:
      self._write_events(int(step), row)

  def _write_events(self, step: int, row: Mapping[str, Any]) -> None:
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto import event_pb2, summary_pb2
    if self._events is None:
      # Writers of one process may open in the same second: the suffix keeps their files apart.
      self._events = EventsWriter(os.path.join(self.workdir, "events"), f".{os.getpid()}.{id(self):x}")
    values = [summary_pb2.Summary.Value(tag=k, simple_value=float(v)) for k, v in row.items()
              if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)]
    self._events.write_event(event_pb2.Event(wall_time=time.time(), step=step,
                                             summary=summary_pb2.Summary(value=values)))
    if time.monotonic() - self._flushed > FLUSH_SECONDS:   # a flush fsyncs (~6 ms): not at every write
      self._events.flush()
      self._flushed = time.monotonic()

  def close(self) -> None:
    if self._events is not None:
      self._events.close()
      self._events = None


def read_events(workdir: str) -> Iterator[tuple[str, int, float]]:
  """(tag, step, value) of every scalar in the TensorBoard event files of `workdir` (TFRecord framing:
  length, its CRC, the serialized `Event`, its CRC; CRCs not checked), file by file."""
  from tensorboardX.proto import event_pb2
  for name in sorted(os.listdir(workdir)):
    if not name.startswith("events.out.tfevents."):
      continue
    with open(os.path.join(workdir, name), "rb") as f:
      data = f.read()
    pos = 0
    while pos + 12 <= len(data):
      (length,) = struct.unpack("<Q", data[pos:pos + 8])
      event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
      pos += 12 + length + 4
      for value in event.summary.value:
        yield value.tag, int(event.step), float(value.simple_value)
