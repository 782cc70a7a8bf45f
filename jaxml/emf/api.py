"""EMF and its baselines as values: a registry maps a method name to the recipe owning its loss and
sampler; `make_generator(config)` never branches on the name.

Config: method (METHODS), num_classes (0: unconditional), model (FlowNet), emf (EMFConfig), fm / meanflow
(overrides of emf; meanflow may set jvp_impl), shortcut (ShortcutConfig), ct (CTConfig). Unknown keys are errors."""

from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from jaxml import core
from jaxml.emf import baselines, sample
from jaxml.emf.losses import EMFConfig, make_emf_loss
from jaxml.emf.model import ApplyFn, make_apply_fn, make_network

__all__ = ["METHODS", "REGISTRY", "FlowMethod", "Generator", "make_generator", "make_method"]

SampleFn = Callable[[Any, jax.Array, jax.Array | None, jax.Array, int], jax.Array]


class Generator(NamedTuple):
  """method: core.Method (init, loss, eval; CT adds init_extra and hooks for its grid schedule);
  sample_fn(params, x0, label, rng, num_steps) -> x1 samples; sampler: 'flow_map', 'flow' or
  'consistency' (which NFE list of a config applies). The consistency sampler also takes `t_mid=`, its
  first re-noise time (default 1/K)."""

  method: core.Method
  sample_fn: SampleFn
  sampler: str


class FlowMethod(NamedTuple):
  """One method: build(apply_fn, sections, num_classes) -> (loss_fn, sample_fn, extra), `extra` None or (initial
  extra state, eval extra state, hooks(total_steps)) for losses that read `extra`; and its sampler family."""

  build: Callable[[ApplyFn, Mapping[str, dict], int], tuple[Callable, SampleFn, Any]]
  sampler: str


def _get(config: Any, key: str, default: Any = None) -> Any:
  if isinstance(config, Mapping) or hasattr(config, "get"):
    return config.get(key, default)
  return getattr(config, key, default)


def _section(config: Any, name: str) -> dict:
  sec = _get(config, name)
  return {} if sec is None else dict(sec.to_dict() if hasattr(sec, "to_dict") else sec)


def _checked(section: Mapping[str, Any], fields: tuple[str, ...], what: str) -> dict:
  core.reject_unknown(section, fields, what)
  return dict(section)


def _emf(param: str, euler_field: str | None = None) -> FlowMethod:
  """EMF with `param` prediction; `euler_field` fixes the Euler step's field (None: the emf section's)."""
  def build(apply_fn, sections, num_classes):
    cfg = sections["emf"]._replace(param=param)
    if euler_field is not None:
      cfg = cfg._replace(euler_field=euler_field)
    loss_fn = make_emf_loss(apply_fn, cfg)
    return loss_fn, lambda p, x0, lab, rng, k: sample.sample_flow_map(apply_fn, p, x0, k, lab, param), None
  return FlowMethod(build, "flow_map")


def _fm(apply_fn, sections, num_classes):
  over = _checked(sections["fm"], EMFConfig._fields, "fm")
  cfg = sections["emf"]._replace(param="u", **{"p": 0.0, **over})
  return (baselines.make_fm_loss(apply_fn, cfg),
          lambda p, x0, lab, rng, k: sample.sample_flow(apply_fn, p, x0, k, lab), None)


def _meanflow(impl: str) -> FlowMethod:
  def build(apply_fn, sections, num_classes):
    over = _checked(sections["meanflow"], EMFConfig._fields + ("jvp_impl",), "meanflow")
    jvp_impl = str(over.pop("jvp_impl", "forward"))
    cfg = sections["emf"]._replace(param="u", **over)
    loss_fn = baselines.make_meanflow_loss(apply_fn, cfg, impl=impl, jvp_impl=jvp_impl)
    return loss_fn, lambda p, x0, lab, rng, k: sample.sample_flow_map(apply_fn, p, x0, k, lab, "u"), None
  return FlowMethod(build, "flow_map")


def _shortcut(apply_fn, sections, num_classes):
  cfg = baselines.ShortcutConfig(**_checked(sections["shortcut"], baselines.ShortcutConfig._fields, "shortcut"))
  return (baselines.make_shortcut_loss(apply_fn, cfg, num_classes=num_classes),
          lambda p, x0, lab, rng, k: sample.sample_flow_map(apply_fn, p, x0, k, lab, "u"), None)


def _ct(apply_fn, sections, num_classes):
  cfg = baselines.CTConfig(**_checked(sections["ct"], baselines.CTConfig._fields, "ct"))
  grid = lambda n: {"grid": jnp.asarray(n, jnp.int32)}

  def hooks(total_steps: int) -> list[core.Hook]:
    def set_grid(step, state):
      return state.replace(extra=grid(baselines.ct_grid_size(step, total_steps, cfg)))
    return [core.Hook(every=max(total_steps // 64, 1), fn=set_grid)]

  return (baselines.make_ct_loss(apply_fn, cfg, num_classes=num_classes),
          lambda p, x0, lab, rng, k, t_mid=None: sample.sample_consistency(apply_fn, p, x0, k, lab, rng, t_mid),
          (grid(cfg.grid_start), grid(cfg.grid_end), hooks))


# The one place a method name is resolved; METHODS are its names (a tuple, as in every method package).
REGISTRY: dict[str, FlowMethod] = {
    "emf_u": _emf("u"), "emf_x1": _emf("x1"), "emf_u_vc": _emf("u", "vc"), "emf_x1_vc": _emf("x1", "vc"),
    "fm": FlowMethod(_fm, "flow"),
    "meanflow": _meanflow("fused"), "meanflow_split": _meanflow("split"),
    "shortcut": FlowMethod(_shortcut, "flow_map"), "ct": FlowMethod(_ct, "consistency"),
}
METHODS = tuple(REGISTRY)


def make_generator(config: Any) -> Generator:
  """Builds `config['method']` (one of METHODS) on the shared FlowNet of `config['model']`."""
  name = _get(config, "method")
  if name not in METHODS:
    raise ValueError(f"unknown method {name!r}; expected one of {METHODS}")
  num_classes = int(_get(config, "num_classes", 0) or 0)
  net = make_network(_section(config, "model"), num_classes=num_classes)
  apply_fn = make_apply_fn(net)
  sections = {k: _section(config, k) for k in ("fm", "meanflow", "shortcut", "ct")}
  sections["emf"] = EMFConfig(**{**_checked(_section(config, "emf"), EMFConfig._fields, "emf"),
                                 "num_classes": num_classes})
  loss_fn, sample_fn, extra = REGISTRY[name].build(apply_fn, sections, num_classes)

  def init(rng, batch):
    x = jnp.asarray(batch["x"])
    t = jnp.zeros((x.shape[0],), x.dtype)
    label = jnp.asarray(batch["y"], jnp.int32) if num_classes and "y" in batch else None
    return net.init(rng, x, t, t, label)["params"]

  eval_rng, (initial, final, hooks) = jax.random.key(12345), extra or (None, None, None)

  def eval_fn(params, batch):
    loss, aux = loss_fn(params, batch, eval_rng, *(() if extra is None else (final,)))
    return {"loss": loss, **aux}

  method = core.Method(init, loss_fn, eval_fn) if extra is None else core.Method(
      init, loss_fn, eval_fn, init_extra=lambda rng, params: initial, hooks=lambda ctx: hooks(int(ctx.num_steps)))
  return Generator(method, sample_fn, REGISTRY[name].sampler)


def make_method(config: Any) -> core.Method:
  """The `core.Method` of `config['method']` (see `make_generator` for the sampler)."""
  return make_generator(config).method
