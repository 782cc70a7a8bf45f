"""`make_generator(config)`: EMF or one of its baselines as a `core.Method` plus its sampler.

Config fields (ml_collections or any mapping-like object):
  method: one of METHODS; emf: EMFConfig fields; model: FlowNet fields; num_classes;
  shortcut: ShortcutConfig fields; ct: CTConfig fields.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxml import core
from jaxml.emf import baselines, sample
from jaxml.emf.losses import EMFConfig, make_emf_loss
from jaxml.emf.model import make_apply_fn, make_network

__all__ = ["METHODS", "Generator", "make_generator", "make_method", "emf_config_from"]

METHODS = ("emf_u", "emf_x1", "fm", "meanflow", "meanflow_split", "shortcut", "ct")

SampleFn = Callable[[Any, jax.Array, jax.Array | None, jax.Array, int], jax.Array]


class Generator(NamedTuple):
  """method: core.Method; sample_fn(params, x0, label, rng, num_steps) -> x1 samples (num_steps static);
  uses_extra/extra/make_hooks(total_steps): method-owned state for core (only CT uses it)."""

  method: core.Method
  sample_fn: SampleFn
  uses_extra: bool = False
  extra: Any = None
  make_hooks: Callable[[int], list] = lambda total_steps: []


def _section(config: Any, name: str) -> dict:
  sec = config.get(name, None) if hasattr(config, "get") else getattr(config, name, None)
  if sec is None:
    return {}
  return dict(sec.to_dict() if hasattr(sec, "to_dict") else sec)


def emf_config_from(config: Any, **overrides) -> EMFConfig:
  """EMFConfig from `config.emf` (unknown keys ignored) plus `num_classes`."""
  sec = _section(config, "emf")
  fields = {k: v for k, v in sec.items() if k in EMFConfig._fields}
  fields["num_classes"] = int(config.get("num_classes", 0) or 0)
  fields.update(overrides)
  return EMFConfig(**fields)


def make_generator(config: Any) -> Generator:
  """Builds the loss, init, eval and sampler of `config.method` on the shared FlowNet."""
  name = config.method
  if name not in METHODS:
    raise ValueError(f"unknown method {name!r}; expected one of {METHODS}")
  num_classes = int(config.get("num_classes", 0) or 0)
  net = make_network(_section(config, "model"), num_classes=num_classes)
  apply_fn = make_apply_fn(net)

  def init(rng, batch):
    x = jnp.asarray(batch["x"])
    t = jnp.zeros((x.shape[0],), x.dtype)
    label = jnp.asarray(batch["y"], jnp.int32) if num_classes and "y" in batch else None
    return net.init(rng, x, t, t, label)["params"]

  uses_extra, extra, make_hooks = False, None, (lambda total_steps: [])
  if name in ("emf_u", "emf_x1"):
    cfg = emf_config_from(config, param="u" if name == "emf_u" else "x1")
    loss_fn = make_emf_loss(apply_fn, cfg)
    sample_fn = lambda p, x0, lab, rng, k: sample.sample_flow_map(apply_fn, p, x0, k, lab, cfg.param)
  elif name == "fm":
    cfg = emf_config_from(config, param="u", p=float(_section(config, "fm").get("p", 0.0)))
    loss_fn = baselines.make_fm_loss(apply_fn, cfg)
    sample_fn = lambda p, x0, lab, rng, k: sample.sample_flow(apply_fn, p, x0, k, lab)
  elif name in ("meanflow", "meanflow_split"):
    mf = _section(config, "meanflow")
    cfg = emf_config_from(config, param="u", **{k: v for k, v in mf.items() if k in EMFConfig._fields})
    loss_fn = baselines.make_meanflow_loss(apply_fn, cfg, impl="fused" if name == "meanflow" else "split",
                                           jvp_impl=str(mf.get("jvp_impl", "forward")))
    sample_fn = lambda p, x0, lab, rng, k: sample.sample_flow_map(apply_fn, p, x0, k, lab, "u")
  elif name == "shortcut":
    scfg = baselines.ShortcutConfig(**{k: v for k, v in _section(config, "shortcut").items()
                                       if k in baselines.ShortcutConfig._fields})
    loss_fn = baselines.make_shortcut_loss(apply_fn, scfg, num_classes=num_classes)
    sample_fn = lambda p, x0, lab, rng, k: sample.sample_flow_map(apply_fn, p, x0, k, lab, "u")
  else:
    ccfg = baselines.CTConfig(**{k: v for k, v in _section(config, "ct").items()
                                 if k in baselines.CTConfig._fields})
    ct_loss = baselines.make_ct_loss(apply_fn, ccfg, num_classes=num_classes)
    loss_fn = ct_loss
    uses_extra = True
    extra = {"grid": jnp.asarray(ccfg.grid_start, jnp.int32)}
    sample_fn = lambda p, x0, lab, rng, k: sample.sample_consistency(apply_fn, p, x0, k, lab, rng)

    def make_hooks(total_steps, ccfg=ccfg):
      def set_grid(step, state):
        return state.replace(extra={"grid": jnp.asarray(baselines.ct_grid_size(step, total_steps, ccfg), jnp.int32)})
      return [core.Hook(every=max(total_steps // 64, 1), fn=set_grid)]

  eval_rng = jax.random.key(12345)

  def eval_fn(params, batch):
    if uses_extra:
      loss, aux = loss_fn(params, batch, eval_rng, {"grid": jnp.asarray(ccfg.grid_end, jnp.int32)})
    else:
      loss, aux = loss_fn(params, batch, eval_rng)
    return {"loss": loss, **aux}

  return Generator(core.Method(init, loss_fn, eval_fn), sample_fn, uses_extra, extra, make_hooks)


def make_method(config: Any) -> core.Method:
  """The `core.Method` of `config.method` (see `make_generator` for the sampler)."""
  return make_generator(config).method
