"""Membership-inference attacks used to judge unlearning (numpy / scikit-learn, host side). Judge SVC-MIA
("MIA-Efficacy", the l1-sparse / SalUn convention) against the retrained model's value, not against 100."""

import numpy as np
from scipy.special import softmax

from jaxml.metrics.ood import auroc

__all__ = ["true_label_confidence", "cross_entropy", "svc_mia_efficacy", "loss_mia_auc"]


def true_label_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """p(y | x) from logits [n, C] and int labels [n] -> [n]."""
  p = softmax(np.asarray(logits, np.float64), axis=-1)
  return p[np.arange(p.shape[0]), np.asarray(labels)]


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """Per-row -log p(y | x) -> [n] (log-sum-exp stable)."""
  z = np.asarray(logits, np.float64)
  m = z.max(axis=-1, keepdims=True)
  lse = (m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True)))[:, 0]
  return lse - z[np.arange(z.shape[0]), np.asarray(labels)]


def svc_mia_efficacy(retain_logits: np.ndarray, retain_labels: np.ndarray,
                     test_logits: np.ndarray, test_labels: np.ndarray,
                     forget_logits: np.ndarray, forget_labels: np.ndarray, *,
                     c: float = 3.0, gamma: str | float = "auto") -> float:
  """% of forget rows an SVC on true-label confidence predicts to be non-members; members are the first
  min(|D_r|, |D_t|) retained rows, non-members as many test rows (balanced, unlike the SalUn script)."""
  from sklearn.svm import SVC  # lazy: only evaluation pays for scikit-learn

  n = min(len(retain_labels), len(test_labels))
  if len(forget_labels) == 0:
    return float("nan")
  feat_in = true_label_confidence(retain_logits[:n], retain_labels[:n])
  feat_out = true_label_confidence(test_logits[:n], test_labels[:n])
  x = np.concatenate([feat_in, feat_out])[:, None]
  y = np.concatenate([np.ones(n), np.zeros(n)])
  clf = SVC(C=c, gamma=gamma, kernel="rbf").fit(x, y)
  pred = clf.predict(true_label_confidence(forget_logits, forget_labels)[:, None])
  return float(100.0 * np.mean(pred == 0))


def loss_mia_auc(member_logits: np.ndarray, member_labels: np.ndarray,
                 nonmember_logits: np.ndarray, nonmember_labels: np.ndarray) -> float:
  """AUROC of the score -CE with members as positives (0.5 = chance)."""
  s_in = -cross_entropy(member_logits, member_labels)
  s_out = -cross_entropy(nonmember_logits, nonmember_labels)
  scores = np.concatenate([s_in, s_out])
  labels = np.concatenate([np.ones(len(s_in)), np.zeros(len(s_out))])
  return auroc(scores, labels)
