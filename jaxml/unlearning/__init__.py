"""Representation Unlearning (Almudevar & Ortega, ICML 2026): learn a map T on the frozen representation
z = g(x) so that h(T(g(x))) keeps retained information and sends forget rows to an uninformative point;
plus the baselines and evaluation of the unlearning benchmark. Start with `run_method` (one signature for
every method), `tune` (a setting by Avg. Gap or any `evaluate.scorer`) and `compare` (one forget split)."""

from jaxml.unlearning import (api, baselines, evaluate, fitting, losses, model, pipelines, report, runner, sampling,
                              targets, task, transform)
from jaxml.unlearning.api import make_method, make_predict_fn, unlearn
from jaxml.unlearning.baselines import BASELINES, ZERO_SHOT_BASELINES, NotApplicable, run_baseline
from jaxml.unlearning.evaluate import avg_gap, collect_outputs, unlearning_metrics
from jaxml.unlearning.runner import METHODS, RunOutput, choose_settings, compare, run_method, tune
from jaxml.unlearning.task import UnlearningTask

__all__ = ["BASELINES", "METHODS", "NotApplicable", "RunOutput", "UnlearningTask", "ZERO_SHOT_BASELINES", "api",
           "avg_gap", "baselines", "choose_settings", "collect_outputs", "compare", "evaluate", "fitting", "losses",
           "make_method", "make_predict_fn", "model", "pipelines", "report", "run_baseline", "run_method", "runner",
           "sampling", "targets", "task", "transform", "tune", "unlearn", "unlearning_metrics"]
