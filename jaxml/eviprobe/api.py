"""Public entry points of X-EviProbe: only the backbone (and the trained baselines) learn by gradient; X-EviProbe
itself is `probe.fit_probe` + `probe.score`, closed form and jit-able."""

from typing import Any, Mapping

from jaxml import core
from jaxml.eviprobe.backbone import make_backbone, make_backbone_method
from jaxml.eviprobe.probe import ProbeConfig

__all__ = ["make_method", "probe_config"]


def make_method(config: Mapping[str, Any]) -> core.Method:
  """Backbone method from a config with `backbone` (name, hidden, dropout, ...), `num_features`,
  `num_classes` and optionally `l2`."""
  model = make_backbone(config["backbone"], int(config["num_features"]), int(config["num_classes"]))
  return make_backbone_method(model, l2=float(config.get("l2", 1e-4)))


def probe_config(cfg: Mapping[str, Any] | None = None) -> ProbeConfig:
  """ProbeConfig from a (partial) mapping; unknown values raise a clear ValueError."""
  cfg = dict(cfg or {})
  core.reject_unknown(cfg, ProbeConfig._fields, "probe")
  return ProbeConfig(**cfg).validate()
