"""X-EviProbe: post-hoc, parameter-free evidential uncertainty for frozen GNNs: `backbone` (the trained
GNN), `pipeline` (fit every method on the clean graph, score any graph), `probe` (the closed-form probe)."""

from jaxml.eviprobe import api, backbone, baselines, pipeline, probe, readouts
from jaxml.eviprobe.api import make_method, probe_config
from jaxml.eviprobe.pipeline import (ABLATIONS, BASELINES, OURS, Fitted, fit_epn, fit_posthoc, isolated_scores,
                                     metrics_for, probe_configs, score_all)
from jaxml.eviprobe.probe import ProbeConfig, ProbeState, fit_probe, score

__all__ = ["ABLATIONS", "BASELINES", "Fitted", "OURS", "ProbeConfig", "ProbeState", "api", "backbone", "baselines",
           "fit_epn", "fit_posthoc", "fit_probe", "isolated_scores", "make_method", "metrics_for", "pipeline", "probe",
           "probe_config", "probe_configs", "readouts", "score", "score_all"]
