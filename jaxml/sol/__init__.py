"""Stochastic Order Learning (SOL) for rank estimation from noisy ordinal labels."""

from jaxml.sol.api import (ALL_METHODS, BASELINES, DEFAULTS, SOL_FAMILY, RankLearner, init_extra,
                           make_embed_fn, make_learner, make_method, make_refresh_fn, make_refresh_hook,
                           sol_settings)
from jaxml.sol.pairs import sample_references
from jaxml.sol.refine import Refinement, refine_labels

__all__ = ["ALL_METHODS", "BASELINES", "DEFAULTS", "SOL_FAMILY", "RankLearner", "Refinement", "init_extra",
           "make_embed_fn", "make_learner", "make_method", "make_refresh_fn", "make_refresh_hook",
           "refine_labels", "sample_references", "sol_settings"]
