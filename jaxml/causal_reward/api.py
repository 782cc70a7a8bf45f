"""`make_method(config)`: every causal-reward model and baseline as a `core.Method`.

Batches (dicts of arrays, rows = preference pairs):
  h_w, h_l [B, D]      embeddings of the chosen / rejected response
  t_w, t_l [B, K]      observable cue proxies (e.g. standardised log length, sycophancy flag)
  label [B]            optional soft label P(w beats l) (default 1)
  grl_lambda [B]       GRL strength for this step, computed on the host from the step
                       (`model.grl_schedule`); constant over the batch, fed per row so it shards.

Config keys (a mapping; missing keys take the spec defaults in `DEFAULTS`).
"""

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from jaxml import core
from jaxml.causal_reward import baselines, losses
from jaxml.causal_reward.model import ADVERSARY_MODULES, FactoredRM

__all__ = ["KINDS", "FACTORED_KINDS", "DEFAULTS", "make_method", "make_reward_fn", "make_factor_fn",
           "make_optimizer", "resolve"]

FACTORED_KINDS = ("crm_u", "crm_n")
KINDS = FACTORED_KINDS + ("vanilla", "oracle", "odin", "covariate", "vib", "rrm")

DEFAULTS: dict[str, Any] = {
    "kind": "crm_u", "dim": 64, "num_cues": 2,
    "trunk_hidden": 128, "trunk_out": 64, "d_c": 16, "d_n": 16, "adv_hidden": 32, "dec_hidden": 128,
    "use_layer_norm": True,
    "adv_weight": 1.0,          # lambda_adv (0 = ablation without adversary)
    "adv_target": "pref",       # "pref" (BT on a) or "reward" (regress a on stop_grad(r)) ablation
    "rec": 0.1, "orth": 0.01, "beta_c": 0.0,
    "aux": 1.0, "adv2": 1.0, "dec": 1.0,    # CRM-N weights of L_aux, L_adv2, L_dec
    "lr": 1e-3, "weight_decay": 1e-4, "adv_lr": 1e-2, "clip_norm": 1.0,
    "odin_cues": (0,), "odin_weight": 1.0,
    "vib_beta": 1e-2, "vib_latent": 16,
    "rrm_weight": 1.0,
}


def resolve(config: Mapping[str, Any]) -> dict[str, Any]:
  """Spec defaults overridden by `config` (a dict or ConfigDict); unknown kinds raise."""
  cfg = dict(DEFAULTS)
  cfg.update({k: v for k, v in dict(config).items()})
  if cfg["kind"] not in KINDS:
    raise ValueError(f"unknown causal_reward kind {cfg['kind']!r}; expected one of {KINDS}")
  return cfg


def _module(cfg: Mapping[str, Any]):
  kind = cfg["kind"]
  trunk = {"trunk_hidden": cfg["trunk_hidden"], "trunk_out": cfg["trunk_out"]}
  if kind in FACTORED_KINDS:
    return FactoredRM(dim=cfg["dim"], d_c=cfg["d_c"], d_n=cfg["d_n"], adv_hidden=cfg["adv_hidden"],
                      dec_hidden=cfg["dec_hidden"], num_cues=cfg["num_cues"] if kind == "crm_n" else 0,
                      use_layer_norm=cfg["use_layer_norm"], stochastic_c=cfg["beta_c"] > 0, **trunk)
  if kind == "odin":
    return baselines.OdinRM(**trunk)
  if kind == "covariate":
    return baselines.CovariateRM(num_cues=cfg["num_cues"], **trunk)
  if kind == "vib":
    return baselines.VibRM(latent=cfg["vib_latent"], **trunk)
  return baselines.RewardMLP(**trunk)


def make_reward_fn(config: Mapping[str, Any]) -> Callable[[Any, jax.Array], jax.Array]:
  """Inference reward `fn(params, h [N, D]) -> r [N]` (adversaries, decoders, cue experts dropped)."""
  cfg = resolve(config)
  module, kind = _module(cfg), cfg["kind"]

  def reward(params, h):
    if kind in FACTORED_KINDS:
      return module.apply(params, h, 0.0)["r"]
    if kind == "odin":
      return module.apply(params, h)["r_q"]
    if kind in ("covariate", "vib"):
      return module.apply(params, h)[0]
    return module.apply(params, h)

  return reward


def make_factor_fn(config: Mapping[str, Any]) -> Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]:
  """`fn(params, h) -> (z_c, z_n)` for the factored kinds (deterministic, z_c at its mean)."""
  cfg = resolve(config)
  if cfg["kind"] not in FACTORED_KINDS:
    raise ValueError(f"kind {cfg['kind']!r} has no factors")
  module = _module(cfg)

  def factors(params, h):
    out = module.apply(params, h, 0.0)
    return out["z_c"], out["z_n"]

  return factors


def _pairs(batch):
  return batch["h_w"], batch["h_l"], batch.get("label")


def _factored_loss(module, cfg):
  nuisance = cfg["kind"] == "crm_n"

  def loss_fn(params, batch, rng):
    h_w, h_l, label = _pairs(batch)
    b = h_w.shape[0]
    h = jnp.concatenate([h_w, h_l], axis=0)
    lam = jnp.mean(batch["grl_lambda"]) if "grl_lambda" in batch else jnp.zeros((), h.dtype)
    out = module.apply(params, h, lam, rng if cfg["beta_c"] > 0 else None)
    r, a = out["r"], out["a"]
    l_bt = losses.bt_loss(r[:b], r[b:], label)
    if cfg["adv_target"] == "pref":
      l_adv = losses.bt_loss(a[:b], a[b:], label)
    elif cfg["adv_target"] == "reward":
      l_adv = 0.5 * jnp.mean((a - jax.lax.stop_gradient(r)) ** 2)
    else:
      raise ValueError(f"unknown adv_target {cfg['adv_target']!r}")
    l_rec = losses.reconstruction(h, out["h_hat"])
    l_orth = losses.cross_cov_fro2(out["z_c"], out["z_n"])
    loss = l_bt + cfg["adv_weight"] * l_adv + cfg["rec"] * l_rec + cfg["orth"] * l_orth
    aux = {"l_bt": l_bt, "l_adv": l_adv, "l_rec": l_rec, "l_orth": l_orth, "lam": lam,
           "acc": losses.pairwise_accuracy(r[:b], r[b:], label)}
    if cfg["beta_c"] > 0:
      l_min = losses.gaussian_kl(out["mu_c"], out["logvar_c"])
      loss = loss + cfg["beta_c"] * l_min
      aux["l_min"] = l_min
    if nuisance:
      t = jnp.concatenate([batch["t_w"], batch["t_l"]], axis=0)
      l_aux = 0.5 * jnp.mean((out["t_aux"] - t) ** 2)
      l_adv2 = 0.5 * jnp.mean((out["t_adv"] - t) ** 2)
      l_dec = sum(jnp.abs(losses.pearson(r, t[:, k])) for k in range(t.shape[1]))
      loss = loss + cfg["aux"] * l_aux + cfg["adv2"] * l_adv2 + cfg["dec"] * l_dec
      aux.update(l_aux=l_aux, l_adv2=l_adv2, l_dec=l_dec)
    return loss, aux

  return loss_fn


def _baseline_loss(module, cfg):
  kind = cfg["kind"]

  def loss_fn(params, batch, rng):
    h_w, h_l, label = _pairs(batch)
    b = h_w.shape[0]
    h = jnp.concatenate([h_w, h_l], axis=0)
    aux: dict[str, jax.Array] = {}
    if kind == "odin":
      out = module.apply(params, h)
      t = jnp.concatenate([batch["t_w"], batch["t_l"]], axis=0)
      total = out["r_q"] + out["r_l"]
      l_bt = losses.bt_loss(total[:b], total[b:], label)
      pen = baselines.odin_penalty(out["r_q"], out["r_l"], t, out["w_q"], out["w_l"], tuple(cfg["odin_cues"]))
      loss, r = l_bt + cfg["odin_weight"] * pen, out["r_q"]
      aux["odin_penalty"] = pen
    elif kind == "covariate":
      t = jnp.concatenate([batch["t_w"], batch["t_l"]], axis=0)
      r, r_adj = module.apply(params, h, t)
      l_bt = losses.bt_loss(r_adj[:b], r_adj[b:], label)
      loss = l_bt
    elif kind == "vib":
      r, mu, logvar = module.apply(params, h, rng)
      l_bt = losses.bt_loss(r[:b], r[b:], label)
      kl = losses.gaussian_kl(mu, logvar)
      loss = l_bt + cfg["vib_beta"] * kl
      aux["kl"] = kl
    else:
      r = module.apply(params, h)
      l_bt = losses.bt_loss(r[:b], r[b:], label)
      loss = l_bt
      if kind == "rrm":
        l_rrm = baselines.rrm_loss_terms(r[:b], r[b:])
        loss = loss + cfg["rrm_weight"] * l_rrm
        aux["l_rrm"] = l_rrm
    aux.update(l_bt=l_bt, acc=losses.pairwise_accuracy(r[:b], r[b:], label))
    return loss, aux

  return loss_fn


def make_method(config: Mapping[str, Any]) -> core.Method:
  """Returns `core.Method(init, loss_fn, eval_fn)` for `config["kind"]` (see `KINDS`).

  init(rng, example_batch) -> params; eval_fn(params, batch) -> {"acc", "bt"} on the batch's
  pairs using the inference reward.
  """
  cfg = resolve(config)
  module = _module(cfg)
  reward = make_reward_fn(cfg)

  def init(rng, example_batch):
    h = example_batch["h_w"][:2]
    if cfg["kind"] in FACTORED_KINDS:
      return module.init(rng, h, 0.0)
    if cfg["kind"] == "covariate":
      return module.init(rng, h, jnp.zeros((h.shape[0], cfg["num_cues"]), h.dtype))
    return module.init(rng, h)

  loss_fn = _factored_loss(module, cfg) if cfg["kind"] in FACTORED_KINDS else _baseline_loss(module, cfg)

  def eval_fn(params, batch):
    r_w, r_l = reward(params, batch["h_w"]), reward(params, batch["h_l"])
    label = batch.get("label")
    return {"acc": losses.pairwise_accuracy(r_w, r_l, label), "bt": losses.bt_loss(r_w, r_l, label)}

  return core.Method(init=init, loss_fn=loss_fn, eval_fn=eval_fn)


def make_optimizer(config: Mapping[str, Any], total_steps: int = 0) -> optax.GradientTransformation:
  """AdamW(lr, wd) after global-norm clipping; for factored kinds the adversary heads form a
  second group with Adam(adv_lr) after its own clipping (`core.multi_group`)."""
  cfg = resolve(config)
  del total_steps  # constant rates, as in the spec
  clip = float(cfg["clip_norm"])
  main = optax.chain(optax.clip_by_global_norm(clip), optax.adamw(cfg["lr"], weight_decay=cfg["weight_decay"]))
  if cfg["kind"] not in FACTORED_KINDS:
    return main
  adversary = optax.chain(optax.clip_by_global_norm(clip), optax.adam(cfg["adv_lr"]))
  pattern = r"(^|/)(" + "|".join(ADVERSARY_MODULES) + r")(/|$)"
  return core.multi_group({"main": main, "adversary": adversary},
                          lambda params: core.label_by_path(params, [(pattern, "adversary")], "main"))
