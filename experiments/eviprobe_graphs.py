"""X-EviProbe on frozen GNNs: OOD and misclassification detection under GPN-style shifts.

For every dataset x split x init: train the backbone (stacked with the deep-ensemble members,
member 0 is "the" backbone) through core.fit with early stopping, save it with orbax, restore
it, fit every post-hoc method on the clean graph, then score every shift setting:
  loc                 leave-out-classes (poisoning; the backbone never saw those labels)
  normal, bernoulli   feature perturbation of 10% of non-train nodes (evasion)
  *_isolated          one node perturbed at a time (one forward pass each); ID = clean test nodes
Rows: method x "<dataset>:<setting>" x split x init, metrics OOD AUROC/AUPR/FPR95, misclassification
AUROC/AUPR, accuracy, ECE, Brier, and cost (fit/score wall seconds, warm). Writes summary.md
(tables per setting, sign tests, relative gains) and ood_auroc.png.
"""

import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import csbm, graph_shift, offline  # noqa: E402
from jaxml.eviprobe import backbone as bb  # noqa: E402
from jaxml.eviprobe import baselines as bl  # noqa: E402
from jaxml.eviprobe import probe  # noqa: E402
from jaxml.eviprobe.api import probe_config  # noqa: E402
from jaxml.metrics import calibration, ood  # noqa: E402

DATASETS = ("cora_ml", "citeseer", "cora", "csbm", "npz")
SETTINGS = ("loc", "normal", "bernoulli", "normal_isolated", "bernoulli_isolated")
BASELINES = ("msp", "entropy", "temp_scaling", "energy", "gnnsafe", "maha_q", "maha_z", "gkde",
             "mc_dropout", "mc_dropout_mi", "ensemble", "ensemble_var", "epn")
OURS = "xeviprobe"
# ablation name -> ProbeConfig overrides (spec A1-A9, teleport sweep) or a read-out variant
ABLATIONS: dict[str, dict] = {
    "A1_latent_only": dict(fusion="latent"), "A2_output_only": dict(fusion="output"),
    "A3_no_prop": dict(propagation="none"), "A3b_tau_only": dict(propagation="tau"),
    "A4_classwise": dict(propagation="classwise"), "A5_sym_norm": dict(norm="sym"),
    "A6_chi2": dict(typicality="chi2"), "A6_conformal": dict(typicality="conformal"),
    "A6_cosine": dict(typicality="cosine"), "A7_temperature": dict(temperature=True),
    "A8_z": dict(latent="z"), "A8_q_and_z": dict(latent="both"), "A9_log": dict(propagation="log"),
    "a0.3": dict(teleport=0.3), "a0.5": dict(teleport=0.5), "ours_mi": {}, "ours_neg_log_evidence": {},
}
READOUT_VARIANTS = {"ours_mi": "mutual_info", "ours_neg_log_evidence": "neg_log_evidence"}
ISOLATED_METHODS = (OURS, "A3_no_prop", "A3b_tau_only", "msp", "energy", "gnnsafe", "maha_q")

_fit_probe = jax.jit(probe.fit_probe, static_argnums=6)
_score = jax.jit(probe.score, static_argnums=5)
_gkde = jax.jit(bl.gkde_prior, static_argnames=("num_classes", "num_nodes", "max_hops", "sigma"))
_gnnsafe = jax.jit(bl.gnnsafe, static_argnames=("steps", "alpha"))
_fit_latent = jax.jit(probe.fit_latent_probe, static_argnums=4)


def validate(config) -> None:
  for d in config.data.datasets:
    common.validate_choice(d, DATASETS, "dataset")
  if "npz" in config.data.datasets and not config.data.path:
    raise common.ConfigError("dataset 'npz' needs data.path (a gnn-benchmark npz file)")
  for s in config.settings:
    common.validate_choice(s, SETTINGS, "setting")
  for b in config.baselines:
    common.validate_choice(b, BASELINES, "baseline")
  for a in config.ablations:
    common.validate_choice(a, tuple(ABLATIONS), "ablation")
  common.validate_choice(config.backbone.name, bb.BACKBONES, "backbone")
  common.validate_choice(config.data.features, ("dense", "sparse"), "feature format")
  probe_config(dict(config.eviprobe))


def load(config, name: str) -> dict:
  if name == "csbm":
    return csbm.make_csbm(**dict(config.data.csbm))
  if name == "npz":
    return offline.load_graph(path=config.data.path, root=config.data_dir)
  fmt = "npz" if name == "cora_ml" else "planetoid"   # GPN's CiteSeer is planetoid CiteSeer
  return offline.load_graph(name, root=config.data_dir, fmt=fmt)


def _features(config, x: np.ndarray) -> dict:
  return bb.sparse_features(x) if config.data.features == "sparse" else {"x": x}


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
  """Runs fn twice (compile, then timed warm call); returns (result, warm seconds)."""
  jax.block_until_ready(fn())
  t0 = time.perf_counter()
  out = jax.block_until_ready(fn())
  return out, time.perf_counter() - t0


def _np(tree):
  return jax.tree.map(np.asarray, jax.device_get(tree))


# ----------------------------------------------------------------------------------- fitting
def fit_posthoc(config, model, params, batch, labels, train_idx, val_idx, num_classes, edges, seed) -> dict:
  """Everything fitted once on the clean graph (the probe, temperature, z-Mahalanobis, GKDE, EPN)."""
  fitted: dict[str, Any] = {"cost": {}}
  out = bb.forward(model, params, batch)
  fitted["clean_out"] = out
  lab, tr, va = jnp.asarray(labels), jnp.asarray(train_idx), jnp.asarray(val_idx)
  cfgs = {OURS: probe_config(dict(config.eviprobe))}
  for name in config.ablations:
    cfgs[name] = probe_config(dict(config.eviprobe) | ABLATIONS[name])
  fitted["cfgs"] = cfgs
  fitted["probe"] = {}
  for name, cfg in cfgs.items():
    # the fit depends only on which latent is probed: equal fit configs share one compile
    fit_cfg = probe.ProbeConfig(latent=cfg.latent)
    fit = lambda: _fit_probe(out["q"], out["z"], out["logits"], lab, tr, va, fit_cfg)  # noqa: E731
    if name == OURS:
      state, secs = _timed(fit)
      fitted["cost"][name] = {"fit_s": secs}
    else:     # ablations are not timed (saves a second run of each)
      state = fit()
    fitted["probe"][name] = state
  fitted["maha_z"], secs = _timed(lambda: _fit_latent(out["z"], lab, tr, va, num_classes))
  fitted["cost"]["maha_z"] = {"fit_s": secs}
  fitted["cost"]["maha_q"] = {"fit_s": fitted["cost"][OURS]["fit_s"]}
  fitted["temperature"] = fitted["probe"][OURS].temperature
  if "gkde" in config.baselines:
    fitted["gkde"], secs = _timed(lambda: _gkde(jnp.asarray(edges), lab, tr, num_classes=num_classes,
                                                num_nodes=labels.shape[0], logits=out["logits"],
                                                sigma=float(config.gkde.sigma), max_hops=int(config.gkde.max_hops)))
    fitted["cost"]["gkde"] = {"fit_s": secs}
  if "epn" in config.baselines:
    method = bl.make_epn_method(num_classes, hidden=int(config.epn.hidden), l2=float(config.epn.l2))
    zb = {"z": np.asarray(out["z"]), "labels": labels,
          "train_mask": np.isin(np.arange(labels.shape[0]), train_idx).astype(np.float32),
          "val_mask": np.isin(np.arange(labels.shape[0]), val_idx).astype(np.float32)}
    opt = core.make_optimizer({"name": "adam", "lr": float(config.epn.lr)}, int(config.epn.steps))
    state = core.create_train_state(method.init(jax.random.key(seed + 17), zb), opt, seed + 17)
    t0 = time.perf_counter()
    res = core.fit(state, core.make_train_step(method.loss_fn, opt), lambda _s: zb, num_steps=int(config.epn.steps),
                   shard_batch_rows=False, log_every=int(config.epn.steps), name="epn", progress=False)
    fitted["epn"] = res.state.params
    fitted["cost"]["epn"] = {"train_s": time.perf_counter() - t0}
  return fitted


# ----------------------------------------------------------------------------------- scoring
def score_all(config, fitted, model, params, stacked, batch, edges, num_classes, rng) -> dict[str, tuple[dict, float]]:
  """method -> (scores dict of numpy arrays with ood, misc, probs[, pred], warm score seconds)."""
  out = bb.forward(model, params, batch)
  e = jnp.asarray(edges)
  res: dict[str, tuple[dict, float]] = {}
  pred = np.asarray(out["logits"]).argmax(-1)
  for name, cfg in fitted["cfgs"].items():
    state = fitted["probe"][name]
    if name == OURS:
      s, secs = _timed(lambda: _score(state, out["q"], out["z"], out["logits"], e, cfg))
    else:
      s, secs = _score(state, out["q"], out["z"], out["logits"], e, cfg), float("nan")
    s = _np(s)
    ood_key = READOUT_VARIANTS.get(name, "u_epi")
    res[name] = ({"ood": s[ood_key], "misc": s["u_alea"], "probs": s["mean_probs"], "pred": pred,
                  "n_clamped": float(s["n_clamped"])}, secs)
  logits = out["logits"]
  simple = {
      "msp": lambda: bl.msp(logits), "entropy": lambda: bl.entropy_score(logits),
      "temp_scaling": lambda: bl.temperature_scaled(logits, fitted["temperature"]),
      "energy": lambda: bl.energy(logits),
      "gnnsafe": lambda: _gnnsafe(logits, e, steps=int(config.gnnsafe.steps), alpha=float(config.gnnsafe.alpha)),
      "maha_q": lambda: bl.mahalanobis(fitted["probe"][OURS].latents[0], out["q"], logits),
      "maha_z": lambda: bl.mahalanobis(fitted["maha_z"], out["z"], logits),
  }
  for name, fn in simple.items():
    if name in config.baselines:
      s, secs = _timed(fn)
      res[name] = (_np(s) | {"pred": pred}, secs)
  if "gkde" in config.baselines:   # a structure-only prior: identical on evasion graphs
    res["gkde"] = (_np({k: fitted["gkde"][k] for k in ("ood", "misc", "probs")}) | {"pred": pred}, 0.0)
  if "epn" in config.baselines:
    s, secs = _timed(lambda: bl.epn_scores(fitted["epn"], out["z"], logits, num_classes, int(config.epn.hidden)))
    res["epn"] = (_np({k: s[k] for k in ("ood", "misc", "probs")}) | {"pred": pred}, secs)
  if {"mc_dropout", "mc_dropout_mi"} & set(config.baselines):
    samples, secs = _timed(lambda: bb.mc_logits(model, params, batch, rng, int(config.mc_samples)))
    s = _np(bl.sample_average(samples))
    p_pred = s["probs"].argmax(-1)
    res["mc_dropout"] = ({"ood": s["ood"], "misc": s["misc"], "probs": s["probs"], "pred": p_pred}, secs)
    res["mc_dropout_mi"] = ({"ood": s["mi"], "misc": s["misc"], "probs": s["probs"], "pred": p_pred}, secs)
  if {"ensemble", "ensemble_var"} & set(config.baselines):
    samples, secs = _timed(lambda: bb.ensemble_logits(model, stacked, batch))
    s = _np(bl.sample_average(samples))
    p_pred = s["probs"].argmax(-1)
    res["ensemble"] = ({"ood": s["ood"], "misc": s["misc"], "probs": s["probs"], "pred": p_pred}, secs)
    res["ensemble_var"] = ({"ood": s["var"], "misc": s["misc"], "probs": s["probs"], "pred": p_pred}, secs)
  return {k: v for k, v in res.items() if k in (OURS, *config.baselines, *config.ablations)}


def _safe(fn, *args) -> float:
  try:
    return fn(*args)
  except ValueError:
    return float("nan")


def metrics_for(s: dict, ood_nodes: np.ndarray, id_nodes: np.ndarray, labels: np.ndarray) -> dict:
  """OOD metrics over ood_nodes (positives) vs id_nodes; misclassification/calibration on id_nodes."""
  out: dict[str, float] = {}
  if ood_nodes.size:
    sc = np.r_[s["ood"][ood_nodes], s["ood"][id_nodes]]
    lab = np.r_[np.ones(ood_nodes.size), np.zeros(id_nodes.size)]
    out.update(ood_auroc=_safe(ood.auroc, sc, lab), ood_aupr=_safe(ood.aupr, sc, lab),
               ood_fpr95=_safe(ood.fpr_at_tpr, sc, lab, 0.95))
  wrong = s["pred"][id_nodes] != labels[id_nodes]
  out.update(misc_auroc=_safe(ood.auroc, s["misc"][id_nodes], wrong), misc_aupr=_safe(ood.aupr, s["misc"][id_nodes], wrong),
             acc=float(1.0 - wrong.mean()), ece=calibration.ece(s["probs"][id_nodes], labels[id_nodes], bins=10),
             brier=calibration.brier(s["probs"][id_nodes], labels[id_nodes]))
  return out


# ----------------------------------------------------------------------------------- isolated
def isolated_scores(config, fitted, model, params, x_clean: np.ndarray, batch, edges, nodes, kind, seed) -> dict:
  """method -> scores of each node in `nodes` when it alone is perturbed (one forward per node)."""
  rows = graph_shift.perturb_features(x_clean, nodes, kind, seed, scale=float(config.shift.normal_scale),
                                      p=float(config.shift.bernoulli_p))[nodes]
  e = jnp.asarray(edges)
  cfgs = fitted["cfgs"]
  methods = [m for m in ISOLATED_METHODS if m in cfgs or m in config.baselines]
  base = dict(batch)
  x0 = jnp.asarray(x_clean)

  def one(args):
    i, row = args
    b = dict(base, x=x0.at[i].set(row))
    out = bb._apply_eval(model, params, b)
    logits = out["logits"]
    res = {}
    for m in methods:
      if m in cfgs:
        res[m] = probe.score(fitted["probe"][m], out["q"], out["z"], logits, e, cfgs[m])["u_epi"][i]
      elif m == "msp":
        res[m] = bl.msp(logits)["ood"][i]
      elif m == "energy":
        res[m] = bl.energy(logits)["ood"][i]
      elif m == "gnnsafe":
        res[m] = bl.gnnsafe(logits, e, steps=int(config.gnnsafe.steps), alpha=float(config.gnnsafe.alpha))["ood"][i]
      elif m == "maha_q":
        res[m] = bl.mahalanobis(fitted["probe"][OURS].latents[0], out["q"], logits)["ood"][i]
    return res

  if config.data.features != "dense":
    raise common.ConfigError("isolated settings need data.features='dense'")
  t0 = time.perf_counter()
  out = jax.jit(lambda n, r: jax.lax.map(one, (n, r)))(jnp.asarray(nodes), jnp.asarray(rows))
  return {"scores": _np(out), "wall_s": time.perf_counter() - t0}


# ----------------------------------------------------------------------------------- summary
def summarise(rows: list[dict], workdir: str, baselines: tuple[str, ...]) -> str:
  """Markdown tables per setting, paired sign tests and relative gains; also the bar plot."""
  cells = sorted({r["dataset"] for r in rows})
  methods = [OURS] + [m for m in baselines] + sorted({r["method"] for r in rows} - {OURS, *baselines})
  get = lambda m, c, k: [r["metrics"].get(k) for r in rows if r["method"] == m and r["dataset"] == c]  # noqa: E731
  lines = []
  settings = sorted({c.split(":")[1] for c in cells}, key=SETTINGS.index)
  pooled_w = pooled_l = 0
  gains = []
  for setting in settings:
    scells = [c for c in cells if c.endswith(":" + setting)]
    lines.append(f"\n### Setting `{setting}` (OOD AUROC / misclassification AUROC, %, mean ± std over splits)\n")
    lines.append("| method | " + " | ".join(c.split(":")[0] for c in scells) + " |")
    lines.append("|---|" + "---|" * len(scells))
    for m in methods:
      vals = []
      for c in scells:
        o = [v for v in get(m, c, "ood_auroc") if v is not None]
        mi = [v for v in get(m, c, "misc_auroc") if v is not None]
        if not o:
          vals.append("–")
          continue
        txt = f"{100 * np.mean(o):.1f} ± {100 * np.std(o):.1f}"
        if mi:
          txt += f" / {100 * np.mean(mi):.1f}"
        vals.append(f"**{txt}**" if m == OURS else txt)
      if any(v != "–" for v in vals):
        lines.append(f"| {m} | " + " | ".join(vals) + " |")
    lines.append("")
    for c in scells:
      means = {m: np.mean([v for v in get(m, c, "ood_auroc") if v is not None] or [np.nan]) for m in baselines}
      means = {m: v for m, v in means.items() if np.isfinite(v)}
      if not means:
        continue
      best = max(means, key=means.get)
      ours = [v for v in get(OURS, c, "ood_auroc")]
      theirs = [v for v in get(best, c, "ood_auroc")]
      w = sum(a > b for a, b in zip(ours, theirs) if a is not None and b is not None)
      l_ = sum(a < b for a, b in zip(ours, theirs) if a is not None and b is not None)
      pooled_w, pooled_l = pooled_w + w, pooled_l + l_
      p = binomtest(w, w + l_).pvalue if w + l_ else float("nan")
      rel = (np.mean(ours) - means[best]) / means[best]
      gains.append((c, rel))
      mis = {m: [v for v in get(m, c, "misc_auroc") if v is not None] for m in (OURS, *baselines)}
      mis = {m: float(np.mean(v)) for m, v in mis.items() if v}
      mis_txt = ""
      if OURS in mis and len(mis) > 1:
        mb = max((v, m) for m, v in mis.items() if m != OURS)
        mis_txt = (f"; misclassification AUROC ours {100 * mis[OURS]:.1f} vs best baseline `{mb[1]}` {100 * mb[0]:.1f} "
                   f"(relative {100 * (mis[OURS] - mb[0]) / mb[0]:+.1f}%)")
      lines.append(f"- `{c}`: best baseline by OOD AUROC = `{best}` ({100 * means[best]:.1f}); ours "
                   f"{100 * np.mean(ours):.1f}; relative gain {100 * rel:+.1f}%; sign test over splits "
                   f"{w} wins / {l_} losses, p = {p:.3g}{mis_txt}")
  # calibration and accuracy (ID test nodes), averaged over datasets and splits per setting
  lines.append("\n### Accuracy / ECE (10 bins) / Brier on ID test nodes, mean over datasets x splits\n")
  cal_settings = [st for st in settings if not st.endswith("_isolated")]
  lines.append("| method | " + " | ".join(cal_settings) + " |")
  lines.append("|---|" + "---|" * len(cal_settings))
  for m in methods:
    vals = []
    for st in cal_settings:
      rs = [r["metrics"] for r in rows if r["method"] == m and r["dataset"].endswith(":" + st)]
      if not rs or rs[0].get("acc") is None:
        vals.append("–")
        continue
      vals.append(" / ".join(f"{np.mean([x[k] for x in rs]):.3f}" for k in ("acc", "ece", "brier")))
    if any(v != "–" for v in vals):
      lines.append(f"| {m} | " + " | ".join(vals) + " |")
  # cost: warm wall seconds (fit once on the clean graph, score once per graph); trained methods add train_s
  lines.append("\n### Cost per method (median over runs; warm jitted calls, seconds)\n")
  lines.append("| method | fit_s | score_s | train_s |")
  lines.append("|---|---|---|---|")
  for m in [OURS, *baselines]:
    cs = [r["cost"] for r in rows if r["method"] == m and not r["dataset"].endswith("_isolated")]
    if not cs:
      continue
    med = lambda k: (f"{np.median([c[k] for c in cs if c.get(k) is not None]):.4f}"  # noqa: E731
                     if any(c.get(k) is not None for c in cs) else "–")
    lines.append(f"| {m} | {med('fit_s')} | {med('score_s')} | {med('train_s')} |")
  p_all = binomtest(pooled_w, pooled_w + pooled_l).pvalue if pooled_w + pooled_l else float("nan")
  wins_cells = sum(g >= 0 for _, g in gains)
  lines.append(f"\n**Pooled paired sign test (ours vs the per-cell best baseline, all cells x splits):** "
               f"{pooled_w} wins / {pooled_l} losses, two-sided p = {p_all:.3g}. Ours ≥ best baseline (mean) in "
               f"{wins_cells} of {len(gains)} dataset x setting cells.\n")
  # bar plot: one panel per setting, bars = methods averaged over datasets and splits
  fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 4.2), squeeze=False)
  for ax, setting in zip(axes[0], settings):
    scells = [c for c in cells if c.endswith(":" + setting)]
    names, means, stds = [], [], []
    for m in [OURS] + list(baselines):
      v = [x for c in scells for x in get(m, c, "ood_auroc") if x is not None]
      if v:
        names.append(m)
        means.append(100 * np.mean(v))
        stds.append(100 * np.std(v))
    colors = ["tab:red" if n == OURS else "tab:gray" for n in names]
    ax.barh(names[::-1], means[::-1], xerr=stds[::-1], color=colors[::-1])
    ax.axvline(50, color="k", lw=0.5, ls="--")
    ax.set_xlim(0, 100)
    ax.set_title(f"{setting} (mean over datasets x splits)", fontsize=9)
    ax.set_xlabel("OOD AUROC (%)")
  fig.tight_layout()
  common.save_plot(fig, workdir, "ood_auroc.png")
  return "\n".join(lines)


# ----------------------------------------------------------------------------------- run
def run(config, workdir: str) -> list[dict]:
  validate(config)
  rows: list[dict] = []
  writer = core.MetricWriter(workdir)
  num_members = int(config.ensemble_size) if {"ensemble", "ensemble_var"} & set(config.baselines) else 1
  for dname in config.data.datasets:
    g = load(config, dname)
    x_clean, edges, labels_all, k_all = g["features"], g["edges"], g["labels"], int(g["num_classes"])
    for split in config.splits:
      masks = graph_shift.gpn_split(labels_all, split, train=float(config.shift.train), val=float(config.shift.val))
      poisonings = sorted({"loc" if s == "loc" else "clean" for s in config.settings
                           if not s.endswith("_isolated") or dname in config.isolated_datasets})
      for init in config.inits:
        for poison in poisonings:
          if poison == "loc":
            info = graph_shift.leave_out_classes(labels_all, k_all, masks, fraction=float(config.shift.loc_fraction))
            labels, k = info["labels"], info["num_classes"]
            tr_mask, va_mask, id_test = info["train_mask"], info["val_mask"], info["test_mask"]
          else:
            labels, k = labels_all, k_all
            tr_mask, va_mask, id_test = masks["train_mask"], masks["val_mask"], masks["test_mask"]
          model = bb.make_backbone(dict(config.backbone), x_clean.shape[1], k)
          batch = dict(_features(config, x_clean), edges=edges, labels=labels,
                       train_mask=tr_mask.astype(np.float32), val_mask=va_mask.astype(np.float32))
          ckpt = common.workdir_subdir(workdir, "checkpoints", dname, poison, f"split{split}_init{init}")
          t0 = time.perf_counter()
          _, tinfo = bb.train_backbone(model, batch, seed=1000 * split + init, optim=dict(config.optim),
                                       max_epochs=int(config.train.max_epochs), patience=int(config.train.patience),
                                       ckpt_dir=ckpt, l2=float(config.train.l2), num_members=num_members,
                                       eval_every=int(config.train.eval_every), log_every=int(config.log_every),
                                       writer=writer, name=f"{dname}_{poison}_s{split}", progress=bool(config.progress))
          train_s = time.perf_counter() - t0
          # every post-hoc method loads this one checkpoint
          stacked = bb.restore_params(model, batch, ckpt, num_members=num_members)
          if stacked is None:
            raise FileNotFoundError(f"backbone checkpoint missing under {ckpt}")
          params = bb.member(stacked, 0) if num_members > 1 else stacked
          train_idx, val_idx = np.flatnonzero(tr_mask), np.flatnonzero(va_mask)
          fitted = fit_posthoc(config, model, params, batch, labels, train_idx, val_idx, k, edges, 1000 * split + init)
          print(f"[eviprobe_graphs] {dname} split {split} init {init} {poison}: backbone {tinfo['epochs']:.0f} epochs "
                f"(best {tinfo['best_epoch']:.0f}, {train_s:.1f}s)", flush=True)
          settings = [s for s in config.settings if ("loc" if s == "loc" else "clean") == poison]
          for setting in settings:
            t1 = time.perf_counter()
            rng = jax.random.key(7919 * split + init)
            if setting.endswith("_isolated"):
              if dname not in config.isolated_datasets:
                continue
              kind = setting.split("_")[0]
              nodes = graph_shift.isolated_nodes(masks["test_mask"], int(config.shift.isolated_nodes), split)
              iso = isolated_scores(config, fitted, model, params, x_clean, batch, edges, nodes, kind, split)
              clean = score_all(config, fitted, model, params, stacked, batch, edges, k, rng)
              id_nodes = np.flatnonzero(id_test)
              for m, sc in iso["scores"].items():
                sc_id = clean[m][0]["ood"][id_nodes]
                s_all = np.r_[sc, sc_id]
                lab = np.r_[np.ones(sc.size), np.zeros(sc_id.size)]
                met = {"ood_auroc": ood.auroc(s_all, lab), "ood_aupr": ood.aupr(s_all, lab),
                       "ood_fpr95": ood.fpr_at_tpr(s_all, lab, 0.95)}
                rows.append(common.row(method=m, dataset=f"{dname}:{setting}", split=split, seed=init, metrics=met,
                                       cost={"isolated_wall_s": iso["wall_s"], "nodes": nodes.size}))
            else:
              if setting == "loc":
                b, ood_nodes = batch, np.flatnonzero(info["ood_test_mask"])
                id_nodes = np.flatnonzero(id_test)
              else:
                pert = graph_shift.select_perturbed(masks, split, budget=float(config.shift.budget))
                xs = graph_shift.perturb_features(x_clean, pert, setting, split, scale=float(config.shift.normal_scale),
                                                  p=float(config.shift.bernoulli_p))
                b = dict(batch, **_features(config, xs))
                ood_nodes = np.flatnonzero(masks["test_mask"] & pert)
                id_nodes = np.flatnonzero(masks["test_mask"] & ~pert)
              scores = score_all(config, fitted, model, params, stacked, b, edges, k, rng)
              for m, (sc, secs) in scores.items():
                met = metrics_for(sc, ood_nodes, id_nodes, labels)
                if "n_clamped" in sc:
                  met["n_clamped"] = sc["n_clamped"]
                cost = {"score_s": secs} | fitted["cost"].get(m, {})
                if m in ("ensemble", "ensemble_var"):
                  cost["train_s"] = train_s          # the stacked run trains all members at once
                rows.append(common.row(method=m, dataset=f"{dname}:{setting}", split=split, seed=init,
                                       metrics=met, cost=cost))
            ours = [r for r in rows if r["method"] == OURS and r["dataset"] == f"{dname}:{setting}"
                    and r["split"] == split and r["seed"] == init]
            best = max((r["metrics"]["ood_auroc"] or 0.0, r["method"]) for r in rows
                       if r["dataset"] == f"{dname}:{setting}" and r["split"] == split and r["seed"] == init
                       and r["method"] in config.baselines)
            if ours:
              print(f"[eviprobe_graphs] {dname}:{setting} split {split}: ours OOD AUROC "
                    f"{ours[0]['metrics']['ood_auroc']:.3f}, best baseline {best[1]} {best[0]:.3f} "
                    f"({time.perf_counter() - t1:.1f}s)", flush=True)
  summary = summarise(rows, workdir, tuple(config.baselines))
  with open(os.path.join(workdir, "summary.md"), "w") as f:
    f.write(summary + "\n")
  print(summary, flush=True)
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="eviprobe_graphs", validate=validate)
