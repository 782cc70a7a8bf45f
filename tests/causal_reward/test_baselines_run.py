"""Every causal-reward baseline kind trains for a few steps in the default suite, with one property
each, on pairs whose preference is decided by an observable cue (the first embedding coordinate)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.causal_reward import api, baselines, losses

SMALL = {"dim": 8, "trunk_hidden": 16, "trunk_out": 8, "num_cues": 1, "odin_cues": (0,),
         "vib_latent": 4}
N = 128


def _cue_pairs():
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(N, 8)), rng.normal(size=(N, 8))
  swap = a[:, 0] < b[:, 0]
  h_w = np.where(swap[:, None], b, a).astype(np.float32)        # chosen = larger cue
  h_l = np.where(swap[:, None], a, b).astype(np.float32)
  return {"h_w": jnp.asarray(h_w), "h_l": jnp.asarray(h_l), "t_w": jnp.asarray(h_w[:, :1]),
          "t_l": jnp.asarray(h_l[:, :1])}


def _train(kind, steps=150, **over):
  cfg = {"kind": kind, **SMALL, **over}
  method, opt, batch = api.make_method(cfg), api.make_optimizer(cfg, {"name": "adam", "lr": 3e-3}), _cue_pairs()
  params = method.init(jax.random.key(0), batch)
  state = opt.init(params)

  @jax.jit
  def step(params, state, key):
    (loss, aux), g = jax.value_and_grad(method.loss_fn, has_aux=True)(params, batch, key)
    upd, state = opt.update(g, state, params)
    return jax.tree.map(lambda p, u: p + u, params, upd), state, loss, aux

  first = None
  for i in range(steps):
    params, state, loss, aux = step(params, state, jax.random.key(i))
    first = float(loss) if first is None else first
  return cfg, params, batch, first, float(loss), aux


def _cue_corr(r, batch):
  return float(losses.pearson(r, jnp.concatenate([batch["t_w"], batch["t_l"]])[:, 0]))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["vanilla", "odin", "covariate", "vib", "rrm"])
def test_every_baseline_trains_and_its_reward_fn_runs(kind):
  cfg, params, batch, first, last, _ = _train(kind)
  assert last < first
  reward = api.make_reward_fn(cfg)
  r_w, r_l = reward(params, batch["h_w"]), reward(params, batch["h_l"])
  assert r_w.shape == (N,) and bool(jnp.all(jnp.isfinite(r_w)))
  if kind in ("vanilla", "rrm", "vib"):
    assert float(losses.pairwise_accuracy(r_w, r_l)) > 0.8        # they learn the cue-driven preference


def test_odin_puts_the_cue_in_r_l_and_keeps_r_q_decorrelated():
  cfg, params, batch, *_ = _train("odin", steps=300)
  h = jnp.concatenate([batch["h_w"], batch["h_l"]])
  out = baselines.OdinRM(trunk_hidden=16, trunk_out=8).apply(params, h)
  assert _cue_corr(out["r_l"], batch) > 0.5
  assert abs(_cue_corr(out["r_q"], batch)) < 0.3
  np.testing.assert_allclose(api.make_reward_fn(cfg)(params, h), out["r_q"], rtol=1e-6)   # inference uses r_Q


def test_covariate_model_learns_a_positive_cue_weight_and_infers_without_it():
  cfg, params, batch, *_ = _train("covariate", steps=300)
  gamma = float(params["params"]["gamma"][0])
  assert gamma > 0.1
  h = jnp.concatenate([batch["h_w"], batch["h_l"]])
  t = jnp.concatenate([batch["t_w"], batch["t_l"]])
  r, r_adj = baselines.CovariateRM(num_cues=1, trunk_hidden=16, trunk_out=8).apply(params, h, t)
  np.testing.assert_allclose(r_adj - r, gamma * t[:, 0], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(api.make_reward_fn(cfg)(params, h), r, rtol=1e-6)


def test_vib_kl_shrinks_with_beta():
  *_, aux_small = _train("vib", vib_beta=1e-3)
  *_, aux_big = _train("vib", vib_beta=1.0)
  assert float(aux_big["kl"]) < 0.5 * float(aux_small["kl"])


def test_rrm_terms_known_values():
  r = jnp.zeros(4)
  np.testing.assert_allclose(baselines.rrm_loss_terms(r, r), 2 * np.log(2.0), rtol=1e-6)
  # Chosen responses far above every other response and all rejected equal: the beat term vanishes,
  # the tie term compares pair i-1's chosen (high) with pair i-2's rejected (low): large.
  r_w, r_l = jnp.full(4, 20.0), jnp.zeros(4)
  beat_only = 0.5 * (losses.bt_loss(r_w, jnp.roll(r_w, 1)) + losses.bt_loss(r_w, jnp.roll(r_l, 1)))
  tie = losses.bt_loss(jnp.roll(r_w, 1), jnp.roll(r_l, 2), jnp.full(4, 0.5))
  np.testing.assert_allclose(baselines.rrm_loss_terms(r_w, r_l), beat_only + tie, rtol=1e-6)
  np.testing.assert_allclose(tie, 10.0 + np.log1p(np.exp(-20.0)), rtol=1e-5)
