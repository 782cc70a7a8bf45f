"""X-EviProbe: post-hoc, parameter-free evidential uncertainty for frozen GNNs."""

from jaxml.eviprobe import api, backbone, baselines, probe, readouts
from jaxml.eviprobe.api import make_method, probe_config
from jaxml.eviprobe.probe import ProbeConfig, ProbeState, fit_probe, score

__all__ = ["ProbeConfig", "ProbeState", "api", "backbone", "baselines", "fit_probe", "make_method", "probe",
           "probe_config", "readouts", "score"]
