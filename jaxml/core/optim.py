"""Optimizers from config, and freezing of sub-trees (an optimizer concern, not a loop one)."""

import re
from typing import Any, Callable, Mapping

import jax
import optax

from jaxml.core.config import reject_unknown
from jaxml.core.types import Params

__all__ = ["make_schedule", "make_optimizer", "learning_rate", "freeze", "label_by_path", "multi_group"]


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


OPTIM_KEYS = ("name", "lr", "schedule", "total_steps", "warmup_steps", "weight_decay", "clip_norm", "b1", "b2",
              "momentum")


def _opt_hparams(cfg: Mapping[str, Any]) -> dict[str, Any]:
  """Every optimizer key read once, up front, whatever the optimizer (strict-config tracking);
  a key this function does not know is an error, not a silently ignored setting."""
  reject_unknown(cfg, OPTIM_KEYS, "optimizer")
  get = cfg.get
  momentum = get("momentum", None)
  return dict(name=str(get("name", "adam")), lr=float(get("lr", 1e-3)), schedule=str(get("schedule", "constant")),
              total_steps=int(get("total_steps", 0) or 0), warmup_steps=int(get("warmup_steps", 0) or 0),
              weight_decay=float(get("weight_decay", 0.0) or 0.0), clip_norm=float(get("clip_norm", 0.0) or 0.0),
              b1=float(get("b1", 0.9)), b2=float(get("b2", 0.999)), momentum=float(momentum) if momentum else None)


def make_optimizer(cfg: Mapping[str, Any], total_steps: int = 0, *, inject_lr: bool = False,
                   lr: float | None = None) -> optax.GradientTransformation:
  """optax chain from an `optim` section (dict or ConfigDict): name, lr and optionally weight_decay,
  momentum, clip_norm, schedule, warmup_steps, total_steps, b1, b2. `total_steps`: the cosine length when
  the section has none; `inject_lr`: the peak rate lives in the state as an array, so a learning-rate grid
  compiles once; `lr` overrides `cfg["lr"]`."""
  hp = _opt_hparams(cfg)
  peak = hp["lr"] if lr is None else float(lr)
  steps = hp["total_steps"] or total_steps
  name, wd = hp["name"], hp["weight_decay"]
  if name not in ("adam", "adamw", "sgd"):
    raise ValueError(f"unknown optimizer {name!r}; expected adam, adamw or sgd")

  def build(learning_rate) -> optax.GradientTransformation:
    if inject_lr:
      # The unit-peak schedule times the injected array: a constant schedule gives exactly
      # `learning_rate`, the same numbers as a float learning rate.
      unit = make_schedule(1.0, schedule=hp["schedule"], total_steps=steps, warmup_steps=hp["warmup_steps"])
      sched = lambda count: learning_rate * unit(count)  # noqa: E731
    else:
      sched = make_schedule(learning_rate, schedule=hp["schedule"], total_steps=steps,
                            warmup_steps=hp["warmup_steps"])
    if name == "adam" and not wd:
      opt = optax.adam(sched, b1=hp["b1"], b2=hp["b2"])
    elif name in ("adam", "adamw"):
      opt = optax.adamw(sched, b1=hp["b1"], b2=hp["b2"], weight_decay=wd)
    else:
      opt = optax.sgd(sched, momentum=hp["momentum"])
      if wd:
        opt = optax.chain(optax.add_decayed_weights(wd), opt)
    clip = hp["clip_norm"]
    return optax.chain(optax.clip_by_global_norm(clip), opt) if clip else opt

  if inject_lr:
    return optax.inject_hyperparams(build)(learning_rate=peak)
  return build(peak)


def learning_rate(opt_state: Any) -> jax.Array | None:
  """The injected learning rate inside an optimizer state (None if it was not injected)."""
  return optax.tree_utils.tree_get(opt_state, "learning_rate")


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
