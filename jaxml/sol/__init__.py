"""Stochastic Order Learning (SOL) for rank estimation from noisy ordinal labels.

  trainer = sol.make_trainer("sol", sol_config, train_config)   # or any baseline name
  fitted = sol.fit(trainer, x_train, y_noisy, x_val, y_val_noisy, seed=0)
  ranks = sol.predict(trainer, fitted, x_test)                   # validation-chosen decoder
"""

from jaxml.sol.api import (ALL_METHODS, BASELINES, DEFAULTS, RELABEL_DECODERS, SOL_FAMILY, RankLearner,
                           host_pair_count, init_extra, make_embed_fn, make_learner, make_method, make_refresh_fn, sol_settings)
from jaxml.sol.decoders import DECODERS
from jaxml.sol.pairs import LabelBook, make_pair_batches, sample_references
from jaxml.sol.refine import RELABEL_STEPS, Refinement, refine_labels
from jaxml.sol.train import Fitted, RankTrainer, fit, make_trainer, predict, relabel_steps

__all__ = ["ALL_METHODS", "BASELINES", "DECODERS", "DEFAULTS", "Fitted", "RELABEL_DECODERS", "RELABEL_STEPS",
           "LabelBook", "RankLearner", "Refinement", "SOL_FAMILY", "RankTrainer", "fit", "host_pair_count", "init_extra", "make_embed_fn",
           "make_learner", "make_method", "make_pair_batches", "make_refresh_fn", "make_trainer", "predict",
           "refine_labels", "relabel_steps", "sample_references", "sol_settings"]
