"""Launcher plumbing shared by every experiment: flags, workdir files, results.json, plots.

Every run writes into --workdir: config.json (the resolved config), metrics.jsonl (a JSON line per logged step),
events.out.tfevents.* (unless `tensorboard=False`), *.png, results.json ({"experiment", "preset", "rows": [{"method",
"dataset", "split", "seed", "metrics", "cost"}], "wall_s", "env"}, written atomically last) and .lock (lock_workdir).
A killed run resumes from its last checkpoint. Strict configs: a `--config.<key>` override that `plan` does not read
fails (exit 2). The persistent compilation cache: $JAXML_CACHE_DIR/jax_cache (`--nocompilation_cache`: off)."""

import datetime
import fcntl
import json
import math
import os
import pathlib
import re
import socket
import sys
import tempfile
import time
from typing import Any, Callable, Iterable, Mapping, NoReturn

import jax
import ml_collections
from absl import flags, logging
from ml_collections import config_flags

from jaxml import core

__all__ = ["define_flags", "run_main", "launch", "row", "validate_choice", "validate_dataset", "save_plot",
           "write_json", "read_runs", "ConfigError", "WorkdirBusyError", "LOCK_FILE", "lock_workdir",
           "track_reads", "config_leaves", "override_keys", "enable_compilation_cache"]

FLAGS = flags.FLAGS


class ConfigError(ValueError):
  """Bad configuration or input, reported before anything is written."""


class WorkdirBusyError(RuntimeError):
  """Another live run holds the workdir's lock."""


LOCK_FILE = ".lock"
_TMP_PREFIX, _TMP_SUFFIX = ".tmp_", ".json"   # write_json's temporary files


def define_flags() -> None:
  """--config (ml_collections file, locked: unknown keys are errors), --workdir, launch mode."""
  if "config" in FLAGS:
    return
  config_flags.DEFINE_config_file("config", None, "Config file, e.g. configs/mlp_digits.py:smoke.",
                                  lock_config=True)
  flags.DEFINE_string("workdir", None, "Output folder (created; reruns resume from its checkpoints).")
  flags.DEFINE_bool("multihost", False, "Call jax.distributed.initialize() (TPU pods, clusters).")
  flags.DEFINE_string("coordinator_address", None, "host:port of process 0 (only off-TPU multihost).")
  flags.DEFINE_integer("num_processes", None, "Process count (only off-TPU multihost).")
  flags.DEFINE_integer("process_id", None, "This process's index (only off-TPU multihost).")
  flags.DEFINE_string("cpu_collectives", None, "e.g. 'gloo' for multi-process CPU runs.")
  flags.DEFINE_bool("compilation_cache", True, "JAX persistent compilation cache in core.cache_dir('jax_cache') "
                    "(JAXML_COMPILATION_CACHE=0 also turns it off).")
  flags.mark_flags_as_required(["config", "workdir"])


def enable_compilation_cache(enabled: bool = True) -> str | None:
  """Turns on JAX's persistent compilation cache (entry points only); returns its folder or None. Every program
  is kept, however quick its compile: on CPU most take well under JAX's 1 s threshold and together dominate."""
  if not enabled or os.environ.get("JAXML_COMPILATION_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
    return None
  path = core.cache_dir("jax_cache")
  os.makedirs(path, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


class _TrackedConfigDict(ml_collections.ConfigDict):
  """A ConfigDict that records the dotted path of every leaf read (attribute, [] or .get)."""

  def __getitem__(self, key):
    value = super().__getitem__(key)
    reads = self.__dict__.get("_jaxml_reads")
    if reads is not None and isinstance(key, str) and "." not in key and not isinstance(value, ml_collections.ConfigDict):
      reads.add(self.__dict__["_jaxml_prefix"] + key)
    return value


def track_reads(config: ml_collections.ConfigDict) -> set[str]:
  """Makes `config` (in place, sub-sections included) record its leaf reads; returns the live set."""
  reads: set[str] = set()

  def convert(cfg: ml_collections.ConfigDict, prefix: str) -> None:
    object.__setattr__(cfg, "__class__", _TrackedConfigDict)
    object.__setattr__(cfg, "_jaxml_reads", reads)
    object.__setattr__(cfg, "_jaxml_prefix", prefix)
    for key, value in cfg._fields.items():
      if isinstance(value, ml_collections.ConfigDict):
        convert(value, f"{prefix}{key}.")

  convert(config, "")
  return reads


def config_leaves(config: ml_collections.ConfigDict, prefix: str = "") -> list[str]:
  """Dotted paths of every leaf (a value that is not a section), without reading them."""
  return [leaf for key, value in config._fields.items()
          for leaf in (config_leaves(value, f"{prefix}{key}.") if isinstance(value, ml_collections.ConfigDict)
                       else [f"{prefix}{key}"])]


_OVERRIDE = re.compile(r"^--?(?:no)?config\.([^=\s]+)")


def override_keys(argv: Iterable[str]) -> list[str]:
  """Config keys set on the command line (`--config.a.b=...`, `--noconfig.flag`)."""
  return [m.group(1) for a in argv if (m := _OVERRIDE.match(a))]


def _exit(message: Any, code: int = 2, lock: int | None = None) -> NoReturn:
  """Drops the workdir lock (closing its descriptor drops the flock), prints one `error:` line, exits."""
  if lock is not None:
    os.close(lock)
  print(f"error: {message}", file=sys.stderr)
  sys.exit(code)


def _bad_config(e: Exception) -> NoReturn:
  """The one line (and exit 2) for an unknown or unused config key."""
  _exit(f"bad --config override or config file ({type(e).__name__}: {e}); check the key against the config file")


def _check_overrides(overrides: list[str], reads: set[str], experiment: str, when: str) -> None:
  if unread := [k for k in overrides if k not in reads]:
    _bad_config(KeyError(f"--config.{unread[0]} is not read by {experiment} {when}; it would be ignored"))


def validate_choice(value: Any, allowed: Iterable[Any], what: str) -> None:
  """Raises ConfigError naming the allowed values; call before writing anything."""
  allowed = tuple(allowed)
  if value not in allowed:
    raise ConfigError(f"unknown {what} {value!r}; expected one of {', '.join(map(str, allowed))}")


def validate_dataset(name: str, allowed: Iterable[str], what: str) -> None:
  """validate_choice, except that a name with '/' is the path of your own data (formats in
  data/README.md), which must exist."""
  from jaxml.data import offline
  if offline.is_path(name):
    if not os.path.exists(os.path.expanduser(name)):
      raise ConfigError(f"{what} path {name} does not exist (a name with '/' is the path of your own data)")
    return
  validate_choice(name, allowed, what)


def _clean(x: Any) -> float | None:
  x = float(x)
  return x if math.isfinite(x) else None


def row(*, method: str, dataset: str, split: int = 0, seed: int = 0,
        metrics: Mapping[str, Any], cost: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """One results.json row; values become floats (non-finite ones become null)."""
  return {"method": str(method), "dataset": str(dataset), "split": int(split), "seed": int(seed),
          "metrics": {k: _clean(v) for k, v in metrics.items()},
          "cost": {k: _clean(v) for k, v in (cost or {}).items()}}


def write_json(path: str, obj: Any) -> None:
  """Atomic write: a reader never sees a half-written file."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix=_TMP_PREFIX, suffix=_TMP_SUFFIX)
  with os.fdopen(fd, "w") as f:
    json.dump(obj, f, indent=1, allow_nan=False)
  os.replace(tmp, path)


def read_runs(workdirs: Iterable[str], key: Callable[[dict], tuple], *, skip: Callable[[dict], bool] = lambda r: False,
              fallback: str | None = None) -> tuple[list[dict], list[dict], list[str]]:
  """The rows of several runs' results.json, for one merged report: (rows, each run's results dict, the runs read
  from `fallback` for lack of a results.json). Rows where `skip` holds are dropped (e.g. rows a report recomputes);
  a `key` seen in two runs is a ValueError, so a merge never counts a cell twice."""
  rows, results, unfinished, seen = [], [], [], set()
  for w in workdirs:
    path = os.path.join(w, "results.json")
    if fallback is not None and not os.path.exists(path):
      path = os.path.join(w, fallback)
      unfinished.append(w)
    with open(path) as f:
      res = json.load(f)
    results.append(res)
    for r in res["rows"]:
      if skip(r):
        continue
      if key(r) in seen:
        raise ValueError(f"{w}: row {key(r)} is in more than one of the merged runs")
      seen.add(key(r))
      rows.append(r)
  return rows, results, unfinished


def lock_workdir(workdir: str) -> int:
  """Makes `workdir` this run's own: returns the descriptor of its held lock (keep it open). An exclusive `flock`
  on `<workdir>/.lock`, WorkdirBusyError while a live run holds it; the kernel drops it when its process dies, so a
  killed run's lock is taken over. Also removes write_json's half-written temporary files."""
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, LOCK_FILE)
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
    os.close(fd)
    raise WorkdirBusyError(f"workdir {workdir} is in use by a live run ({holder}); wait for it to end "
                           "or pass another --workdir") from None
  os.ftruncate(fd, 0)
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
  os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {stamp}\n".encode(), 0)
  for tmp in pathlib.Path(workdir).rglob(f"{_TMP_PREFIX}*{_TMP_SUFFIX}"):
    tmp.unlink()
  return fd


def save_plot(fig: Any, workdir: str, name: str) -> str:
  """Saves a matplotlib figure as PNG in the workdir (process 0 only) and closes it."""
  import matplotlib.pyplot as plt
  path = os.path.join(workdir, name)
  if jax.process_index() == 0:
    fig.savefig(path, dpi=120, bbox_inches="tight")
  plt.close(fig)
  return path


def _check_rows(rows: Any) -> list[dict[str, Any]]:
  if not isinstance(rows, list) or not rows:
    raise ValueError("run() must return a non-empty list of rows built with common.row(...)")
  keys = {"method", "dataset", "split", "seed", "metrics", "cost"}
  for r in rows:
    if set(r) != keys:
      raise ValueError(f"row has keys {sorted(r)}, expected {sorted(keys)}")
  return rows


def launch(run: Callable[[Any, str], list[dict[str, Any]]], *, experiment: str,
           plan: Callable[[Any], Any] | None = None, argv: Any = None) -> None:
  """Runs `run(config, workdir)` and writes config.json and results.json; `plan(config)` (pure, reading every key
  the run uses) runs before the workdir is touched, so bad input leaves nothing behind and exits with one line."""
  del argv
  if not FLAGS["verbosity"].present:  # orbax logs every save at INFO; keep the console readable
    logging.set_verbosity(logging.WARNING)
  if "compilation_cache" in FLAGS:
    enable_compilation_cache(FLAGS.compilation_cache)
  config, workdir = FLAGS.config, FLAGS.workdir
  core.maybe_initialize(FLAGS.multihost, coordinator_address=FLAGS.coordinator_address,
                        num_processes=FLAGS.num_processes, process_id=FLAGS.process_id,
                        cpu_collectives=FLAGS.cpu_collectives)
  config_dict = config.to_dict()
  reads = track_reads(config)
  # Every MetricWriter of this run (however deep in a pipeline) follows the config's one switch.
  os.environ[core.metrics.TENSORBOARD_ENV] = "1" if config.get("tensorboard", True) else "0"
  overrides = override_keys(sys.argv[1:])
  if plan is not None:
    try:
      plan(config)
    except (ValueError, FileNotFoundError) as e:
      _exit(e)
    _check_overrides(overrides, reads, experiment, "with these settings")
  main = jax.process_index() == 0
  created = not os.path.exists(workdir)
  config_path = os.path.join(workdir, "config.json")
  lock = None   # the workdir lock, held from before config.json is written until the run ends
  if main:
    try:
      lock = lock_workdir(workdir)
    except WorkdirBusyError as e:
      _exit(e)
    print(f"[{experiment}] preset={config.get('preset', '')} workdir={workdir} "
          f"processes={jax.process_count()} devices={jax.device_count()}", flush=True)
    write_json(config_path, config_dict)
  t0 = time.perf_counter()
  try:
    rows = _check_rows(run(config, workdir))
  except core.NonFiniteLossError as e:
    _exit(e, 3, lock)
  except (ValueError, FileNotFoundError) as e:
    # Bad input found inside run(): leave no trace of this run behind.
    if main and os.path.exists(config_path) and set(os.listdir(workdir)) <= {"config.json", LOCK_FILE}:
      os.remove(config_path)
      if created:
        os.remove(os.path.join(workdir, LOCK_FILE))
        os.rmdir(workdir)
    _exit(e, 2, lock)
  if main and os.environ.get("JAXML_CONFIG_READS"):
    write_json(os.environ["JAXML_CONFIG_READS"], {"experiment": experiment, "leaves": config_leaves(config),
                                                   "read": sorted(reads)})
  # Without a plan an unread override is only known now: refuse to report results it did not shape.
  _check_overrides(overrides, reads, experiment, "(found after the run; results.json not written)")
  results = {"experiment": experiment, "preset": str(config.get("preset", "")), "rows": rows,
             "wall_s": time.perf_counter() - t0, "env": {"jax": jax.__version__, "devices": jax.device_count(),
                                                         "platform": jax.devices()[0].platform,
                                                         "processes": jax.process_count()}}
  if main:
    write_json(os.path.join(workdir, "results.json"), results)
    print(f"[{experiment}] wrote {os.path.join(workdir, 'results.json')} ({len(rows)} rows, "
          f"{results['wall_s']:.1f}s)", flush=True)
  if lock is not None:
    os.close(lock)   # closing the descriptor drops the flock


def _parse_flags(argv: list[str]) -> list[str]:
  """absl flag parsing with one readable line (and exit 2) for a bad flag or config key."""
  try:
    return FLAGS(argv)
  except flags.Error as e:
    _exit(f"{e}\nusage: python -m experiments.<name> --config=configs/<name>.py:<preset> "
          "--workdir=DIR [--config.key=value ...]")
  except (KeyError, AttributeError, ValueError, TypeError) as e:
    _bad_config(e)


def run_main(run: Callable[[Any, str], list[dict[str, Any]]], *, experiment: str,
             plan: Callable[[Any], Any] | None = None) -> None:
  """The whole entry point of an experiment: define the flags, parse them, launch `run`. Call it under
  `if __name__ == "__main__":` only, so importing an experiment module (e.g. from a benchmark) defines no flags."""
  from absl import app
  define_flags()
  app.run(lambda argv: launch(run, experiment=experiment, plan=plan, argv=argv),
          flags_parser=_parse_flags)
