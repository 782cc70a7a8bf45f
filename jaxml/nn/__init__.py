"""Shared Flax Linen modules; no training logic here."""

from jaxml.nn.mlp import MLP

__all__ = ["MLP"]
