"""Unlearning evaluation: accuracies, MIAs, gap to Retrain, output divergences, representation checks.

Percentages (SalUn convention): UA = 100 - Acc(D_f), RA = Acc(D_r), TA = Acc(D_t), TA_r / TA_f = test
accuracy off / on the forgotten kind, MIA = SVC-MIA efficacy, loss-MIA AUC; Avg. Gap = mean |UA - UA*|,
|RA - RA*|, |TA - TA*|, |MIA - MIA*| (* = Retrain). `bar_score`: max of |FA - FA*| / FA_TOL,
|RA - RA°| / ACC_TOL, |TA_r - TA_r°| / ACC_TOL (° = original); <= 1 iff the forgetting bar is met."""

from typing import Callable, Mapping, NamedTuple

import numpy as np
from scipy.special import softmax

from jaxml import core
from jaxml.metrics import mia as mia_lib
from jaxml.metrics.representation import linear_cka, linear_probe_accuracy
from jaxml.unlearning.task import UnlearningTask

__all__ = ["Outputs", "collect_outputs", "unlearning_metrics", "avg_gap", "divergences", "representation_checks",
           "GAP_KEYS", "FA_TOL", "ACC_TOL", "bar_gaps", "bar_score", "SCORES", "scorer"]

GAP_KEYS = ("UA", "RA", "TA", "MIA")
# The forgetting bar per forget split: forget accuracy within FA_TOL points of Retrain's, retain and
# retained-class test accuracy within ACC_TOL points of the original model's.
FA_TOL, ACC_TOL = 2.0, 1.0
# Selection criteria of a grid (`scorer`): Avg. Gap to Retrain, or the bar score.
SCORES = ("avg_gap", "bar")

# Rows per compiled evaluation pass (config key `eval_chunk`; inputs zero-padded to a multiple): another chunk is
# another compiled shape, so metrics can differ at the float level.
EVAL_CHUNK = 2048


class Outputs(NamedTuple):
  """Logits and representations of one model on the training and test rows (numpy)."""

  logits_train: np.ndarray   # [n, C]
  feats_train: np.ndarray    # [n, D]
  logits_test: np.ndarray    # [n_test, C]
  feats_test: np.ndarray     # [n_test, D]


def collect_outputs(predict: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], task: UnlearningTask,
                    chunk: int = EVAL_CHUNK) -> Outputs:
  """predict(x) -> (logits, feats) over `chunk`-row calls on the train and test inputs (`core.batched_apply`:
  one compiled shape for both)."""
  return Outputs(*core.batched_apply(predict, task.x_train, chunk), *core.batched_apply(predict, task.x_test, chunk))


def _acc(logits: np.ndarray, y: np.ndarray) -> float:
  return float(100.0 * np.mean(np.argmax(logits, -1) == y)) if len(y) else float("nan")


def unlearning_metrics(out: Outputs, task: UnlearningTask) -> dict[str, float]:
  """UA, RA, TA, TA_r, TA_f, MIA (SVC efficacy), MIA_AUC (loss attack D_f vs D_t)."""
  y = np.asarray(task.y_train)
  r, f = task.retain_idx, task.forget_idx
  m = {"UA": 100.0 - _acc(out.logits_train[f], y[f]), "RA": _acc(out.logits_train[r], y[r]),
       "TA": _acc(out.logits_test, task.y_test)}
  mask = task.test_forget_mask if task.test_forget_mask is not None else np.zeros(len(task.y_test), bool)
  if mask.any():
    m["TA_r"] = _acc(out.logits_test[~mask], task.y_test[~mask])
    m["TA_f"] = _acc(out.logits_test[mask], task.y_test[mask])
  # Attackers are fitted on the unlearned model's own outputs (members: retained rows).
  rr = r[np.random.default_rng(0).permutation(r.size)]
  m["MIA"] = mia_lib.svc_mia_efficacy(out.logits_train[rr], y[rr], out.logits_test, task.y_test,
                                      out.logits_train[f], y[f])
  m["MIA_AUC"] = (mia_lib.loss_mia_auc(out.logits_train[f], y[f], out.logits_test, task.y_test)
                  if f.size else float("nan"))
  return m


def avg_gap(metrics: Mapping[str, float], reference: Mapping[str, float]) -> float:
  """Mean absolute difference to the reference (Retrain) over UA, RA, TA, MIA."""
  return float(np.mean([abs(metrics[k] - reference[k]) for k in GAP_KEYS]))


def bar_gaps(metrics: Mapping[str, float], retrain: Mapping[str, float],
             original: Mapping[str, float]) -> dict[str, float]:
  """dFA = FA - FA(Retrain) (FA, else 100 - UA), dRA = RA - RA(original), dTA_r = TA_r - TA_r(original)
  (TA when no test row is of the forgotten kind, e.g. random forgetting)."""
  ta = "TA_r" if all("TA_r" in m for m in (metrics, original)) else "TA"
  fa = lambda m: m["FA"] if "FA" in m else 100.0 - m["UA"]  # noqa: E731
  return {"dFA": fa(metrics) - fa(retrain), "dRA": metrics["RA"] - original["RA"],
          "dTA_r": metrics[ta] - original[ta]}


def bar_score(metrics: Mapping[str, float], retrain: Mapping[str, float], original: Mapping[str, float], *,
              fa_tol: float = FA_TOL, acc_tol: float = ACC_TOL) -> float:
  """max(|dFA| / fa_tol, |dRA| / acc_tol, |dTA_r| / acc_tol) of `bar_gaps`: <= 1 iff the split meets the
  bar; inf when a gap is nan (never chosen, never met)."""
  d = bar_gaps(metrics, retrain, original)
  v = np.abs([d["dFA"] / fa_tol, d["dRA"] / acc_tol, d["dTA_r"] / acc_tol])
  return float("inf") if np.isnan(v).any() else float(v.max())


def scorer(name: str, retrain: Mapping[str, float],
           original: Mapping[str, float]) -> Callable[[Mapping[str, float]], float]:
  """metrics -> selection score (lower is better) of criterion `name` in SCORES: Avg. Gap to `retrain`
  or `bar_score` against `retrain` and `original` (the metrics of both on the same split)."""
  if name == "avg_gap":
    return lambda m: avg_gap(m, retrain)
  if name == "bar":
    return lambda m: bar_score(m, retrain, original)
  raise ValueError(f"unknown selection score {name!r}; expected one of {SCORES}")


def divergences(out: Outputs, ref: Outputs, task: UnlearningTask) -> dict[str, float]:
  """Mean KL(p_retrain || p) and JS(p, p_retrain) of softmax outputs on D_r, D_f, D_t."""
  eps = 1e-12
  res = {}
  for name, a, b in (("r", out.logits_train[task.retain_idx], ref.logits_train[task.retain_idx]),
                     ("f", out.logits_train[task.forget_idx], ref.logits_train[task.forget_idx]),
                     ("t", out.logits_test, ref.logits_test)):
    if not len(a):
      res[f"KL_{name}"] = res[f"JS_{name}"] = float("nan")
      continue
    p, q = (softmax(np.asarray(v, np.float64), axis=-1) for v in (a, b))
    mix = 0.5 * (p + q)
    kl = lambda u, v: np.sum(u * (np.log(u + eps) - np.log(v + eps)), -1)  # noqa: E731
    res[f"KL_{name}"] = float(np.mean(kl(q, p)))
    res[f"JS_{name}"] = float(np.mean(0.5 * kl(p, mix) + 0.5 * kl(q, mix)))
  return res


def representation_checks(out: Outputs, original: Outputs, task: UnlearningTask, *, seed: int = 0,
                          max_rows: int = 400) -> dict[str, float]:
  """Forget-label linear probe (%) on the representations (fit on half of D_f plus as many D_r rows, scored on
  the other half; high = still decodable) and linear CKA to the original's on D_r and D_f."""
  rng = np.random.default_rng([seed, 17])
  y = np.asarray(task.y_probe_train if task.y_probe_train is not None else task.y_train)
  f = rng.permutation(task.forget_idx)[: 2 * max_rows]
  r = rng.permutation(task.retain_idx)[:max_rows]
  res = {}
  if f.size >= 4:
    half = f.size // 2
    fit_rows = np.concatenate([f[:half], r[: max(half, 1)]])
    res["probe_f"] = linear_probe_accuracy(out.feats_train[fit_rows], y[fit_rows],
                                           out.feats_train[f[half:]], y[f[half:]])
    res["CKA_f"] = linear_cka(out.feats_train[f], original.feats_train[f])
  else:
    res["probe_f"] = res["CKA_f"] = float("nan")
  res["CKA_r"] = linear_cka(out.feats_train[r], original.feats_train[r])
  return res
