"""Unlearning baselines, all started from the same trained model and trained through `core.fit`.

Every function takes (hp, model, params0, task, seed, cache, train_config) and returns a `BaselineOutput`
holding the full edited classifier parameters. Adam is used throughout (the reference repos
mix SGD and Adam); learning rates and epochs are per-method hyper-parameters (`DEFAULTS`,
overridable from the experiment config). Notation: f = h o g the classifier, D_r / D_f / D_t
retain / forget / test sets, CE cross-entropy, KL(p || q) between softmax outputs.

  retrain          CE on D_r from a fresh init with the original recipe (gold standard)
  finetune         CE on D_r starting from the original model
  grad_ascent      -CE on D_f
  neggrad_plus     alpha CE(D_r) - (1 - alpha) CE(D_f)                      (Kurmanji et al. 2023)
  random_labels    CE(D_f with random wrong labels) + CE(D_r)
  l1_sparse        CE(D_r) + gamma_t ||theta||_1, gamma_t linear to 0      (Jia et al. 2023)
  salun            random_labels restricted to the top-q |grad CE(D_f)| weights (Fan et al. 2024)
  scrub            max-steps: -KL(teacher || student) on D_f; min-steps alpha KL + gamma CE on D_r
  boundary_shrink  CE on D_f relabelled by the class of the FGSM neighbour  (Chen et al. 2023)
  bad_teacher      KL to the original on a fraction of D_r, to a random-init teacher on D_f
  emmn             zero-shot: error-max noise (forget classes) + error-min noise (retained
                   classes) learnt against the frozen model, then impair / repair on the noise
  jit              zero-shot: minimise ||f(x) - f(x + xi)|| / ||xi|| around forget inputs (Foster et al.)
  head_only        control: the Representation Unlearning objective on a copy of the head
                   (logit space) instead of a transform of z
  sisa             S shard models (ensemble = mean softmax); unlearning retrains the shards that
                   held forget rows on their retained rows (Bourtoule et al. 2021; no slicing)
  unsir            error-maximising noise for the forget classes learnt against the frozen model,
                   then impair (CE on noise labelled as the forget class + a retain subset) and
                   repair (CE on the retain subset), SGD with momentum (Tarun et al. 2023)
  gkt              zero-shot: a generator and a fresh student play a distillation game against the
                   original (teacher); pseudo-samples the teacher gives a forget class with
                   probability > threshold are dropped (gated), plus attention transfer on z
                   (Chundawat et al. 2023)
"""

import time
from typing import Any, Callable, Hashable, Mapping, MutableMapping, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml.unlearning import model as model_lib
from jaxml.unlearning.api import FitOutput, batched_apply, cached_encoder, fit_params
from jaxml.unlearning.losses import weighted_mean
from jaxml.unlearning.sampling import index_stream, steps_for_epochs, structure, value, with_values
from jaxml.unlearning.task import UnlearningTask

__all__ = ["DEFAULTS", "BASELINES", "ZERO_SHOT_BASELINES", "CLASS_ONLY", "ENSEMBLES", "ensemble_predictor",
           "shard_of", "BaselineOutput", "NotApplicable",
           "train_classifier", "run_baseline", "hyperparameters", "saliency_mask", "fgsm_labels"]

DEFAULTS: dict[str, dict[str, Any]] = {
    "train": dict(epochs=60.0, lr=1e-3, batch_size=128),
    "finetune": dict(epochs=10.0, lr=1e-3, batch_size=128),
    "grad_ascent": dict(epochs=5.0, lr=1e-4, batch_size=128, min_steps=0),
    "neggrad_plus": dict(epochs=3.0, lr=5e-4, alpha=0.95, batch_size=128),
    "random_labels": dict(epochs=3.0, lr=1e-3, batch_size=128),
    "l1_sparse": dict(epochs=5.0, lr=1e-3, gamma_l1=5e-4, batch_size=128),
    "salun": dict(epochs=3.0, lr=1e-3, mask_fraction=0.5, batch_size=128),
    "scrub": dict(max_epochs=2, min_epochs=3, lr=5e-4, alpha=1.0, gamma=1.0, batch_size=128),
    "boundary_shrink": dict(epochs=10.0, lr=1e-4, eps=0.25, batch_size=128, min_steps=0),
    "bad_teacher": dict(epochs=3.0, lr=1e-4, retain_fraction=0.3, temperature=1.0, batch_size=128),
    "emmn": dict(noise_per_class=16, noise_steps=400, noise_lr=0.1, noise_l2=0.01,
                 impair_steps=2, impair_lr=0.01, repair_steps=2, repair_lr=0.01),
    "jit": dict(epochs=1.0, lr=1e-4, sigma=0.1, num_perturb=4, batch_size=128, min_steps=0),
    "head_only": dict(beta=0.01, lr=1e-3, epochs=5.0, min_steps=200, batch_size=128),
    # Authors' configs (RU repository): SISA 10 shards x 5 slices, SGD 0.1; here Adam with the train
    # recipe (the same one Retrain uses) and no slices.
    "sisa": dict(shards=5, epochs=60.0, lr=1e-3, batch_size=128),
    # Authors' configs: 25 noise iterations at lr 0.01 (Adam), lambda 0.1, clamp 2.5, 20 copies;
    # impair 3 epochs at SGD 0.05, repair 1 epoch at SGD 0.01, momentum 0.9; 1000 retain rows per class.
    "unsir": dict(noise_copies=20, noise_steps=25, noise_lr=0.01, noise_l2=0.1, noise_clamp=2.5,
                  impair_epochs=3.0, impair_lr=0.05, repair_epochs=1.0, repair_lr=0.01, momentum=0.9,
                  retain_per_class=1000, batch_size=128),
    # Authors' configs: Adam 1e-3, batch 256, z 128, 1 generator + 10 student steps per cycle,
    # 4000 cycles, attention weight 250, KL temperature 1, gate threshold 0.01.
    "gkt": dict(cycles=4000, generator_steps=1, student_steps=10, lr=1e-3, batch_size=256, z_dim=128,
                generator_hidden=256, at_beta=250.0, temperature=1.0, threshold=0.01),
}

BASELINES = ("retrain", "finetune", "grad_ascent", "neggrad_plus", "random_labels", "l1_sparse", "salun",
             "scrub", "boundary_shrink", "bad_teacher", "head_only", "sisa", "unsir")
ZERO_SHOT_BASELINES = ("emmn", "jit", "gkt")
CLASS_ONLY = ("emmn", "unsir", "gkt")
ENSEMBLES = ("sisa",)       # params stacked over shard models; predict with `ensemble_predictor`


class NotApplicable(ValueError):
  """The baseline does not apply to this regime (e.g. class-level zero-shot methods)."""


class BaselineOutput(NamedTuple):
  params: Any            # full classifier parameters {"encoder", "head"}
  wall_s: float          # whole unlearning run incl. compile and any pre-computation
  steady_s: float        # the same without the compiling first step of each fit
  num_steps: int


def hyperparameters(name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
  key = "train" if name == "retrain" else name
  if key not in DEFAULTS:
    raise ValueError(f"unknown baseline {name!r}; expected one of {', '.join(BASELINES + ZERO_SHOT_BASELINES)}")
  hp = dict(DEFAULTS[key])
  for k, v in dict(overrides or {}).items():
    if k not in hp:
      raise ValueError(f"unknown hyper-parameter {k!r} for {name}; expected {sorted(hp)}")
    hp[k] = type(hp[k])(v) if not isinstance(hp[k], float) else float(v)
  return hp


# --------------------------------------------------------------------------- pieces
def _apply(model: nn.Module) -> Callable:
  return lambda p, x: model.apply({"params": p}, x)


def _ce(logits: jax.Array, y: jax.Array, w: jax.Array | None = None) -> jax.Array:
  per = optax.softmax_cross_entropy_with_integer_labels(logits, y)
  return jnp.mean(per) if w is None else weighted_mean(per, w)


def _kl(teacher_logits: jax.Array, student_logits: jax.Array, temperature: float = 1.0) -> jax.Array:
  """Per-row KL(softmax(t / T) || softmax(s / T)) -> [B]."""
  lt = jax.nn.log_softmax(teacher_logits / temperature)
  ls = jax.nn.log_softmax(student_logits / temperature)
  return jnp.sum(jnp.exp(lt) * (lt - ls), axis=-1)


def _key(name: str, hp: Mapping[str, Any], model: nn.Module, *extra: Hashable) -> Hashable:
  return (name, structure(hp), model, *extra)


def _fit(key, params, loss_fn, hp, batch_fn, num_steps, seed, extra, cache, model, train_config, *,
         frozen: tuple[str, ...] = (), lr_key: str = "lr", name: str | None = None,
         shape: tuple = ()) -> FitOutput:
  """One core.train run at the learning rate hp[lr_key] (an array: a grid over it compiles once)."""
  return fit_params(_key(key, hp, model, *shape), loss_fn, params, batch_fn, num_steps=num_steps, seed=seed,
                    lr=float(hp[lr_key]), train_config=train_config, extra=extra, frozen=frozen, cache=cache,
                    name=name or key)


def _take(task: UnlearningTask, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  return task.x_train[rows], task.y_train[rows].astype(np.int32)


def _ce_retain_loss(model: nn.Module) -> Callable:
  f = _apply(model)

  def loss_fn(params, batch, rng, extra):
    del rng, extra
    return _ce(f(params, batch["xr"]), batch["yr"]), {}

  return loss_fn


def _rf_batches(task: UnlearningTask, bsz: int, seed: int, *, retain: bool = True, forget: bool = True,
                retain_idx: np.ndarray | None = None) -> Callable[[int], dict]:
  """Batches {xr, yr, ir} from D_r and {xf, yf, wf, if} from D_f (ir / if = row indices)."""
  r_stream = index_stream(task.retain_idx if retain_idx is None else retain_idx, bsz, seed, 2)
  f_stream = index_stream(task.forget_idx, bsz, seed, 1)

  def batch_fn(step):
    out = {}
    if retain:
      rr, _ = r_stream(step)
      out["xr"], out["yr"] = _take(task, rr)
      out["ir"] = rr.astype(np.int32)
    if forget:
      rf, wf = f_stream(step)
      out["xf"], out["yf"] = _take(task, rf)
      out["wf"], out["if"] = wf, rf.astype(np.int32)
    return out

  return batch_fn


def train_classifier(hp: Mapping[str, Any], model: nn.Module, task: UnlearningTask, rows: np.ndarray, *,
                     seed: int, cache: MutableMapping | None = None, name: str = "train",
                     train_config: Mapping[str, Any] | None = None) -> FitOutput:
  """CE training from a fresh init on the given training rows (original model or Retrain)."""
  params = model.init(jax.random.key(seed), jnp.asarray(task.x_train[:1]))["params"]
  bsz = int(hp["batch_size"])
  stream = index_stream(np.asarray(rows), bsz, seed, 0)

  def batch_fn(step):
    r, _ = stream(step)
    x, y = _take(task, r)
    return {"xr": x, "yr": y, "ir": r.astype(np.int32)}

  steps = steps_for_epochs(len(rows), bsz, float(hp["epochs"]))
  return _fit("train", params, _ce_retain_loss(model), hp, batch_fn, steps, seed, None, cache, model, train_config,
              name=name)


# --------------------------------------------------------------------------- parameter-editing baselines
def _finetune(hp, model, params0, task, seed, cache, tc):
  bsz = int(hp["batch_size"])
  steps = steps_for_epochs(task.retain_idx.size, bsz, hp["epochs"])
  fit = _fit("finetune", params0, _ce_retain_loss(model), hp,
             _rf_batches(task, bsz, seed, forget=False), steps, seed, None, cache, model, tc)
  return fit, 0.0


def _grad_ascent(hp, model, params0, task, seed, cache, tc):
  f, bsz = _apply(model), int(hp["batch_size"])

  def loss_fn(params, batch, rng, extra):
    ce_f = _ce(f(params, batch["xf"]), batch["yf"], batch["wf"])
    return -ce_f, {"forget_ce": ce_f}

  steps = steps_for_epochs(task.forget_idx.size, bsz, hp["epochs"], minimum=hp["min_steps"])
  fit = _fit("grad_ascent", params0, loss_fn, hp, _rf_batches(task, bsz, seed, retain=False),
             steps, seed, None, cache, model, tc)
  return fit, 0.0


def _neggrad_plus(hp, model, params0, task, seed, cache, tc):
  f, bsz, alpha = _apply(model), int(hp["batch_size"]), float(hp["alpha"])

  def loss_fn(params, batch, rng, extra):
    ce_r = _ce(f(params, batch["xr"]), batch["yr"])
    ce_f = _ce(f(params, batch["xf"]), batch["yf"], batch["wf"])
    return value(batch, "alpha") * ce_r - value(batch, "one_minus_alpha") * ce_f, {"retain_ce": ce_r, "forget_ce": ce_f}

  steps = steps_for_epochs(task.retain_idx.size, bsz, hp["epochs"])
  # 1 - alpha is formed on the host (in double precision, as before) and sent as its own value.
  batches = with_values(_rf_batches(task, bsz, seed), bsz, alpha=alpha, one_minus_alpha=1.0 - alpha)
  fit = _fit("neggrad_plus", params0, loss_fn, hp, batches, steps, seed, None, cache, model, tc)
  return fit, 0.0


def _random_label_batches(task: UnlearningTask, bsz: int, seed: int) -> Callable[[int], dict]:
  """D_r / D_f batches where each forget row gets a uniformly random *wrong* label (fresh per step)."""
  base = _rf_batches(task, bsz, seed)

  def batch_fn(step):
    b = base(step)
    shift = np.random.default_rng([seed, 11, int(step)]).integers(1, task.num_classes, size=bsz)
    b["yrand"] = ((b["yf"] + shift) % task.num_classes).astype(np.int32)
    return b

  return batch_fn


def _random_label_loss(model: nn.Module, masked: bool) -> Callable:
  f = _apply(model)

  def loss_fn(params, batch, rng, extra):
    if masked:
      # Gradients (hence Adam updates) vanish outside the saliency mask.
      params = jax.tree.map(lambda p, m: m * p + (1.0 - m) * jax.lax.stop_gradient(p), params, extra["mask"])
    ce_f = _ce(f(params, batch["xf"]), batch["yrand"], batch["wf"])
    ce_r = _ce(f(params, batch["xr"]), batch["yr"])
    return ce_f + ce_r, {"random_label_ce": ce_f, "retain_ce": ce_r}

  return loss_fn


def _random_labels(hp, model, params0, task, seed, cache, tc):
  bsz = int(hp["batch_size"])
  steps = steps_for_epochs(task.retain_idx.size, bsz, hp["epochs"])
  fit = _fit("random_labels", params0, _random_label_loss(model, False), hp,
             _random_label_batches(task, bsz, seed), steps, seed, None, cache, model, tc)
  return fit, 0.0


def _l1_sparse(hp, model, params0, task, seed, cache, tc):
  """CE(D_r) + gamma_t ||theta||_1 with gamma_t = gamma (1 - t / T) carried in the batch (one value
  repeated per row), so the schedule is not baked into the compiled step."""
  f, bsz = _apply(model), int(hp["batch_size"])
  steps = steps_for_epochs(task.retain_idx.size, bsz, hp["epochs"])
  base = _rf_batches(task, bsz, seed, forget=False)
  gamma = float(hp["gamma_l1"])

  def batch_fn(step):
    return base(step) | {"gamma": np.full(bsz, gamma * (1.0 - step / steps), np.float32)}

  def loss_fn(params, batch, rng, extra):
    ce_r = _ce(f(params, batch["xr"]), batch["yr"])
    l1 = sum(jnp.sum(jnp.abs(p)) for p in jax.tree.leaves(params))
    return ce_r + jnp.mean(batch["gamma"]) * l1, {"retain_ce": ce_r, "l1": l1}

  fit = _fit("l1_sparse", params0, loss_fn, hp, batch_fn, steps, seed, None, cache, model, tc)
  return fit, 0.0


def _cached(cache: MutableMapping | None, key: Hashable, build: Callable[[], Any]) -> Any:
  if cache is None:
    return build()
  if key not in cache:
    cache[key] = build()
  return cache[key]


def _padded_chunks(x: np.ndarray, y: np.ndarray, chunk: int):
  """Fixed-size row chunks (zero-padded, weight 0) so one compiled shape serves every forget set."""
  for i in range(0, x.shape[0], chunk):
    xb, yb = x[i:i + chunk], y[i:i + chunk]
    pad = chunk - xb.shape[0]
    w = np.concatenate([np.ones(xb.shape[0], np.float32), np.zeros(pad, np.float32)])
    if pad:
      xb = np.concatenate([xb, np.zeros((pad,) + xb.shape[1:], xb.dtype)])
      yb = np.concatenate([yb, np.zeros(pad, yb.dtype)])
    yield xb, yb.astype(np.int32), w, chunk - pad


def saliency_mask(model: nn.Module, params: Any, x_f: np.ndarray, y_f: np.ndarray, fraction: float,
                  chunk: int = 256, cache: MutableMapping | None = None) -> Any:
  """m = 1[|grad_theta CE(D_f)| >= its (1 - q) quantile over all weights]: the salient (largest
  magnitude) q fraction. (The SalUn repository sorts ascending before thresholding; the paper's
  definition, used here, keeps the largest gradients.)"""
  f = _apply(model)
  grad_sum = _cached(cache, ("saliency", model), lambda: jax.jit(jax.grad(
      lambda p, x, y, w: jnp.sum(w * optax.softmax_cross_entropy_with_integer_labels(f(p, x), y)))))
  grads = jax.tree.map(jnp.zeros_like, params)
  for xb, yb, w, _ in _padded_chunks(x_f, y_f, chunk):
    grads = jax.tree.map(jnp.add, grads, grad_sum(params, xb, yb, w))
  flat = jnp.concatenate([jnp.abs(g).ravel() for g in jax.tree.leaves(grads)])
  threshold = jnp.quantile(flat, 1.0 - fraction)
  return jax.tree.map(lambda g: (jnp.abs(g) >= threshold).astype(jnp.float32), grads)


def _salun(hp, model, params0, task, seed, cache, tc):
  t0 = time.perf_counter()
  if task.forget_idx.size:
    mask = saliency_mask(model, params0, *_take(task, task.forget_idx), float(hp["mask_fraction"]), cache=cache)
  else:
    mask = jax.tree.map(jnp.zeros_like, params0)
  jax.block_until_ready(mask)
  pre = time.perf_counter() - t0
  bsz = int(hp["batch_size"])
  steps = steps_for_epochs(task.retain_idx.size, bsz, hp["epochs"])
  fit = _fit("salun", params0, _random_label_loss(model, True), hp,
             _random_label_batches(task, bsz, seed), steps, seed, {"mask": mask}, cache, model, tc)
  return fit, pre


def _scrub(hp, model, params0, task, seed, cache, tc):
  f, bsz = _apply(model), int(hp["batch_size"])
  n_max = steps_for_epochs(task.forget_idx.size, bsz, 1.0) if task.forget_idx.size else 0
  n_min = steps_for_epochs(task.retain_idx.size, bsz, 1.0)
  phases = []
  for epoch in range(int(hp["min_epochs"])):
    if epoch < int(hp["max_epochs"]):
      phases += [1.0] * n_max
    phases += [0.0] * n_min
  phases = np.asarray(phases, np.float32)
  base = with_values(_rf_batches(task, bsz, seed), bsz, alpha=float(hp["alpha"]), gamma=float(hp["gamma"]))

  def batch_fn(step):
    return base(step) | {"phase": np.full(bsz, phases[step], np.float32)}

  def loss_fn(params, batch, rng, extra):
    teacher = jax.lax.stop_gradient(extra["teacher"])
    kl_f = weighted_mean(_kl(f(teacher, batch["xf"]), f(params, batch["xf"])), batch["wf"])
    logits_r = f(params, batch["xr"])
    kl_r = jnp.mean(_kl(f(teacher, batch["xr"]), logits_r))
    ce_r = _ce(logits_r, batch["yr"])
    phase = jnp.mean(batch["phase"])
    loss = phase * (-kl_f) + (1.0 - phase) * (value(batch, "alpha") * kl_r + value(batch, "gamma") * ce_r)
    return loss, {"forget_kl": kl_f, "retain_kl": kl_r, "retain_ce": ce_r}

  fit = _fit("scrub", params0, loss_fn, hp, batch_fn, len(phases), seed,
             {"teacher": params0}, cache, model, tc)
  return fit, 0.0


def fgsm_labels(model: nn.Module, params: Any, x: np.ndarray, y: np.ndarray, eps: float,
                chunk: int = 256, cache: MutableMapping | None = None) -> np.ndarray:
  """Class predicted by the original model at the FGSM neighbour x + eps sign(grad_x CE)."""
  f = _apply(model)

  def build():
    def labels(p, xb, yb, step):
      g = jax.grad(lambda xx: jnp.sum(optax.softmax_cross_entropy_with_integer_labels(f(p, xx), yb)))(xb)
      return jnp.argmax(f(p, xb + step * jnp.sign(g)), axis=-1)
    return jax.jit(labels)

  labels = _cached(cache, ("fgsm", model), build)
  step = np.float32(eps)
  out = [np.asarray(labels(params, xb, yb, step))[:n] for xb, yb, _, n in _padded_chunks(x, y, chunk)]
  return np.concatenate(out).astype(np.int32) if out else np.zeros(0, np.int32)


def _boundary_shrink(hp, model, params0, task, seed, cache, tc):
  f, bsz = _apply(model), int(hp["batch_size"])
  t0 = time.perf_counter()
  x_f, y_f = _take(task, task.forget_idx)
  y_b = np.zeros(task.x_train.shape[0], np.int32)
  if task.forget_idx.size:
    y_b[task.forget_idx] = fgsm_labels(model, params0, x_f, y_f, float(hp["eps"]), cache=cache)
  pre = time.perf_counter() - t0
  base = _rf_batches(task, bsz, seed, retain=False)

  def batch_fn(step):
    b = base(step)
    return b | {"yb": y_b[b["if"]]}

  def loss_fn(params, batch, rng, extra):
    ce = _ce(f(params, batch["xf"]), batch["yb"], batch["wf"])
    return ce, {"neighbour_ce": ce}

  steps = steps_for_epochs(task.forget_idx.size, bsz, hp["epochs"], minimum=hp["min_steps"])
  fit = _fit("boundary_shrink", params0, loss_fn, hp, batch_fn, steps, seed, None, cache, model, tc)
  return fit, pre


def _bad_teacher(hp, model, params0, task, seed, cache, tc):
  f, bsz = _apply(model), int(hp["batch_size"])
  rng = np.random.default_rng([seed, 13])
  n_keep = max(1, int(round(float(hp["retain_fraction"]) * task.retain_idx.size)))
  retain_sub = np.sort(rng.choice(task.retain_idx, n_keep, replace=False))
  bad = model.init(jax.random.key(seed + 100_003), jnp.asarray(task.x_train[:1]))["params"]

  def loss_fn(params, batch, rng, extra):
    good, incompetent = jax.lax.stop_gradient(extra["teacher"]), jax.lax.stop_gradient(extra["bad"])
    temp = value(batch, "temperature")
    kl_r = jnp.mean(_kl(f(good, batch["xr"]), f(params, batch["xr"]), temp))
    kl_f = weighted_mean(_kl(f(incompetent, batch["xf"]), f(params, batch["xf"]), temp), batch["wf"])
    return kl_r + kl_f, {"retain_kl": kl_r, "forget_kl": kl_f}

  steps = steps_for_epochs(n_keep + task.forget_idx.size, bsz, hp["epochs"])
  batches = with_values(_rf_batches(task, bsz, seed, retain_idx=retain_sub), bsz, temperature=float(hp["temperature"]))
  fit = _fit("bad_teacher", params0, loss_fn, hp, batches, steps, seed, {"teacher": params0, "bad": bad},
             cache, model, tc)
  return fit, 0.0


def _head_only(hp, model, params0, task, seed, cache, tc):
  """RU's objective with the head as the trainable map (logit space): retain logits stay put,
  forget logits move to the logits of reference rows of D (mean squared distance)."""
  bsz = int(hp["batch_size"])
  t0 = time.perf_counter()
  enc = cached_encoder(model, params0, cache)
  z_all = batched_apply(enc, task.x_train)
  pre = time.perf_counter() - t0
  r_stream = index_stream(task.retain_idx, bsz, seed, 2)
  f_stream = index_stream(task.forget_idx, bsz, seed, 1)
  a_stream = index_stream(np.concatenate([task.retain_idx, task.forget_idx]), bsz, seed, 3)

  def batch_fn(step):
    rr, _ = r_stream(step)
    rf, wf = f_stream(step)
    ra, _ = a_stream(step)
    return {"zr": z_all[rr], "zf": z_all[rf], "wf": wf, "zref": z_all[ra],
            "hp_beta": np.full(bsz, hp["beta"], np.float32)}

  def loss_fn(params, batch, rng, extra):
    h = lambda p, z: model_lib.head_logits(model, p, z)  # noqa: E731
    ref = jax.lax.stop_gradient(extra["model"])
    l_r = jnp.mean((h(params, batch["zr"]) - h(ref, batch["zr"])) ** 2)
    target = h(ref, batch["zref"])
    t_mean = jnp.mean(target, axis=0)
    spread = jnp.mean(jnp.sum((target - t_mean) ** 2, axis=-1))
    per_row = jnp.sum((h(params, batch["zf"]) - t_mean) ** 2, axis=-1) + spread
    l_f = weighted_mean(per_row, batch["wf"])
    return l_r + value(batch, "beta") * l_f, {"retain_loss": l_r, "forget_loss": l_f}

  steps = steps_for_epochs(task.forget_idx.size, bsz, hp["epochs"], minimum=hp["min_steps"])
  fit = _fit("head_only", params0, loss_fn, hp, batch_fn, steps, seed, {"model": params0}, cache, model, tc,
             frozen=(r"^encoder/",))
  return fit, pre


# --------------------------------------------------------------------------- zero-shot baselines
def _emmn(hp, model, params0, task, seed, cache, tc):
  """Zero-shot (no training data): noise learnt against the frozen model, then impair / repair."""
  if not task.forget_classes:
    raise NotApplicable("emmn is a class-level method (needs forgotten classes)")
  f = _apply(model)
  k = int(hp["noise_per_class"])
  forget = list(task.forget_classes)
  keep = [c for c in range(task.num_classes) if c not in forget]
  labels = np.asarray([c for c in forget for _ in range(k)] + [c for c in keep for _ in range(k)], np.int32)
  signs = np.asarray([-1.0] * (k * len(forget)) + [1.0] * (k * len(keep)), np.float32)
  shape = task.x_train.shape[1:]
  noise0 = jax.random.normal(jax.random.key(seed + 7), (labels.size,) + shape, jnp.float32)
  total_wall = total_steady = 0.0

  def noise_loss(params, batch, rng, extra):
    logits = f(jax.lax.stop_gradient(extra["model"]), params["noise"])
    per = optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"])
    reg = jnp.mean(jnp.sum(params["noise"].reshape(labels.size, -1) ** 2, axis=-1))
    # Error-maximising rows (sign -1) ascend CE of the forgotten class; error-minimising rows descend.
    return jnp.mean(batch["sign"] * per) + value(batch, "noise_l2") * reg, {"noise_ce": jnp.mean(per)}

  noise_batch = {"y": labels, "sign": signs, "hp_noise_l2": np.full(labels.size, hp["noise_l2"], np.float32)}
  fit = _fit("emmn_noise", {"noise": noise0}, noise_loss, hp, lambda s: noise_batch, int(hp["noise_steps"]), seed,
             {"model": params0}, cache, model, tc, lr_key="noise_lr", shape=(labels.size,))
  noise = np.asarray(fit.params["noise"])
  total_wall, total_steady = fit.wall_s, fit.steady_s

  def ce_loss(params, batch, rng, extra):
    return _ce(f(params, batch["x"]), batch["y"], batch["w"]), {}

  impair = {"x": noise, "y": labels, "w": np.ones(labels.size, np.float32)}
  fit = _fit("emmn_impair", params0, ce_loss, hp, lambda s: impair, int(hp["impair_steps"]), seed, None, cache,
             model, tc, lr_key="impair_lr", shape=(labels.size,))
  total_wall, total_steady = total_wall + fit.wall_s, total_steady + fit.steady_s
  repair = impair | {"w": (signs > 0).astype(np.float32)}     # error-minimising (retained-class) noise only
  fit = _fit("emmn_repair", fit.params, ce_loss, hp, lambda s: repair, int(hp["repair_steps"]), seed, None, cache,
             model, tc, lr_key="repair_lr", shape=(labels.size,))
  total_wall, total_steady = total_wall + fit.wall_s, total_steady + fit.steady_s
  out = FitOutput(fit.params, total_wall, total_steady,
                  int(hp["noise_steps"]) + int(hp["impair_steps"]) + int(hp["repair_steps"]), fit.final_loss)
  return out, 0.0


def _jit(hp, model, params0, task, seed, cache, tc):
  """JiT: smooth the model around each forget input (no labels, no retained data)."""
  f, bsz = _apply(model), int(hp["batch_size"])
  kk = int(hp["num_perturb"])

  def loss_fn(params, batch, rng, extra):
    x = batch["xf"]
    xi = value(batch, "sigma") * jax.random.normal(rng, (kk,) + x.shape, x.dtype)
    p = jax.nn.softmax(f(params, x))
    p_xi = jax.nn.softmax(f(params, (x[None] + xi).reshape((-1,) + x.shape[1:]))).reshape((kk,) + p.shape)
    # sqrt(. + tiny): the norm's gradient is undefined at 0 (identical outputs).
    num = jnp.sqrt(jnp.sum((p[None] - p_xi) ** 2, axis=-1) + 1e-12)
    ratio = num / jnp.linalg.norm(xi.reshape(kk, x.shape[0], -1), axis=-1)
    lip = weighted_mean(jnp.mean(ratio, axis=0), batch["wf"])
    return lip, {"lipschitz": lip}

  steps = steps_for_epochs(task.forget_idx.size, bsz, hp["epochs"], minimum=hp["min_steps"])
  batches = with_values(_rf_batches(task, bsz, seed, retain=False), bsz, sigma=float(hp["sigma"]))
  fit = _fit("jit", params0, loss_fn, hp, batches, steps, seed, None, cache, model, tc)
  return fit, 0.0


# --------------------------------------------------------------------------- SISA, UNSIR, GKT
def shard_of(n: int, shards: int, seed: int) -> np.ndarray:
  """Shard id of each training row: a seeded balanced partition of [0, n) into `shards` parts."""
  perm = np.random.default_rng([seed, 29]).permutation(n)
  out = np.empty(n, np.int64)
  out[perm] = np.arange(n) % shards
  return out


def ensemble_predictor(model: nn.Module, cache: MutableMapping | None = None) -> Callable:
  """predict(stacked_params, x) -> (log mean_s softmax(f_s(x)), mean_s g_s(x)): SISA's aggregation
  of the shard models (mean of prediction vectors; features averaged for the representation checks)."""
  def build():
    def one(p, x):
      return jax.nn.softmax(model.apply({"params": p}, x)), model_lib.encode(model, p, x)

    def predict(stacked, x):
      probs, feats = jax.vmap(one, in_axes=(0, None))(stacked, x)
      return jnp.log(jnp.mean(probs, 0) + 1e-12), jnp.mean(feats, 0)

    return jax.jit(predict)

  return _cached(cache, ("ensemble", model), build)


def _sisa(hp, model, params0, task, seed, cache, tc):
  """SISA: shard models trained on disjoint shards of D; an unlearning request retrains (from a
  fresh init, on the shard's retained rows) only the shards that hold forget rows. The shards
  without forget rows are trained before the request (deployment time, not counted)."""
  del params0
  n, shards = task.x_train.shape[0], int(hp["shards"])
  sid = shard_of(n, shards, seed)
  affected = set(np.unique(sid[task.forget_idx]).tolist())
  keep = np.ones(n, bool)
  keep[task.forget_idx] = False
  train_hp = {k: hp[k] for k in ("epochs", "lr", "batch_size")}
  models, wall, steady, steps = [], 0.0, 0.0, 0
  for s in range(shards):
    rows = np.flatnonzero((sid == s) & keep) if s in affected else np.flatnonzero(sid == s)
    fit = train_classifier(train_hp, model, task, rows, seed=seed * 1000 + s, cache=cache, name=f"sisa_{s}",
                           train_config=tc)
    models.append(fit.params)
    if s in affected:
      wall, steady, steps = wall + fit.wall_s, steady + fit.steady_s, steps + fit.num_steps
  stacked = jax.tree.map(lambda *a: jnp.stack(a), *models)
  return FitOutput(stacked, wall, steady, max(steps, 1), float("nan")), 0.0


def _unsir(hp, model, params0, task, seed, cache, tc):
  """UNSIR: error-maximising noise (label: the forget class), impair on noise + a retain subset,
  repair on the retain subset. Needs forgotten classes."""
  if not task.forget_classes:
    raise NotApplicable("unsir is a class-level method (needs forgotten classes)")
  f, bsz = _apply(model), int(hp["batch_size"])
  k = int(hp["noise_copies"])
  labels = np.repeat(np.asarray(task.forget_classes, np.int32), k)
  shape = task.x_train.shape[1:]
  noise0 = jax.random.normal(jax.random.key(seed + 31), (labels.size,) + shape, jnp.float32)
  t0 = time.perf_counter()

  def noise_loss(params, batch, rng, extra):
    x = jnp.clip(params["noise"], -value(batch, "clamp"), value(batch, "clamp"))
    per = optax.softmax_cross_entropy_with_integer_labels(f(jax.lax.stop_gradient(extra["model"]), x), batch["y"])
    reg = jnp.mean(jnp.sum(x.reshape(labels.size, -1) ** 2, axis=-1))
    return -jnp.mean(per) + value(batch, "noise_l2") * reg, {"noise_ce": jnp.mean(per)}

  nb = with_values(lambda s: {"y": labels}, labels.size, noise_l2=float(hp["noise_l2"]),
                   clamp=float(hp["noise_clamp"]))
  fit_n = _fit("unsir_noise", {"noise": noise0}, noise_loss, hp, nb, int(hp["noise_steps"]), seed,
               {"model": params0}, cache, model, tc, lr_key="noise_lr", shape=(labels.size,))
  noise = np.clip(np.asarray(fit_n.params["noise"]), -hp["noise_clamp"], hp["noise_clamp"])
  # Retain subset: at most retain_per_class rows of each retained class.
  rng = np.random.default_rng([seed, 37])
  y = np.asarray(task.y_train)
  subset = np.sort(np.concatenate([rng.permutation(task.retain_idx[y[task.retain_idx] == c])[:int(hp["retain_per_class"])]
                                   for c in np.unique(y[task.retain_idx])]))
  sgd = dict(tc or {}) | {"optim": {"name": "sgd", "momentum": float(hp["momentum"])}}
  r_stream = index_stream(subset, bsz, seed, 5)
  n_stream = index_stream(np.arange(labels.size), bsz, seed, 6)

  def impair_batch(step):
    rr, _ = r_stream(step)
    x, yy = _take(task, rr)
    rn, _ = n_stream(step)
    return {"xr": x, "yr": yy, "xn": noise[rn], "yn": labels[rn]}

  def impair_loss(params, batch, rng, extra):
    ce_r = _ce(f(params, batch["xr"]), batch["yr"])
    ce_n = _ce(f(params, batch["xn"]), batch["yn"])
    return ce_r + ce_n, {"retain_ce": ce_r, "noise_ce": ce_n}

  n_imp = steps_for_epochs(subset.size + labels.size, bsz, float(hp["impair_epochs"]))
  fit_i = _fit("unsir_impair", params0, impair_loss, hp, impair_batch, n_imp, seed, None, cache, model, sgd,
               lr_key="impair_lr", shape=(labels.size,))
  n_rep = steps_for_epochs(subset.size, bsz, float(hp["repair_epochs"]))
  fit_r = _fit("unsir_repair", fit_i.params, _ce_retain_loss(model), hp,
               lambda s: {k: v for k, v in impair_batch(s + n_imp).items() if k in ("xr", "yr")}, n_rep, seed,
               None, cache, model, sgd, lr_key="repair_lr")
  wall = time.perf_counter() - t0
  compile_s = sum(max(ft.wall_s - ft.steady_s, 0.0) for ft in (fit_n, fit_i, fit_r))
  return FitOutput(fit_r.params, wall, wall - compile_s, fit_n.num_steps + n_imp + n_rep, fit_r.final_loss), 0.0


class _Generator(nn.Module):
  """z [B, z_dim] -> pseudo-inputs [B, *shape]: a two-layer ReLU MLP (GKT's generator, small)."""

  shape: tuple
  hidden: int

  @nn.compact
  def __call__(self, z):
    h = nn.relu(nn.Dense(self.hidden)(z))
    h = nn.relu(nn.Dense(self.hidden)(h))
    return nn.Dense(int(np.prod(self.shape)))(h).reshape((z.shape[0],) + self.shape)


def _attention(z: jax.Array) -> jax.Array:
  """Attention-transfer map of a feature vector: z^2 normalised to unit norm per row."""
  a = z ** 2
  return a / (jnp.linalg.norm(a, axis=-1, keepdims=True) + 1e-8)


def _gkt(hp, model, params0, task, seed, cache, tc):
  """GKT (zero-shot): per cycle, `generator_steps` Adam steps of the generator ascending
  KL(teacher || student) on its samples, then `student_steps` Adam steps of the student on
  KL(teacher || student) + at_beta ||att(g_t) - att(g_s)||^2 over the samples the teacher gives
  every forget class probability <= threshold (the gate). Student: a fresh init; no data is read."""
  del tc
  if not task.forget_classes:
    raise NotApplicable("gkt is a class-level method (needs forgotten classes)")
  shape = tuple(task.x_train.shape[1:])
  bsz, zd = int(hp["batch_size"]), int(hp["z_dim"])
  gen = _Generator(shape, int(hp["generator_hidden"]))
  n_g, n_s, cycles = int(hp["generator_steps"]), int(hp["student_steps"]), int(hp["cycles"])
  forget_mask = np.zeros(task.num_classes, np.float32)
  forget_mask[list(task.forget_classes)] = 1.0
  opt = optax.adam(float(hp["lr"]))

  def build():
    f = _apply(model)
    enc = lambda p, x: model_lib.encode(model, p, x)  # noqa: E731

    def gen_step(carry, key, teacher, temp):
      gp, sp, go, so = carry

      def loss(p):
        x = gen.apply({"params": p}, jax.random.normal(key, (bsz, zd)))
        return -jnp.mean(_kl(f(teacher, x), f(jax.lax.stop_gradient(sp), x), temp))

      g = jax.grad(loss)(gp)
      upd, go = opt.update(g, go, gp)
      return (optax.apply_updates(gp, upd), sp, go, so)

    def student_step(carry, key, teacher, temp, at_beta, threshold, fmask):
      gp, sp, go, so = carry

      def loss(p):
        x = gen.apply({"params": jax.lax.stop_gradient(gp)}, jax.random.normal(key, (bsz, zd)))
        t_logits = f(teacher, x)
        gate = (jnp.sum(jax.nn.softmax(t_logits) * fmask, -1) <= threshold).astype(jnp.float32)
        per = _kl(t_logits, f(p, x), temp)
        att = jnp.sum((_attention(enc(teacher, x)) - _attention(enc(p, x))) ** 2, -1)
        return weighted_mean(per + at_beta * att, gate)

      g = jax.grad(loss)(sp)
      upd, so = opt.update(g, so, sp)
      return (gp, optax.apply_updates(sp, upd), go, so)

    def run(gp, sp, teacher, key, temp, at_beta, threshold, fmask):
      def cycle(carry, k):
        kg, ks = jax.random.split(k)
        carry = jax.lax.fori_loop(0, n_g, lambda i, c: gen_step(c, jax.random.fold_in(kg, i), teacher, temp), carry)
        carry = jax.lax.fori_loop(0, n_s, lambda i, c: student_step(c, jax.random.fold_in(ks, i), teacher, temp,
                                                                     at_beta, threshold, fmask), carry)
        return carry, None

      carry = (gp, sp, opt.init(gp), opt.init(sp))
      carry, _ = jax.lax.scan(cycle, carry, jax.random.split(key, cycles))
      return carry[1]

    return jax.jit(run)

  run = _cached(cache, ("gkt", model, shape, structure(hp)), build)
  k_gen, k_student, k_run = jax.random.split(jax.random.key(seed + 41), 3)
  gp = gen.init(k_gen, jnp.zeros((1, zd)))["params"]
  sp = model.init(k_student, jnp.asarray(task.x_train[:1]))["params"]
  args = (jnp.float32(hp["temperature"]), jnp.float32(hp["at_beta"]), jnp.float32(hp["threshold"]),
          jnp.asarray(forget_mask))
  t0 = time.perf_counter()
  compiled = _cached(cache, ("gkt_compiled", model, shape, structure(hp)),
                     lambda: run.lower(gp, sp, params0, k_run, *args).compile())
  t1 = time.perf_counter()
  student = jax.block_until_ready(compiled(gp, sp, params0, k_run, *args))
  t2 = time.perf_counter()
  return FitOutput(student, t2 - t0, t2 - t1, cycles * (n_g + n_s), float("nan")), 0.0


_RUNNERS = {
    "finetune": _finetune, "grad_ascent": _grad_ascent, "neggrad_plus": _neggrad_plus,
    "random_labels": _random_labels, "l1_sparse": _l1_sparse, "salun": _salun, "scrub": _scrub,
    "boundary_shrink": _boundary_shrink, "bad_teacher": _bad_teacher, "head_only": _head_only,
    "emmn": _emmn, "jit": _jit, "sisa": _sisa, "unsir": _unsir, "gkt": _gkt,
}


def run_baseline(name: str, model: nn.Module, params0: Any, task: UnlearningTask, *, seed: int,
                 overrides: Mapping[str, Any] | None = None, cache: MutableMapping | None = None,
                 train_config: Mapping[str, Any] | None = None) -> BaselineOutput:
  """Runs one baseline by name (retrain included) from the trained `params0`. `train_config`:
  optim / log_every / mesh for core.train (the learning rates are the baseline's own)."""
  hp = hyperparameters(name, overrides)
  t0 = time.perf_counter()
  if name == "retrain":
    fit = train_classifier(hp, model, task, task.retain_idx, seed=seed, cache=cache, name="retrain",
                           train_config=train_config)
    pre = 0.0
  else:
    fit, pre = _RUNNERS[name](hp, model, params0, task, seed, cache, train_config)
  # `pre` (masks, FGSM labels, cached features) is inside `wall`; only the fits' compiling
  # first steps are removed for the steady time.
  del pre
  wall = time.perf_counter() - t0
  if name == "sisa":
    wall = fit.wall_s        # only the retrained (affected) shards; the others predate the request
  compile_overhead = max(fit.wall_s - fit.steady_s, 0.0)
  return BaselineOutput(fit.params, wall, wall - compile_overhead, fit.num_steps)
