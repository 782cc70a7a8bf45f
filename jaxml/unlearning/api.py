"""Representation Unlearning as a `core.Method`, and `unlearn()` which runs it through `core.fit`. Parameters are
{"model", "transform", "stats"}; only "transform" trains, so dropping T undoes the unlearning."""

import time
from typing import Any, Callable, Hashable, Mapping, MutableMapping, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml import core
from jaxml.unlearning import fitting, losses
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.fitting import FitOutput, cached_encoder, fit_params
from jaxml.unlearning.sampling import feature_batches, index_stream, steps_for_epochs, structure, value, with_values
from jaxml.unlearning.targets import class_statistics, target_info, uniform_target
from jaxml.unlearning.transform import make_transform

__all__ = ["DEFAULTS", "FROZEN", "TARGETS", "UnlearnOutput", "batch_values", "init_params", "make_eval_fn",
           "make_loss_fn", "make_method", "make_optimizer", "make_predict_fn", "step_structure", "unlearn"]

# Reference-code defaults with the CPU adaptations of the spec (step floor, batch 128).
DEFAULTS: dict[str, Any] = dict(
    beta=0.01,                # IB trade-off (grid 1e-4 ... 1)
    transform="residual",     # linear | residual (jaxml default) | mlp (reference)
    hidden=(256,),            # hidden widths of T (residual / mlp)
    num_samples=1,            # M Monte-Carlo samples of the channel noise
    noise_scale=0.0,          # s (0: deterministic, the reference configs)
    lr=1e-3,                  # Adam
    batch_size=128,
    epochs=5.0,               # epochs over the forget set
    min_steps=200,            # CPU floor on steps (inferred)
    zero_shot=False,
    prototypes="head",        # zero-shot proxies: head rows, or "rescaled" to the mean feature norm (extension)
    label_weight=0.0,         # lambda of the label-aware extension lambda * CE(h(T(z_r)), y_r)
    identity_weight=0.0,      # gamma of the identity anchor gamma E||T(u) - u||^2, u ~ N(0, r^2/D I) (extension)
    target="mean",            # forget target: "mean" (the reference; zero-shot, the prior mixture of head rows)
                              # or "uniform" (extension: nearest point where the head is uniform on retained classes)
    target_margin=4.0,        # "uniform": logit gap of the forgotten classes below the retained ones
)

FROZEN = (r"^model/", r"^stats/")
TARGETS = ("mean", "uniform")


def _cfg(config: Mapping[str, Any] | None) -> dict[str, Any]:
  """The settings over `DEFAULTS`, each cast once to its default's type (unknown keys are errors)."""
  given = dict(config or {})
  core.reject_unknown(given, sorted(DEFAULTS), "unlearning")
  out = DEFAULTS | {k: type(DEFAULTS[k])(v) for k, v in given.items()}
  if out["target"] not in TARGETS:
    raise ValueError(f"unknown target {out['target']!r}; expected one of {TARGETS}")
  if out["zero_shot"] and out["label_weight"]:
    raise ValueError("label_weight needs retained labels; the zero-shot regime has none (set it to 0)")
  return out


def _prototypes(cfg: Mapping[str, Any], params: Any) -> jax.Array:
  w = model_lib.head_kernel(jax.lax.stop_gradient(params["model"]))          # [C, D]
  if cfg["prototypes"] == "rescaled":
    norm = jax.lax.stop_gradient(params["stats"]["feature_norm"])
    w = norm * w / jnp.linalg.norm(w, axis=-1, keepdims=True)
  elif cfg["prototypes"] != "head":
    raise ValueError(f"unknown prototypes {cfg['prototypes']!r}; expected 'head' or 'rescaled'")
  return w


def make_loss_fn(config: Mapping[str, Any] | None, model: nn.Module) -> Callable:
  """loss_fn(params, batch, rng[, extra]) -> (loss, aux) for the standard (zr, yr, zf, wf, zref) or zero-shot
  (zf, wf) batch; float settings ride as `hp_*` arrays (`batch_values`)."""
  cfg = _cfg(config)
  transform = make_transform(cfg["transform"], cfg["hidden"])
  noisy = bool(cfg["noise_scale"])

  def loss_fn(params, batch, rng, extra=None):
    del extra
    t_fn = lambda z: transform.apply({"params": params["transform"]}, z)  # noqa: E731
    kw = dict(beta=value(batch, "beta"), num_samples=cfg["num_samples"],
              noise_scale=value(batch, "noise_scale") if noisy else 0.0)
    stats = jax.lax.stop_gradient(params["stats"])
    if cfg["zero_shot"]:
      shift = stats.get("target_shift")
      if shift is None and cfg["target"] != "mean":
        raise ValueError("a zero-shot target other than the mean needs stats['target_shift'] (see `unlearn`)")
      loss, aux = losses.zero_shot_objective(t_fn, batch["zf"], batch["wf"], _prototypes(cfg, params),
                                             stats["pi"], stats["pi_retain"], rng, target_shift=shift, **kw)
    else:
      loss, aux = losses.standard_objective(t_fn, batch["zr"], batch["zf"], batch["wf"], batch["zref"], rng, **kw)
    if cfg["label_weight"]:
      logits = model_lib.head_logits(model, jax.lax.stop_gradient(params["model"]), t_fn(batch["zr"]))
      ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["yr"]).mean()
      loss = loss + value(batch, "label_weight") * ce
      aux = aux | {"label_ce": ce}
    if cfg["identity_weight"]:
      # Data-free: Gaussian probes at the typical feature norm keep T near the identity off the few
      # points the zero-shot retain term pins (its 10 head rows), without reading any retained row.
      shape = batch["zf"].shape
      u = jax.random.normal(jax.random.fold_in(rng, 7), shape) * (stats["feature_norm"] / jnp.sqrt(shape[-1]))
      anchor = jnp.mean(jnp.sum((t_fn(u) - u) ** 2, axis=-1))
      loss = loss + value(batch, "identity_weight") * anchor
      aux = aux | {"identity_anchor": anchor}
    return loss, aux

  return loss_fn


def batch_values(config: Mapping[str, Any] | None) -> dict[str, float]:
  """The float settings the loss reads from the batch (see `make_loss_fn`)."""
  cfg = _cfg(config)
  return {k: cfg[k] for k in ("beta", "noise_scale", "label_weight", "identity_weight")}


def step_structure(config: Mapping[str, Any] | None) -> tuple:
  """What shapes the compiled RU step: the non-float settings plus whether the noise, the label-aware
  term and the identity anchor are on (their values travel in the batch)."""
  cfg = _cfg(config)
  return structure(cfg) + tuple((k, bool(cfg[k])) for k in ("noise_scale", "label_weight", "identity_weight"))


def make_eval_fn(config: Mapping[str, Any] | None, model: nn.Module) -> Callable:
  """eval_fn(params, {"x", "y"}) -> {"accuracy", "loss"} of x -> h(T(g(x)))."""
  predict = make_predict_fn(config, model)

  def eval_fn(params, batch):
    out = predict(params, batch["x"])[0]
    ce = optax.softmax_cross_entropy_with_integer_labels(out, batch["y"])
    return {"accuracy": jnp.mean(jnp.argmax(out, -1) == batch["y"]), "loss": jnp.mean(ce)}

  return eval_fn


def init_params(config: Mapping[str, Any] | None, rng: jax.Array, model_params: Any, feature_dim: int,
                stats: Mapping[str, np.ndarray]) -> dict[str, Any]:
  cfg = _cfg(config)
  transform = make_transform(cfg["transform"], cfg["hidden"])
  phi = transform.init(rng, jnp.zeros((1, feature_dim), jnp.float32))["params"]
  return {"model": model_params, "transform": phi, "stats": jax.tree.map(jnp.asarray, dict(stats))}


def make_method(config: Mapping[str, Any] | None, model: nn.Module, model_params: Any,
                stats: Mapping[str, np.ndarray]) -> core.Method:
  """core.Method whose init(rng, example_batch) adds an identity-initialised T to the trained model;
  the encoder, head and stats are frozen (`Method.frozen`). Batches carry `batch_values(config)`."""

  def init(rng, example_batch):
    return init_params(config, rng, model_params, example_batch["zf"].shape[-1], stats)

  return core.Method(init, make_loss_fn(config, model), make_eval_fn(config, model), frozen=FROZEN)


def make_optimizer(config: Mapping[str, Any] | None) -> optax.GradientTransformation:
  """Adam on T (learning rate injected as an array); encoder, head and stats frozen (exactly zero
  updates) via `core.freeze` — what `core.train` builds for `make_method` with optim={adam, lr}."""
  cfg = _cfg(config)
  adam = core.make_optimizer({"name": "adam", "lr": cfg["lr"]}, inject_lr=True)
  return core.freeze(adam, list(FROZEN))


def make_predict_fn(config: Mapping[str, Any] | None, model: nn.Module) -> Callable:
  """predict(params, x) -> (logits [B, C], z' [B, D]) of the unlearned model (jitted)."""
  cfg = _cfg(config)
  transform = make_transform(cfg["transform"], cfg["hidden"])

  @jax.jit
  def predict(params, x):
    z = transform.apply({"params": params["transform"]}, model_lib.encode(model, params["model"], x))
    return model_lib.head_logits(model, params["model"], z), z

  return predict


class UnlearnOutput(NamedTuple):
  params: Any
  fit: FitOutput
  encode_s: float           # time to cache features
  wall_s: float             # encoder warm-up + encode + fit (incl. compile)
  steady_s: float           # encode + fit without warm-up and the compiling first step
  target_info: dict         # where the forget target sits for the frozen head (`targets.target_info`)


def _features(cfg: Mapping[str, Any], enc: Callable, model: nn.Module, model_params: Any, x_train: np.ndarray,
              forget_idx: np.ndarray, feature_norm: float | None) -> tuple[np.ndarray, int, float]:
  """(z, D, mean feature norm): z of every training row, or zero-shot of the forget rows only (D from shapes, the
  norm from the forget rows unless a deployment stored it, `feature_norm`)."""
  if not cfg["zero_shot"]:
    z = core.batched_apply(enc, x_train, fitting.CHUNK)
    return z, z.shape[-1], float(np.mean(np.linalg.norm(z, axis=-1)))
  z = core.batched_apply(enc, x_train[forget_idx], fitting.CHUNK) if forget_idx.size else np.zeros((0, 1), np.float32)
  # Shape only (eval_shape reads no values): the zero-shot path never touches retained inputs.
  dim = jax.eval_shape(lambda x: model_lib.encode(model, model_params, x),
                       jax.ShapeDtypeStruct((1,) + x_train.shape[1:], jnp.float32)).shape[-1]
  if feature_norm is None:
    feature_norm = float(np.mean(np.linalg.norm(z, axis=-1))) if forget_idx.size else 1.0
  return z, dim, feature_norm


def _forget_target(cfg: Mapping[str, Any], model_params: Any, stats: dict, mean: np.ndarray,
                   forget_classes: Sequence[int]) -> tuple[np.ndarray, dict, np.ndarray]:
  """(target, stats, shift = target - mean), the target `mean` or the uniform-head point. Shifting the reference
  batch (standard) or the prototypes (zero-shot, `stats["target_shift"]`) moves L_f's minimiser by the shift."""
  target = mean
  if cfg["target"] == "uniform":
    head = model_params["head"]
    target = uniform_target(head["kernel"], head["bias"], mean, forget_classes, cfg["target_margin"])
  shift = (target - mean).astype(np.float32)
  return target, (stats | {"target_shift": shift} if cfg["zero_shot"] else stats), shift


def _batches(cfg: Mapping[str, Any], z: np.ndarray, dim: int, y_train: np.ndarray, retain_idx: np.ndarray,
             forget_idx: np.ndarray, shift: np.ndarray, seed: int) -> Callable[[int], dict]:
  """Zero-shot: {zf, wf} from the forget features z. Standard: {zr, yr, zf, wf, zref} from the features of
  every row, the reference rows (D_r and D_f) shifted to the target."""
  bsz = cfg["batch_size"]
  if cfg["zero_shot"]:
    f_local = index_stream(np.arange(forget_idx.size), bsz, seed, 1)

    def zero_shot_batch(step):
      rows, w = f_local(step)
      zf = z[rows] if forget_idx.size else np.zeros((bsz, dim), np.float32)
      return {"zf": zf.astype(np.float32), "wf": w}

    return zero_shot_batch
  return feature_batches(z, retain_idx, forget_idx, bsz, seed, y=y_train, shift=shift)


def unlearn(config: Mapping[str, Any] | None, model: nn.Module, model_params: Any, x_train: np.ndarray,
            y_train: np.ndarray, retain_idx: np.ndarray, forget_idx: np.ndarray, *, num_classes: int,
            forget_classes: Sequence[int] = (), seed: int = 0,
            cache: MutableMapping[Hashable, Any] | None = None, mesh: Any = None,
            feature_norm: float | None = None, progress: bool = False,
            train_config: Mapping[str, Any] | None = None) -> UnlearnOutput:
  """Runs Representation Unlearning (standard or zero-shot per `config`; zero-shot reads only the forget rows of
  `x_train` and the class counts of `y_train`) through `core.train`.
  Steps = max(min_steps, ceil(epochs |D_f| / B)); `train_config`: the loop keys of `core.loop_config`."""
  cfg = _cfg(config)
  retain_idx, forget_idx = np.asarray(retain_idx, np.int64), np.asarray(forget_idx, np.int64)
  enc = cached_encoder(model, model_params, cache)
  # Warm-up on one (padded) chunk: compiles the encoder if this process has not yet (in wall_s, not steady_s).
  t_warm = time.perf_counter()
  rows_for_shape = forget_idx[:1] if cfg["zero_shot"] else np.arange(1)
  if rows_for_shape.size:
    core.batched_apply(enc, x_train[rows_for_shape], fitting.CHUNK)
  warm_s = time.perf_counter() - t_warm
  t0 = time.perf_counter()
  z, dim, feature_norm = _features(cfg, enc, model, model_params, x_train, forget_idx, feature_norm)
  stats = class_statistics(y_train, num_classes, forget_classes, feature_norm)
  if cfg["zero_shot"]:   # the prior mixture of the (used) prototypes, sum_c pi_c w_c
    mean = stats["pi"] @ np.asarray(_prototypes(cfg, {"model": model_params, "stats": stats}))
  else:
    mean = z[np.concatenate([retain_idx, forget_idx])].mean(axis=0)
  target, stats, shift = _forget_target(cfg, model_params, stats, mean, forget_classes)
  encode_s = time.perf_counter() - t0
  info = target_info(model, model_params, mean, target, forget_classes)
  params = init_params(cfg, jax.random.key(seed), model_params, dim, stats)
  num_steps = steps_for_epochs(forget_idx.size, cfg["batch_size"], cfg["epochs"], minimum=cfg["min_steps"])
  batch_fn = _batches(cfg, z, dim, np.asarray(y_train, np.int32), retain_idx, forget_idx, shift, seed)
  key = ("representation_unlearning", step_structure(cfg), model)
  tc = {k: v for k, v in dict(train_config or {}).items() if k != "unroll"}
  fit = fit_params(key, make_loss_fn(cfg, model), params, with_values(batch_fn, cfg["batch_size"], **batch_values(cfg)),
                   lr=cfg["lr"], train_config=tc, frozen=FROZEN, num_steps=num_steps, seed=seed, cache=cache,
                   name="ru_zs" if cfg["zero_shot"] else "ru", progress=progress, mesh=mesh)
  return UnlearnOutput(fit.params, fit, encode_s, warm_s + encode_s + fit.wall_s, encode_s + fit.steady_s, info)
