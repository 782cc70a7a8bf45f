"""Euler Mean Flows (EMF) and its baselines on 2-D toys, GP functions, mnist1d, digits and point clouds.

Every method (EMF u / x1, flow matching, MeanFlow with jax.jvp, shortcut, consistency training)
uses the same network, optimiser, batch, steps, EMA and seed per domain, trains through
core.fit, and is evaluated with EMA weights at several NFE against held-out data, next to the
real-vs-real floor. Feature metrics (Frechet, KID) use a small classifier trained here through
core.fit on the same training split.
"""

import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import matplotlib
import ml_collections
import numpy as np
import optax

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import iterators, offline, toys  # noqa: E402
from jaxml.emf import api  # noqa: E402
from jaxml.metrics import generative as gm  # noqa: E402
from jaxml.nn.mlp import MLP  # noqa: E402

DATASETS = ("checkerboard", "8gaussians", "moons", "gp", "mnist1d", "digits", "pointclouds")
NETS = ("mlp", "unet", "setnet")
PRIMARY = {"checkerboard": "sw", "8gaussians": "sw", "moons": "sw", "gp": "energy", "mnist1d": "frechet",
           "digits": "frechet", "pointclouds": "mmd_cd"}


def validate(config) -> None:
  for d in config.datasets:
    common.validate_choice(d, DATASETS, "dataset")
  for m in config.methods:
    common.validate_choice(m, api.METHODS, "method")
  for v in config.nets.values():
    common.validate_choice(v, NETS, "network")


# ----------------------------------------------------------------------------------------- data

def _domain(name: str) -> str:
  return "toy" if name in toys.TOY2D else name


def load_domain(name: str, config) -> dict[str, Any]:
  """train x (+ y), held-out eval set, a disjoint real 'floor' set of the eval size, and extras."""
  d = config.data
  if name in toys.TOY2D:
    tr, ev, fl = (toys.toy2d(name, n, seed) for n, seed in
                  ((d.toy_train, 100), (d.toy_eval, 101), (d.toy_eval, 102)))
    tr, ev, fl, mean, std = toys.standardize(tr, ev, fl)
    out = {"train": tr, "eval": ev, "floor": fl, "mean": mean, "std": std}
    if name == "8gaussians":
      out["centers"] = (toys.eight_gaussian_centers() - mean) / std
      out["mode_std"] = float(0.1 / np.mean(std))
    return out
  if name == "gp":
    tr, cov = toys.gp_functions(d.gp_train, np.random.default_rng(200))
    ev, _ = toys.gp_functions(d.gp_eval, np.random.default_rng(201))
    fl, _ = toys.gp_functions(d.gp_eval, np.random.default_rng(202))
    return {"train": tr, "eval": ev, "floor": fl, "cov": cov}
  if name == "mnist1d":
    raw = offline.load_mnist1d(seed=0)
    mean, std = float(raw["x_train"].mean()), float(raw["x_train"].std())
    norm = lambda a: ((a - mean) / std).astype(np.float32)
    floor_rows = np.random.default_rng(300).permutation(len(raw["x_train"]))[:len(raw["x_test"])]
    return {"train": norm(raw["x_train"]), "y_train": raw["y_train"], "eval": norm(raw["x_test"]),
            "y_eval": raw["y_test"], "floor": norm(raw["x_train"][floor_rows]), "num_classes": 10}
  if name == "digits":
    raw = offline.load_digits(seed=0)
    img = config.nets.digits == "unet"
    prep = lambda a: (2 * a - 1).reshape((len(a), 8, 8, 1) if img else (len(a), 64)).astype(np.float32)
    floor_rows = np.random.default_rng(400).permutation(len(raw["x_train"]))[:len(raw["x_test"])]
    return {"train": prep(raw["x_train"]), "y_train": raw["y_train"], "eval": prep(raw["x_test"]),
            "y_eval": raw["y_test"], "floor": prep(raw["x_train"][floor_rows]), "num_classes": 10,
            "dequantize": 1.0 / 16 if config.data.dequantize else 0.0}
  if name == "pointclouds":
    tr, ytr = toys.point_clouds(d.pc_train, np.random.default_rng(500), num_points=d.pc_points)
    ev, _ = toys.point_clouds(d.pc_eval, np.random.default_rng(501), num_points=d.pc_points)
    fl, _ = toys.point_clouds(d.pc_eval, np.random.default_rng(502), num_points=d.pc_points)
    return {"train": tr, "y_train": ytr, "eval": ev, "floor": fl}
  raise ValueError(f"unknown dataset {name!r}")


def make_batches(data: dict, batch_size: int, seed: int) -> Callable[[int], dict]:
  base = iterators.epoch_batches({"x": data["train"]}, batch_size, seed=seed)
  width = data.get("dequantize", 0.0)
  if not width:
    return base

  def batch_at(step):
    b = base(step)
    noise = core.numpy_rng(seed, 7, int(step)).uniform(-width, width, b["x"].shape)
    return {"x": (b["x"] + noise).astype(np.float32)}

  return batch_at


# ------------------------------------------------------------------------------ feature classifier

def train_classifier(name: str, data: dict, config, workdir: str):
  """MLP classifier (penultimate width 64) trained by core.fit; returns (features_fn, test accuracy)."""
  c = config.classifier
  feat, head = MLP(tuple(c.hidden)), MLP((data["num_classes"],))
  flat = lambda x: jnp.reshape(x, (x.shape[0], -1))
  features = lambda p, x: jax.nn.relu(feat.apply({"params": p["feat"]}, flat(x)))
  logits = lambda p, x: head.apply({"params": p["head"]}, features(p, x))

  def init(rng, batch):
    r1, r2 = jax.random.split(rng)
    f = feat.init(r1, flat(jnp.asarray(batch["x"])))["params"]
    return {"feat": f, "head": head.init(r2, jnp.zeros((1, c.hidden[-1])))["params"]}

  def loss_fn(params, batch, rng):
    del rng
    lg = logits(params, batch["x"])
    return optax.softmax_cross_entropy_with_integer_labels(lg, batch["y"]).mean(), \
        {"accuracy": jnp.mean(lg.argmax(-1) == batch["y"])}

  method = core.Method(init, loss_fn, None)
  train = {"x": data["train"], "y": data["y_train"]}
  opt = core.make_optimizer({"name": "adam", "lr": c.lr}, c.steps)
  state = core.create_train_state(method.init(jax.random.key(0), train), opt, 0)
  res = core.fit(state, core.make_train_step(loss_fn, opt), iterators.epoch_batches(train, c.batch_size, seed=0),
                 num_steps=c.steps, log_every=max(c.steps // 2, 1), writer=core.MetricWriter(workdir),
                 name=f"{name}/classifier", progress=False)
  params = res.state.params
  feat_fn = jax.jit(features)
  acc = float(jnp.mean(jax.jit(logits)(params, data["eval"]).argmax(-1) == data["y_eval"]))
  return (lambda x: np.asarray(feat_fn(params, jnp.asarray(x)))), acc


# ----------------------------------------------------------------------------------------- metrics

def score(name: str, x: np.ndarray, data: dict, feats=None) -> dict[str, float]:
  ref = data["eval"]
  if name == "pointclouds":
    return gm.point_cloud_scores(x, ref)
  out = {"sw": gm.sliced_wasserstein(x, ref), "energy": gm.energy_distance(x, ref)}
  if name in toys.TOY2D:
    out["mmd"] = gm.mmd_rbf(x, ref)
  if name == "8gaussians":
    out["modes"], out["off_mode"] = gm.mode_coverage(x, data["centers"], data["mode_std"])
  if name == "gp":
    out["cov_err"], out["mean_err"] = gm.covariance_error(x, data["cov"])
    out["psd_l1"] = gm.periodogram_l1(x, ref)
  if feats is not None:
    fx, fr = feats(x), feats(ref)
    out["frechet"] = gm.frechet_distance(fx, fr)
    out["kid"] = gm.kid(fx, fr)
  if not np.all(np.isfinite(x)):
    out = {k: float("nan") for k in out}
  return out


# ------------------------------------------------------------------------------------------- train

def method_config(config, method: str, kind: str) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({
      "method": method, "num_classes": 0, "model": config.model[kind].to_dict(),
      "emf": config.emf.to_dict(), "meanflow": config.meanflow.to_dict(), "fm": config.fm.to_dict(),
      "shortcut": config.shortcut.to_dict(), "ct": config.ct.to_dict()})


class _Built:
  """A generator with its train step and jitted sampler, reused across datasets and seeds of one
  shape so that each (method, network, shape) compiles once."""

  def __init__(self, gen: api.Generator, optimizer, ema_decay: float):
    self.gen = gen
    self.optimizer = optimizer
    self.step = core.make_train_step(gen.method.loss_fn, optimizer, ema_decay=ema_decay, uses_extra=gen.uses_extra)
    self.sample = jax.jit(gen.sample_fn)


def nfe_list(config, method: str) -> tuple[int, ...]:
  if method == "fm":
    return tuple(config.nfe.fm)
  if method == "ct":
    return tuple(config.nfe.ct)
  return tuple(config.nfe.flow_map)


def run(config, workdir: str) -> list[dict]:
  validate(config)
  optimizer = core.make_optimizer(config.optim, config.num_steps)
  cache: dict[tuple, _Built] = {}
  rows: list[dict] = []
  samples: dict[tuple[str, str], np.ndarray] = {}
  loaded: dict[str, dict] = {}
  for name in config.datasets:
    data = loaded[name] = load_domain(name, config)
    kind = config.nets[_domain(name)]
    feats = None
    if name in ("digits", "mnist1d"):
      t0 = time.perf_counter()
      feats, acc = train_classifier(name, data, config, workdir)
      print(f"[emf_generate] {name}: feature classifier test accuracy {acc:.3f} "
            f"({time.perf_counter() - t0:.1f}s)", flush=True)
      data["classifier_acc"] = acc
    floor = score(name, data["floor"], data, feats)
    if "classifier_acc" in data:
      floor["classifier_acc"] = data["classifier_acc"]
    rows.append(common.row(method="real", dataset=name, split=0, seed=0, metrics=floor))
    print(f"[emf_generate] {name}: real-vs-real floor " + " ".join(f"{k}={v:.4g}" for k, v in floor.items()),
          flush=True)
    n_eval = len(data["eval"])
    for seed in config.seeds:
      batches = make_batches(data, config.batch_size, seed)
      example = batches(0)
      for method in config.methods:
        key = (method, kind, data["train"].shape[1:])
        if key not in cache:
          cache[key] = _Built(api.make_generator(method_config(config, method, kind)), optimizer, config.ema_decay)
        built = cache[key]
        params = built.gen.method.init(jax.random.key(seed), example)
        state = core.create_train_state(params, optimizer, seed, ema=True, extra=built.gen.extra)
        t0 = time.perf_counter()
        res = core.fit(state, built.step, batches, num_steps=config.num_steps, log_every=config.log_every,
                       writer=core.MetricWriter(workdir), hooks=built.gen.make_hooks(config.num_steps),
                       name=f"{name}/{method}/s{seed}", progress=True)
        wall = time.perf_counter() - t0
        cost = {"train_wall_s": wall, "steps_per_s": res.steps_per_s, "params": core.param_count(params),
                "steps": config.num_steps, "final_loss": res.train_metrics.get("loss", float("nan"))}
        x0 = jax.random.normal(jax.random.key(10_000 + seed), (n_eval,) + data["train"].shape[1:])
        for k in nfe_list(config, method):
          x = np.asarray(built.sample(res.state.ema_params, x0, None, jax.random.key(20_000 + seed),
                                      jnp.asarray(k, jnp.int32)))
          metrics = {"nfe": k, **score(name, x, data, feats)}
          rows.append(common.row(method=f"{method}@{k}", dataset=name, split=0, seed=seed, metrics=metrics,
                                 cost=cost))
          if seed == config.seeds[0]:
            samples[(name, f"{method}@{k}")] = x
          print(f"[emf_generate] {name} {method} seed {seed} NFE {k}: "
                + " ".join(f"{m}={v:.4g}" for m, v in metrics.items() if m != "nfe"), flush=True)
  plot_samples(config, loaded, samples, workdir)
  print_summary(rows)
  return rows


# ------------------------------------------------------------------------------------------- plots

def plot_samples(config, loaded: dict, samples: dict, workdir: str) -> None:
  methods = list(config.methods)
  toys_here = [d for d in config.datasets if d in toys.TOY2D]
  if toys_here:
    cols = ["real"] + [f"{m}@1" for m in methods] + (["fm@8"] if "fm" in methods and 8 in config.nfe.fm else [])
    fig, axes = plt.subplots(len(toys_here), len(cols), figsize=(2.0 * len(cols), 2.0 * len(toys_here)),
                             squeeze=False)
    for i, d in enumerate(toys_here):
      for j, c in enumerate(cols):
        x = loaded[d]["eval"] if c == "real" else samples.get((d, c))
        ax = axes[i, j]
        if x is not None:
          ax.scatter(x[:2000, 0], x[:2000, 1], s=0.5, alpha=0.5)
        ax.set_xlim(-3, 3), ax.set_ylim(-3, 3), ax.set_xticks([]), ax.set_yticks([])
        if i == 0:
          ax.set_title(c, fontsize=8)
    common.save_plot(fig, workdir, "toys_samples.png")
  for d in ("digits", "mnist1d", "gp", "pointclouds"):
    if d not in config.datasets:
      continue
    cols = ["real"] + [f"{m}@1" for m in methods] + [f"{m}@2" for m in methods if m != "fm"]
    fig, axes = plt.subplots(1 if d != "pointclouds" else 3, len(cols), figsize=(1.9 * len(cols), 2.2 if d != "pointclouds" else 5.5),
                             squeeze=False)
    for j, c in enumerate(cols):
      x = loaded[d]["eval"] if c == "real" else samples.get((d, c))
      ax = axes[0, j]
      ax.set_title(c, fontsize=7)
      if x is None:
        continue
      if d == "digits":
        imgs = np.clip(x[:16].reshape(16, 8, 8), -1, 1)
        grid = imgs.reshape(4, 4, 8, 8).transpose(0, 2, 1, 3).reshape(32, 32)
        ax.imshow(grid, cmap="gray", vmin=-1, vmax=1)
      elif d in ("mnist1d", "gp"):
        for s in x[:4]:
          ax.plot(s, lw=0.8)
        ax.set_ylim(-4, 4)
      else:
        for i in range(3):
          axes[i, j].scatter(x[i, :, 0], x[i, :, 1], s=1)
          axes[i, j].set_xlim(-1.6, 1.6), axes[i, j].set_ylim(-1.6, 1.6)
          axes[i, j].set_xticks([]), axes[i, j].set_yticks([])
      ax.set_xticks([]), ax.set_yticks([])
    common.save_plot(fig, workdir, f"{d}_samples.png")


def print_summary(rows: list[dict]) -> None:
  """Markdown table of each dataset's primary metric (mean over seeds) per method@NFE."""
  by: dict[tuple[str, str], list[float]] = {}
  for r in rows:
    key = PRIMARY[r["dataset"]]
    v = r["metrics"].get(key)
    by.setdefault((r["dataset"], r["method"]), []).append(np.nan if v is None else v)
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  methods = list(dict.fromkeys(r["method"] for r in rows))
  print("| method | " + " | ".join(f"{d} ({PRIMARY[d]})" for d in datasets) + " |")
  print("|---" * (len(datasets) + 1) + "|")
  for m in methods:
    cells = []
    for d in datasets:
      v = by.get((d, m))
      cells.append("" if v is None else (f"{np.mean(v):.4g}" + (f" ± {np.std(v):.2g}" if len(v) > 1 else "")))
    print(f"| {m} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
  common.run_main(run, experiment="emf_generate", validate=validate)
