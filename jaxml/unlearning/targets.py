"""Where Representation Unlearning sends the forget rows (the reference: the mean representation; our
`uniform_target`), the class statistics it stores, and the collision check `target_info`."""

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxml.unlearning import model as model_lib

__all__ = ["class_statistics", "head_probs", "target_info", "uniform_target"]


def head_probs(model: nn.Module, model_params: Any, z: np.ndarray) -> np.ndarray:
  """softmax(h(z)) of the frozen head at one point z [D] -> [C] (numpy)."""
  logits = model_lib.head_logits(model, model_params, jnp.asarray(z, jnp.float32)[None])
  return np.asarray(jax.nn.softmax(logits[0]))


def uniform_target(kernel: np.ndarray, bias: np.ndarray, mean: np.ndarray, forget_classes: Sequence[int],
                   margin: float) -> np.ndarray:
  """The point nearest `mean` whose head logits (z K + b) are equal on the retained classes and `margin` lower
  on the forgotten ones: z* = mean - pinv(P K^T) P (K^T mean + b + margin 1_F), P centring over classes."""
  k = np.asarray(kernel, np.float64)
  c = k.shape[1]
  gap = np.zeros(c)
  gap[list(forget_classes)] = float(margin)
  centre = np.eye(c) - 1.0 / c
  a = centre @ k.T                                                   # [C, D]
  resid = centre @ (k.T @ np.asarray(mean, np.float64) + np.asarray(bias, np.float64) + gap)
  return (np.asarray(mean, np.float64) - np.linalg.pinv(a) @ resid).astype(np.float32)


def class_statistics(y_train: np.ndarray, num_classes: int, forget_classes: Sequence[int],
                     feature_norm: float) -> dict[str, np.ndarray]:
  """Class priors pi_c = N_c / N, retained priors pi^R (0 on forgotten classes) and the mean
  training-feature norm: what a deployment would store at training time."""
  counts = np.bincount(np.asarray(y_train), minlength=num_classes).astype(np.float32)
  pi = counts / counts.sum()
  pi_r = np.where(np.isin(np.arange(num_classes), forget_classes), 0.0, counts)
  pi_r = pi_r / max(pi_r.sum(), 1.0)
  return {"pi": pi.astype(np.float32), "pi_retain": pi_r.astype(np.float32),
          "feature_norm": np.asarray(feature_norm, np.float32)}


def target_info(model: nn.Module, model_params: Any, mean: np.ndarray, target: np.ndarray,
                forget_classes: Sequence[int]) -> dict[str, float]:
  """The collision check: argmax / max-probability of h at the mean representation and at the forget target,
  and whether the head's class there is a forgotten one (nan when no class is forgotten)."""
  out = {}
  for name, z in (("mean", mean), ("target", target)):
    p = head_probs(model, model_params, z)
    out[f"{name}_argmax"] = float(np.argmax(p))
    out[f"{name}_pmax"] = float(np.max(p))
    out[f"{name}_collides"] = float(int(np.argmax(p)) in set(forget_classes)) if forget_classes else float("nan")
  out["target_shift"] = float(np.linalg.norm(np.asarray(target) - np.asarray(mean)))
  return out
