"""Gradient structure of the causal reward model losses: reversal layers and the stopped reward.

* the adversary on z_n (CRM-U/N) and the second adversary on z_c (CRM-N) pass through a
  gradient-reversal layer: the λ-dependent part of the gradient on the projection that feeds
  them is exactly −λ · weight · (the plain gradient of that adversary loss), and the adversaries'
  own parameters see no λ at all;
* with `adv_target="reward"` the adversary regresses on sg(r): the reward head's gradient does
  not depend on the adversary weight.
Removing a reversal or the stop-gradient makes these tests fail.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.causal_reward import api, losses
from jaxml.causal_reward.model import FactoredRM

SMALL = {"dim": 6, "trunk_hidden": 8, "trunk_out": 8, "d_c": 4, "d_n": 4, "adv_hidden": 5, "dec_hidden": 7,
         "num_cues": 2}
B = 6


def _batch(lam):
  rng = np.random.default_rng(0)
  f = lambda *s: jnp.asarray(rng.normal(size=s), jnp.float32)
  return {"h_w": f(B, 6), "h_l": f(B, 6), "t_w": f(B, 2), "t_l": f(B, 2), "grl_lambda": jnp.full((B,), lam)}


def _grads(cfg, params, lam):
  method = api.make_method(cfg)
  return jax.grad(lambda p: method.loss_fn(p, _batch(lam), jax.random.key(0))[0])(params)


def _module(cfg):
  return FactoredRM(dim=cfg["dim"], trunk_hidden=cfg["trunk_hidden"], trunk_out=cfg["trunk_out"], d_c=cfg["d_c"],
                    d_n=cfg["d_n"], adv_hidden=cfg["adv_hidden"], dec_hidden=cfg["dec_hidden"],
                    num_cues=cfg["num_cues"] if cfg["kind"] == "crm_n" else 0)


def _close(a, b):
  for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=2e-4, atol=1e-6)


def _plain_adversary_grads(cfg, params):
  """Gradients of the two adversary losses with the reversal turned into the identity (λ = −1)."""
  module, batch = _module(cfg), _batch(0.0)
  h = jnp.concatenate([batch["h_w"], batch["h_l"]])
  t = jnp.concatenate([batch["t_w"], batch["t_l"]])

  def adv(p):
    a = module.apply(p, h, -1.0)["a"]
    return losses.bt_loss(a[:B], a[B:])

  def adv2(p):
    return 0.5 * jnp.mean((module.apply(p, h, -1.0)["t_adv"] - t) ** 2)

  return jax.grad(adv)(params), jax.grad(adv2)(params)


@pytest.mark.slow
def test_both_adversaries_are_reversed_with_strength_lambda():
  cfg = {"kind": "crm_n", **SMALL, "adv_weight": 0.7, "adv2": 1.3}
  params = api.make_method(cfg).init(jax.random.key(1), _batch(0.0))
  g0, g = _grads(cfg, params, 0.0), _grads(cfg, params, 0.5)
  plain, plain2 = _plain_adversary_grads(cfg, params)
  p0, p, pa, pa2 = g0["params"], g["params"], plain["params"], plain2["params"]
  # z_n's projection: only the first adversary depends on λ.
  _close(jax.tree.map(lambda x, y: x - y, p["proj_n"], p0["proj_n"]),
         jax.tree.map(lambda x: -0.5 * 0.7 * x, pa["proj_n"]))
  # z_c's projection: only the second adversary depends on λ.
  _close(jax.tree.map(lambda x, y: x - y, p["proj_c"], p0["proj_c"]),
         jax.tree.map(lambda x: -0.5 * 1.3 * x, pa2["proj_c"]))
  # The adversaries themselves are trained normally (no λ), and their gradient is not zero.
  _close(p["adversary"], p0["adversary"])
  _close(p["adversary2"], p0["adversary2"])
  assert float(jnp.max(jnp.abs(pa["proj_n"]["kernel"]))) > 1e-4
  assert float(jnp.max(jnp.abs(pa2["proj_c"]["kernel"]))) > 1e-4


def test_reward_target_adversary_does_not_train_the_reward_head():
  base = {"kind": "crm_u", **SMALL, "adv_target": "reward"}
  params = api.make_method(base).init(jax.random.key(2), _batch(0.0))
  g_off = _grads({**base, "adv_weight": 0.0}, params, 0.3)["params"]
  g_on = _grads({**base, "adv_weight": 5.0}, params, 0.3)["params"]
  _close(g_on["reward_head"], g_off["reward_head"])
  # ... while the adversary term does change the gradient upstream of z_n.
  diff = jnp.max(jnp.abs(g_on["proj_n"]["kernel"] - g_off["proj_n"]["kernel"]))
  assert float(diff) > 1e-4
