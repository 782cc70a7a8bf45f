"""How every unlearning run trains: `fit_params` (one timed `core.train` run) and `cached` (a value built
once per key of a caller-owned cache), so runs differing only in arrays compile once."""

import time
from typing import Any, Callable, Hashable, Mapping, MutableMapping, NamedTuple

import flax.linen as nn
import jax
import numpy as np

from jaxml import core
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.sampling import structure

__all__ = ["CHUNK", "FitOutput", "cached", "cached_encoder", "encode_rows", "fit_params"]

# Rows per compiled call of the frozen encoder (`encode_rows`).
CHUNK = 1024


class FitOutput(NamedTuple):
  """params; wall_s (incl. compile); steady_s (without the compiling first step); num_steps; final_loss."""

  params: Any
  wall_s: float
  steady_s: float
  num_steps: int
  final_loss: float


def cached(cache: MutableMapping[Hashable, Any] | None, key: Hashable, build: Callable[[], Any]) -> Any:
  """`build()` once per `key` of `cache`; without a cache, a fresh build on every call."""
  if cache is None:
    return build()
  if key not in cache:
    cache[key] = build()
  return cache[key]


def cached_encoder(model: nn.Module, model_params: Any,
                   cache: MutableMapping[Hashable, Any] | None = None) -> Callable[[jax.Array], jax.Array]:
  """x -> g(x) with the parameters as a jit argument, so the compiled encoder is shared across seeds."""
  enc = cached(cache, ("encode", model), lambda: jax.jit(lambda p, x: model_lib.encode(model, p, x)))
  return lambda x: enc(model_params, x)


def encode_rows(model: nn.Module, model_params: Any, x: np.ndarray,
                cache: MutableMapping[Hashable, Any] | None = None) -> np.ndarray:
  """z = g(x) [n, D] (numpy) in `CHUNK`-row calls of the cached encoder (one compiled shape; read at call time,
  as by `api.unlearn`, so a test of a large encoder on a few rows may lower it)."""
  return core.batched_apply(cached_encoder(model, model_params, cache), x, CHUNK)


def _no_init(rng: jax.Array, batch: Any) -> Any:
  raise ValueError("unlearning runs start from given parameters (core.train(init_params=...))")


def fit_params(key: Hashable, loss_fn: Callable, params: Any, batch_fn: Callable[[int], dict], *, num_steps: int,
               seed: int, lr: float, train_config: Mapping[str, Any] | None = None, extra: Any = None,
               frozen: tuple[str, ...] = (), cache: MutableMapping[Hashable, Any] | None = None,
               name: str = "unlearn", progress: bool = False, mesh: Any = None) -> FitOutput:
  """Trains `params` with `loss_fn(params, batch, rng, extra)` through `core.train` (default Adam, `lr` injected as
  an array), timing it; the trainer is cached under `key` (all the loss closure reads), optimizer and `frozen`."""
  if num_steps <= 0:
    return FitOutput(params, 0.0, 0.0, 0, float("nan"))
  given = {k: v for k, v in dict(train_config or {}).items() if v}
  cfg = core.loop_config({"optim": {"name": "adam"}, "log_every": 1000} | given, num_steps=num_steps)
  schedule_key = () if cfg["optim"].get("schedule", "constant") == "constant" else (num_steps,)
  full_key = (key, structure(cfg["optim"]), frozen, cfg.get("unroll", False)) + schedule_key
  trainer = cached(cache, full_key, lambda: core.make_trainer(
      core.Method(_no_init, loss_fn, init_extra=lambda rng, p: None, frozen=frozen), cfg))
  marks: dict[str, float] = {}

  def mark(step: int, st: core.TrainState) -> None:
    if step == 1:
      jax.block_until_ready(st.params)
      marks["first"] = time.perf_counter()

  t0 = time.perf_counter()
  res = core.train(trainer, batch_fn, cfg, seed=seed, init_params=params, extra=extra, lr=float(lr),
                   hooks=[core.Hook(1, mark)], name=name, progress=progress, mesh=mesh)
  jax.block_until_ready(res.params)
  t_end = time.perf_counter()
  wall = t_end - t0
  steady = (t_end - marks["first"]) * num_steps / (num_steps - 1) if num_steps > 1 else wall
  return FitOutput(res.params, wall, steady, num_steps, res.train_metrics.get("loss", float("nan")))
