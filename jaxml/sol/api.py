"""SOL as a `core.Method`, its ablations, the GOL-style variant, inference and loop hooks.

SOL keeps non-trainable state in `TrainState.extra`:
  centroids [C, d]  stochastic centroids (refreshed every epoch by a hook),
  labels    [N]     current (possibly relabelled) noisy training ranks,
  flagged   [N]     whether an instance was ever flagged as noisy,
  epochs    ()      number of refreshes done.
SOL batches are {"x": [2B, ...], "idx": [2B] int32} (B bases then their B references); the
loss reads ranks from `extra["labels"][idx]`, so relabelling is exact under resume.
"""

from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxml import core
from jaxml.sol import baselines
from jaxml.sol import losses as L
from jaxml.sol.model import RankNet
from jaxml.sol.refine import refine_labels

__all__ = ["SOL_FAMILY", "BASELINES", "ALL_METHODS", "DEFAULTS", "RankLearner", "sol_settings",
           "make_learner", "make_method", "init_extra", "make_embed_fn", "make_refresh_fn",
           "make_refresh_hook"]

SOL_FAMILY = ("sol", "sol_no_so", "sol_no_d", "sol_sigma0", "sol_no_relabel", "gol")
BASELINES = baselines.BASELINES
ALL_METHODS = SOL_FAMILY + BASELINES

DEFAULTS: dict[str, Any] = dict(
    num_classes=10, sigma=1.0, tau=1, margin=0.25, neighbourhood=1, pairs_per_class=32, pair_pool=0,
    w_so=1.0, w_d=1.0, w_center=1.0, eta=0.9, relabel=True, start_epoch=0,
    relabel_step="constant_rate_mean", backbone="mlp", hidden=(128, 128), embed_dim=32,
    knn=50, soft_sigma=1.0, poe_kl=1e-3, poe_margin=0.5, poe_weight=0.1)

# Ablations and GOL as overrides of the SOL settings (spec §5).
_VARIANTS: dict[str, dict[str, Any]] = {
    "sol": {},
    "sol_no_so": {"w_so": 0.0},
    "sol_no_d": {"w_d": 0.0},
    "sol_sigma0": {"sigma": 0.0},
    "sol_no_relabel": {"relabel": False},
    # GOL = σ → 0, learnable reference points, no refinement; metric loss + center loss.
    "gol": {"sigma": 0.0, "relabel": False, "w_d": 0.0},
}


class RankLearner(NamedTuple):
  """What an experiment needs to train and evaluate one method on the shared loop.

  predictors: {suffix: predict_fn(params, extra, x) -> [B] int32 ranks}; "" is the method's
  main rule (SOL: nearest expectation), "_knn" the k-NN alternative (SOL family only).
  batch_kind: "pairs" (SOL family: x + idx, labels in extra) or "plain" (x + y).
  refresh: whether the per-epoch centroid/embedding hook runs.
  """

  name: str
  method: core.Method
  predictors: dict[str, Callable[[Any, Any, jax.Array], jax.Array]]
  uses_extra: bool
  batch_kind: str
  refresh: bool
  settings: dict[str, Any]


def sol_settings(config: Mapping[str, Any] | None = None, variant: str = "sol") -> dict[str, Any]:
  """DEFAULTS <- config <- variant overrides."""
  if variant not in _VARIANTS:
    raise ValueError(f"unknown SOL variant {variant!r}; expected one of {tuple(_VARIANTS)}")
  s = dict(DEFAULTS)
  s.update({k: v for k, v in dict(config or {}).items() if k in DEFAULTS})
  s.update(_VARIANTS[variant])
  s["hidden"] = tuple(s["hidden"])
  return s


def _net(s: Mapping[str, Any], head: str) -> RankNet:
  return RankNet(num_classes=int(s["num_classes"]), head=head, backbone=s["backbone"],
                 hidden=tuple(s["hidden"]), embed_dim=int(s["embed_dim"]))


def make_method(config: Mapping[str, Any] | None = None, variant: str = "sol") -> core.Method:
  """SOL (or an ablation / GOL) as a core.Method whose loss takes `extra`
  (use `core.make_train_step(method.loss_fn, opt, uses_extra=True)`).

  L = w_so · L_SO + w_d · mean_b L_D(b)  (+ w_center · center loss for GOL).
  """
  s = sol_settings(config, variant)
  learnable = variant == "gol"
  net = _net(s, "gol" if learnable else "embed")
  c, sigma, tau = int(s["num_classes"]), float(s["sigma"]), int(s["tau"])
  table = L.gaussian_table(c, sigma)

  def init(rng: jax.Array, batch: core.Batch) -> core.Params:
    return net.init(rng, jnp.asarray(batch["x"]))["params"]

  def loss_fn(params, batch, rng, extra):
    out = net.apply({"params": params}, batch["x"])
    e = out["embedding"]
    ranks = extra["labels"][batch["idx"]]
    cent = out["centroids"] if learnable else jax.lax.stop_gradient(extra["centroids"])
    prof = L.expected_profile(e, cent, table)
    pairs = L.sample_pairs(rng, ranks, tau, int(s["pairs_per_class"]), int(s["pair_pool"]))
    dist = L.gaussian_rows(ranks, c, sigma)
    probs = L.order_probs(dist[pairs.base], dist[pairs.ref], tau)
    l_so = L.stochastic_order_loss(prof[pairs.base], prof[pairs.ref], ranks[pairs.base],
                                   ranks[pairs.ref], probs, float(s["margin"]), pairs.valid)
    l_d = L.discriminative_loss(prof, ranks, int(s["neighbourhood"])).mean()
    loss = float(s["w_so"]) * l_so + float(s["w_d"]) * l_d
    aux = {"l_so": l_so, "l_d": l_d, "pairs": pairs.valid.sum()}
    if learnable:
      l_c = L.center_loss(e, cent, ranks)
      loss = loss + float(s["w_center"]) * l_c
      aux["l_center"] = l_c
    return loss, aux

  return core.Method(init, loss_fn, None)


def _make_predictors(s: Mapping[str, Any], learnable: bool) -> dict[str, Callable]:
  net = _net(s, "gol" if learnable else "embed")
  table = L.gaussian_table(int(s["num_classes"]), float(s["sigma"]))

  def predict_fn(params, extra, x):
    """Nearest expectation: r̂ = argmin_l S_l(f(x))."""
    out = net.apply({"params": params}, x)
    cent = out["centroids"] if learnable else extra["centroids"]
    return jnp.argmin(L.expected_profile(out["embedding"], cent, table), -1).astype(jnp.int32)

  def knn_fn(params, extra, x):
    """k-NN rule (spec §2.7 alternative): round(mean of the current labels of the k most
    cosine-similar training embeddings, as of the last refresh)."""
    e = net.apply({"params": params}, x)["embedding"]
    k = min(int(s["knn"]), extra["embeddings"].shape[0])
    _, idx = jax.lax.top_k(e @ extra["embeddings"].T, k)
    mean = extra["labels"][idx].astype(jnp.float32).mean(-1)
    return jnp.clip(jnp.round(mean), 0, int(s["num_classes"]) - 1).astype(jnp.int32)

  return {"": predict_fn, "_knn": knn_fn}


def make_embed_fn(config: Mapping[str, Any] | None = None, *, chunk: int = 1024) -> Callable:
  """embed(params, x) -> [N, d] unit embeddings, in chunks of `chunk` rows (lax.map)."""
  net = _net(sol_settings(config), "embed")

  def embed(params, x):
    n = x.shape[0]
    size = min(chunk, n)
    pad = (-n) % size
    xp = jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)]) if pad else x
    out = jax.lax.map(lambda xb: net.apply({"params": params}, xb)["embedding"],
                      xp.reshape((-1, size) + x.shape[1:]))
    return out.reshape((-1, out.shape[-1]))[:n]

  return embed


def init_extra(config: Mapping[str, Any] | None, params: core.Params, x_train: np.ndarray,
               labels: np.ndarray, variant: str = "sol", *, refresh: Callable | None = None) -> dict[str, jax.Array]:
  """Initial `extra`: centroids from the untrained encoder (the refresh before epoch 0).

  `refresh` may pass a prebuilt `make_refresh_fn(config, variant)` (reuses its compilation).
  """
  s = sol_settings(config, variant)
  labels = jnp.asarray(labels, jnp.int32)
  extra = {"centroids": jnp.zeros((int(s["num_classes"]), int(s["embed_dim"])), jnp.float32),
           "labels": labels, "flagged": jnp.zeros(labels.shape, jnp.bool_),
           "embeddings": jnp.zeros((labels.shape[0], int(s["embed_dim"])), jnp.float32),
           "epochs": jnp.zeros((), jnp.int32)}
  refresh = refresh or make_refresh_fn(config, variant)
  extra, _ = refresh(params, extra, jnp.asarray(x_train), jnp.asarray(False))
  return {**extra, "epochs": jnp.zeros((), jnp.int32)}


def make_refresh_fn(config: Mapping[str, Any] | None = None, variant: str = "sol") -> Callable:
  """Jitted refresh(params, extra, x_train, relabel) -> (extra, stats).

  Embeds the training set, recomputes the stochastic centroids, and if `relabel` (a traced
  bool) refines the labels and recomputes the centroids with them (spec §2.1, §2.6).
  """
  s = sol_settings(config, variant)
  c, sigma = int(s["num_classes"]), float(s["sigma"])
  table = L.gaussian_table(c, sigma)
  embed = make_embed_fn(s)

  @jax.jit
  def refresh(params, extra, x_train, relabel):
    e = embed(params, x_train)
    labels = extra["labels"]
    cent = L.soft_centroids(e, L.gaussian_rows(labels, c, sigma))
    ref = refine_labels(L.expected_profile(e, cent, table), labels, eta=float(s["eta"]),
                        step_rule=s["relabel_step"])
    new_labels = jnp.where(relabel, ref.labels, labels)
    flagged = relabel & ref.flagged
    cent = jnp.where(relabel, L.soft_centroids(e, L.gaussian_rows(new_labels, c, sigma)), cent)
    new_extra = {"centroids": cent, "labels": new_labels, "flagged": extra["flagged"] | flagged,
                 "embeddings": e, "epochs": extra["epochs"] + 1}
    stats = {"flagged": flagged.sum(), "changed": (new_labels != labels).sum(), "step": ref.step}
    return new_extra, stats

  return refresh


def make_refresh_hook(config: Mapping[str, Any] | None, x_train: np.ndarray, steps_per_epoch: int, *,
                      variant: str = "sol",
                      on_labels: Callable[[np.ndarray], None] | None = None,
                      log: Callable[[int, dict], None] | None = None,
                      refresh: Callable | None = None) -> core.Hook:
  """core.Hook run after every epoch: refresh centroids; relabel once the 0-based index of the
  epoch just finished exceeds `start_epoch` (and `relabel` is on). `on_labels` receives the
  new host labels (the reference sampler reads them); `refresh` reuses a prebuilt refresh fn."""
  s = sol_settings(config, variant)
  refresh = refresh or make_refresh_fn(config, variant)
  x_dev = jnp.asarray(x_train)

  def fn(step: int, state: core.TrainState) -> core.TrainState:
    epoch = step // steps_per_epoch - 1
    relabel = bool(s["relabel"]) and epoch > int(s["start_epoch"])
    extra, stats = refresh(state.params, state.extra, x_dev, jnp.asarray(relabel))
    if on_labels is not None and relabel:
      on_labels(np.asarray(jax.device_get(extra["labels"])))
    if log is not None:
      log(step, jax.device_get(stats))
    return state.replace(extra=extra)

  return core.Hook(steps_per_epoch, fn)


def make_learner(name: str, config: Mapping[str, Any] | None = None) -> RankLearner:
  """Any method of ALL_METHODS with the same encoder settings."""
  if name in SOL_FAMILY:
    s = sol_settings(config, name)
    learnable = name == "gol"
    return RankLearner(name, make_method(config, name), _make_predictors(s, learnable), True, "pairs",
                       True, s)
  if name in BASELINES:
    s = sol_settings(config)
    method, predict = baselines.make_baseline(name, s)
    return RankLearner(name, method, {"": predict}, False, "plain", False, s)
  raise ValueError(f"unknown method {name!r}; expected one of {ALL_METHODS}")
