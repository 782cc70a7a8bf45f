"""Representation Unlearning (Almudevar & Ortega, ICML 2026): forgetting by learning a map
T on the frozen representation z = g(x) so that h(T(g(x))) keeps retained information and
sends forget representations to an uninformative point; plus the baselines and evaluation
of the unlearning benchmark.

Start with `run_method(name, settings, model, params0, task, seed=...)`: one signature for RU,
RU zero-shot, RU with the uniform target (`ru_uniform`, our extension: the forget target is the point
nearest the mean representation where the frozen head is uniform over the retained classes, which
removes the failure when the head maps the mean to the forgotten class; `ru_zs_uniform` moves the
zero-shot target the same way, from head rows and class counts only; `ru_zs_anchor` adds an
identity anchor whose weight it chooses from the forget rows alone), every baseline (SISA, UNSIR
and GKT included), Retrain and the original model (`ru_val`: RU under settings the caller chose on
validation); `tune` picks a setting by Avg. Gap, or by any score such as the forgetting bar (`evaluate.scorer`).
Modules: `model` (classifier = encoder + linear head), `transform` (T), `losses` (standard and
zero-shot objectives), `targets` (forget targets, class statistics), `api` (`make_method`, `unlearn`),
`fitting` (`fit_params`: one timed `core.train` run; `cached`), `sampling` (batch builders; float
settings ride in the batch), `baselines` (one `Baseline` spec per method, one driver), `pipelines`
(the multi-stage baselines and shared pieces), `evaluate`, `runner` (`run_method`, `tune`,
`tune_methods`, `compare`: one forget split, every method against Retrain), `report` (tables of rows).
"""

from jaxml.unlearning import (api, baselines, evaluate, fitting, losses, model, pipelines, report, runner, sampling,
                              targets, task, transform)
from jaxml.unlearning.api import make_method, make_predict_fn, unlearn
from jaxml.unlearning.baselines import BASELINES, ZERO_SHOT_BASELINES, NotApplicable, run_baseline
from jaxml.unlearning.evaluate import avg_gap, collect_outputs, unlearning_metrics
from jaxml.unlearning.runner import METHODS, RunOutput, compare, run_method, tune, tune_methods
from jaxml.unlearning.task import UnlearningTask

__all__ = ["BASELINES", "METHODS", "NotApplicable", "RunOutput", "UnlearningTask", "ZERO_SHOT_BASELINES", "api",
           "avg_gap", "baselines", "collect_outputs", "compare", "evaluate", "fitting", "losses", "make_method", "make_predict_fn",
           "model", "pipelines", "report", "run_baseline", "run_method", "runner", "sampling", "targets", "task",
           "transform", "tune",
           "tune_methods", "unlearn", "unlearning_metrics"]
