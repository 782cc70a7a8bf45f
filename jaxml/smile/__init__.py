"""SMILE: stochastic-gradient microcanonical Langevin ensembles (ICML 2026) on blackjax 1.7.

`psmile` (`auto_l`: L and an ε cap chosen during warmup; the default for posteriors), the bare kernels
(`kernel`), step-size tuners and the noise preconditioner (`adaptation`), BNN targets (`targets`), the
chain runner (`chains`), SG-MCMC baselines (`baselines`), the ensemble method (`api`) and the
ensemble → warmup → sampling pipeline (`pipeline`)."""

from jaxml.smile.adaptation import (PrecondConfig, RefConfig, Tuner, fixed_tuner, mile_warmup, per_chain_tuner,
                                    ref_tuner, virial_tuner)
from jaxml.smile.api import make_classifier_method, make_method, make_model
from jaxml.smile.auto_l import AutoLState, psmile
from jaxml.smile.chains import (ChainKernel, ChainResult, make_chain_runner, make_mclmc_runner, run_chains, run_mclmc,
                                smile_chain_kernel)
from jaxml.smile.kernel import Sampler, SmileInfo, SmileState, build_kernel, smile
from jaxml.smile.pipeline import (METHODS, SMILE_VARIANTS, TUNED_PSMILE, Samplers, authors_row_order, eps_drift,
                                  evaluate, fit_ensemble, make_samplers, member_plan, run_classification, run_split,
                                  sample_split, sampler_batch_size, schedule, step_grid)

__all__ = ["AutoLState", "ChainKernel", "ChainResult", "METHODS", "PrecondConfig", "RefConfig", "SMILE_VARIANTS",
           "Sampler", "Samplers", "SmileInfo", "SmileState", "TUNED_PSMILE", "Tuner", "authors_row_order",
           "build_kernel", "eps_drift", "evaluate", "fit_ensemble", "fixed_tuner", "make_chain_runner",
           "make_classifier_method", "make_mclmc_runner", "make_method", "make_model", "make_samplers", "member_plan",
           "mile_warmup", "per_chain_tuner", "psmile", "ref_tuner", "run_chains", "run_classification", "run_mclmc",
           "run_split", "sample_split", "sampler_batch_size", "schedule", "smile", "smile_chain_kernel", "step_grid",
           "virial_tuner"]
