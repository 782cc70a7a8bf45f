"""The authors' CausalRM (`crm_authors`): each loss term on a hand-checked case, the reversal's sign,
mean-latent inference and the settings of their training script."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import causal_reward as crm
from jaxml import core
from jaxml.causal_reward import api, losses

DIM, D_C, D_N = 3, 2, 4
SMALL = {"dim": DIM, "trunk_hidden": 5, "d_c": D_C, "d_n": D_N, "dec_hidden": 6}


def _method(**over):
  return api.make_method({**crm.authors_config(), **SMALL, **over})


def _batch(lam: float = 1.0) -> dict:
  h_w = np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 1.0]], np.float32)
  h_l = np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 1.0]], np.float32)
  return {"h_w": h_w, "h_l": h_l, "grl_lambda": np.full(2, lam, np.float32)}


def _hand_params(method):
  """Encoder and decoder zeroed, so every latent mean / log-variance is its bias and h^ = 0; the
  variances e^-30 make the sampled latents equal their means to float precision."""
  params = method.init(jax.random.key(0), _batch())
  params = jax.tree.map(jnp.zeros_like, params)
  p = params["params"]
  p["mu_c"]["bias"] = jnp.array([1.0, -2.0])
  p["logvar_c"]["bias"] = jnp.full(D_C, -30.0)
  p["mu_n"]["bias"] = jnp.array([0.5, 0.0, 0.0, 0.0])
  p["logvar_n"]["bias"] = jnp.full(D_N, -30.0)
  p["reward_head"]["kernel"] = jnp.array([[0.3], [0.1]])
  p["adversary"]["kernel"] = jnp.full((D_N, 1), 0.2)
  return params


def test_kl_and_reconstruction_on_hand_cases():
  # KL(N(1, 1) || N(0, 1)) = 1/2; KL(N(-2, 2) || N(0, 1)) = (2 + 4 - 1 - log 2) / 2
  kl = losses.gaussian_kl(jnp.array([[1.0, -2.0]]), jnp.array([[0.0, np.log(2.0)]]))
  np.testing.assert_allclose(kl, 0.5 + (5.0 - np.log(2.0)) / 2, rtol=1e-6)
  # the authors' 0.5 (mse(h^_w, h_w) + mse(h^_l, h_l)), mse averaged over elements
  h_w, h_l = np.array([[1.0, 2.0]]), np.array([[0.0, 2.0]])
  rec = losses.reconstruction(jnp.asarray(np.concatenate([h_w, h_l])), jnp.zeros((2, 2)))
  np.testing.assert_allclose(rec, 0.5 * (np.mean(h_w ** 2) + np.mean(h_l ** 2)), rtol=1e-6)


@pytest.mark.slow
def test_every_term_and_the_total_on_a_hand_built_model():
  method = _method()
  params = _hand_params(method)
  batch = _batch()
  # Every response has the same latents, so both BT terms are log 2.
  loss, aux = method.loss_fn(params, batch, jax.random.key(1))
  h = np.concatenate([batch["h_w"], batch["h_l"]])
  # per dimension KL = (sigma^2 + mu^2 - 1 - log sigma^2) / 2 with log sigma^2 = -30
  kl_c = 0.5 * (1.0 - 1 + 30) + 0.5 * (4.0 - 1 + 30)
  kl_n = 0.5 * (0.25 - 1 + 30) + 3 * 0.5 * (0.0 - 1 + 30)
  rec = np.mean(np.sum(h ** 2, axis=1)) / DIM
  expected = {"l_bt": np.log(2.0), "l_adv": np.log(2.0), "l_rec": rec, "l_kl_c": kl_c, "l_kl_n": kl_n}
  for k, v in expected.items():
    np.testing.assert_allclose(aux[k], v, rtol=1e-5, err_msg=k)
  total = np.log(2.0) * (1 + 0.05) + 1e-3 * (rec + kl_c + kl_n)
  np.testing.assert_allclose(loss, total, rtol=1e-5)


@pytest.mark.slow
def test_reversal_flips_the_encoder_gradient_and_not_the_adversary_gradient():
  method = _method()
  params = method.init(jax.random.key(2), _batch())
  only_adv = {k: np.zeros(2, np.float32) for k in ("rec", "beta_c", "beta_n")} | {"adv_weight": np.ones(2, np.float32)}

  def grads(lam):
    batch = {**_batch(lam), "hp": only_adv}
    g = jax.grad(lambda p: method.loss_fn(p, batch, jax.random.key(3))[0])(params)["params"]
    # remove the BT reward term, which does not depend on lam
    g0 = jax.grad(lambda p: method.loss_fn(p, {**_batch(lam), "hp": {**only_adv, "adv_weight": np.zeros(2, np.float32)}},
                                           jax.random.key(3))[0])(params)["params"]
    return jax.tree.map(lambda a, b: a - b, g, g0)

  plus, minus = grads(1.0), grads(-1.0)
  np.testing.assert_allclose(plus["adversary"]["kernel"], minus["adversary"]["kernel"], rtol=1e-5)
  assert np.abs(plus["adversary"]["kernel"]).max() > 0
  np.testing.assert_allclose(plus["mu_n"]["kernel"], -minus["mu_n"]["kernel"], rtol=1e-5, atol=1e-8)
  assert np.abs(plus["mu_n"]["kernel"]).max() > 0
  # the causal branch never sees the adversary
  np.testing.assert_allclose(plus["mu_c"]["kernel"], 0.0, atol=1e-8)


def test_inference_reward_reads_the_mean_and_training_samples():
  cfg = {**crm.authors_config(), **SMALL}
  method, reward = api.make_method(cfg), api.make_reward_fn(cfg)
  params = method.init(jax.random.key(4), _batch())
  h = jnp.asarray(_batch()["h_w"])
  out = api._module(api.resolve(cfg)).apply(params, h, 0.0)
  np.testing.assert_allclose(reward(params, h), out["mu_c"] @ params["params"]["reward_head"]["kernel"][:, 0],
                             rtol=1e-5)
  sampled = api._module(api.resolve(cfg)).apply(params, h, 0.0, jax.random.key(5))["r"]
  assert not np.allclose(sampled, reward(params, h))


@pytest.mark.slow
def test_one_optimiser_group_and_finite_training():
  optim = {"name": "adam", "lr": 1e-2, "clip_norm": 1.0}
  trainer = crm.make_trainer({**crm.authors_config(), **SMALL}, optim)
  params = trainer.method.init(jax.random.key(6), _batch())
  structure = lambda opt: jax.tree_util.tree_structure(opt.init(params))  # noqa: E731
  assert structure(trainer.optimizer) == structure(core.make_optimizer(optim))
  assert structure(api.make_optimizer({**SMALL, "kind": "crm_u"}, optim)) != structure(core.make_optimizer(optim))
  rng = np.random.default_rng(0)
  data = {"h_w": rng.normal(size=(32, DIM)).astype(np.float32), "h_l": rng.normal(size=(32, DIM)).astype(np.float32)}
  out = crm.train(trainer, data, seed=0, epochs=2, batch_size=16)
  assert np.isfinite(out.train_metrics["loss"]) and out.train_metrics["lam"] == 1.0   # constant GRL strength


def test_authors_settings_are_their_script_defaults():
  cfg = api.resolve(crm.authors_config())
  assert (cfg["kind"], cfg["d_c"], cfg["d_n"]) == ("crm_authors", 128, 512)
  assert (cfg["rec"], cfg["adv_weight"], cfg["beta_c"], cfg["beta_n"]) == (1e-3, 0.05, 1e-3, 1e-3)
  assert (cfg["lam_max"], cfg["schedule"]) == (1.0, "constant")
