"""Softmax classifiers (MLP or linear) as a `core.Method`: the smallest complete method package,
and the template for adding a new one (docs/adding_a_method.md)."""

from jaxml.classifier.api import KINDS, make_method, make_model

__all__ = ["KINDS", "make_method", "make_model"]
