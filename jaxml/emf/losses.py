"""Euler Mean Flow (EMF) losses: a JVP-free surrogate of flow-map trajectory consistency.

Clock: `t = 0` noise, `t = 1` data, `x_t = (1 - t) x0 + t x1`, `v_c = x1 - x0`; intervals
`0 <= t <= r <= 1`. The network predicts either the average velocity `u_{t->r}(x)` ("u") or the
endpoint `xh_{t->r}(x) = x + (1 - t) u_{t->r}(x)` ("x1").

Semigroup with an Euler intermediate point `s = t + delta`, `y = x_t + delta v_sg(x_t, t)`:
`(r - t) u_{t->r}(x_t) = delta v + (r - t - delta) u_{t+delta->r}(y)`. Rewritten so the unknown
appears linearly beside a data anchor (Li et al. 2026; our derivation, see the spec):

  u:  T_u = v_c + k_u [u_sg(y, t + delta, r) - sg u(x_t, t, r)],          k_u = (r - t - delta)_+ / delta
  x1: T_x = x1  + k_x [xh_sg(y, t + delta, r) - sg xh(x_t, t, r)],         k_x = (r - t - delta)_+ a / (b delta)

with `a = max(1 - t, eps)`, `b = max(1 - r, eps)`. As `delta -> 0` the bracket times the gain tends
to the MeanFlow JVP term `(r - t) D_t u` (tangent `(v_theta, 1, 0)`), at rate O(delta).
Loss `E[w(e) e]`, `e = ||out - sg T||^2` (x1: divided by `a^2`, u-space scale), adaptive weight
`w(e) = sg (e + c)^-p`.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxml.emf.model import ApplyFn

__all__ = ["EMFConfig", "sample_time_pairs", "adaptive_weight", "per_row_sq", "euler_target", "jvp_target",
           "labels_for_training", "guided_anchor", "make_emf_loss", "velocity_from", "interpolate", "draw_flow_batch",
           "weighted_mean", "row_split_mse"]


class EMFConfig(NamedTuple):
  """Static settings shared by EMF and the baselines that use interval rows.

  param: 'u' (average velocity) or 'x1' (endpoint). delta: Euler step, s = t + delta. rho: fraction of
  interval rows (t < r). time_law: 'uniform' or 'logit_normal' (ln_mu, ln_sigma). p, c: adaptive weight
  (e + c)^-p. eps: clamp of 1 - t, 1 - r (x1). euler_field: 'model' (own field at r = t; alias 'diag'),
  'full' (r = 1) or 'vc' (conditional velocity). form: 'linear' (EMF) or 'convex' (bootstrap ablation, u).
  aux_rows: 'interval' or 'all'. num_classes > 0: class-conditional (label `num_classes` is null).
  label_dropout, guidance_w, guidance_k: training-time guidance. target_clip: clip of the correction (0 = off)."""

  param: str = "u"
  delta: float = 0.01
  rho: float = 0.5
  time_law: str = "uniform"
  ln_mu: float = 0.0
  ln_sigma: float = 1.0
  p: float = 1.0
  c: float = 1e-3
  eps: float = 0.02
  euler_field: str = "model"
  form: str = "linear"
  aux_rows: str = "interval"
  num_classes: int = 0
  label_dropout: float = 0.1
  guidance_w: float = 1.0
  guidance_k: float = 0.0
  target_clip: float = 0.0


def _bcast(v: jax.Array, x: jax.Array) -> jax.Array:
  """[B] -> [B, 1, ..., 1] matching x's rank."""
  return v.reshape(v.shape + (1,) * (x.ndim - 1))


def per_row_sq(d: jax.Array) -> jax.Array:
  """Squared norm over all data dimensions: [B, ...] -> [B]."""
  return jnp.sum(jnp.square(d).reshape(d.shape[0], -1), axis=-1)


def adaptive_weight(err: jax.Array, p: float | jax.Array, c: float) -> jax.Array:
  """w = sg((err + c)^-p); p = 0 gives weight 1.

  `p` may be a traced array (e.g. `jax.vmap` over a grid of weightings shares one compile);
  a Python 0 skips the power altogether.
  """
  if isinstance(p, (int, float)) and p == 0:
    return jnp.ones_like(err)
  return jax.lax.stop_gradient(1.0 / jnp.power(err + c, p))


def weighted_mean(err: jax.Array, p: float | jax.Array, c: float) -> jax.Array:
  """The loss E[w(e) e] over the rows, w the `adaptive_weight`."""
  return jnp.mean(adaptive_weight(err, p, c) * err)


def row_split_mse(err: jax.Array, n_int: int) -> dict[str, jax.Array]:
  """Mean error of the diagonal rows (r = t) and of the first `n_int` rows, the interval rows."""
  is_int = jnp.arange(err.shape[0]) < n_int
  return {"mse_diag": jnp.sum(jnp.where(is_int, 0.0, err)) / max(err.shape[0] - n_int, 1),
          "mse_interval": jnp.sum(jnp.where(is_int, err, 0.0)) / max(n_int, 1)}


def _base_times(rng: jax.Array, shape: tuple[int, ...], cfg: EMFConfig) -> jax.Array:
  if cfg.time_law == "uniform":
    return jax.random.uniform(rng, shape)
  if cfg.time_law == "logit_normal":
    return jax.nn.sigmoid(cfg.ln_mu + cfg.ln_sigma * jax.random.normal(rng, shape))
  raise ValueError(f"unknown time_law {cfg.time_law!r}; expected uniform or logit_normal")


def num_interval_rows(batch: int, rho: float) -> int:
  return int(round(rho * batch))


def sample_time_pairs(rng: jax.Array, batch: int, cfg: EMFConfig) -> tuple[jax.Array, jax.Array]:
  """(t, r), each [batch]: the first `round(rho * batch)` rows are intervals t = min(a, b) <= r = max(a, b)
  with a, b i.i.d. from the base law; the remaining rows have r = t. (Data rows are already
  shuffled, so the fixed positions carry no information; fixed positions keep shapes static.)"""
  n_int = num_interval_rows(batch, cfg.rho)
  ab = _base_times(rng, (2, batch), cfg)
  lo, hi = jnp.minimum(ab[0], ab[1]), jnp.maximum(ab[0], ab[1])
  is_int = jnp.arange(batch) < n_int
  return jnp.where(is_int, lo, ab[0]), jnp.where(is_int, hi, ab[0])


def interpolate(x0: jax.Array, x1: jax.Array, t: jax.Array) -> jax.Array:
  """x_t = (1 - t) x0 + t x1 for times t [B]."""
  return _bcast(1 - t, x1) * x0 + _bcast(t, x1) * x1


def draw_flow_batch(batch: dict, rng: jax.Array, cfg: EMFConfig) -> tuple[jax.Array | None, ...]:
  """(x1, x0, t, r, labels, dropped, x_t): data, noise, times t <= r [B], training labels and their dropped
  mask, and x_t; the same key use for EMF and the baselines on its clock (EMF at rho = 0 draws what flow
  matching draws)."""
  x1 = batch["x"]
  noise_rng, time_rng, label_rng = jax.random.split(rng, 3)
  x0 = jax.random.normal(noise_rng, x1.shape, x1.dtype)
  t, r = sample_time_pairs(time_rng, x1.shape[0], cfg)
  labels, dropped = labels_for_training(label_rng, batch.get("y"), cfg)
  t = t.astype(x1.dtype)
  return x1, x0, t, r.astype(x1.dtype), labels, dropped, interpolate(x0, x1, t)


def velocity_from(out: jax.Array, x: jax.Array, t: jax.Array, param: str, eps: float) -> jax.Array:
  """Velocity implied by a network output: u itself, or (xh - x) / max(1 - t, eps)."""
  if param == "u":
    return out
  return (out - x) / _bcast(jnp.maximum(1.0 - t, eps), x)


def labels_for_training(rng: jax.Array, labels: jax.Array | None, cfg: EMFConfig
                        ) -> tuple[jax.Array | None, jax.Array | None]:
  """(labels with a `label_dropout` fraction replaced by the null label, dropped mask)."""
  if cfg.num_classes <= 0 or labels is None:
    return None, None
  dropped = jax.random.uniform(rng, labels.shape) < cfg.label_dropout
  return jnp.where(dropped, cfg.num_classes, labels).astype(jnp.int32), dropped


def guided_anchor(apply_fn: ApplyFn, params_sg: Any, xt: jax.Array, t: jax.Array, anchor: jax.Array,
                  labels: jax.Array | None, dropped: jax.Array | None, cfg: EMFConfig) -> jax.Array:
  """Baked-in guidance: on kept rows `w anchor + (1 - w - k) f(x_t, t, t | null) + k f(x_t, t, t | c)`,
  with `f` the stopped model at r = t (v for u, E[x1|x] for x1). Identity when w = 1, k = 0."""
  if labels is None or (cfg.guidance_w == 1.0 and cfg.guidance_k == 0.0):
    return anchor
  null = jnp.full(labels.shape, cfg.num_classes, jnp.int32)
  f_null = apply_fn(params_sg, xt, t, t, null)
  f_cond = apply_fn(params_sg, xt, t, t, labels) if cfg.guidance_k else jnp.zeros_like(anchor)
  w, k = cfg.guidance_w, cfg.guidance_k
  guided = w * anchor + (1.0 - w - k) * f_null + k * f_cond
  return jnp.where(_bcast(dropped, anchor), anchor, jax.lax.stop_gradient(guided))


def euler_target(apply_fn: ApplyFn, params_sg: Any, x: jax.Array, t: jax.Array, r: jax.Array,
                 anchor: jax.Array, out: jax.Array, label: jax.Array | None, cfg: EMFConfig,
                 vc: jax.Array | None = None) -> tuple[jax.Array, dict[str, jax.Array]]:
  """EMF target for rows (x, t, r) given the anchor (v_c or x1) and the differentiated output.

  Returns the (stopped) target [B, ...] and per-row diagnostics (gain [B], |correction| [B]).
  """
  params_sg = jax.lax.stop_gradient(params_sg)
  out = jax.lax.stop_gradient(out)
  delta = cfg.delta
  if cfg.euler_field in ("model", "diag", "full"):   # own field at r = t, or the full map r = 1
    r_field = jnp.ones_like(t) if cfg.euler_field == "full" else t
    vel = velocity_from(apply_fn(params_sg, x, t, r_field, label), x, t, cfg.param, cfg.eps)
  elif cfg.euler_field == "vc":
    if vc is None:
      raise ValueError("euler_field='vc' needs the conditional velocity")
    vel = vc
  else:
    raise ValueError(f"unknown euler_field {cfg.euler_field!r}; expected model, full or vc")
  y = x + delta * vel
  nxt = apply_fn(params_sg, y, t + delta, r, label)
  span = jnp.maximum(r - t - delta, 0.0)
  if cfg.form == "convex":
    if cfg.param != "u":
      raise ValueError("the convex (bootstrap) form is implemented for u-prediction only")
    long = (r - t) > delta
    conv = (delta * anchor + _bcast(span, x) * nxt) / _bcast(jnp.where(long, r - t, 1.0), x)
    target = jnp.where(_bcast(long, x), conv, anchor)
    corr = target - anchor
    gain = jnp.where(long, span / jnp.where(long, r - t, 1.0), 0.0)
  else:
    # k_u = span / delta; k_x = span a / (b delta), a = max(1 - t, eps), b = max(1 - r, eps)
    gain = span / delta if cfg.param == "u" else (
        span * jnp.maximum(1.0 - t, cfg.eps) / (jnp.maximum(1.0 - r, cfg.eps) * delta))
    corr = _bcast(gain, x) * (nxt - out)
    if cfg.target_clip > 0:
      corr = jnp.clip(corr, -cfg.target_clip, cfg.target_clip)
    target = anchor + corr
  diag = {"gain": gain, "corr": jnp.sqrt(per_row_sq(corr) / max(corr[0].size, 1))}
  return jax.lax.stop_gradient(target), diag


def jvp_target(apply_fn: ApplyFn, params: Any, x: jax.Array, t: jax.Array, r: jax.Array,
               anchor: jax.Array, label: jax.Array | None, param: str, tangent_v: jax.Array,
               eps: float = 0.0) -> jax.Array:
  """MeanFlow-style target with a JVP along (tangent_v, 1, 0) in (x, t, r).

  u:  anchor + (r - t) D_t u;   x1: anchor + ((r - t)(1 - t) / (1 - r)) D_t xh  (our clock).
  """
  fn = lambda xx, tt, rr: apply_fn(params, xx, tt, rr, label)
  _, du = jax.jvp(fn, (x, t, r), (tangent_v, jnp.ones_like(t), jnp.zeros_like(r)))
  coef = r - t if param == "u" else (r - t) * jnp.maximum(1.0 - t, eps) / jnp.maximum(1.0 - r, eps)
  return anchor + _bcast(coef, x) * du


def make_emf_loss(apply_fn: ApplyFn, cfg: EMFConfig) -> Callable[..., tuple[jax.Array, dict[str, jax.Array]]]:
  """`loss_fn(params, batch, rng) -> (loss, aux)` for EMF; batch {'x': [B, ...], 'y': [B] int (optional)}."""
  if cfg.param not in ("u", "x1"):
    raise ValueError(f"unknown param {cfg.param!r}; expected u or x1")
  if cfg.aux_rows not in ("interval", "all"):
    raise ValueError(f"unknown aux_rows {cfg.aux_rows!r}; expected interval or all")

  def loss_fn(params, batch, rng):
    x1, x0, t, r, labels, dropped, xt = draw_flow_batch(batch, rng, cfg)
    bsz = x1.shape[0]
    n_int = num_interval_rows(bsz, cfg.rho)
    vc = x1 - x0
    out = apply_fn(params, xt, t, r, labels)
    params_sg = jax.lax.stop_gradient(params)
    anchor = vc if cfg.param == "u" else x1
    anchor = guided_anchor(apply_fn, params_sg, xt, t, anchor, labels, dropped, cfg)
    m = bsz if cfg.aux_rows == "all" else n_int
    aux_diag = {}
    if m > 0:
      sl = lambda a: None if a is None else a[:m]
      tgt_m, aux_diag = euler_target(apply_fn, params_sg, xt[:m], t[:m], r[:m], anchor[:m], out[:m],
                                     sl(labels), cfg, vc[:m])
      target = jnp.concatenate([tgt_m, anchor[m:]], axis=0) if m < bsz else tgt_m
    else:
      target = anchor
    err = per_row_sq(out - jax.lax.stop_gradient(target))
    if cfg.param == "x1":
      err = err / jnp.square(jnp.maximum(1.0 - t, cfg.eps))
    loss = weighted_mean(err, cfg.p, cfg.c)
    aux = {"mse": jnp.mean(err), **row_split_mse(err, n_int), "active_frac": jnp.mean((r - t) > cfg.delta)}
    if aux_diag:
      for k, v in aux_diag.items():
        v = v[:n_int] if n_int else v
        aux |= {f"{k}_median": jnp.median(v), f"{k}_max": jnp.max(v)}
    return loss, aux

  return loss_fn
