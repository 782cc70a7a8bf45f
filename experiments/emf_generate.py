"""Euler Mean Flows (EMF) and its baselines on 2-D toys, GP functions, mnist1d, digits and point clouds.

Every method (EMF u / x1, flow matching, MeanFlow with jax.jvp, shortcut, consistency training)
comes from `jaxml.emf.make_generator`, uses the same network, optimiser, batch, steps, EMA and seed
per domain, trains through core.train, and is evaluated with EMA weights at several NFE against
held-out data, next to the real-vs-real floor. Feature metrics (Frechet, KID) use a small
classifier trained here through core.train on the same training split.
"""

import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax

matplotlib.use("Agg")

from experiments import common, report  # noqa: E402
from jaxml import core, emf  # noqa: E402
from jaxml.data import iterators, offline, toys  # noqa: E402
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
    common.validate_choice(m, emf.METHODS, "method")
  for d in dict.fromkeys(_domain(d) for d in config.datasets):
    common.validate_choice(config.nets[d], NETS, "network")


def _domain(name: str) -> str:
  return "toy" if name in toys.TOY2D else name


def load_domain(name: str, config) -> dict[str, Any]:
  """train x (+ y), held-out eval set, a disjoint real 'floor' set of the eval size, and extras."""
  d = config.data
  if name in toys.TOY2D:
    return toys.toy_domain(name, num_train=d.toy_train, num_eval=d.toy_eval)
  if name == "gp":
    (tr, cov), (ev, _), (fl, _) = (toys.gp_functions(n, np.random.default_rng(s))
                                   for n, s in ((d.gp_train, 200), (d.gp_eval, 201), (d.gp_eval, 202)))
    return {"train": tr, "eval": ev, "floor": fl, "cov": cov}
  if name == "pointclouds":
    (tr, ytr), (ev, _), (fl, _) = (toys.point_clouds(n, np.random.default_rng(s), num_points=d.pc_points)
                                   for n, s in ((d.pc_train, 500), (d.pc_eval, 501), (d.pc_eval, 502)))
    return {"train": tr, "y_train": ytr, "eval": ev, "floor": fl}
  if name == "mnist1d":
    raw = offline.load_mnist1d(seed=0)
    mean, std = float(raw["x_train"].mean()), float(raw["x_train"].std())
    prep = lambda a: ((a - mean) / std).astype(np.float32)
    floor_seed = 300
  else:
    raw = offline.load_digits(seed=0)
    img = config.nets.digits == "unet"
    prep = lambda a: (2 * a - 1).reshape((len(a), 8, 8, 1) if img else (len(a), 64)).astype(np.float32)
    floor_seed = 400
  floor_rows = np.random.default_rng(floor_seed).permutation(len(raw["x_train"]))[:len(raw["x_test"])]
  out = {"train": prep(raw["x_train"]), "y_train": raw["y_train"], "eval": prep(raw["x_test"]),
         "y_eval": raw["y_test"], "floor": prep(raw["x_train"][floor_rows]), "num_classes": 10}
  if name == "digits":
    out["dequantize"] = 1.0 / 16 if d.dequantize else 0.0
  return out


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


def train_cfg(config, optim, num_steps: int, log_every: int, ema_decay: float | None = None) -> dict:
  return {"optim": optim, "num_steps": num_steps, "log_every": log_every, "eval_every": 0,
          "checkpoint_every": config.checkpoint_every, "ema_decay": ema_decay}


def train_classifier(name: str, data: dict, config, workdir: str, mesh):
  """MLP classifier (penultimate width 64) trained by core.train; returns (features_fn, test accuracy)."""
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
    return (optax.softmax_cross_entropy_with_integer_labels(lg, batch["y"]).mean(),
            {"accuracy": jnp.mean(lg.argmax(-1) == batch["y"])})

  train = {"x": data["train"], "y": data["y_train"]}
  res = core.train(core.Method(init, loss_fn), iterators.epoch_batches(train, c.batch_size, seed=0),
                   train_cfg(config, {"name": "adam", "lr": c.lr}, c.steps, max(c.steps // 2, 1)),
                   workdir=workdir, name=f"{name}/classifier", seed=0, mesh=mesh,
                   init_params=init(jax.random.key(0), train))
  feat_fn = jax.jit(features)
  acc = float(jnp.mean(jax.jit(logits)(res.params, data["eval"]).argmax(-1) == data["y_eval"]))
  return (lambda x: np.asarray(feat_fn(res.params, jnp.asarray(x)))), acc


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


def generator_config(config, method: str, kind: str) -> dict:
  """The package's config for one method: the shared sections of the experiment config."""
  sections = {k: config[k] for k in ("emf", "meanflow", "fm", "shortcut", "ct") if k in config}
  return {"method": method, "num_classes": 0, "model": config.model[kind], **sections}


def run(config, workdir: str) -> list[dict]:
  validate(config)
  mesh = core.make_mesh(int(config.mesh.num_data) or None)
  rows: list[dict] = []
  samples: dict[tuple[str, str], np.ndarray] = {}
  loaded: dict[str, dict] = {}
  for name in config.datasets:
    data = loaded[name] = load_domain(name, config)
    feats, floor = None, {}
    if name in ("digits", "mnist1d"):
      t0 = time.perf_counter()
      feats, floor["classifier_acc"] = train_classifier(name, data, config, workdir, mesh)
      print(f"[emf_generate] {name}: feature classifier test accuracy {floor['classifier_acc']:.3f} "
            f"({time.perf_counter() - t0:.1f}s)", flush=True)
    floor = score(name, data["floor"], data, feats) | floor
    rows.append(common.row(method="real", dataset=name, split=0, seed=0, metrics=floor))
    print(f"[emf_generate] {name}: real-vs-real floor " + " ".join(f"{k}={v:.4g}" for k, v in floor.items()),
          flush=True)
    for seed in range(int(config.seed), int(config.seed) + int(config.num_seeds)):
      batches = make_batches(data, config.batch_size, seed)
      for method in config.methods:
        gen = emf.make_generator(generator_config(config, method, config.nets[_domain(name)]))
        params = gen.method.init(jax.random.key(seed), batches(0))
        res = core.train(gen.method, batches, train_cfg(config, config.optim, config.num_steps, config.log_every,
                                                        config.ema_decay),
                         workdir=workdir, name=f"{name}/{method}/s{seed}", seed=seed, mesh=mesh, init_params=params)
        cost = {"train_wall_s": res.wall_s, "steps_per_s": res.steps_per_s, "params": core.param_count(params),
                "steps": config.num_steps, "final_loss": res.train_metrics.get("loss", float("nan"))}
        sample = jax.jit(gen.sample_fn)
        x0 = jax.random.normal(jax.random.key(10_000 + seed), (len(data["eval"]),) + data["train"].shape[1:])
        for k in config.nfe[gen.sampler]:
          x = np.asarray(sample(res.params, x0, None, jax.random.key(20_000 + seed), jnp.asarray(k, jnp.int32)))
          metrics = {"nfe": k, **score(name, x, data, feats)}
          rows.append(common.row(method=f"{method}@{k}", dataset=name, split=0, seed=seed, metrics=metrics,
                                 cost=cost))
          if seed == int(config.seed):
            samples[(name, f"{method}@{k}")] = x
          print(f"[emf_generate] {name} {method} seed {seed} NFE {k}: "
                + " ".join(f"{m}={v:.4g}" for m, v in metrics.items() if m != "nfe"), flush=True)
  plot_samples(config, loaded, samples, workdir)
  print(report.primary_table(rows, PRIMARY), flush=True)
  return rows


def plot_samples(config, loaded: dict, samples: dict, workdir: str) -> None:
  methods = list(config.methods)
  toys_here = [d for d in config.datasets if d in toys.TOY2D]
  if toys_here:
    cols = ["real"] + [f"{m}@1" for m in methods] + (["fm@8"] if "fm" in methods and 8 in config.nfe.flow else [])
    panels = [[(c, loaded[d]["eval"] if c == "real" else samples.get((d, c))) for c in cols] for d in toys_here]
    common.save_plot(report.sample_grid(panels, "scatter"), workdir, "toys_samples.png")
  kinds = {"digits": "image", "mnist1d": "curves", "gp": "curves", "pointclouds": "clouds"}
  for d in (d for d in kinds if d in config.datasets):
    cols = ["real"] + [f"{m}@1" for m in methods] + [f"{m}@2" for m in methods if m != "fm"]
    panels = [[(c, loaded[d]["eval"] if c == "real" else samples.get((d, c))) for c in cols]]
    common.save_plot(report.sample_grid(panels, kinds[d]), workdir, f"{d}_samples.png")


if __name__ == "__main__":
  common.run_main(run, experiment="emf_generate", validate=validate)
