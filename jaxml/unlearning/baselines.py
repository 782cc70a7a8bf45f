"""Unlearning baselines as data: one `Baseline` spec per method, run by one driver, `run_baseline`, from the
same trained model through `core.train`. f = h o g, D_r / D_f retain / forget sets.

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
  head_only        control: the RU objective on a copy of the head instead of a transform of z
  jit              zero-shot: minimise ||f(x) - f(x + xi)|| / ||xi|| around forget inputs (Foster et al.)
  emmn, sisa, unsir, gkt: multi-stage, see `jaxml.unlearning.pipelines`.
"""

import time
from functools import partial
from typing import Any, Callable, Hashable, Mapping, MutableMapping, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml import core
from jaxml.unlearning import model as model_lib
from jaxml.unlearning import pipelines as pl
from jaxml.unlearning.fitting import FitOutput, cached, encode_rows
from jaxml.unlearning.losses import weighted_mean
from jaxml.unlearning.pipelines import NotApplicable, Run, ce, kl, retain_ce_loss, rf_batches, train_classifier
from jaxml.unlearning.sampling import feature_batches, steps_for_epochs, value, with_values
from jaxml.unlearning.task import UnlearningTask

__all__ = ["BASELINES", "ZERO_SHOT_BASELINES", "ENSEMBLES", "SPECS", "Baseline", "NotApplicable", "ensemble_predictor",
           "fgsm_labels", "hyperparameters", "retain_ce_loss", "run_baseline", "saliency_mask", "shard_of",
           "train_classifier"]

BASELINES = ("retrain", "finetune", "grad_ascent", "neggrad_plus", "random_labels", "l1_sparse", "salun",
             "scrub", "boundary_shrink", "bad_teacher", "head_only", "sisa", "unsir")
ZERO_SHOT_BASELINES = ("emmn", "jit", "gkt")
ENSEMBLES = ("sisa",)       # params stacked over shard models; predict with `ensemble_predictor`
shard_of = pl.shard_of


class Baseline(NamedTuple):
  """One baseline's settings and the pieces of its run: loss(model, hp) -> loss_fn; batches(Run with steps and
  data) -> batch_fn(step); steps(Run) -> int; values(hp) -> float settings in the batch; prepare(Run) -> (extra,
  data for `batches`); frozen parameter patterns; or a whole run(Run) -> FitOutput (multi-stage methods)."""

  name: str
  defaults: dict[str, Any]
  loss: Callable | None = None
  batches: Callable[[Run], Callable[[int], dict]] | None = None
  steps: Callable[[Run], int] | None = None
  values: Callable[[Mapping[str, Any]], dict[str, float]] = lambda hp: {}
  prepare: Callable[[Run], tuple[Any, Any]] | None = None
  frozen: tuple[str, ...] = ()
  run: Callable[[Run], FitOutput] | None = None


# --------------------------------------------------------------------------- pieces
def _over(which: str, floor: bool = False) -> Callable[[Run], int]:
  """Steps for hp['epochs'] over D_r or D_f (at least hp['min_steps'] when `floor`)."""
  def steps(r):
    rows = r.task.retain_idx.size if which == "retain" else r.task.forget_idx.size
    return steps_for_epochs(rows, r.hp["batch_size"], r.hp["epochs"], minimum=r.hp["min_steps"] if floor else 1)
  return steps


def _forget_ce_loss(label: str, sign: float, aux: str) -> Callable:
  """sign * CE(f(x_f), batch[label]) over the forget rows (grad_ascent: -CE; boundary_shrink: FGSM labels)."""
  def make(model, hp):
    def loss_fn(params, batch, rng, extra):
      ce_f = ce(model.apply({"params": params}, batch["xf"]), batch[label], batch["wf"])
      return sign * ce_f, {aux: ce_f}
    return loss_fn
  return make


def _neggrad_loss(model, hp):
  def loss_fn(params, batch, rng, extra):
    ce_r = ce(model.apply({"params": params}, batch["xr"]), batch["yr"])
    ce_f = ce(model.apply({"params": params}, batch["xf"]), batch["yf"], batch["wf"])
    return value(batch, "alpha") * ce_r - value(batch, "one_minus_alpha") * ce_f, {"retain_ce": ce_r, "forget_ce": ce_f}
  return loss_fn


def _random_label_batches(r: Run) -> Callable[[int], dict]:
  """D_r / D_f batches where each forget row gets a uniformly random *wrong* label (fresh per step)."""
  base, k = rf_batches(r), r.task.num_classes

  def batch_fn(step):
    b = base(step)
    shift = np.random.default_rng([r.seed, 11, int(step)]).integers(1, k, size=r.hp["batch_size"])
    return b | {"yrand": ((b["yf"] + shift) % k).astype(np.int32)}

  return batch_fn


def _random_label_loss(model, hp):
  def loss_fn(params, batch, rng, extra):
    if extra is not None:
      # SalUn: gradients (hence Adam updates) vanish outside the saliency mask.
      params = jax.tree.map(lambda p, m: m * p + (1.0 - m) * jax.lax.stop_gradient(p), params, extra["mask"])
    ce_f = ce(model.apply({"params": params}, batch["xf"]), batch["yrand"], batch["wf"])
    ce_r = ce(model.apply({"params": params}, batch["xr"]), batch["yr"])
    return ce_f + ce_r, {"random_label_ce": ce_f, "retain_ce": ce_r}
  return loss_fn


def _l1_batches(r: Run) -> Callable[[int], dict]:
  """gamma_t = gamma (1 - t / T) rides in the batch, so the schedule is not baked into the compiled step."""
  base, bsz = rf_batches(r, forget=False), r.hp["batch_size"]
  return lambda step: base(step) | {"gamma": np.full(bsz, r.hp["gamma_l1"] * (1.0 - step / r.steps), np.float32)}


def _l1_loss(model, hp):
  def loss_fn(params, batch, rng, extra):
    ce_r = ce(model.apply({"params": params}, batch["xr"]), batch["yr"])
    l1 = sum(jnp.sum(jnp.abs(p)) for p in jax.tree.leaves(params))
    return ce_r + jnp.mean(batch["gamma"]) * l1, {"retain_ce": ce_r, "l1": l1}
  return loss_fn


def _padded_rows(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(x, y, w) with a padding row in front (zeros, label 0, weight 0): `core.batched_apply` over the
  positions 1..n pads its last chunk with position 0, i.e. with exactly that row."""
  return (np.concatenate([np.zeros((1,) + x.shape[1:], x.dtype), x]),
          np.concatenate([np.zeros(1, np.int32), np.asarray(y, np.int32)]),
          np.concatenate([np.zeros(1, np.float32), np.ones(len(y), np.float32)]))


def saliency_mask(model: nn.Module, params: Any, x_f: np.ndarray, y_f: np.ndarray, fraction: float,
                  chunk: int = 256, cache: MutableMapping | None = None) -> Any:
  """m = 1[|grad CE(D_f)| >= its (1 - q) quantile over all weights]: the paper's largest-gradient q fraction (the
  SalUn repository sorts ascending); gradients are summed over `chunk`-row calls."""
  grad_sum = cached(cache, ("saliency", model), lambda: jax.jit(jax.grad(lambda p, x, y, w: jnp.sum(
      w * optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, x), y)))))
  xp, yp, wp = _padded_rows(x_f, y_f)

  def chunk_sum(pos):
    pos = np.asarray(pos)
    return jax.tree.map(lambda g: g[None], grad_sum(params, xp[pos], yp[pos], wp[pos]))

  grads = jax.tree.map(lambda g: np.sum(g, axis=0), core.batched_apply(chunk_sum, np.arange(1, len(y_f) + 1), chunk))
  threshold = jnp.quantile(jnp.concatenate([jnp.abs(g).ravel() for g in jax.tree.leaves(grads)]), 1.0 - fraction)
  return jax.tree.map(lambda g: (jnp.abs(g) >= threshold).astype(jnp.float32), grads)


def _salun_prepare(r: Run) -> tuple[dict, None]:
  task = r.task
  if not task.forget_idx.size:
    return {"mask": jax.tree.map(jnp.zeros_like, r.params0)}, None
  x_f, y_f = task.x_train[task.forget_idx], task.y_train[task.forget_idx]
  mask = saliency_mask(r.model, r.params0, x_f, y_f, r.hp["mask_fraction"], cache=r.cache)
  return {"mask": jax.block_until_ready(mask)}, None


def _scrub_phases(r: Run) -> np.ndarray:
  """1 per max-step (one epoch over D_f, in the first `max_epochs` epochs), 0 per min-step (an epoch over D_r)."""
  task, hp = r.task, r.hp
  n_max = steps_for_epochs(task.forget_idx.size, hp["batch_size"], 1.0) if task.forget_idx.size else 0
  n_min = steps_for_epochs(task.retain_idx.size, hp["batch_size"], 1.0)
  return np.asarray([p for e in range(hp["min_epochs"]) for p in [1.0] * (n_max if e < hp["max_epochs"] else 0)
                     + [0.0] * n_min], np.float32)


def _scrub_batches(r: Run) -> Callable[[int], dict]:
  base, phases = rf_batches(r), _scrub_phases(r)
  return lambda step: base(step) | {"phase": np.full(r.hp["batch_size"], phases[step], np.float32)}


def _scrub_loss(model, hp):
  f = lambda p, x: model.apply({"params": p}, x)  # noqa: E731

  def loss_fn(params, batch, rng, extra):
    teacher = jax.lax.stop_gradient(extra["teacher"])
    kl_f = weighted_mean(kl(f(teacher, batch["xf"]), f(params, batch["xf"])), batch["wf"])
    logits_r = f(params, batch["xr"])
    kl_r = jnp.mean(kl(f(teacher, batch["xr"]), logits_r))
    ce_r = ce(logits_r, batch["yr"])
    phase = jnp.mean(batch["phase"])
    loss = phase * (-kl_f) + (1.0 - phase) * (value(batch, "alpha") * kl_r + value(batch, "gamma") * ce_r)
    return loss, {"forget_kl": kl_f, "retain_kl": kl_r, "retain_ce": ce_r}

  return loss_fn


def fgsm_labels(model: nn.Module, params: Any, x: np.ndarray, y: np.ndarray, eps: float,
                chunk: int = 256, cache: MutableMapping | None = None) -> np.ndarray:
  """Class predicted by the original model at the FGSM neighbour x + eps sign(grad_x CE), [n] int32."""
  def build():
    def labels(p, xb, yb, step):
      f = lambda xx: model.apply({"params": p}, xx)  # noqa: E731
      g = jax.grad(lambda xx: jnp.sum(optax.softmax_cross_entropy_with_integer_labels(f(xx), yb)))(xb)
      return jnp.argmax(f(xb + step * jnp.sign(g)), axis=-1)
    return jax.jit(labels)

  if not len(y):
    return np.zeros(0, np.int32)
  labels, (xp, yp, _) = cached(cache, ("fgsm", model), build), _padded_rows(x, y)
  fn = lambda pos: labels(params, xp[np.asarray(pos)], yp[np.asarray(pos)], np.float32(eps))  # noqa: E731
  return core.batched_apply(fn, np.arange(1, len(y) + 1), chunk).astype(np.int32)


def _boundary_prepare(r: Run) -> tuple[None, np.ndarray]:
  task, y_b = r.task, np.zeros(r.task.x_train.shape[0], np.int32)
  if task.forget_idx.size:
    x_f, y_f = task.x_train[task.forget_idx], task.y_train[task.forget_idx]
    y_b[task.forget_idx] = fgsm_labels(r.model, r.params0, x_f, y_f, r.hp["eps"], cache=r.cache)
  return None, y_b


def _boundary_batches(r: Run) -> Callable[[int], dict]:
  base = rf_batches(r, retain=False)
  return lambda step: (lambda b: b | {"yb": r.data[b["if"]]})(base(step))


def _bad_teacher_kept(r: Run) -> int:
  """How many retained rows Bad Teacher distils on: `retain_fraction` of D_r, at least one."""
  return max(1, int(round(r.hp["retain_fraction"] * r.task.retain_idx.size)))


def _bad_teacher_prepare(r: Run) -> tuple[dict, np.ndarray]:
  bad = r.model.init(jax.random.key(r.seed + 100_003), jnp.asarray(r.task.x_train[:1]))["params"]
  subset = np.random.default_rng([r.seed, 13]).choice(r.task.retain_idx, _bad_teacher_kept(r), replace=False)
  return {"teacher": r.params0, "bad": bad}, np.sort(subset)


def _bad_teacher_loss(model, hp):
  f = lambda p, x: model.apply({"params": p}, x)  # noqa: E731

  def loss_fn(params, batch, rng, extra):
    good, incompetent = jax.lax.stop_gradient(extra["teacher"]), jax.lax.stop_gradient(extra["bad"])
    temp = value(batch, "temperature")
    kl_r = jnp.mean(kl(f(good, batch["xr"]), f(params, batch["xr"]), temp))
    kl_f = weighted_mean(kl(f(incompetent, batch["xf"]), f(params, batch["xf"]), temp), batch["wf"])
    return kl_r + kl_f, {"retain_kl": kl_r, "forget_kl": kl_f}

  return loss_fn


def _bad_teacher_steps(r: Run) -> int:
  return steps_for_epochs(_bad_teacher_kept(r) + r.task.forget_idx.size, r.hp["batch_size"], r.hp["epochs"])


def _head_only_loss(model, hp):
  """RU's objective with the head as the trainable map (logit space): retain logits stay put,
  forget logits move to the logits of reference rows of D (mean squared distance)."""
  def loss_fn(params, batch, rng, extra):
    h = lambda p, z: model_lib.head_logits(model, p, z)  # noqa: E731
    ref = jax.lax.stop_gradient(extra["model"])
    l_r = jnp.mean((h(params, batch["zr"]) - h(ref, batch["zr"])) ** 2)
    target = h(ref, batch["zref"])
    t_mean = jnp.mean(target, axis=0)
    spread = jnp.mean(jnp.sum((target - t_mean) ** 2, axis=-1))
    l_f = weighted_mean(jnp.sum((h(params, batch["zf"]) - t_mean) ** 2, axis=-1) + spread, batch["wf"])
    return l_r + value(batch, "beta") * l_f, {"retain_loss": l_r, "forget_loss": l_f}
  return loss_fn


def _jit_loss(model, hp):
  """JiT: smooth the model around each forget input (no labels, no retained data)."""
  kk = hp["num_perturb"]

  def loss_fn(params, batch, rng, extra):
    x = batch["xf"]
    xi = value(batch, "sigma") * jax.random.normal(rng, (kk,) + x.shape, x.dtype)
    p = jax.nn.softmax(model.apply({"params": params}, x))
    p_xi = jax.nn.softmax(model.apply({"params": params}, (x[None] + xi).reshape((-1,) + x.shape[1:])))
    # sqrt(. + tiny): the norm's gradient is undefined at 0 (identical outputs).
    num = jnp.sqrt(jnp.sum((p[None] - p_xi.reshape((kk,) + p.shape)) ** 2, axis=-1) + 1e-12)
    lip = weighted_mean(jnp.mean(num / jnp.linalg.norm(xi.reshape(kk, x.shape[0], -1), axis=-1), axis=0), batch["wf"])
    return lip, {"lipschitz": lip}

  return loss_fn


# --------------------------------------------------------------------------- the specs and the driver
_BS = dict(batch_size=128)
SPECS: dict[str, Baseline] = {s.name: s for s in (
    Baseline("retrain", dict(epochs=60.0, lr=1e-3, **_BS), run=pl.run_retrain),
    Baseline("finetune", dict(epochs=10.0, lr=1e-3, **_BS), lambda m, hp: retain_ce_loss(m),
             partial(rf_batches, forget=False), _over("retain")),
    Baseline("grad_ascent", dict(epochs=5.0, lr=1e-4, min_steps=0, **_BS), _forget_ce_loss("yf", -1.0, "forget_ce"),
             partial(rf_batches, retain=False), _over("forget", floor=True)),
    # 1 - alpha is formed on the host (in double precision) and sent as its own value.
    Baseline("neggrad_plus", dict(epochs=3.0, lr=5e-4, alpha=0.95, **_BS), _neggrad_loss, rf_batches, _over("retain"),
             lambda hp: {"alpha": hp["alpha"], "one_minus_alpha": 1.0 - hp["alpha"]}),
    Baseline("random_labels", dict(epochs=3.0, lr=1e-3, **_BS), _random_label_loss, _random_label_batches,
             _over("retain")),
    Baseline("l1_sparse", dict(epochs=5.0, lr=1e-3, gamma_l1=5e-4, **_BS), _l1_loss, _l1_batches, _over("retain")),
    Baseline("salun", dict(epochs=3.0, lr=1e-3, mask_fraction=0.5, **_BS), _random_label_loss, _random_label_batches,
             _over("retain"), prepare=_salun_prepare),
    Baseline("scrub", dict(max_epochs=2, min_epochs=3, lr=5e-4, alpha=1.0, gamma=1.0, **_BS), _scrub_loss,
             _scrub_batches, lambda r: len(_scrub_phases(r)), lambda hp: {"alpha": hp["alpha"], "gamma": hp["gamma"]},
             prepare=lambda r: ({"teacher": r.params0}, None)),
    Baseline("boundary_shrink", dict(epochs=10.0, lr=1e-4, eps=0.25, min_steps=0, **_BS),
             _forget_ce_loss("yb", 1.0, "neighbour_ce"), _boundary_batches, _over("forget", floor=True),
             prepare=_boundary_prepare),
    Baseline("bad_teacher", dict(epochs=3.0, lr=1e-4, retain_fraction=0.3, temperature=1.0, **_BS), _bad_teacher_loss,
             lambda r: rf_batches(r, retain_idx=r.data), _bad_teacher_steps,
             lambda hp: {"temperature": hp["temperature"]}, prepare=_bad_teacher_prepare),
    Baseline("head_only", dict(beta=0.01, lr=1e-3, epochs=5.0, min_steps=200, **_BS), _head_only_loss,
             lambda r: feature_batches(r.data, r.task.retain_idx, r.task.forget_idx, r.hp["batch_size"], r.seed),
             _over("forget", floor=True), lambda hp: {"beta": hp["beta"]},
             prepare=lambda r: ({"model": r.params0}, encode_rows(r.model, r.params0, r.task.x_train, r.cache)),
             frozen=(r"^encoder/",)),
    Baseline("jit", dict(epochs=1.0, lr=1e-4, sigma=0.1, num_perturb=4, min_steps=0, **_BS), _jit_loss,
             partial(rf_batches, retain=False), _over("forget", floor=True), lambda hp: {"sigma": hp["sigma"]}),
    Baseline("emmn", pl.EMMN_DEFAULTS, run=pl.run_emmn),
    Baseline("sisa", pl.SISA_DEFAULTS, run=pl.run_sisa),
    Baseline("unsir", pl.UNSIR_DEFAULTS, run=pl.run_unsir),
    Baseline("gkt", pl.GKT_DEFAULTS, run=pl.run_gkt),
)}


def hyperparameters(name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """The spec's defaults with `overrides` cast to each default's type (unknown keys are errors)."""
  if name not in SPECS:
    raise ValueError(f"unknown baseline {name!r}; expected one of {', '.join(BASELINES + ZERO_SHOT_BASELINES)}")
  defaults, given = SPECS[name].defaults, dict(overrides or {})
  core.reject_unknown(given, sorted(defaults), name)
  return defaults | {k: type(defaults[k])(v) for k, v in given.items()}


def _single_fit(spec: Baseline, r: Run) -> FitOutput:
  extra, data = spec.prepare(r) if spec.prepare else (None, None)
  r = r._replace(steps=spec.steps(r), data=data)
  batches = with_values(spec.batches(r), r.hp["batch_size"], **spec.values(r.hp))
  return pl.fit(r, spec.name, r.params0, spec.loss(r.model, r.hp), batches, r.steps, extra=extra, frozen=spec.frozen)


def run_baseline(name: str, model: nn.Module, params0: Any, task: UnlearningTask, *, seed: int,
                 overrides: Mapping[str, Any] | None = None, cache: MutableMapping[Hashable, Any] | None = None,
                 train_config: Mapping[str, Any] | None = None) -> FitOutput:
  """Runs one baseline by name (retrain included) from the trained `params0`; `train_config`: core.train's loop
  keys (the learning rates are the baseline's own). Raises `NotApplicable` when the method does not apply."""
  hp, spec = hyperparameters(name, overrides), SPECS[name]
  t0 = time.perf_counter()
  fit = (spec.run or partial(_single_fit, spec))(Run(hp, model, params0, task, seed, cache, train_config))
  # Pre-computations (masks, FGSM labels, features) count in the wall time; the steady time removes
  # only the fits' compiling first steps. SISA: only the retrained shards (the others predate the request).
  wall = fit.wall_s if name in ENSEMBLES else time.perf_counter() - t0
  return fit._replace(wall_s=wall, steady_s=wall - max(fit.wall_s - fit.steady_s, 0.0))


def ensemble_predictor(model: nn.Module, cache: MutableMapping | None = None) -> Callable:
  """predict(stacked_params, x) -> (log mean_s softmax(f_s(x)), mean_s g_s(x)): SISA's aggregation
  of the shard models (mean of prediction vectors; features averaged for the representation checks)."""
  one = lambda p, x: (jax.nn.softmax(model.apply({"params": p}, x)), model_lib.encode(model, p, x))  # noqa: E731

  def predict(stacked, x):
    probs, feats = jax.vmap(one, in_axes=(0, None))(stacked, x)
    return jnp.log(jnp.mean(probs, 0) + 1e-12), jnp.mean(feats, 0)

  return cached(cache, ("ensemble", model), lambda: jax.jit(predict))
