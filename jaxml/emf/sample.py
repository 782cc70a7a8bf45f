"""Few-step samplers on a uniform grid 0 = tau_0 < ... < tau_K = 1 (NFE = K), all `lax.fori_loop`.

- flow-map u: `x <- x + (tau' - tau) u(x, tau, tau')`; x1: `x <- ((1 - tau') x + (tau' - tau) xh) / (1 - tau)`.
- flow: Euler `x <- x + (tau' - tau) v(x, tau, tau)`.
- consistency: `f(x, t) = x + (1 - t) F(x, t, 1)`; step k re-noises to t_k = t_mid + (k - 1)(1 - t_mid)/(K - 1).
`num_steps` may be traced (one compiled sampler serves every K)."""

from typing import Any

import jax
import jax.numpy as jnp

from jaxml.emf.model import ApplyFn

__all__ = ["sample_flow_map", "sample_flow", "sample_consistency", "consistency_fn"]


def _grid(k: jax.Array, num_steps: int | jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
  n = jnp.asarray(num_steps).astype(dtype)
  return k.astype(dtype) / n, (k + 1).astype(dtype) / n


def _full(v: jax.Array, x: jax.Array) -> jax.Array:
  return jnp.full((x.shape[0],), v, x.dtype)


def sample_flow_map(apply_fn: ApplyFn, params: Any, x0: jax.Array, num_steps: int,
                    label: jax.Array | None = None, param: str = "u") -> jax.Array:
  """Flow-map sampler (EMF, MeanFlow, shortcut: all predict the average velocity or endpoint)."""

  def body(k, x):
    t0, t1 = _grid(k, num_steps, x.dtype)
    out = apply_fn(params, x, _full(t0, x), _full(t1, x), label)
    if param == "u":
      return x + (t1 - t0) * out
    return ((1 - t1) * x + (t1 - t0) * out) / (1 - t0)

  return jax.lax.fori_loop(0, num_steps, body, x0)


def sample_flow(apply_fn: ApplyFn, params: Any, x0: jax.Array, num_steps: int,
                label: jax.Array | None = None) -> jax.Array:
  """Euler integration of the instantaneous field: the u flow-map sampler with the network at r = t."""
  at_t = lambda p, x, t, r, lab: apply_fn(p, x, t, t, lab)  # noqa: E731
  return sample_flow_map(at_t, params, x0, num_steps, label)


def consistency_fn(apply_fn: ApplyFn, params: Any, x: jax.Array, t: jax.Array,
                   label: jax.Array | None = None) -> jax.Array:
  """f(x, t) = x + (1 - t) F(x, t, r = 1): equals x at t = 1 by construction."""
  scale = (1 - t).reshape(t.shape + (1,) * (x.ndim - 1))
  return x + scale * apply_fn(params, x, t, jnp.ones_like(t), label)


def _renoise_time(k: jax.Array, num_steps: int | jax.Array, t_mid: float | jax.Array | None, dtype) -> jax.Array:
  """t_k = t_mid + (k - 1)(1 - t_mid)/(K - 1) for k = 1 .. K - 1; t_mid = None is 1/K (then t_k = k/K)."""
  n = jnp.asarray(num_steps).astype(dtype)
  first = 1 / n if t_mid is None else jnp.asarray(t_mid, dtype)
  return first + (k - 1).astype(dtype) * (1 - first) / jnp.maximum(n - 1, 1)


def sample_consistency(apply_fn: ApplyFn, params: Any, x0: jax.Array, num_steps: int,
                       label: jax.Array | None = None, rng: jax.Array | None = None,
                       t_mid: float | jax.Array | None = None) -> jax.Array:
  """One step f(x0, 0); step k >= 1 re-noises the estimate x to t_k (`_renoise_time`) along a fresh
  path, x_t = (1 - t_k) z + t_k x with z ~ N(0, I) (the training path), and applies f(x_t, t_k).
  t_mid: the first re-noise time (None: 1/K, the uniform grid t_k = k/K)."""
  if rng is None:
    raise ValueError("consistency sampling needs an rng (re-noising after the first step)")
  x = consistency_fn(apply_fn, params, x0, jnp.zeros((x0.shape[0],), x0.dtype), label)

  def body(k, x):
    t = _renoise_time(k, num_steps, t_mid, x.dtype)
    z = jax.random.normal(jax.random.fold_in(rng, k), x.shape, x.dtype)
    xt = (1 - t) * z + t * x
    return consistency_fn(apply_fn, params, xt, _full(t, x), label)

  return jax.lax.fori_loop(1, num_steps, body, x)
