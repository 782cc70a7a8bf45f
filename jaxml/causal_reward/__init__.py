"""Causal reward models (CRM-U, crm_authors, CRM-N), an alternating adversary, baselines, probes, best-of-N.

    from jaxml import causal_reward as crm
    trainer = crm.make_trainer({"kind": "crm_n", "dim": 64}, {"name": "adamw", "lr": 1e-3, "clip_norm": 1.0})
    out = crm.train(trainer, pairs, seed=0, epochs=10, batch_size=256)
    rewards = crm.predict(trainer.reward, out.params, h)
"""

from jaxml.causal_reward.api import (ADV_MODES, FACTORED_KINDS, KINDS, WEIGHTS, authors_config, default_config,
                                     make_factor_fn, make_method, make_optimizer, make_reward_fn, resolve)
from jaxml.causal_reward import evaluate
from jaxml.causal_reward.baselines import cue_rule_accuracy
from jaxml.causal_reward.bon import best_of_n, fit_gao, kl_bon, powers_of_two
from jaxml.causal_reward.losses import bt_loss, pairwise_accuracy, pearson
from jaxml.causal_reward.model import FactoredRM, VaeFactoredRM, grad_reverse, grl_schedule
from jaxml.causal_reward.probes import (ProbeResult, make_probe_trainer, pref_probe, regress_probe, ridge_accuracy,
                                        ridge_r2, spearman)
from jaxml.causal_reward.training import RewardTrainer, TrainOutput, epoch_batches, make_trainer, predict, train

__all__ = [
    "ADV_MODES", "FACTORED_KINDS", "KINDS", "WEIGHTS", "authors_config", "default_config", "make_factor_fn", "make_method",
    "make_optimizer", "make_reward_fn", "resolve", "evaluate", "cue_rule_accuracy", "best_of_n", "fit_gao", "kl_bon",
    "powers_of_two", "bt_loss", "pairwise_accuracy", "pearson", "FactoredRM", "VaeFactoredRM", "grad_reverse", "grl_schedule",
    "ProbeResult", "make_probe_trainer", "pref_probe", "regress_probe", "ridge_accuracy", "ridge_r2", "spearman",
    "TrainOutput", "RewardTrainer", "epoch_batches", "make_trainer", "predict", "train",
]
