"""X-EviProbe and its baselines as one importable pipeline: fit once on the clean graph, score any graph.

  fitted = fit_posthoc(config, model, params, batch, train_idx, val_idx, num_classes, seed=0)
  scores = score_all(config, fitted, model, params, shifted_batch, rng=key, stacked=ensemble_params)
  rows   = {m: metrics_for(s, ood_nodes, id_nodes, labels) for m, (s, secs) in scores.items()}

`config` sections: eviprobe (ProbeConfig), extension (its overrides for the guarded row), baselines,
ablations, gnnsafe, gkde, epn, gpn (`gpn.MODEL_KEYS` + `GPN_TRAIN_KEYS`), mc_samples. Scorers return numpy
`ood`, `misc`, `probs` [N, K], `pred` [N]; structure-dependent methods read the scored batch's edges."""

import time
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxml import core
from jaxml.eviprobe import backbone as bb
from jaxml.eviprobe import baselines as bl
from jaxml.eviprobe import gpn as gpn_lib
from jaxml.eviprobe import probe
from jaxml.eviprobe.api import probe_config
from jaxml.eviprobe.defaults import ABLATIONS, BASELINES, GRID, GUARD_GRID, MISC_GRID
from jaxml.metrics import calibration, ood

__all__ = ["OURS", "EXTENSION", "GRID", "GUARD_GRID", "BASELINES", "ABLATIONS", "READOUT_VARIANTS",
           "ISOLATED_METHODS", "Fitted", "probe_configs", "fit_posthoc", "fit_epn", "fit_gpn", "GPN_TRAIN_KEYS",
           "score_all", "isolated_scores", "metrics_for", "aurc", "timed", "MISC_GRID"]

OURS = "xeviprobe"
# X-EviProbe with the two-sided own-evidence guard (probe module docstring): the extension beyond the paper
EXTENSION = "xeviprobe_guard"
READOUT_VARIANTS = {"ours_mi": "mutual_info", "ours_neg_log_evidence": "neg_log_evidence"}
ISOLATED_METHODS = (OURS, EXTENSION, "A3_no_prop", "A3b_tau_only", "linear", "msp", "energy", "gnnsafe", "maha_q", "gpn")

_fit_probe = jax.jit(probe.fit_probe, static_argnums=6)
_score = jax.jit(probe.score, static_argnums=5)
_fit_latent = jax.jit(probe.fit_latent_probe, static_argnums=4)
# GKDE's sigma is traced: one compile serves every value.
_gkde = jax.jit(bl.gkde_prior, static_argnames=("num_classes", "num_nodes", "max_hops"))
_gnnsafe = jax.jit(bl.gnnsafe, static_argnames=("steps", "alpha"))


class Fitted(NamedTuple):
  """What the post-hoc methods fitted on the clean graph (plus the inputs GKDE needs to refit)."""

  cfgs: dict[str, probe.ProbeConfig]     # OURS and each ablation
  probe: dict[str, probe.ProbeState]
  maha_z: probe.LatentProbe
  temperature: jax.Array
  gkde: dict | None
  epn: Any
  gpn: Any                               # (model, params, class_counts) or None
  edges: np.ndarray                      # the clean graph's edges
  labels: np.ndarray
  train_idx: np.ndarray
  num_classes: int
  cost: dict[str, dict[str, float]]


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
  """Runs fn twice (compile, then a timed warm call); returns (result, warm seconds)."""
  jax.block_until_ready(fn())
  t0 = time.perf_counter()
  out = jax.block_until_ready(fn())
  return out, time.perf_counter() - t0


def _np(tree):
  return jax.tree.map(np.asarray, jax.device_get(tree))


def probe_configs(config: Mapping[str, Any]) -> dict[str, probe.ProbeConfig]:
  """OURS from `config['eviprobe']`, EXTENSION from `config['extension']` over it (when given), then each of
  `config['ablations']` as overrides of `config['eviprobe']`."""
  base = dict(config["eviprobe"])
  out = {OURS: probe_config(base)}
  if "extension" in config:
    out[EXTENSION] = probe_config(base | dict(config["extension"]))
  for name in config["ablations"]:
    if name not in ABLATIONS:
      raise ValueError(f"unknown ablation {name!r}; expected one of {', '.join(ABLATIONS)}")
    out[name] = probe_config(base | ABLATIONS[name])
  return out


def _gkde_fit(config, edges, labels, train_idx, num_classes, logits) -> dict:
  g = dict(config["gkde"])
  return _gkde(jnp.asarray(edges), jnp.asarray(labels), jnp.asarray(train_idx), num_classes=num_classes,
               num_nodes=labels.shape[0], logits=logits, sigma=jnp.float32(g["sigma"]), max_hops=int(g["max_hops"]))


def fit_epn(config: Mapping[str, Any], z: np.ndarray, labels: np.ndarray, train_idx: np.ndarray,
            val_idx: np.ndarray, num_classes: int, seed: int) -> tuple[Any, float]:
  """Trains the EPN probe on frozen latents z through core.fit; returns (params, wall seconds)."""
  e = dict(config["epn"])
  method = bl.make_epn_method(num_classes, hidden=int(e["hidden"]), l2=float(e["l2"]))
  n = labels.shape[0]
  zb = {"z": np.asarray(z), "labels": labels, "train_mask": np.isin(np.arange(n), train_idx).astype(np.float32),
        "val_mask": np.isin(np.arange(n), val_idx).astype(np.float32)}
  steps = int(e["steps"])
  opt = core.make_optimizer({"name": "adam", "lr": float(e["lr"])}, steps)
  state = core.create_train_state(method.init(jax.random.key(seed + 17), zb), opt, seed + 17)
  t0 = time.perf_counter()
  res = core.fit(state, core.make_train_step(method.loss_fn, opt), lambda _s: zb, num_steps=steps,
                 shard_batch_rows=False, log_every=steps, name="epn", progress=False)
  return res.state.params, time.perf_counter() - t0


GPN_TRAIN_KEYS = ("lr", "max_epochs", "patience", "warmup_epochs")


def fit_gpn(config: Mapping[str, Any], batch: Mapping[str, Any], num_features: int, num_classes: int,
            seed: int) -> tuple[Any, float, dict[str, float]]:
  """Trains GPN on the clean graph through core.train: `warmup_epochs` flow-only epochs (no selection), then
  the full model from there (early stopping on validation UCE; fresh Adam state, as GPN's two optimisers).
  Returns ((model, params, class_counts), wall seconds, {val_uce, val_acc, best_epoch} of the selected params)."""
  g = dict(config["gpn"])
  core.reject_unknown(g, gpn_lib.MODEL_KEYS + GPN_TRAIN_KEYS, "gpn")
  labels = np.asarray(batch["labels"])
  counts = np.bincount(labels[np.asarray(batch["train_mask"]) > 0], minlength=num_classes).astype(np.float32)
  method, model = gpn_lib.make_gpn_method(g, num_features, num_classes)
  keep = ("x", "feat_rows", "feat_cols", "feat_vals", "edges", "train_mask", "val_mask")
  gb = {k: np.asarray(v) for k, v in batch.items() if k in keep} | dict(labels=labels, class_counts=counts)
  epochs, warmup = int(g["max_epochs"]), int(g["warmup_epochs"])
  optim = {"name": "adam", "lr": float(g["lr"])}
  t0 = time.perf_counter()
  init_params = None
  if warmup > 0:
    warm, _ = gpn_lib.make_gpn_method(g, num_features, num_classes, phase="warmup")
    init_params = core.train(warm, lambda _s: gb, {"optim": optim, "num_steps": warmup, "log_every": warmup},
                             seed=seed + 31, shard_batch_rows=False, name="gpn_warmup", progress=False).params
  res = core.train(method, lambda _s: gb, {"optim": optim, "num_steps": epochs, "eval_every": 1, "log_every": epochs},
                   seed=seed + 31, eval_batches=[gb], shard_batch_rows=False, init_params=init_params, name="gpn",
                   select=core.Selection("val_uce", "min", every=1, patience=int(g["patience"])), progress=False)
  params = gpn_lib.latent_stats(model, res.params, gb)
  secs = time.perf_counter() - t0
  val = method.eval_fn(res.params, gb)
  info = {"val_uce": float(val["val_uce"]), "val_acc": float(val["val_acc"]), "best_epoch": float(res.best_step or 0)}
  return (model, params, jnp.asarray(counts)), secs, info


def fit_posthoc(config: Mapping[str, Any], model, params, batch: Mapping[str, Any], train_idx: np.ndarray,
                val_idx: np.ndarray, num_classes: int, *, seed: int = 0) -> Fitted:
  """Fits everything that is fitted once on the clean graph: the probe (and its ablations),
  temperature, z-Mahalanobis, GKDE and EPN. `batch` holds features, edges and labels."""
  out = bb.forward(model, params, batch)
  labels = np.asarray(batch["labels"])
  lab, tr, va = jnp.asarray(labels), jnp.asarray(train_idx), jnp.asarray(val_idx)
  cfgs = probe_configs(config)
  baselines = tuple(config["baselines"])
  cost: dict[str, dict[str, float]] = {}
  probes = {}
  fits: dict[probe.ProbeConfig, probe.ProbeState] = {}
  for name, cfg in cfgs.items():
    # the fit depends only on which latent is probed: equal fit configs share one compile and one fit
    fit_cfg = probe.ProbeConfig(latent=cfg.latent)
    fit = lambda: _fit_probe(out["q"], out["z"], out["logits"], lab, tr, va, fit_cfg)  # noqa: E731
    if name in (OURS, EXTENSION):
      probes[name], secs = timed(fit)
      cost[name] = {"fit_s": secs}
      fits.setdefault(fit_cfg, probes[name])
    else:     # ablations are not timed (saves a second run of each)
      if fit_cfg not in fits:
        fits[fit_cfg] = fit()
      probes[name] = fits[fit_cfg]
  maha_z, secs = timed(lambda: _fit_latent(out["z"], lab, tr, va, num_classes))
  cost["maha_z"] = {"fit_s": secs}
  cost["maha_q"] = {"fit_s": cost[OURS]["fit_s"]}
  edges = np.asarray(batch["edges"])
  gkde = epn = gpn = None
  if "gkde" in baselines:
    gkde, secs = timed(lambda: _gkde_fit(config, edges, labels, train_idx, num_classes, out["logits"]))
    cost["gkde"] = {"fit_s": secs}
  if "epn" in baselines:
    epn, secs = fit_epn(config, np.asarray(out["z"]), labels, train_idx, val_idx, num_classes, seed)
    cost["epn"] = {"train_s": secs}
  if "gpn" in baselines:
    gpn, secs, info = fit_gpn(config, batch, int(model.num_features), num_classes, seed)
    cost["gpn"] = {"train_s": secs} | info   # GPN's selection metrics on validation ride along with its cost
  return Fitted(cfgs, probes, maha_z, probes[OURS].temperature, gkde, epn, gpn, edges, labels,
                np.asarray(train_idx), num_classes, cost)


def _simple_scorers(config: Mapping[str, Any], fitted: Fitted, out: Mapping[str, jax.Array],
                    edges: jax.Array) -> dict[str, Callable[[], dict]]:
  """Baseline name -> thunk of its {ood, misc, probs} from the backbone's forward `out` on one graph."""
  logits, gs = out["logits"], dict(config["gnnsafe"])
  return {
      "msp": lambda: bl.msp(logits), "entropy": lambda: bl.entropy_score(logits),
      "temp_scaling": lambda: bl.temperature_scaled(logits, fitted.temperature), "energy": lambda: bl.energy(logits),
      "gnnsafe": lambda: _gnnsafe(logits, edges, steps=int(gs["steps"]), alpha=float(gs["alpha"])),
      "maha_q": lambda: bl.mahalanobis(fitted.probe[OURS].latents[0], out["q"], logits),
      "maha_z": lambda: bl.mahalanobis(fitted.maha_z, out["z"], logits),
  }


def _row(s: Mapping[str, Any], pred: Any) -> dict:
  """numpy ood, misc and probs of one scorer's output, with the predictions `pred`."""
  return _np({key: s[key] for key in ("ood", "misc", "probs")}) | {"pred": np.asarray(pred)}


def score_all(config: Mapping[str, Any], fitted: Fitted, model, params, batch: Mapping[str, Any], *,
              rng: jax.Array, stacked: Any = None) -> dict[str, tuple[dict, float]]:
  """method -> (numpy scores {ood, misc, probs, pred[, n_clamped]}, warm score seconds) on `batch`
  (the clean graph or a shifted one). `stacked`: the ensemble's stacked parameters."""
  out = bb.forward(model, params, batch)
  edges_np = np.asarray(batch["edges"])
  e = jnp.asarray(edges_np)
  baselines = tuple(config["baselines"])
  k = fitted.num_classes
  res: dict[str, tuple[dict, float]] = {}
  pred = np.asarray(out["logits"]).argmax(-1)
  # `score` returns every misclassification read-out: configs that differ only in `misc_readout` and share one
  # fitted state (`fit_posthoc` fits each latent once) share one compiled scorer and one call; 'misc' is then
  # picked by name.
  shared: dict[tuple[probe.ProbeConfig, int], dict] = {}
  for name, cfg in fitted.cfgs.items():
    state = fitted.probe[name]
    key = (cfg._replace(misc_readout=probe.MISC_READOUTS[0]), id(state))
    if name in (OURS, EXTENSION):
      s, secs = timed(lambda: _score(state, out["q"], out["z"], out["logits"], e, cfg))
      s = shared.setdefault(key, _np(s))
    else:
      if key not in shared:
        shared[key] = _np(_score(state, out["q"], out["z"], out["logits"], e, key[0]))
      s, secs = shared[key], float("nan")
    s = dict(s, misc=s[cfg.misc_readout])
    res[name] = ({"ood": s[READOUT_VARIANTS.get(name, "u_epi")], "misc": s["misc"], "probs": s["mean_probs"],
                  "pred": pred, "n_clamped": float(s["n_clamped"])}, secs)
  logits = out["logits"]
  for name, fn in _simple_scorers(config, fitted, out, e).items():
    if name in baselines:
      s, secs = timed(fn)
      res[name] = (_row(s, pred), secs)
  if "gkde" in baselines:
    if np.array_equal(edges_np, fitted.edges):   # a structure-only prior: unchanged by feature shifts
      g, secs = fitted.gkde, 0.0
    else:                                        # the graph was rewired: the prior is refitted on it
      g, secs = timed(lambda: _gkde_fit(config, edges_np, fitted.labels, fitted.train_idx, k, logits))
    res["gkde"] = (_row(g, pred), secs)
  if "epn" in baselines:
    hidden = int(dict(config["epn"])["hidden"])
    s, secs = timed(lambda: bl.epn_scores(fitted.epn, out["z"], logits, k, hidden))
    res["epn"] = (_row(s, pred), secs)
  if "gpn" in baselines:
    gm, gp, counts = fitted.gpn
    s, secs = timed(lambda: gpn_lib.gpn_scores(dict(config["gpn"]), gm, gp, batch, counts))
    res["gpn"] = (_row(s, s["pred"]), secs)
  samplers = []
  if {"mc_dropout", "mc_dropout_mi"} & set(baselines):
    samplers.append(("mc_dropout", "mi", lambda: bb.mc_logits(model, params, batch, rng, int(config["mc_samples"]))))
  if {"ensemble", "ensemble_var"} & set(baselines):
    if stacked is None:
      raise ValueError("ensemble baselines need the stacked ensemble parameters (stacked=...)")
    samplers.append(("ensemble", "var", lambda: bb.ensemble_logits(model, stacked, batch)))
  for name, second, fn in samplers:
    samples, secs = timed(fn)
    s = _np(bl.sample_average(samples))
    both = _row(s, s["probs"].argmax(-1))
    res[name], res[f"{name}_{second}"] = (both, secs), (both | {"ood": s[second]}, secs)
  return {m: v for m, v in res.items() if m in (OURS, EXTENSION, *baselines, *config["ablations"])}


def _safe(fn, *args) -> float:
  try:
    return fn(*args)
  except ValueError:
    return float("nan")


def aurc(uncertainty: np.ndarray, wrong: np.ndarray) -> float:
  """Area under the risk-coverage curve: keep the k most certain nodes, risk_k = errors among them / k,
  AURC = mean_k risk_k (k = 1..n); lower is better. It scores a method's own predictions and ranking together, so
  GPN and a frozen backbone compare on one footing; tied uncertainties share their mean error (order-free)."""
  u, w = np.asarray(uncertainty, np.float64), np.asarray(wrong, np.float64)
  if u.size == 0:
    raise ValueError("aurc needs at least one node")
  order = np.argsort(u, kind="stable")
  u, w = u[order], w[order]
  _, start, counts = np.unique(u, return_index=True, return_counts=True)
  w = np.repeat(np.add.reduceat(w, start) / counts, counts)     # ties share their mean error
  k = np.arange(1, u.size + 1)
  return float(np.mean(np.cumsum(w) / k))


def metrics_for(s: Mapping[str, np.ndarray], ood_nodes: np.ndarray, id_nodes: np.ndarray,
                labels: np.ndarray, ref_preds: Mapping[str, np.ndarray] | None = None) -> dict[str, float]:
  """OOD metrics over ood_nodes (positives) vs id_nodes; misclassification/calibration on id_nodes (errors of
  the method's own `pred`; `aurc` on them). `ref_preds` {name: pred [N]} adds `misc_auroc_<name>`: the same
  misclassification score ranked against that model's errors (e.g. the frozen backbone's, a common error set)."""
  out: dict[str, float] = {}
  if ood_nodes.size:
    sc = np.r_[s["ood"][ood_nodes], s["ood"][id_nodes]]
    lab = np.r_[np.ones(ood_nodes.size), np.zeros(id_nodes.size)]
    out.update(ood_auroc=_safe(ood.auroc, sc, lab), ood_aupr=_safe(ood.aupr, sc, lab),
               ood_fpr95=_safe(ood.fpr_at_tpr, sc, lab, 0.95))
  wrong = s["pred"][id_nodes] != labels[id_nodes]
  out.update(misc_auroc=_safe(ood.auroc, s["misc"][id_nodes], wrong),
             misc_aupr=_safe(ood.aupr, s["misc"][id_nodes], wrong),
             aurc=_safe(aurc, s["misc"][id_nodes], wrong),
             acc=float(1.0 - wrong.mean()), ece=calibration.ece(s["probs"][id_nodes], labels[id_nodes], bins=10),
             brier=calibration.brier(s["probs"][id_nodes], labels[id_nodes]))
  for name, pred in (ref_preds or {}).items():
    out[f"misc_auroc_{name}"] = _safe(ood.auroc, s["misc"][id_nodes], pred[id_nodes] != labels[id_nodes])
  return out


def isolated_scores(config: Mapping[str, Any], fitted: Fitted, model, params, batch: Mapping[str, Any],
                    nodes: np.ndarray, rows: np.ndarray) -> dict:
  """method -> OOD scores [len(nodes)] when node nodes[i] alone gets feature row rows[i] (one forward
  per node, all in one jitted `lax.map`); needs dense features `batch['x']`. Also returns wall_s."""
  if "x" not in batch:
    raise ValueError("isolated settings need dense features (batch['x'])")
  e, cfgs = jnp.asarray(batch["edges"]), fitted.cfgs
  methods = [m for m in ISOLATED_METHODS if m in cfgs or m in config["baselines"]]
  x0 = jnp.asarray(batch["x"])

  def one(args):
    i, row = args
    b = dict(batch, x=x0.at[i].set(row))
    out = bb.forward_eval(model, params, b)
    simple = _simple_scorers(config, fitted, out, e)
    res = {}
    for m in methods:
      if m in cfgs:
        res[m] = probe.score(fitted.probe[m], out["q"], out["z"], out["logits"], e, cfgs[m])["u_epi"][i]
      elif m == "gpn":
        gm, gp, counts = fitted.gpn
        res[m] = gpn_lib.gpn_scores(dict(config["gpn"]), gm, gp, b, counts, jit=False)["ood"][i]
      else:
        res[m] = simple[m]()["ood"][i]
    return res

  t0 = time.perf_counter()
  out = jax.jit(lambda n, r: jax.lax.map(one, (n, r)))(jnp.asarray(nodes), jnp.asarray(rows))
  return {"scores": _np(out), "wall_s": time.perf_counter() - t0}
