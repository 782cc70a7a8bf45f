"""SMILE: stochastic-gradient microcanonical Langevin ensembles (ICML 2026) on blackjax 1.7.

`psmile` (`auto_l`: L and an ε cap chosen during warmup; the default for posteriors), the bare kernels
(`kernel`), step-size tuners and the noise preconditioner (`adaptation`), BNN targets (`targets`), the
chain runner (`chains`), SG-MCMC baselines (`baselines`), the ensemble method (`api`) and the
ensemble → warmup → sampling pipeline (`pipeline`)."""

from jaxml.smile.adaptation import (PrecondConfig, PrecondState, RefConfig, StepInput, Tuner, TunerState,
                                    fixed_tuner, gamma_quantile, mile_warmup, per_chain_tuner, precond_init,
                                    precond_inverse_mass, precond_update, ref_tuner, tuner_init, tuner_thresholds,
                                    tuner_update, virial_tuner)
from jaxml.smile.chains import (ChainKernel, ChainResult, make_chain_runner, make_mclmc_runner, peg_per_step,
                                run_chains, run_mclmc, smile_chain_kernel)
from jaxml.smile.api import make_classifier_method, make_method, make_model
from jaxml.smile.auto_l import AutoLState, psmile
from jaxml.smile.kernel import Sampler, SmileInfo, SmileState, build_kernel, smile
from jaxml.smile.pipeline import (METHODS, SMILE_VARIANTS, TUNED_PSMILE, Samplers, authors_row_order, eps_drift,
                                  evaluate, fit_ensemble, make_samplers,
                                  member_plan, run_classification, run_split, sample_split, sampler_batch_size,
                                  schedule, step_grid)

__all__ = [
    "ChainKernel", "ChainResult", "METHODS", "PrecondConfig", "PrecondState", "SMILE_VARIANTS", "TUNED_PSMILE",
    "RefConfig", "Sampler", "Samplers", "SmileInfo", "SmileState", "StepInput", "Tuner", "TunerState", "authors_row_order", "eps_drift", "evaluate", "fit_ensemble",
    "gamma_quantile", "make_chain_runner", "make_classifier_method", "make_mclmc_runner", "make_method",
    "make_model", "make_samplers", "member_plan", "mile_warmup", "peg_per_step", "precond_init",
    "precond_inverse_mass", "precond_update", "psmile", "run_chains", "run_classification", "run_mclmc",
    "run_split", "sample_split", "sampler_batch_size", "schedule", "smile", "smile_chain_kernel",
    "step_grid", "tuner_init", "tuner_thresholds", "tuner_update", "build_kernel", "fixed_tuner", "per_chain_tuner",
    "ref_tuner", "virial_tuner",
]
__all__ += ["AutoLState"]
