"""Research metrics as pure array functions (numpy/jax arrays in, floats or arrays out), importable from the
package (`from jaxml.metrics import energy_distance`) and from their module (`jaxml.metrics.generative`)."""

from jaxml.metrics import calibration, generative, mcmc, mia, ood, ranking, representation, tables
from jaxml.metrics.calibration import brier, ece, interval_coverage
from jaxml.metrics.generative import (box_coverage, chamfer_matrix, classifier_two_sample, covariance_error,
                                      energy_distance, frechet_distance, kid, mmd_rbf, mode_coverage, periodogram_l1,
                                      point_cloud_scores, sliced_wasserstein)
from jaxml.metrics.mcmc import bulk_ess, ess, rank_normalize, rank_split_rhat, split_chains, split_rhat
from jaxml.metrics.mia import cross_entropy, loss_mia_auc, svc_mia_efficacy, true_label_confidence
from jaxml.metrics.ood import aupr, auroc, fpr_at_tpr
from jaxml.metrics.ranking import (cumulative_score, flag_precision_recall, mae, paired_values, wilcoxon_paired,
                                   zero_one)
from jaxml.metrics.representation import linear_cka, linear_probe_accuracy
from jaxml.metrics.tables import finite_values, fmt_mean_std, markdown_table, method_cell_table, std_err

_MODULES = (calibration, generative, mcmc, mia, ood, ranking, representation, tables)
__all__ = [m.__name__.rsplit(".", 1)[1] for m in _MODULES] + [name for m in _MODULES for name in m.__all__]
