"""Representation Unlearning as a `core.Method`, and `unlearn()` which runs it through `core.fit`.

Parameters are one tree {"model": {"encoder", "head"}, "transform": phi, "stats": {...}};
`core.freeze` zeroes every update outside "transform" (the encoder, head and the stored class
statistics never change), so the deployed model is x -> h(T_phi(g(x))) and dropping T undoes
the unlearning. Features z = g(x) are encoded once and cached (the encoder is frozen), as in
the reference algorithm; the zero-shot variant encodes only the forget rows.
"""

import time
from typing import Any, Callable, Hashable, Mapping, MutableMapping, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml import core
from jaxml.unlearning import losses
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.sampling import index_stream, steps_for_epochs, structure, value, with_values
from jaxml.unlearning.transform import make_transform

__all__ = ["DEFAULTS", "FROZEN", "TARGETS", "uniform_target", "head_probs", "make_method", "make_loss_fn", "make_eval_fn", "make_optimizer",
           "class_statistics", "init_params", "unlearn", "UnlearnOutput", "batched_apply", "batch_values",
           "step_structure", "make_predict_fn", "FitOutput", "fit_params", "target_info"]

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
    prototypes="head",        # zero-shot proxies: head rows ("head") or rows rescaled to the mean
                              # training-feature norm ("rescaled", an extension)
    label_weight=0.0,         # lambda of the label-aware extension lambda * CE(h(T(z_r)), y_r)
    identity_weight=0.0,      # gamma of the data-free identity anchor (extension, both regimes):
                              # gamma E_u ||T(u) - u||^2, u ~ N(0, r^2/D I), r = stats["feature_norm"]
    target="mean",            # forget target: "mean" (the reference: the mean representation of D;
                              # zero-shot, the prior mixture of head rows) or "uniform" (extensions
                              # `ru_uniform` / `ru_zs_uniform`: the point nearest that mean where the
                              # head is uniform over retained classes)
    target_margin=4.0,        # "uniform": logit gap of the forgotten classes below the retained ones
)

FROZEN = (r"^model/", r"^stats/")
TARGETS = ("mean", "uniform")


def _cfg(config: Mapping[str, Any] | None) -> dict[str, Any]:
  given = dict(config or {})
  core.reject_unknown(given, sorted(DEFAULTS), "unlearning")
  out = dict(DEFAULTS)
  out.update(given)
  if out["target"] not in TARGETS:
    raise ValueError(f"unknown target {out['target']!r}; expected one of {TARGETS}")
  if out["zero_shot"] and float(out["label_weight"]):
    raise ValueError("label_weight needs retained labels; the zero-shot regime has none (set it to 0)")
  return out


def head_probs(model: nn.Module, model_params: Any, z: np.ndarray) -> np.ndarray:
  """softmax(h(z)) of the frozen head at one point z [D] -> [C] (numpy)."""
  logits = model_lib.head_logits(model, model_params, jnp.asarray(z, jnp.float32)[None])
  return np.asarray(jax.nn.softmax(logits[0]))


def uniform_target(kernel: np.ndarray, bias: np.ndarray, mean: np.ndarray, forget_classes: Sequence[int],
                   margin: float) -> np.ndarray:
  """The point nearest `mean` whose head logits are equal on the retained classes and `margin`
  lower on the forgotten ones (all equal without forgotten classes: h(z*) uniform, KL(h(z*) || U) = 0).

  The head is affine, logits = z K + b (K [D, C]), so the set {z : P (K^T z + b + margin 1_F) = 0}
  (P centres over classes) is an affine subspace and its nearest point to the mean is
  z* = mean - pinv(P K^T) P (K^T mean + b + margin 1_F): the exact minimiser of the distance among
  the points where the head's output is the target distribution (the closed form of running
  gradient steps on KL(h(z) || q) from the mean with a proximity term).
  """
  k = np.asarray(kernel, np.float64)
  c = k.shape[1]
  gap = np.zeros(c)
  gap[list(forget_classes)] = float(margin)
  centre = np.eye(c) - 1.0 / c
  a = centre @ k.T                                                   # [C, D]
  resid = centre @ (k.T @ np.asarray(mean, np.float64) + np.asarray(bias, np.float64) + gap)
  return (np.asarray(mean, np.float64) - np.linalg.pinv(a) @ resid).astype(np.float32)


def class_statistics(y_train: np.ndarray, num_classes: int, forget_classes: Sequence[int],
                     feature_norm: float) -> dict[str, np.ndarray]:
  """Class priors pi_c = N_c / N, retained priors pi^R (0 on forgotten classes) and the mean
  training-feature norm: what a deployment would store at training time."""
  counts = np.bincount(np.asarray(y_train), minlength=num_classes).astype(np.float32)
  pi = counts / counts.sum()
  keep = np.ones(num_classes, bool)
  keep[list(forget_classes)] = False
  pi_r = np.where(keep, counts, 0.0)
  pi_r = pi_r / max(pi_r.sum(), 1.0)
  return {"pi": pi.astype(np.float32), "pi_retain": pi_r.astype(np.float32),
          "feature_norm": np.asarray(feature_norm, np.float32)}


def _prototypes(cfg: Mapping[str, Any], params: Any) -> jax.Array:
  w = model_lib.head_kernel(jax.lax.stop_gradient(params["model"]))          # [C, D]
  if cfg["prototypes"] == "rescaled":
    norm = jax.lax.stop_gradient(params["stats"]["feature_norm"])
    w = norm * w / jnp.linalg.norm(w, axis=-1, keepdims=True)
  elif cfg["prototypes"] != "head":
    raise ValueError(f"unknown prototypes {cfg['prototypes']!r}; expected 'head' or 'rescaled'")
  return w


def make_loss_fn(config: Mapping[str, Any] | None, model: nn.Module) -> Callable:
  """loss_fn(params, batch, rng[, extra]) -> (loss, aux) for the standard or zero-shot objective.

  Standard batch: zr [B, D], yr [B], zf [B, D], wf [B], zref [B, D]. Zero-shot batch: zf, wf.
  Both carry the float settings as `hp_beta`, `hp_noise_scale`, `hp_label_weight`, `hp_identity_weight` (`batch_values`),
  so the compiled step depends only on `step_structure(config)`.
  """
  cfg = _cfg(config)
  transform = make_transform(cfg["transform"], cfg["hidden"])
  noisy = bool(cfg["noise_scale"])

  def loss_fn(params, batch, rng, extra=None):
    del extra
    t_fn = lambda z: transform.apply({"params": params["transform"]}, z)  # noqa: E731
    kw = dict(beta=value(batch, "beta"), num_samples=int(cfg["num_samples"]),
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
  return {k: float(cfg[k]) for k in ("beta", "noise_scale", "label_weight", "identity_weight")}


def step_structure(config: Mapping[str, Any] | None) -> tuple:
  """What shapes the compiled RU step: the non-float settings plus whether the noise and the
  label-aware term are on (their values travel in the batch)."""
  cfg = _cfg(config)
  return structure(cfg) + (("noisy", bool(cfg["noise_scale"])), ("label_term", bool(cfg["label_weight"])),
                           ("identity_term", bool(cfg["identity_weight"])))


def make_eval_fn(config: Mapping[str, Any] | None, model: nn.Module) -> Callable:
  """eval_fn(params, {"x", "y"}) -> {"accuracy", "loss"} of x -> h(T(g(x)))."""
  cfg = _cfg(config)
  transform = make_transform(cfg["transform"], cfg["hidden"])

  def eval_fn(params, batch):
    z = model_lib.encode(model, params["model"], batch["x"])
    out = model_lib.head_logits(model, params["model"], transform.apply({"params": params["transform"]}, z))
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
    return init_params(config, rng, model_params, int(example_batch["zf"].shape[-1]), stats)

  return core.Method(init, make_loss_fn(config, model), make_eval_fn(config, model), frozen=FROZEN)


def make_optimizer(config: Mapping[str, Any] | None) -> optax.GradientTransformation:
  """Adam on T (learning rate injected as an array); encoder, head and stats frozen (exactly zero
  updates) via `core.freeze` — what `core.train` builds for `make_method` with optim={adam, lr}."""
  cfg = _cfg(config)
  adam = core.make_optimizer({"name": "adam", "lr": float(cfg["lr"])}, inject_lr=True)
  return core.freeze(adam, list(FROZEN))


class FitOutput(NamedTuple):
  """params: trained; wall_s: whole run incl. compile; steady_s: estimated run time without the
  first (compiling) step; num_steps; final_loss: mean loss of the last log window."""

  params: Any
  wall_s: float
  steady_s: float
  num_steps: int
  final_loss: float


def _no_init(rng: jax.Array, batch: Any) -> Any:
  raise ValueError("unlearning runs start from given parameters (core.train(init_params=...))")


def fit_params(key: Hashable, loss_fn: Callable, params: Any, batch_fn: Callable[[int], dict], *, num_steps: int,
               seed: int, lr: float, train_config: Mapping[str, Any] | None = None, extra: Any = None,
               frozen: tuple[str, ...] = (), cache: MutableMapping[Hashable, Any] | None = None,
               name: str = "unlearn", progress: bool = False, mesh: Any = None) -> FitOutput:
  """Trains `params` with `loss_fn(params, batch, rng, extra)` through `core.train`, timing the run.

  `train_config` supplies `optim` (default Adam), `log_every`, `checkpoint_every` (used only with a
  workdir, which these in-memory runs do not have), `steps_per_dispatch`, `mesh` and `unroll` (`core.train`'s
  option: the steps of a dispatch written out instead of scanned); `lr` is injected as an array. The `core.Trainer` is kept in `cache` under `key` (which must name everything the loss
  closure reads, see `sampling.structure`), so runs differing in arrays compile once.
  """
  tc = dict(train_config or {})
  unroll = bool(tc.get("unroll", False))
  cfg = {"optim": dict(tc.get("optim") or {"name": "adam"}), "num_steps": int(num_steps),
         "log_every": int(tc.get("log_every", 1000) or 1000), "mesh": tc.get("mesh"),
         "checkpoint_every": int(tc.get("checkpoint_every", 0) or 0),
         "steps_per_dispatch": int(tc.get("steps_per_dispatch", 0) or 0), "unroll": unroll}
  if num_steps <= 0:
    return FitOutput(params, 0.0, 0.0, 0, float("nan"))
  schedule_key = () if cfg["optim"].get("schedule", "constant") == "constant" else (num_steps,)
  full_key = (key, structure(cfg["optim"]), frozen, unroll) + schedule_key
  if cache is not None and full_key in cache:
    trainer = cache[full_key]
  else:
    method = core.Method(_no_init, loss_fn, init_extra=lambda rng, p: None, frozen=frozen)
    trainer = core.make_trainer(method, cfg)
    if cache is not None:
      cache[full_key] = trainer
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


def batched_apply(fn: Callable[[jax.Array], Any], x: np.ndarray, chunk: int = 1024) -> Any:
  """Applies a jitted `fn` to row chunks of x, the last one zero-padded to `chunk` rows (one
  compiled shape, also for inputs shorter than a chunk: `unlearn`'s warm-up call on one row compiles
  the shape its timed calls use), and concatenates the (numpy) results."""
  n = x.shape[0]
  outs = []
  for i in range(0, n, chunk):
    part = x[i:i + chunk]
    pad = chunk - part.shape[0]
    if pad:
      part = np.concatenate([part, np.zeros((pad,) + part.shape[1:], part.dtype)])
    outs.append(jax.tree.map(lambda a, k=chunk - pad: a[:k], jax.device_get(fn(jnp.asarray(part)))))
  return jax.tree.map(lambda *a: np.concatenate(a, axis=0), *outs)


def cached_encoder(model: nn.Module, model_params: Any,
                   cache: MutableMapping[Hashable, Any] | None = None) -> Callable[[jax.Array], jax.Array]:
  """x -> g(x) with the parameters as a jit argument, so the compiled encoder is shared across seeds."""
  key = ("encode", model)
  if cache is not None and key in cache:
    enc = cache[key]
  else:
    enc = jax.jit(lambda p, x: model_lib.encode(model, p, x))
    if cache is not None:
      cache[key] = enc
  return lambda x: enc(model_params, x)


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
  target_info: dict         # where the forget target sits for the frozen head (see `target_info`)


def target_info(model: nn.Module, model_params: Any, mean: np.ndarray, target: np.ndarray,
                forget_classes: Sequence[int]) -> dict[str, float]:
  """The collision check: argmax / max-probability of h at the mean representation and at the
  forget target actually used, and whether the head's class there is a forgotten one (nan when no
  class is forgotten). With target == mean (the reference) the two coincide."""
  out = {}
  for name, z in (("mean", mean), ("target", target)):
    p = head_probs(model, model_params, z)
    out[f"{name}_argmax"] = float(np.argmax(p))
    out[f"{name}_pmax"] = float(np.max(p))
    out[f"{name}_collides"] = float(int(np.argmax(p)) in set(forget_classes)) if forget_classes else float("nan")
  out["target_shift"] = float(np.linalg.norm(np.asarray(target) - np.asarray(mean)))
  return out


def unlearn(config: Mapping[str, Any] | None, model: nn.Module, model_params: Any, x_train: np.ndarray,
            y_train: np.ndarray, retain_idx: np.ndarray, forget_idx: np.ndarray, *, num_classes: int,
            forget_classes: Sequence[int] = (), seed: int = 0,
            cache: MutableMapping[Hashable, Any] | None = None, mesh: Any = None,
            feature_norm: float | None = None, progress: bool = False,
            train_config: Mapping[str, Any] | None = None) -> UnlearnOutput:
  """Runs Representation Unlearning (standard or zero-shot per `config`) through `core.fit`.

  The zero-shot path reads only the forget rows of `x_train` and the class counts of
  `y_train` (statistics a deployment stores at training time), never retained inputs.
  Steps = max(min_steps, ceil(epochs |D_f| / B)). `train_config`: optim / log_every / mesh for
  `core.train` (the learning rate is `config['lr']`).
  """
  cfg = _cfg(config)
  bsz = int(cfg["batch_size"])
  retain_idx, forget_idx = np.asarray(retain_idx, np.int64), np.asarray(forget_idx, np.int64)
  enc = cached_encoder(model, model_params, cache)
  # Warm-up on one (padded) chunk: compiles the encoder if this process has not yet; counted in
  # wall_s but not in steady_s.
  t_warm = time.perf_counter()
  rows_for_shape = forget_idx[:1] if cfg["zero_shot"] else np.arange(1)
  if rows_for_shape.size:
    batched_apply(enc, x_train[rows_for_shape])
  warm_s = time.perf_counter() - t_warm
  t0 = time.perf_counter()
  if cfg["zero_shot"]:
    z_f = batched_apply(enc, x_train[forget_idx]) if forget_idx.size else np.zeros((0, 1), np.float32)
    f_pos = np.arange(forget_idx.size)
    # Shape only (eval_shape reads no values): the zero-shot path never touches retained inputs.
    feature_dim = int(jax.eval_shape(lambda x: model_lib.encode(model, model_params, x),
                                     jax.ShapeDtypeStruct((1,) + x_train.shape[1:], jnp.float32)).shape[-1])
    # The rescaled-prototype extension needs the typical feature norm; a deployment would store
    # it at training time like the class counts. Without it we use the forget rows' mean norm.
    if feature_norm is None:
      feature_norm = float(np.mean(np.linalg.norm(z_f, axis=-1))) if forget_idx.size else 1.0
  else:
    z_all = batched_apply(enc, x_train)
    feature_dim = int(z_all.shape[-1])
    feature_norm = float(np.mean(np.linalg.norm(z_all, axis=-1)))
  stats = class_statistics(y_train, num_classes, forget_classes, feature_norm)
  if cfg["zero_shot"]:
    # Zero-shot target: the prior mixture of the (used) prototypes, sum_c pi_c w_c.
    protos = np.asarray(_prototypes(cfg, {"model": model_params, "stats": stats}))
    mean = target = stats["pi"] @ protos
    if cfg["target"] == "uniform":
      # Extension `ru_zs_uniform`: the same uniform-head point as `ru_uniform`, found from the prior
      # mixture instead of the data mean (head and class counts only: still zero-shot). L_f^zs's
      # minimiser is sum_c pi_c (w_c + s) = mean + s, so shifting its prototypes by s moves it there.
      head = model_params["head"]
      target = uniform_target(head["kernel"], head["bias"], mean, forget_classes, float(cfg["target_margin"]))
    stats = stats | {"target_shift": (target - mean).astype(np.float32)}
    shift = np.zeros(feature_dim, np.float32)
  else:
    mean = z_all[np.concatenate([retain_idx, forget_idx])].mean(axis=0)
    target = mean
    if cfg["target"] == "uniform":
      head = model_params["head"]
      target = uniform_target(head["kernel"], head["bias"], mean, forget_classes, float(cfg["target_margin"]))
    # L_f's minimiser is the reference batch mean; shifting the batch moves it to the target.
    shift = (target - mean).astype(np.float32)
  encode_s = time.perf_counter() - t0
  info = target_info(model, model_params, mean, target, forget_classes)
  params = init_params(cfg, jax.random.key(seed), model_params, feature_dim, stats)
  num_steps = steps_for_epochs(forget_idx.size, bsz, float(cfg["epochs"]), minimum=int(cfg["min_steps"]))
  y_train = np.asarray(y_train, np.int32)

  values = batch_values(cfg)
  if cfg["zero_shot"]:
    f_local = index_stream(f_pos, bsz, seed, 1)

    def batch_fn(step):
      rows, w = f_local(step)
      zf = z_f[rows] if forget_idx.size else np.zeros((bsz, feature_dim), np.float32)
      return {"zf": zf.astype(np.float32), "wf": w}
  else:
    f_rows = index_stream(forget_idx, bsz, seed, 1)
    r_rows = index_stream(retain_idx, bsz, seed, 2)
    all_rows = index_stream(np.concatenate([retain_idx, forget_idx]), bsz, seed, 3)

    def batch_fn(step):
      rr, _ = r_rows(step)
      rf, wf = f_rows(step)
      ra, _ = all_rows(step)
      return {"zr": z_all[rr], "yr": y_train[rr], "zf": z_all[rf], "wf": wf, "zref": z_all[ra] + shift}

  key = ("representation_unlearning", step_structure(cfg), model)
  # T trains on cached z: its step runs no encoder layer, so it keeps the rolled multi-step loop.
  tc = {k: v for k, v in dict(train_config or {}).items() if k != "unroll"}
  fit = fit_params(key, make_loss_fn(cfg, model), params, with_values(batch_fn, bsz, **values), lr=float(cfg["lr"]),
                   train_config=tc, frozen=FROZEN, num_steps=num_steps, seed=seed, cache=cache,
                   name="ru_zs" if cfg["zero_shot"] else "ru", progress=progress, mesh=mesh)
  return UnlearnOutput(fit.params, fit, encode_s, warm_s + encode_s + fit.wall_s, encode_s + fit.steady_s, info)
