"""Post-hoc probes on frozen features: closed-form ridge (numpy) and fresh MLPs (through core.fit).

The adversary's own loss is not evidence that information was removed; fresh probes on held-out
rows are (Elazar & Goldberg 2018: adversarial removal often leaves the attribute decodable).
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import scipy.stats

from jaxml import core
from jaxml.causal_reward import baselines, training

__all__ = ["ridge_fit", "ridge_r2", "ridge_accuracy", "spearman", "ProbeResult", "make_probe_trainer",
           "pref_probe", "regress_probe"]


def ridge_fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> tuple[np.ndarray, float]:
  """Weights and intercept of min ||y - x w - b||^2 + l2 n ||w||^2 (x standardised inside)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  mu, sd = x.mean(0), x.std(0) + 1e-8
  xs = (x - mu) / sd
  w = np.linalg.solve(xs.T @ xs + l2 * len(x) * np.eye(x.shape[1]), xs.T @ (y - y.mean())) / sd
  return w, float(y.mean() - mu @ w)


def ridge_r2(x_tr, y_tr, x_te, y_te, l2: float = 1e-3) -> float:
  """Held-out R^2 of a ridge probe."""
  w, b = ridge_fit(x_tr, y_tr, l2)
  pred = np.asarray(x_te, np.float64) @ w + b
  y_te = np.asarray(y_te, np.float64)
  return float(1.0 - np.sum((y_te - pred) ** 2) / np.sum((y_te - y_te.mean()) ** 2))


def ridge_accuracy(x_tr, y_tr, x_te, y_te, l2: float = 1e-3) -> float:
  """Held-out accuracy of a ridge classifier for a 0/1 target (threshold 1/2)."""
  w, b = ridge_fit(x_tr, y_tr, l2)
  pred = (np.asarray(x_te, np.float64) @ w + b) > 0.5
  return float(np.mean(pred == (np.asarray(y_te) > 0.5)))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
  """Spearman rank correlation with average ranks for ties (the binary cue is all ties)."""
  return float(scipy.stats.spearmanr(x, y).statistic)


class ProbeResult(NamedTuple):
  train_score: float
  test_score: float


def make_probe_trainer(task: str, dim: int, *, hidden: int = 64, lr: float = 3e-3):
  """A fresh-MLP probe (trunk `hidden` -> 32, GELU) as a `training.RewardTrainer`: task "pref" trains
  Bradley-Terry on pairs, "regress" regresses a scalar (MSE). Build once per (task, dim): one compile."""
  if task not in ("pref", "regress"):
    raise ValueError(f"unknown probe task {task!r}; expected 'pref' or 'regress'")
  trainer = training.make_trainer({"kind": "vanilla", "dim": dim, "trunk_hidden": hidden, "trunk_out": 32},
                                  {"name": "adam", "lr": lr, "clip_norm": 1.0})
  if task == "pref":
    return trainer
  module = baselines.RewardMLP(trunk_hidden=hidden, trunk_out=32)

  def loss_fn(params, batch, rng):
    del rng
    err = module.apply(params, batch["h_w"]) - batch["label"]
    return 0.5 * jnp.mean(err * err), {}

  method = core.Method(init=lambda rng, b: module.init(rng, b["h_w"][:2]), loss_fn=loss_fn)
  return trainer._replace(method=method, core=core.make_trainer(method, {}, optimizer=trainer.optimizer))


def _fit_probe(trainer, data, seed, steps, batch_size):
  n = len(data["h_w"])
  bs = min(batch_size, n)
  epochs = max(1, -(-steps // max(n // bs, 1)))
  return training.train(trainer, data, seed=seed, epochs=epochs, batch_size=bs).params


def pref_probe(trainer, z_w: np.ndarray, z_l: np.ndarray, *, seed: int, steps: int = 400, batch_size: int = 256,
               train_frac: float = 0.5) -> ProbeResult:
  """Preference probe on frozen features of pairs (chosen first): a fresh MLP fitted on the first
  `train_frac` of the rows, accuracy on the rest (held out) and on its own training rows."""
  n_tr = int(len(z_w) * train_frac)
  params = _fit_probe(trainer, {"h_w": z_w[:n_tr], "h_l": z_l[:n_tr]}, seed, steps, batch_size)
  reward = trainer.reward
  acc = lambda a, b: float(np.mean(np.sign(training.predict(reward, params, a)  # noqa: E731
                                           - training.predict(reward, params, b)) * 0.5 + 0.5))
  return ProbeResult(acc(z_w[:n_tr], z_l[:n_tr]), acc(z_w[n_tr:], z_l[n_tr:]))


def regress_probe(trainer, z: np.ndarray, y: np.ndarray, *, seed: int, steps: int = 400, batch_size: int = 256,
                  train_frac: float = 0.5) -> ProbeResult:
  """Held-out R^2 of a fresh MLP regressing y [n] on frozen features z [n, d] (y standardised)."""
  n_tr = int(len(z) * train_frac)
  y = np.asarray(y, np.float64)
  mu, sd = y[:n_tr].mean(), y[:n_tr].std() + 1e-12
  ys = ((y - mu) / sd).astype(np.float32)
  params = _fit_probe(trainer, {"h_w": z[:n_tr], "h_l": z[:n_tr], "label": ys[:n_tr]}, seed, steps, batch_size)
  pred = training.predict(trainer.reward, params, z)

  def r2(sl):
    err = ys[sl] - pred[sl]
    return float(1.0 - np.sum(err ** 2) / np.sum((ys[sl] - ys[sl].mean()) ** 2))

  return ProbeResult(r2(slice(0, n_tr)), r2(slice(n_tr, None)))
