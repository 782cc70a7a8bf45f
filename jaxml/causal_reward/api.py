"""`make_method(config)`: every causal-reward model and baseline as a `core.Method`.

Batches (rows = preference pairs): h_w, h_l [B, D] embeddings of chosen / rejected; t_w, t_l [B, K] cue
proxies; label [B] optional P(w beats l); grl_lambda [B] this step's GRL strength (`grl_schedule`);
hp optional {name: [B]} loss weights of `WEIGHTS`, fed as arrays so variants share one compiled step.
Missing config keys take `default_config()`'s values."""

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from jaxml import core
from jaxml.causal_reward import baselines, losses
from jaxml.causal_reward.defaults import authors_config, default_config
from jaxml.causal_reward.model import ADVERSARY_MODULES, FactoredRM, VaeFactoredRM, adversary_mlp

__all__ = ["KINDS", "FACTORED_KINDS", "WEIGHTS", "ADV_MODES", "default_config", "authors_config", "resolve",
           "make_method", "make_reward_fn", "make_factor_fn", "make_optimizer"]

FACTORED_KINDS = ("crm_u", "crm_n", "crm_authors")
KINDS = FACTORED_KINDS + ("vanilla", "oracle", "odin", "covariate", "vib", "rrm")
ADV_MODES = ("grl", "alternating")
# Loss weights that enter the jitted step as arrays (`batch["hp"]`).
WEIGHTS = ("adv_weight", "rec", "orth", "beta_c", "beta_n", "aux", "adv2", "dec", "odin_weight", "vib_beta", "rrm_weight")


def resolve(config: Mapping[str, Any]) -> dict[str, Any]:
  """`default_config()` overridden by `config` (dict or ConfigDict); unknown keys or kinds raise."""
  cfg = default_config()
  given = dict(config.items()) if hasattr(config, "items") else dict(config)
  core.reject_unknown(given, sorted(cfg), "causal_reward config")
  cfg.update(given)
  for key, allowed in (("kind", KINDS), ("adv_mode", ADV_MODES), ("adv_target", ("pref", "reward"))):
    if cfg[key] not in allowed:
      raise ValueError(f"unknown causal_reward {key} {cfg[key]!r}; expected one of {allowed}")
  return cfg


def _module(cfg: Mapping[str, Any]):
  kind = cfg["kind"]
  trunk = {"trunk_hidden": cfg["trunk_hidden"], "trunk_out": cfg["trunk_out"]}
  if kind == "crm_authors":
    return VaeFactoredRM(dim=cfg["dim"], hidden=cfg["trunk_hidden"], d_c=cfg["d_c"], d_n=cfg["d_n"],
                         dec_hidden=cfg["dec_hidden"])
  if kind in FACTORED_KINDS:
    return FactoredRM(dim=cfg["dim"], d_c=cfg["d_c"], d_n=cfg["d_n"], adv_hidden=cfg["adv_hidden"],
                      dec_hidden=cfg["dec_hidden"], num_cues=cfg["num_cues"] if kind == "crm_n" else 0,
                      norm_c=bool(cfg["norm_c"]), norm_n=bool(cfg["norm_n"]), stochastic_c=cfg["beta_c"] > 0,
                      adv_condition=bool(cfg["adv_condition"]), **trunk)
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


def _pair_inputs(batch, cfg) -> tuple[jax.Array, int, Any, Callable[[str], jax.Array], jax.Array]:
  """(h = [h_w; h_l] [2B, D], B, label, weight(name) -> this step's loss weight, GRL lam) of a batch."""
  h = jnp.concatenate([batch["h_w"], batch["h_l"]], axis=0)
  lam = jnp.mean(batch["grl_lambda"]) if "grl_lambda" in batch else jnp.zeros((), h.dtype)
  hp = batch.get("hp", {})
  weight = lambda name: jnp.mean(hp[name]) if name in hp else jnp.asarray(cfg[name], jnp.float32)  # noqa: E731
  return h, batch["h_w"].shape[0], batch.get("label"), weight, lam


def _cues(batch) -> jax.Array:
  return jnp.concatenate([batch["t_w"], batch["t_l"]], axis=0)


def _alternating_term(params, z_n: jax.Array, b: int, label, cfg, t: jax.Array | None) -> jax.Array:
  """Encoder loss against an adversary trained `adv_steps` SGD steps on the frozen z_n: its confusion loss
  BT(a_w, a_l; 1/2), which makes its preference uninformative (maximising its loss would reward wrong guesses)."""
  adv = adversary_mlp(cfg["adv_hidden"])
  theta = jax.lax.stop_gradient(params["params"]["adversary"])
  z_frozen = jax.lax.stop_gradient(z_n)
  cond = (lambda z: jnp.concatenate([z, t], axis=-1)) if t is not None else (lambda z: z)

  def adv_loss(th, z):
    a = adv.apply({"params": th}, cond(z))[..., 0]
    return losses.bt_loss(a[:b], a[b:], label)

  def inner(_, th):
    g = jax.grad(adv_loss)(th, z_frozen)
    return jax.tree.map(lambda p, d: p - cfg["adv_inner_lr"] * d, th, g)

  theta = jax.lax.fori_loop(0, int(cfg["adv_steps"]), inner, theta)
  a = adv.apply({"params": theta}, cond(z_n))[..., 0]
  return losses.bt_loss(a[:b], a[b:], jnp.full((b,), 0.5, a.dtype))


def _factored_loss(module, cfg):
  nuisance = cfg["kind"] == "crm_n"
  alternating = cfg["adv_mode"] == "alternating"

  def loss_fn(params, batch, rng):
    h, b, label, w, lam = _pair_inputs(batch, cfg)
    t = _cues(batch) if nuisance else None
    t_adv = t if cfg["adv_condition"] else None
    # Alternating: the layer gets lam = 0, so the adversary trains on a frozen z_n (zero cotangent
    # to the encoder); the encoder's push comes from `_alternating_term`, scaled by the same ramp.
    out = module.apply(params, h, jnp.zeros_like(lam) if alternating else lam, rng if cfg["beta_c"] > 0 else None,
                       t_adv)
    r, a = out["r"], out["a"]
    l_bt = losses.bt_loss(r[:b], r[b:], label)
    if cfg["adv_target"] == "pref":
      l_adv = losses.bt_loss(a[:b], a[b:], label)
    else:
      l_adv = 0.5 * jnp.mean((a - jax.lax.stop_gradient(r)) ** 2)
    l_rec = losses.reconstruction(h, out["h_hat"])
    l_orth = losses.cross_cov_fro2(out["z_c"], out["z_n"])
    loss = l_bt + w("adv_weight") * l_adv + w("rec") * l_rec + w("orth") * l_orth
    aux = {"l_bt": l_bt, "l_adv": l_adv, "l_rec": l_rec, "l_orth": l_orth, "lam": lam,
           "acc": losses.pairwise_accuracy(r[:b], r[b:], label)}
    if alternating:
      l_conf = _alternating_term(params, out["z_n"], b, label, cfg, t_adv)
      loss = loss + w("adv_weight") * lam * l_conf
      aux["l_confuse"] = l_conf
    if cfg["beta_c"] > 0:
      l_min = losses.gaussian_kl(out["mu_c"], out["logvar_c"])
      loss = loss + w("beta_c") * l_min
      aux["l_min"] = l_min
    if nuisance:
      l_aux = 0.5 * jnp.mean((out["t_aux"] - t) ** 2)
      l_adv2 = 0.5 * jnp.mean((out["t_adv"] - t) ** 2)
      l_dec = sum(jnp.abs(losses.pearson(r, t[:, k])) for k in range(t.shape[1]))
      loss = loss + w("aux") * l_aux + w("adv2") * l_adv2 + w("dec") * l_dec
      aux.update(l_aux=l_aux, l_adv2=l_adv2, l_dec=l_dec)
    return loss, aux

  return loss_fn


def _authors_loss(module, cfg):
  """The authors' objective (their `crm_trainer.py`, schedules off): L = BT(r_w, r_l) + adv_weight BT(a_w, a_l)
  + rec ||h - h^||^2 / D + beta_c KL(q(z_c | h) || N(0, I)) + beta_n KL(q(z_n | h) || N(0, I)), a = w_a^T GRL(z_n)."""

  def loss_fn(params, batch, rng):
    h, b, label, w, lam = _pair_inputs(batch, cfg)
    out = module.apply(params, h, lam, rng)
    r, a = out["r"], out["a"]
    terms = {"l_bt": losses.bt_loss(r[:b], r[b:], label), "l_adv": losses.bt_loss(a[:b], a[b:], label),
             "l_rec": losses.reconstruction(h, out["h_hat"]),
             "l_kl_c": losses.gaussian_kl(out["mu_c"], out["logvar_c"]),
             "l_kl_n": losses.gaussian_kl(out["mu_n"], out["logvar_n"])}
    loss = (terms["l_bt"] + w("adv_weight") * terms["l_adv"] + w("rec") * terms["l_rec"]
            + w("beta_c") * terms["l_kl_c"] + w("beta_n") * terms["l_kl_n"])
    return loss, {**terms, "lam": lam, "acc": losses.pairwise_accuracy(r[:b], r[b:], label)}

  return loss_fn


def _baseline_loss(module, cfg):
  kind = cfg["kind"]

  def loss_fn(params, batch, rng):
    h, b, label, w, _ = _pair_inputs(batch, cfg)
    aux: dict[str, jax.Array] = {}
    extra = 0.0                       # the kind's term beside BT on the training-time preference score
    if kind == "odin":
      out = module.apply(params, h)
      r, score = out["r_q"], out["r_q"] + out["r_l"]
      aux["odin_penalty"] = baselines.odin_penalty(out["r_q"], out["r_l"], _cues(batch), out["w_q"], out["w_l"],
                                                   tuple(cfg["odin_cues"]))
      extra = w("odin_weight") * aux["odin_penalty"]
    elif kind == "covariate":
      r, score = module.apply(params, h, _cues(batch))
    elif kind == "vib":
      r, mu, logvar = module.apply(params, h, rng)
      score, aux["kl"] = r, losses.gaussian_kl(mu, logvar)
      extra = w("vib_beta") * aux["kl"]
    else:
      r = score = module.apply(params, h)
      if kind == "rrm":
        aux["l_rrm"] = baselines.rrm_loss_terms(r[:b], r[b:])
        extra = w("rrm_weight") * aux["l_rrm"]
    l_bt = losses.bt_loss(score[:b], score[b:], label)
    aux.update(l_bt=l_bt, acc=losses.pairwise_accuracy(r[:b], r[b:], label))
    return l_bt + extra, aux

  return loss_fn


def make_method(config: Mapping[str, Any]) -> core.Method:
  """`core.Method(init, loss_fn, eval_fn)` for `config["kind"]` (see `KINDS`); eval_fn(params, batch) -> {"acc",
  "bt"} on the batch's pairs using the inference reward."""
  cfg = resolve(config)
  module, reward, kind = _module(cfg), make_reward_fn(cfg), cfg["kind"]

  def init(rng, example_batch):
    h = example_batch["h_w"][:2]
    if kind in FACTORED_KINDS:
      return module.init(rng, h, 0.0)
    if kind == "covariate":
      return module.init(rng, h, jnp.zeros((h.shape[0], cfg["num_cues"]), h.dtype))
    return module.init(rng, h)

  loss_fn = (_authors_loss if kind == "crm_authors" else _factored_loss if kind in FACTORED_KINDS
             else _baseline_loss)(module, cfg)

  def eval_fn(params, batch):
    r_w, r_l = reward(params, batch["h_w"]), reward(params, batch["h_l"])
    label = batch.get("label")
    return {"acc": losses.pairwise_accuracy(r_w, r_l, label), "bt": losses.bt_loss(r_w, r_l, label)}

  return core.Method(init=init, loss_fn=loss_fn, eval_fn=eval_fn)


def make_optimizer(config: Mapping[str, Any], optim: Mapping[str, Any], total_steps: int = 0
                   ) -> optax.GradientTransformation:
  """`core.make_optimizer(optim)` (every key of the experiment's `optim` section is honoured);
  for crm_u and crm_n the adversary heads form a second group with the same transformation at
  `optim.lr * adv_lr_mult` and no weight decay (the spec's Adam at 10x); crm_authors keeps one
  group, as the authors' trainer does."""
  cfg = resolve(config)
  optim = dict(optim.items()) if hasattr(optim, "items") else dict(optim)
  main = core.make_optimizer(optim, total_steps)
  if cfg["kind"] not in FACTORED_KINDS or cfg["kind"] == "crm_authors":
    return main
  adv_optim = {**optim, "lr": float(optim.get("lr", 1e-3)) * float(cfg["adv_lr_mult"]), "weight_decay": 0.0}
  if adv_optim.get("name") == "adamw":
    adv_optim["name"] = "adam"
  adversary = core.make_optimizer(adv_optim, total_steps)
  pattern = r"(^|/)(" + "|".join(ADVERSARY_MODULES) + r")(/|$)"
  return core.multi_group({"main": main, "adversary": adversary},
                          lambda params: core.label_by_path(params, [(pattern, "adversary")], "main"))
