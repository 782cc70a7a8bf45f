"""The shared pieces of the baselines (CE, KL, batches, one timed fit) and the multi-stage ones, each a
`run(Run) -> FitOutput`: retrain, emmn, sisa (Bourtoule et al. 2021), unsir (Tarun et al. 2023) and gkt
(Chundawat et al. 2023), each described at its `run_*`."""

import time
from typing import Any, Callable, Mapping, MutableMapping, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml.unlearning import model as model_lib
from jaxml.unlearning.fitting import FitOutput, cached, fit_params
from jaxml.unlearning.losses import weighted_mean
from jaxml.unlearning.sampling import index_stream, steps_for_epochs, structure, value, with_values
from jaxml.unlearning.task import UnlearningTask

__all__ = ["EMMN_DEFAULTS", "GKT_DEFAULTS", "SISA_DEFAULTS", "UNSIR_DEFAULTS", "NotApplicable", "Run", "ce", "fit",
           "kl", "retain_ce_loss", "rf_batches", "run_emmn", "run_gkt", "run_retrain", "run_sisa", "run_unsir",
           "shard_of", "train_classifier"]

EMMN_DEFAULTS = dict(noise_per_class=16, noise_steps=400, noise_lr=0.1, noise_l2=0.01, impair_steps=2, impair_lr=0.01,
                     repair_steps=2, repair_lr=0.01)
# Authors' configs (RU repository): SISA 10 shards x 5 slices, SGD 0.1; here Adam with the train recipe
# (the same one Retrain uses) and no slices.
SISA_DEFAULTS = dict(shards=5, epochs=60.0, lr=1e-3, batch_size=128)
# Authors' configs: 25 noise iterations at lr 0.01 (Adam), lambda 0.1, clamp 2.5, 20 copies; impair 3
# epochs at SGD 0.05, repair 1 epoch at SGD 0.01, momentum 0.9; 1000 retain rows per class.
UNSIR_DEFAULTS = dict(noise_copies=20, noise_steps=25, noise_lr=0.01, noise_l2=0.1, noise_clamp=2.5, impair_epochs=3.0,
                      impair_lr=0.05, repair_epochs=1.0, repair_lr=0.01, momentum=0.9, retain_per_class=1000,
                      batch_size=128)
# Authors' configs: Adam 1e-3, batch 256, z 128, 1 generator + 10 student steps per cycle, 4000 cycles,
# attention weight 250, KL temperature 1, gate threshold 0.01.
GKT_DEFAULTS = dict(cycles=4000, generator_steps=1, student_steps=10, lr=1e-3, batch_size=256, z_dim=128,
                    generator_hidden=256, at_beta=250.0, temperature=1.0, threshold=0.01)


class NotApplicable(ValueError):
  """The baseline does not apply to this regime (e.g. class-level zero-shot methods)."""


class Run(NamedTuple):
  """One baseline run: settings, classifier, starting parameters, task, seed, compile cache, `core.train`
  settings; `steps` and `data` (what the spec's `prepare` computed) once the driver has them."""

  hp: Mapping[str, Any]
  model: nn.Module
  params0: Any
  task: UnlearningTask
  seed: int
  cache: MutableMapping | None = None
  train_config: Mapping[str, Any] | None = None
  steps: int = 0
  data: Any = None


def ce(logits: jax.Array, y: jax.Array, w: jax.Array | None = None) -> jax.Array:
  """Mean CE [B, C], [B] -> scalar (weighted by w [B] when given)."""
  per = optax.softmax_cross_entropy_with_integer_labels(logits, y)
  return jnp.mean(per) if w is None else weighted_mean(per, w)


def kl(teacher_logits: jax.Array, student_logits: jax.Array, temperature: float = 1.0) -> jax.Array:
  """Per-row KL(softmax(t / T) || softmax(s / T)) -> [B]."""
  lt = jax.nn.log_softmax(teacher_logits / temperature)
  ls = jax.nn.log_softmax(student_logits / temperature)
  return jnp.sum(jnp.exp(lt) * (lt - ls), axis=-1)


def fit(r: Run, key: str, params: Any, loss_fn: Callable, batch_fn: Callable[[int], dict], num_steps: int, *,
        extra: Any = None, frozen: tuple[str, ...] = (), lr_key: str = "lr", name: str | None = None,
        shape: tuple = ()) -> FitOutput:
  """One `fit_params` run of `r` at the learning rate r.hp[lr_key] (an array: a grid over it compiles once),
  its compiled step cached under (key, the settings' structure, model, shape)."""
  return fit_params((key, structure(r.hp), r.model, *shape), loss_fn, params, batch_fn, num_steps=num_steps,
                    seed=r.seed, lr=r.hp[lr_key], train_config=r.train_config, extra=extra, frozen=frozen,
                    cache=r.cache, name=name or key)


def _take(task: UnlearningTask, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  return task.x_train[rows], task.y_train[rows].astype(np.int32)


def retain_ce_loss(model: nn.Module) -> Callable:
  """loss_fn: CE of the classifier on the retain batch {xr, yr}."""
  def loss_fn(params, batch, rng, extra):
    return ce(model.apply({"params": params}, batch["xr"]), batch["yr"]), {}
  return loss_fn


def rf_batches(r: Run, *, retain: bool = True, forget: bool = True, retain_idx: np.ndarray | None = None,
               retain_stream: int = 2) -> Callable[[int], dict]:
  """Batches {xr, yr, ir} from D_r (or `retain_idx`, seeded stream `retain_stream`) and {xf, yf, wf, if} from D_f
  (ir / if = row indices)."""
  task, bsz = r.task, r.hp["batch_size"]
  r_stream = index_stream(task.retain_idx if retain_idx is None else retain_idx, bsz, r.seed, retain_stream)
  f_stream = index_stream(task.forget_idx, bsz, r.seed, 1)

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
  run = Run(hp, model, None, task, seed, cache, train_config)
  batch_fn = rf_batches(run, forget=False, retain_idx=np.asarray(rows), retain_stream=0)
  steps = steps_for_epochs(len(rows), hp["batch_size"], hp["epochs"])
  return fit(run, "train", params, retain_ce_loss(model), batch_fn, steps, name=name)


def run_retrain(r: Run) -> FitOutput:
  """Retrain, the gold standard: CE on D_r from a fresh init with the original recipe."""
  return train_classifier(r.hp, r.model, r.task, r.task.retain_idx, seed=r.seed, cache=r.cache, name="retrain",
                          train_config=r.train_config)


def _chain(*fits: FitOutput) -> FitOutput:
  """Consecutive fits as one: the last params, summed times and steps."""
  return FitOutput(fits[-1].params, sum(f.wall_s for f in fits), sum(f.steady_s for f in fits),
                   sum(f.num_steps for f in fits), fits[-1].final_loss)


def _needs_classes(name: str, task: UnlearningTask) -> None:
  if not task.forget_classes:
    raise NotApplicable(f"{name} is a class-level method (needs forgotten classes)")


def _noise_loss(model: nn.Module, rows: int, clamp: bool, sign_key: str | None) -> Callable:
  """Noise learnt against the frozen model (extra["model"]): mean(s * CE(f(noise), y)) + l2 * mean ||noise||^2,
  s = batch[sign_key] (EMMN: -1 error-maximising, +1 error-minimising rows) or -1 (UNSIR); UNSIR clamps first."""
  def loss_fn(params, batch, rng, extra):
    x = jnp.clip(params["noise"], -value(batch, "clamp"), value(batch, "clamp")) if clamp else params["noise"]
    per = optax.softmax_cross_entropy_with_integer_labels(
        model.apply({"params": jax.lax.stop_gradient(extra["model"])}, x), batch["y"])
    reg = jnp.mean(jnp.sum(x.reshape(rows, -1) ** 2, axis=-1))
    data = jnp.mean(batch[sign_key] * per) if sign_key else -jnp.mean(per)
    return data + value(batch, "noise_l2") * reg, {"noise_ce": jnp.mean(per)}
  return loss_fn


def _fit_noise(r: Run, key: str, labels: np.ndarray, batch: dict, offset: int, clip: bool, sign_key: str | None,
               **values: float) -> FitOutput:
  """Learns one noise input per label (`_noise_loss`) from N(0, I), seeded by seed + offset."""
  noise0 = jax.random.normal(jax.random.key(r.seed + offset), (labels.size,) + r.task.x_train.shape[1:], jnp.float32)
  batches = with_values(lambda s: batch, labels.size, noise_l2=r.hp["noise_l2"], **values)
  return fit(r, key, {"noise": noise0}, _noise_loss(r.model, labels.size, clip, sign_key), batches,
             r.hp["noise_steps"], extra={"model": r.params0}, lr_key="noise_lr", shape=(labels.size,))


def run_emmn(r: Run) -> FitOutput:
  """EMMN, zero-shot (no training data): error-max / error-min noise against the frozen model, then impair / repair."""
  hp, task, model = r.hp, r.task, r.model
  _needs_classes("emmn", task)
  k, forget = hp["noise_per_class"], list(task.forget_classes)
  keep = [c for c in range(task.num_classes) if c not in forget]
  labels = np.asarray([c for c in forget for _ in range(k)] + [c for c in keep for _ in range(k)], np.int32)
  signs = np.asarray([-1.0] * (k * len(forget)) + [1.0] * (k * len(keep)), np.float32)
  fit_n = _fit_noise(r, "emmn_noise", labels, {"y": labels, "sign": signs}, 7, False, "sign")

  def ce_loss(params, batch, rng, extra):
    return ce(model.apply({"params": params}, batch["x"]), batch["y"], batch["w"]), {}

  impair = {"x": np.asarray(fit_n.params["noise"]), "y": labels, "w": np.ones(labels.size, np.float32)}
  fit_i = fit(r, "emmn_impair", r.params0, ce_loss, lambda s: impair, hp["impair_steps"], lr_key="impair_lr",
              shape=(labels.size,))
  repair = impair | {"w": (signs > 0).astype(np.float32)}     # error-minimising (retained-class) noise only
  fit_r = fit(r, "emmn_repair", fit_i.params, ce_loss, lambda s: repair, hp["repair_steps"], lr_key="repair_lr",
              shape=(labels.size,))
  return _chain(fit_n, fit_i, fit_r)


def shard_of(n: int, shards: int, seed: int) -> np.ndarray:
  """Shard id of each training row: a seeded balanced partition of [0, n) into `shards` parts."""
  perm = np.random.default_rng([seed, 29]).permutation(n)
  out = np.empty(n, np.int64)
  out[perm] = np.arange(n) % shards
  return out


def run_sisa(r: Run) -> FitOutput:
  """SISA: shard models on disjoint shards of D (predict: mean softmax); a request retrains from a fresh init only the
  shards holding forget rows (the others predate it, their time not counted); params are stacked."""
  hp, task = r.hp, r.task
  n, shards = task.x_train.shape[0], hp["shards"]
  sid = shard_of(n, shards, r.seed)
  affected = set(np.unique(sid[task.forget_idx]).tolist())
  keep = ~np.isin(np.arange(n), task.forget_idx)
  train_hp = {k: hp[k] for k in ("epochs", "lr", "batch_size")}
  models, timed = [], []
  for s in range(shards):
    rows = np.flatnonzero((sid == s) & keep) if s in affected else np.flatnonzero(sid == s)
    fit_s = train_classifier(train_hp, r.model, task, rows, seed=r.seed * 1000 + s, cache=r.cache,
                             name=f"sisa_{s}", train_config=r.train_config)
    models.append(fit_s.params)
    timed += [fit_s] if s in affected else []
  stacked = jax.tree.map(lambda *a: jnp.stack(a), *models)
  return FitOutput(stacked, sum(f.wall_s for f in timed), sum(f.steady_s for f in timed),
                   max(sum(f.num_steps for f in timed), 1), float("nan"))


def _retain_subset(task: UnlearningTask, per_class: int, seed: int) -> np.ndarray:
  """At most `per_class` rows of each retained class (seeded)."""
  rng, y = np.random.default_rng([seed, 37]), np.asarray(task.y_train)
  return np.sort(np.concatenate([rng.permutation(task.retain_idx[y[task.retain_idx] == c])[:per_class]
                                 for c in np.unique(y[task.retain_idx])]))


def run_unsir(r: Run) -> FitOutput:
  """UNSIR: error-maximising noise (label: the forget class), impair on noise + a retain subset, repair
  on the retain subset (SGD with momentum). Needs forgotten classes."""
  hp, task, model, seed = r.hp, r.task, r.model, r.seed
  _needs_classes("unsir", task)
  bsz, labels = hp["batch_size"], np.repeat(np.asarray(task.forget_classes, np.int32), hp["noise_copies"])
  fit_n = _fit_noise(r, "unsir_noise", labels, {"y": labels}, 31, True, None, clamp=hp["noise_clamp"])
  noise = np.clip(np.asarray(fit_n.params["noise"]), -hp["noise_clamp"], hp["noise_clamp"])
  subset = _retain_subset(task, hp["retain_per_class"], seed)
  sgd = r._replace(train_config=dict(r.train_config or {}) | {"optim": {"name": "sgd", "momentum": hp["momentum"]}})
  r_stream, n_stream = index_stream(subset, bsz, seed, 5), index_stream(np.arange(labels.size), bsz, seed, 6)

  def impair_batch(step):
    (rr, _), (rn, _) = r_stream(step), n_stream(step)
    x, yy = _take(task, rr)
    return {"xr": x, "yr": yy, "xn": noise[rn], "yn": labels[rn]}

  def impair_loss(params, batch, rng, extra):
    ce_r = ce(model.apply({"params": params}, batch["xr"]), batch["yr"])
    ce_n = ce(model.apply({"params": params}, batch["xn"]), batch["yn"])
    return ce_r + ce_n, {"retain_ce": ce_r, "noise_ce": ce_n}

  n_imp = steps_for_epochs(subset.size + labels.size, bsz, hp["impair_epochs"])
  fit_i = fit(sgd, "unsir_impair", r.params0, impair_loss, impair_batch, n_imp, lr_key="impair_lr",
              shape=(labels.size,))
  fit_r = fit(sgd, "unsir_repair", fit_i.params, retain_ce_loss(model),
              lambda s: {k: v for k, v in impair_batch(s + n_imp).items() if k in ("xr", "yr")},
              steps_for_epochs(subset.size, bsz, hp["repair_epochs"]), lr_key="repair_lr")
  return _chain(fit_n, fit_i, fit_r)


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


def _gkt_program(model: nn.Module, gen: nn.Module, hp: Mapping[str, Any]) -> Callable:
  """Jitted run(gen, student, teacher, key, temperature, at_beta, threshold, forget_mask) -> student: `cycles` x
  (generator steps ascending KL(teacher || student) on generated samples, then student steps on KL + at_beta
  ||att(g_t) - att(g_s)||^2 over the samples the teacher gives every forget class probability <= threshold)."""
  f = lambda p, x: model.apply({"params": p}, x)  # noqa: E731
  enc = lambda p, x: model_lib.encode(model, p, x)  # noqa: E731
  bsz, zd, opt = hp["batch_size"], hp["z_dim"], optax.adam(hp["lr"])

  def gen_step(carry, key, teacher, temp):
    gp, sp, go, so = carry

    def loss(p):
      x = gen.apply({"params": p}, jax.random.normal(key, (bsz, zd)))
      return -jnp.mean(kl(f(teacher, x), f(jax.lax.stop_gradient(sp), x), temp))

    upd, go = opt.update(jax.grad(loss)(gp), go, gp)
    return (optax.apply_updates(gp, upd), sp, go, so)

  def student_step(carry, key, teacher, temp, at_beta, threshold, fmask):
    gp, sp, go, so = carry

    def loss(p):
      x = gen.apply({"params": jax.lax.stop_gradient(gp)}, jax.random.normal(key, (bsz, zd)))
      t_logits = f(teacher, x)
      gate = (jnp.sum(jax.nn.softmax(t_logits) * fmask, -1) <= threshold).astype(jnp.float32)
      att = jnp.sum((_attention(enc(teacher, x)) - _attention(enc(p, x))) ** 2, -1)
      return weighted_mean(kl(t_logits, f(p, x), temp) + at_beta * att, gate)

    upd, so = opt.update(jax.grad(loss)(sp), so, sp)
    return (gp, optax.apply_updates(sp, upd), go, so)

  def run(gp, sp, teacher, key, temp, at_beta, threshold, fmask):
    def cycle(carry, k):
      kg, ks = jax.random.split(k)
      carry = jax.lax.fori_loop(0, hp["generator_steps"],
                                lambda i, c: gen_step(c, jax.random.fold_in(kg, i), teacher, temp), carry)
      carry = jax.lax.fori_loop(0, hp["student_steps"], lambda i, c: student_step(
          c, jax.random.fold_in(ks, i), teacher, temp, at_beta, threshold, fmask), carry)
      return carry, None

    carry, _ = jax.lax.scan(cycle, (gp, sp, opt.init(gp), opt.init(sp)), jax.random.split(key, hp["cycles"]))
    return carry[1]

  return jax.jit(run)


def run_gkt(r: Run) -> FitOutput:
  """GKT (zero-shot): `_gkt_program` from a fresh student (no data is read; the first training input
  only gives the student's shapes). Its own jitted program, not `core.train`, so `r.train_config` is unused."""
  hp, model, task, cache, params0 = r.hp, r.model, r.task, r.cache, r.params0
  _needs_classes("gkt", task)
  shape = tuple(task.x_train.shape[1:])
  gen = _Generator(shape, hp["generator_hidden"])
  run = cached(cache, ("gkt", model, shape, structure(hp)), lambda: _gkt_program(model, gen, hp))
  k_gen, k_student, k_run = jax.random.split(jax.random.key(r.seed + 41), 3)
  gp = gen.init(k_gen, jnp.zeros((1, hp["z_dim"])))["params"]
  sp = model.init(k_student, jnp.asarray(task.x_train[:1]))["params"]
  args = (jnp.float32(hp["temperature"]), jnp.float32(hp["at_beta"]), jnp.float32(hp["threshold"]),
          jnp.asarray(np.isin(np.arange(task.num_classes), task.forget_classes).astype(np.float32)))
  t0 = time.perf_counter()
  compiled = cached(cache, ("gkt_compiled", model, shape, structure(hp)),
                    lambda: run.lower(gp, sp, params0, k_run, *args).compile())
  t1 = time.perf_counter()
  student = jax.block_until_ready(compiled(gp, sp, params0, k_run, *args))
  t2 = time.perf_counter()
  return FitOutput(student, t2 - t0, t2 - t1, hp["cycles"] * (hp["generator_steps"] + hp["student_steps"]),
                   float("nan"))
