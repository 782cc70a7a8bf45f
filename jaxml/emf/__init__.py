"""Euler Mean Flows: JVP-free one/few-step flow-map generation, with its baselines."""

from jaxml.emf import evaluate
from jaxml.emf.api import METHODS, REGISTRY, Generator, make_generator, make_method
from jaxml.emf.losses import EMFConfig, euler_target, jvp_target, make_emf_loss, sample_time_pairs
from jaxml.emf.sample import sample_consistency, sample_flow, sample_flow_map

__all__ = ["evaluate", "METHODS", "REGISTRY", "Generator", "make_generator", "make_method", "EMFConfig", "euler_target",
           "jvp_target", "make_emf_loss", "sample_time_pairs", "sample_consistency", "sample_flow", "sample_flow_map"]
