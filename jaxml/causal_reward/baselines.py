"""Baseline reward models on the same inputs and trunk as the factored model (spec section 5).

    B0 vanilla   BT on r = Dense(1)(Trunk(h))
    B1 ODIN      r_Q, r_L linear heads on Trunk(h); BT(r_Q + r_L) - rho(r_L, t_k) + |rho(r_Q, t_k)|
                 + |w_Q^T w_L|; inference with r_Q (Chen et al., ICML 2024)
    B2 covariate BT on r(h) + gamma^T t, gamma learned; inference with r(h) (product of experts)
    B3 VIB       z ~ N(mu(h), diag s(h)^2), r = Dense(1)(z); BT + beta KL(q || N(0, I)); inference at mu
    B4 RRM       BT plus in-batch augmented pairs (approximate re-implementation, see `rrm_loss_terms`)
    B5 oracle    B0 trained on unbiased labels (a data choice, made by the caller)
    B6 cue rules `cue_rule_accuracy` (numpy)"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxml.causal_reward import losses
from jaxml.causal_reward.model import Trunk

__all__ = ["RewardMLP", "CovariateRM", "OdinRM", "VibRM", "odin_penalty", "rrm_loss_terms",
           "cue_rule_accuracy"]


class RewardMLP(nn.Module):
  """r = Dense(1)(Trunk(h)): [N, D] -> [N]. Also the post-hoc MLP probe on frozen factors."""

  trunk_hidden: int = 128
  trunk_out: int = 64

  @nn.compact
  def __call__(self, h: jax.Array) -> jax.Array:
    u = Trunk(self.trunk_hidden, self.trunk_out, name="trunk")(h)
    return nn.Dense(1, name="reward_head")(u)[..., 0]


class CovariateRM(nn.Module):
  """Returns (r [N], r + gamma^T t [N]); gamma [K] learned, used only in training."""

  num_cues: int
  trunk_hidden: int = 128
  trunk_out: int = 64

  @nn.compact
  def __call__(self, h: jax.Array, t: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    r = RewardMLP(self.trunk_hidden, self.trunk_out, name="rm")(h)
    gamma = self.param("gamma", nn.initializers.zeros, (self.num_cues,))
    return r, r if t is None else r + t @ gamma


class OdinRM(nn.Module):
  """Returns dict r_q [N], r_l [N] (two linear heads on the shared trunk) and the heads' weights."""

  trunk_hidden: int = 128
  trunk_out: int = 64

  @nn.compact
  def __call__(self, h: jax.Array) -> dict[str, jax.Array]:
    u = Trunk(self.trunk_hidden, self.trunk_out, name="trunk")(h)
    head_q, head_l = nn.Dense(1, name="head_q"), nn.Dense(1, name="head_l")
    r_q, r_l = head_q(u)[..., 0], head_l(u)[..., 0]
    return {"r_q": r_q, "r_l": r_l, "w_q": head_q.variables["params"]["kernel"][:, 0],
            "w_l": head_l.variables["params"]["kernel"][:, 0]}


class VibRM(nn.Module):
  """InfoRM-style variational bottleneck: returns (r [N], mu [N, k], logvar [N, k]); z is sampled when `rng` is
  given (training), else z = mu (inference)."""

  latent: int = 16
  trunk_hidden: int = 128
  trunk_out: int = 64

  @nn.compact
  def __call__(self, h: jax.Array, rng: jax.Array | None = None):
    u = Trunk(self.trunk_hidden, self.trunk_out, name="trunk")(h)
    mu, logvar = jnp.split(nn.Dense(2 * self.latent, name="encoder")(u), 2, axis=-1)
    z = mu if rng is None else mu + jnp.exp(0.5 * logvar) * jax.random.normal(rng, mu.shape, mu.dtype)
    return nn.Dense(1, name="reward_head")(z)[..., 0], mu, logvar


def odin_penalty(r_q: jax.Array, r_l: jax.Array, t: jax.Array, w_q: jax.Array, w_l: jax.Array,
                 cue_columns: tuple[int, ...]) -> jax.Array:
  """sum_k [-rho(r_L, t_k) + |rho(r_Q, t_k)|] + |w_Q^T w_L| over the chosen cue columns of t [N, K]."""
  pen = jnp.abs(jnp.dot(w_q, w_l))
  for k in cue_columns:
    pen = pen - losses.pearson(r_l, t[:, k]) + jnp.abs(losses.pearson(r_q, t[:, k]))
  return pen


def rrm_loss_terms(r_w: jax.Array, r_l: jax.Array) -> jax.Array:
  """RRM-style augmentation inside a batch (approximate; Liu et al. 2024): pair i's chosen beats pair
  i+1's responses (label 1); two other prompts' responses tie (label 1/2). Rolled rewards, no extra passes."""
  off_w, off_l = jnp.roll(r_w, 1), jnp.roll(r_l, 1)
  beat = 0.5 * (losses.bt_loss(r_w, off_w) + losses.bt_loss(r_w, off_l))
  tie = losses.bt_loss(off_w, jnp.roll(r_l, 2), jnp.full_like(r_w, 0.5))
  return beat + tie


def cue_rule_accuracy(t_w: np.ndarray, t_l: np.ndarray, label: np.ndarray | None = None) -> float:
  """Accuracy of 'pick the response with the larger cue' (ties count 1/2). t_w, t_l: [N]."""
  d = np.asarray(t_w, np.float64) - np.asarray(t_l, np.float64)
  correct = np.where(d > 0, 1.0, np.where(d < 0, 0.0, 0.5))
  if label is not None:
    correct = np.where(np.asarray(label) >= 0.5, correct, 1.0 - correct)
  return float(np.mean(correct))
