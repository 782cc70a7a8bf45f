"""Shared config pieces: the base sections every experiment has, and preset-argument parsing."""

import ml_collections

__all__ = ["base_config", "parse_arg"]


def parse_arg(arg: str | None, presets: tuple[str, ...], **defaults):
  """Parses "preset:key=value,key=value" (big_vision style) into (preset, ConfigDict); the first preset is the
  default, values keep their default's type, unknown keys and presets are errors (not silent typos)."""
  preset, _, rest = (arg or presets[0]).partition(":")
  if preset not in presets:
    raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(presets)}")
  values = dict(defaults)
  for item in filter(None, rest.split(",")):
    key, sep, raw = item.partition("=")
    if not sep:
      raise ValueError(f"config argument {item!r} is not key=value")
    if key not in defaults:
      raise ValueError(f"unknown config argument {key!r}; expected one of {', '.join(defaults) or '(none)'}")
    if isinstance(defaults[key], bool):
      values[key] = raw.lower() in ("1", "true", "yes")
    else:
      values[key] = raw if defaults[key] is None else type(defaults[key])(raw)
  return preset, ml_collections.ConfigDict(values)


def base_config(*, data_dir: bool = True) -> ml_collections.ConfigDict:
  """Sections shared by every experiment: seed, data root, optimizer, loop cadence, mesh. Every key must be read
  (tests/test_configs.py), so data without a root passes `data_dir=False`."""
  config = ml_collections.ConfigDict()
  config.preset = ""
  config.seed = 0
  if data_dir:
    # None: $JAXML_DATA_DIR, else data/ in the checkout.
    config.data_dir = ml_collections.config_dict.placeholder(str)
  config.optim = ml_collections.ConfigDict(dict(
      name="adam", lr=1e-3, weight_decay=0.0, clip_norm=0.0, schedule="constant", warmup_steps=0))
  config.log_every = 100
  config.checkpoint_every = 0
  config.steps_per_dispatch = 0   # K training steps per host dispatch; 0: the largest K <= 50 dividing every cadence
  config.mesh = ml_collections.ConfigDict(dict(num_data=0))   # 0: all devices
  config.tensorboard = True       # TensorBoard event files beside metrics.jsonl (read by the launcher)
  return config
