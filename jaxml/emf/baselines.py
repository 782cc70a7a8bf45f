"""Baselines of the EMF experiment on the same network and clock (t = 0 noise, t = 1 data).

- Flow matching: `||net(x_t, t, t) - v_c||^2` (x1 form: `||xh(x_t, t, t) - x1||^2 / (1 - t)^2`).
- MeanFlow (Geng et al. 2025): target `sg(v_c + (r - t) D_t u)`, `D_t u = jvp(net, (x_t, t, r), (v_c, 1, 0))`;
  'fused' takes the JVP inside `value_and_grad` (official code), 'split' on stopped parameters.
- Shortcut (Frans et al. 2025): `s(x_t, t, d) = net(x_t, t, t + d)`; bootstrap rows regress on two stopped
  half steps, clipped to [-4, 4].
- Consistency training (iCT-style): `f(x, t) = x + (1 - t) net(x, t, 1)`, pseudo-Huber between adjacent
  cells of an N-cell grid, N doubling from 10 to 1280 (kept in `state.extra` by a host hook).
"""

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxml.emf.losses import (EMFConfig, _bcast, adaptive_weight, draw_flow_batch, guided_anchor, interpolate,
                              labels_for_training, num_interval_rows, per_row_sq, row_split_mse, weighted_mean)
from jaxml.emf.model import ApplyFn
from jaxml.emf.sample import consistency_fn

__all__ = ["make_fm_loss", "make_meanflow_loss", "jvp_double_vjp", "ShortcutConfig", "make_shortcut_loss", "CTConfig",
           "make_ct_loss", "ct_grid_size"]

LossFn = Callable[..., tuple[jax.Array, dict[str, jax.Array]]]


def make_fm_loss(apply_fn: ApplyFn, cfg: EMFConfig) -> LossFn:
  """Flow matching (r = t on every row); same key use as EMF so EMF with rho = 0 equals it exactly."""

  def loss_fn(params, batch, rng):
    x1, x0, t, _, labels, dropped, xt = draw_flow_batch(batch, rng, cfg._replace(rho=0.0))
    out = apply_fn(params, xt, t, t, labels)
    anchor = (x1 - x0) if cfg.param == "u" else x1
    anchor = guided_anchor(apply_fn, jax.lax.stop_gradient(params), xt, t, anchor, labels, dropped, cfg)
    err = per_row_sq(out - anchor)
    if cfg.param == "x1":
      err = err / jnp.square(jnp.maximum(1.0 - t, cfg.eps))
    return weighted_mean(err, cfg.p, cfg.c), {"mse": jnp.mean(err)}

  return loss_fn


def jvp_double_vjp(fn: Callable, primals: tuple, tangents: tuple) -> tuple[jax.Array, jax.Array]:
  """JVP computed as the transpose of the VJP (the "double-backward trick" of frameworks whose
  forward mode is missing for some ops, e.g. `torch.autograd.functional.jvp`). Same values as
  `jax.jvp`; used by the cost benchmark to show what that route costs."""
  y, vjp_fn = jax.vjp(fn, *primals)
  _, transpose = jax.vjp(vjp_fn, jnp.zeros_like(y))
  (jt,) = transpose(tuple(tangents))
  return y, jt


def make_meanflow_loss(apply_fn: ApplyFn, cfg: EMFConfig, *, impl: str = "fused",
                       jvp_impl: str = "forward") -> LossFn:
  """MeanFlow with `jax.jvp` (u-prediction). `cfg.aux_rows='all'` takes the JVP on the full batch
  (official JAX code); 'interval' only on the interval rows (plain forward on the rest).
  `jvp_impl='double_vjp'` computes the same JVP through two reverse passes (benchmark only)."""
  if impl not in ("fused", "split"):
    raise ValueError(f"unknown MeanFlow impl {impl!r}; expected fused or split")
  if jvp_impl not in ("forward", "double_vjp"):
    raise ValueError(f"unknown jvp_impl {jvp_impl!r}; expected forward or double_vjp")
  jvp = jax.jvp if jvp_impl == "forward" else jvp_double_vjp
  if cfg.param != "u":
    raise ValueError("the MeanFlow baseline is u-prediction only")

  def loss_fn(params, batch, rng):
    x1, x0, t, r, labels, dropped, xt = draw_flow_batch(batch, rng, cfg)
    bsz = x1.shape[0]
    n_int = num_interval_rows(bsz, cfg.rho)
    m = bsz if cfg.aux_rows == "all" else n_int
    vc = x1 - x0
    params_sg = jax.lax.stop_gradient(params)
    anchor = guided_anchor(apply_fn, params_sg, xt, t, vc, labels, dropped, cfg)
    sl = lambda a, lo, hi: None if a is None else a[lo:hi]
    tangents = (anchor[:m], jnp.ones((m,), x1.dtype), jnp.zeros((m,), x1.dtype))
    if impl == "fused":
      fn = lambda xx, tt, rr: apply_fn(params, xx, tt, rr, sl(labels, 0, m))
      out_m, du = jvp(fn, (xt[:m], t[:m], r[:m]), tangents)
      out = out_m if m == bsz else jnp.concatenate(
          [out_m, apply_fn(params, xt[m:], t[m:], r[m:], sl(labels, m, bsz))], axis=0)
    else:
      out = apply_fn(params, xt, t, r, labels)
      fn = lambda xx, tt, rr: apply_fn(params_sg, xx, tt, rr, sl(labels, 0, m))
      _, du = jvp(fn, (xt[:m], t[:m], r[:m]), tangents)
    corr = _bcast(r[:m] - t[:m], du) * du
    target = anchor + jnp.concatenate([corr, jnp.zeros_like(anchor[m:])], axis=0) if m < bsz else anchor + corr
    err = per_row_sq(out - jax.lax.stop_gradient(target))
    return weighted_mean(err, cfg.p, cfg.c), {"mse": jnp.mean(err), **row_split_mse(err, n_int)}

  return loss_fn


class ShortcutConfig(NamedTuple):
  """max_steps M (d in {1, 1/2, ..., 1/M}); boot_frac of rows are bootstrap rows; fm_d: flow rows at
  'smallest' d = 1/M (default, as the shortcut authors do: the finest bootstrap level d = 2/M asks for
  half steps d = 1/M, which these rows train) or at 'zero'; p, c: adaptive weight (e + c)^-p of each
  row's error (p = 0: plain MSE, the paper's loss)."""

  max_steps: int = 32
  boot_frac: float = 0.25
  target_clip: float = 4.0
  fm_d: str = "smallest"
  p: float = 0.0
  c: float = 1e-3


def make_shortcut_loss(apply_fn: ApplyFn, cfg: ShortcutConfig, *, num_classes: int = 0,
                       label_dropout: float = 0.1) -> LossFn:
  """Shortcut model. Bootstrap rows cycle through every level d = 2^-j, j = 0..log2(M) - 1, so each
  level gets rows even on small batches; t is on multiples of d. Teacher: online stopped weights."""
  levels = int(round(math.log2(cfg.max_steps)))
  if 2 ** levels != cfg.max_steps:
    raise ValueError(f"max_steps must be a power of two, got {cfg.max_steps}")
  if cfg.fm_d not in ("smallest", "zero"):
    raise ValueError(f"unknown fm_d {cfg.fm_d!r}; expected smallest or zero")
  ecfg = EMFConfig(num_classes=num_classes, label_dropout=label_dropout)

  def loss_fn(params, batch, rng):
    x1 = batch["x"]
    bsz = x1.shape[0]
    n_boot = max(int(round(cfg.boot_frac * bsz)), min(levels, bsz))
    noise_rng, time_rng, label_rng = jax.random.split(rng, 3)
    x0 = jax.random.normal(noise_rng, x1.shape, x1.dtype)
    labels, _ = labels_for_training(label_rng, batch.get("y"), ecfg)
    u = jax.random.uniform(time_rng, (bsz,), x1.dtype)
    j = jnp.arange(bsz) % levels
    d_boot = jnp.power(2.0, -j.astype(x1.dtype))
    t_boot = jnp.floor(u * jnp.power(2.0, j.astype(x1.dtype))) * d_boot
    d_fm = 0.0 if cfg.fm_d == "zero" else 1.0 / cfg.max_steps
    is_boot = jnp.arange(bsz) < n_boot
    d = jnp.where(is_boot, d_boot, d_fm)
    t = jnp.where(is_boot, t_boot, u * (1.0 - d_fm))
    xt = interpolate(x0, x1, t)
    out = apply_fn(params, xt, t, t + d, labels)
    p_sg = jax.lax.stop_gradient(params)
    sl = lambda a: None if a is None else a[:n_boot]
    xb, tb, hb = xt[:n_boot], t[:n_boot], d[:n_boot] / 2
    s1 = apply_fn(p_sg, xb, tb, tb + hb, sl(labels))
    s2 = apply_fn(p_sg, xb + _bcast(hb, xb) * s1, tb + hb, tb + 2 * hb, sl(labels))
    boot = jnp.clip((s1 + s2) / 2, -cfg.target_clip, cfg.target_clip)
    target = jnp.concatenate([boot, (x1 - x0)[n_boot:]], axis=0)
    err = per_row_sq(out - jax.lax.stop_gradient(target))
    return weighted_mean(err, cfg.p, cfg.c), {"mse_boot": jnp.mean(err[:n_boot]), "mse_flow": jnp.mean(err[n_boot:])}

  return loss_fn


class CTConfig(NamedTuple):
  """grid_start -> grid_end cells (doubling); huber_c = c_scale * sqrt(D) (0.00054 sqrt(D) in iCT);
  p, c: adaptive weight (e + c)^-p of each row's pseudo-Huber distance (p = 0: iCT's plain loss)."""

  grid_start: int = 10
  grid_end: int = 1280
  c_scale: float = 0.00054
  p: float = 0.0
  c: float = 1e-3


def ct_grid_size(step: int, total_steps: int, cfg: CTConfig) -> int:
  """N(step): doubles from grid_start to grid_end in equal stages over training."""
  doublings = int(round(math.log2(cfg.grid_end / cfg.grid_start)))
  stage = min(int(step * (doublings + 1) / max(total_steps, 1)), doublings)
  return int(min(cfg.grid_start * 2 ** stage, cfg.grid_end))


def make_ct_loss(apply_fn: ApplyFn, cfg: CTConfig, *, num_classes: int = 0,
                 label_dropout: float = 0.1) -> LossFn:
  """Consistency training; `loss_fn(params, batch, rng, extra)` with `extra['grid']` an int32 N."""
  ecfg = EMFConfig(num_classes=num_classes, label_dropout=label_dropout)

  def loss_fn(params, batch, rng, extra):
    x1 = batch["x"]
    bsz = x1.shape[0]
    dim = math.prod(x1.shape[1:])
    huber_c = cfg.c_scale * math.sqrt(dim)
    n = extra["grid"].astype(x1.dtype)
    noise_rng, time_rng, label_rng = jax.random.split(rng, 3)
    x0 = jax.random.normal(noise_rng, x1.shape, x1.dtype)
    labels, _ = labels_for_training(label_rng, batch.get("y"), ecfg)
    i = jnp.floor(jax.random.uniform(time_rng, (bsz,), x1.dtype) * n)
    t_a, t_b = i / n, (i + 1) / n
    f_a = consistency_fn(apply_fn, params, interpolate(x0, x1, t_a), t_a, labels)
    f_b = jax.lax.stop_gradient(consistency_fn(apply_fn, jax.lax.stop_gradient(params), interpolate(x0, x1, t_b), t_b,
                                               labels))
    dist = jnp.sqrt(per_row_sq(f_a - f_b) + huber_c ** 2) - huber_c
    return jnp.mean(adaptive_weight(dist, cfg.p, cfg.c) * dist * n), {"dist": jnp.mean(dist), "grid": n}

  return loss_fn
