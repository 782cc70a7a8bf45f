"""Optimizers from config, and freezing of sub-trees (an optimizer concern, not a loop one)."""

import re
from typing import Any, Callable, Mapping

import jax
import optax

from jaxml.core.types import Params

__all__ = ["make_schedule", "make_optimizer", "freeze", "label_by_path", "multi_group"]


def make_schedule(lr: float, *, schedule: str = "constant", total_steps: int = 0,
                  warmup_steps: int = 0, end_factor: float = 0.0) -> optax.Schedule:
  """Learning-rate schedule: constant or cosine, with an optional linear warm-up."""
  if schedule == "constant":
    main = optax.constant_schedule(lr)
  elif schedule == "cosine":
    main = optax.cosine_decay_schedule(lr, max(total_steps - warmup_steps, 1), alpha=end_factor)
  else:
    raise ValueError(f"unknown schedule {schedule!r}; expected 'constant' or 'cosine'")
  if warmup_steps <= 0:
    return main
  return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup_steps), main], [warmup_steps])


def make_optimizer(cfg: Mapping[str, Any], total_steps: int = 0) -> optax.GradientTransformation:
  """optax chain from a config section with keys name, lr, and optionally weight_decay,
  momentum, clip_norm, schedule, warmup_steps, b1, b2."""
  get = cfg.get
  sched = make_schedule(float(get("lr", 1e-3)), schedule=get("schedule", "constant"),
                        total_steps=int(get("total_steps", total_steps) or total_steps),
                        warmup_steps=int(get("warmup_steps", 0)))
  name = get("name", "adam")
  wd = float(get("weight_decay", 0.0))
  if name == "adam":
    opt = optax.adamw(sched, b1=get("b1", 0.9), b2=get("b2", 0.999), weight_decay=wd) if wd else \
        optax.adam(sched, b1=get("b1", 0.9), b2=get("b2", 0.999))
  elif name == "adamw":
    opt = optax.adamw(sched, b1=get("b1", 0.9), b2=get("b2", 0.999), weight_decay=wd)
  elif name == "sgd":
    opt = optax.sgd(sched, momentum=get("momentum", None) or None)
    if wd:
      opt = optax.chain(optax.add_decayed_weights(wd), opt)
  else:
    raise ValueError(f"unknown optimizer {name!r}; expected adam, adamw or sgd")
  clip = get("clip_norm", None)
  return optax.chain(optax.clip_by_global_norm(float(clip)), opt) if clip else opt


def label_by_path(params: Params, rules: list[tuple[str, str]], default: str) -> Params:
  """Labels each leaf by the first regex (over its '/'-joined path) that matches."""

  def label(path, _):
    name = "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
    for pattern, lab in rules:
      if re.search(pattern, name):
        return lab
    return default

  return jax.tree_util.tree_map_with_path(label, params)


def multi_group(transforms: Mapping[str, optax.GradientTransformation],
                labels: Params | Callable[[Params], Params]) -> optax.GradientTransformation:
  """Different optimizers for labelled parameter groups (`optax.multi_transform`)."""
  return optax.multi_transform(dict(transforms), labels)


def freeze(optimizer: optax.GradientTransformation, frozen_patterns: list[str]) -> optax.GradientTransformation:
  """Wraps `optimizer` so leaves whose path matches any pattern get exactly zero updates."""
  rules = [(p, "frozen") for p in frozen_patterns]
  return multi_group({"trainable": optimizer, "frozen": optax.set_to_zero()},
                     lambda params: label_by_path(params, rules, "trainable"))
