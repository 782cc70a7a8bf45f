"""Factored causal reward model: trunk -> (z_c, z_n); reward on z_c, adversary on GRL(z_n).

    u   = Trunk(h)                          MLP (hidden, GELU) -> trunk_out
    z_c = P_c u,  z_n = LN(P_n u)           parameter-free layer norm on z_n (`norm_n`; on z_c, `norm_c`,
                                            an ablation: it bounds the reward, so best-of-N saturates)
    r   = w_r^T z_c + b_r                   reward head (causal factor only)
    a   = Adv(GRL_lam(z_n))                 adversary, MLP adv_hidden -> 1
    h^  = Dec([z_c, z_n])                   decoder, MLP dec_hidden -> D
  CRM-N adds  g(z_n) -> t  (auxiliary) and  b(GRL_lam(z_c)) -> t  (second adversary); with `adv_condition`
  the adversary reads [GRL(z_n), t] (rewarded only for preference information beyond the cues).
GRL is identity forward, -lam · cotangent backward; lam is an array, so changing it never recompiles."""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxml.nn.mlp import MLP

__all__ = ["grad_reverse", "grl_schedule", "layer_norm", "adversary_mlp", "Trunk", "FactoredRM", "VaeFactoredRM",
           "ADVERSARY_MODULES"]

# Top-level submodule names that form the adversary optimiser group.
ADVERSARY_MODULES = ("adversary", "adversary2")


@jax.custom_vjp
def _grad_reverse(x: jax.Array, lam: jax.Array) -> jax.Array:
  return x


def _gr_fwd(x, lam):
  return x, lam


def _gr_bwd(lam, g):
  return (-lam * g).astype(g.dtype), jnp.zeros_like(lam)


_grad_reverse.defvjp(_gr_fwd, _gr_bwd)


def grad_reverse(x: jax.Array, lam: jax.Array | float) -> jax.Array:
  """GRL_lam(x) = x forward; -lam * cotangent backward (zero cotangent for lam, traced: no recompiles)."""
  return _grad_reverse(x, jnp.asarray(lam, dtype=x.dtype))


def grl_schedule(step: Any, total_steps: int, *, lam_max: float = 1.0, gamma: float = 10.0,
                 kind: str = "dann") -> Any:
  """DANN ramp lam(p) = lam_max (2 / (1 + exp(-gamma p)) - 1), p = step / total_steps, elementwise on the host
  (numpy arrays or numbers), fed to the step as data; `kind="constant"` returns lam_max."""
  if kind == "constant":
    return np.full(np.shape(step), lam_max, np.float32) if np.ndim(step) else float(lam_max)
  if kind != "dann":
    raise ValueError(f"unknown GRL schedule {kind!r}; expected 'dann' or 'constant'")
  p = np.clip(np.asarray(step, np.float64) / max(int(total_steps), 1), 0.0, 1.0)
  lam = lam_max * (2.0 / (1.0 + np.exp(-gamma * p)) - 1.0)
  return lam.astype(np.float32) if np.ndim(lam) else float(lam)


def layer_norm(x: jax.Array, eps: float = 1e-5) -> jax.Array:
  """Parameter-free layer norm over the last axis (stops scale inflation against the adversary)."""
  mu = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.var(x, axis=-1, keepdims=True)
  return (x - mu) * jax.lax.rsqrt(var + eps)


def adversary_mlp(hidden: int, out: int = 1, name: str | None = None) -> nn.Module:
  """The adversary's MLP (hidden GELU -> out); also applied on its own by the alternating update."""
  return MLP((hidden, out), activation=nn.gelu, name=name)


class Trunk(nn.Module):
  """Shared trunk u = Dense(out)(GELU(Dense(hidden)(h))): [N, D] -> [N, out]."""

  hidden: int = 128
  out: int = 64

  @nn.compact
  def __call__(self, h: jax.Array) -> jax.Array:
    return MLP((self.hidden, self.out), activation=nn.gelu, name="mlp")(h)


class FactoredRM(nn.Module):
  """The factored reward model. `__call__(h [N, D], lam) -> dict` with
  r [N], a [N], z_c [N, d_c], z_n [N, d_n], h_hat [N, D], and for num_cues > 0 also
  t_aux [N, K] (from z_n) and t_adv [N, K] (from GRL(z_c)). With `stochastic_c` (VIB-form
  minimality, beta_c > 0) also mu_c, logvar_c; z_c is sampled when `rng` is given."""

  dim: int
  trunk_hidden: int = 128
  trunk_out: int = 64
  d_c: int = 16
  d_n: int = 16
  adv_hidden: int = 32
  dec_hidden: int = 128
  num_cues: int = 0
  norm_c: bool = False
  norm_n: bool = True
  stochastic_c: bool = False
  adv_condition: bool = False

  @nn.compact
  def __call__(self, h: jax.Array, lam: jax.Array | float = 0.0, rng: jax.Array | None = None,
               t: jax.Array | None = None) -> dict[str, jax.Array]:
    u = Trunk(self.trunk_hidden, self.trunk_out, name="trunk")(h)
    out: dict[str, jax.Array] = {}
    if self.stochastic_c:
      stats = nn.Dense(2 * self.d_c, name="proj_c")(u)
      mu, logvar = jnp.split(stats, 2, axis=-1)
      pre_c = mu if rng is None else mu + jnp.exp(0.5 * logvar) * jax.random.normal(rng, mu.shape, mu.dtype)
      out.update(mu_c=mu, logvar_c=logvar)
    else:
      pre_c = nn.Dense(self.d_c, name="proj_c")(u)
    z_c = layer_norm(pre_c) if self.norm_c else pre_c
    z_n = nn.Dense(self.d_n, name="proj_n")(u)
    z_n = layer_norm(z_n) if self.norm_n else z_n
    r = nn.Dense(1, name="reward_head")(z_c)[..., 0]
    adv_in = grad_reverse(z_n, lam)
    if self.adv_condition and self.num_cues > 0:   # the adversary also sees the cues, un-reversed
      t = jnp.zeros((h.shape[0], self.num_cues), h.dtype) if t is None else t
      adv_in = jnp.concatenate([adv_in, t], axis=-1)
    a = adversary_mlp(self.adv_hidden, name="adversary")(adv_in)[..., 0]
    h_hat = MLP((self.dec_hidden, self.dim), activation=nn.gelu, name="decoder")(
        jnp.concatenate([z_c, z_n], axis=-1))
    out.update(r=r, a=a, z_c=z_c, z_n=z_n, h_hat=h_hat)
    if self.num_cues > 0:
      out["t_aux"] = MLP((self.adv_hidden, self.num_cues), activation=nn.gelu, name="aux")(z_n)
      out["t_adv"] = MLP((self.adv_hidden, self.num_cues), activation=nn.gelu, name="adversary2")(
          grad_reverse(z_c, lam))
    return out


class VaeFactoredRM(nn.Module):
  """The authors' CausalRM head on a frozen embedding (`crm_authors`):
      s = ReLU(W2 ReLU(W1 h)); z_c ~ N(mu_c(s), exp(logvar_c(s))), z_n ~ N(mu_n(s), exp(logvar_n(s)))
      r = w_r^T z_c (mu_c at inference),  a = w_a^T GRL_lam(z_n),  h^ = Dec([z_c, z_n]);
  `__call__(h [N, D], lam, rng)` samples the latents when `rng` is given, else uses the means; the linear
  heads start at N(0, 1 / (d + 1)) weights, as in the authors' initialisation."""

  dim: int
  hidden: int = 128
  d_c: int = 128
  d_n: int = 512
  dec_hidden: int = 128

  @nn.compact
  def __call__(self, h: jax.Array, lam: jax.Array | float = 0.0, rng: jax.Array | None = None,
               t: jax.Array | None = None) -> dict[str, jax.Array]:
    del t   # the authors' model sees no cue labels
    s = nn.relu(MLP((self.hidden, self.hidden), activation=nn.relu, name="encoder")(h))
    stats = {}
    for name, d in (("c", self.d_c), ("n", self.d_n)):
      stats["mu_" + name] = nn.Dense(d, name=f"mu_{name}")(s)
      stats["logvar_" + name] = nn.Dense(d, name=f"logvar_{name}")(s)
    if rng is None:
      z_c, z_n = stats["mu_c"], stats["mu_n"]
    else:
      rng_c, rng_n = jax.random.split(rng)
      z_c, z_n = (stats["mu_" + k] + jnp.exp(0.5 * stats["logvar_" + k]) * jax.random.normal(r, stats["mu_" + k].shape)
                  for k, r in (("c", rng_c), ("n", rng_n)))
    head = lambda d, name: nn.Dense(1, use_bias=False, kernel_init=nn.initializers.normal(1.0 / (d + 1)), name=name)  # noqa: E731
    r = head(self.d_c, "reward_head")(z_c)[..., 0]
    a = head(self.d_n, "adversary")(grad_reverse(z_n, lam))[..., 0]
    h_hat = MLP((self.dec_hidden, self.dec_hidden, self.dim), activation=nn.relu, name="decoder")(
        jnp.concatenate([z_c, z_n], axis=-1))
    return {"r": r, "a": a, "z_c": z_c, "z_n": z_n, "h_hat": h_hat, **stats}
