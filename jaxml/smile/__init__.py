"""SMILE: stochastic-gradient microcanonical Langevin ensembles (ICML 2026) on blackjax 1.7.

Kernels (`smile`, `psmile`), the Gamma-quantile tuner and noise preconditioner
(`adaptation`), BNN targets and predictive metrics (`targets`), the chain runner
(`chains`), SG-MCMC baselines (`baselines`) and the ensemble member method (`api`).
"""

from jaxml.smile.adaptation import (PrecondConfig, PrecondState, TunerConfig, TunerState, gamma_quantile,
                                    mile_warmup, precond_init, precond_inverse_mass, precond_update,
                                    tuner_init, tuner_thresholds, tuner_update)
from jaxml.smile.chains import (ChainKernel, ChainResult, make_chain_runner, make_mclmc_runner, peg_per_step,
                                run_chains, run_mclmc, smile_chain_kernel)
from jaxml.smile.kernel import Sampler, SmileInfo, SmileState, psmile, smile, smile_family

__all__ = [
    "ChainKernel", "ChainResult", "PrecondConfig", "make_chain_runner", "PrecondState", "Sampler", "SmileInfo", "SmileState",
    "TunerConfig", "TunerState", "gamma_quantile", "mile_warmup", "peg_per_step", "precond_init",
    "precond_inverse_mass", "precond_update", "psmile", "run_chains", "run_mclmc", "smile", "smile_chain_kernel",
    "smile_family", "make_mclmc_runner",
    "tuner_init", "tuner_thresholds", "tuner_update",
]
