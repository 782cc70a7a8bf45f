"""Euler Mean Flows (EMF) and its baselines on 2-D toys, GP functions, mnist1d, digits and point clouds.

Every method (EMF u / x1, flow matching, MeanFlow with jax.jvp, shortcut, consistency training)
comes from `jaxml.emf.make_generator`, uses the same network, optimiser, batch, steps, EMA and seed
per domain, trains through core.train, and is evaluated with EMA weights at several NFE against
held-out data, next to three floors: real-vs-real (a disjoint real set), the data mean repeated, and
N(0, I) noise (what an untrained flow-map model emits at one step); a row whose primary metric is at or
beyond the noise floor is marked not learned. Every flow-map method trains once per adaptive-weight p of
`config.weightings`; the headline row `method@k` uses the p whose 1-NFE score on a validation set (separate
real samples and noise, never the test set) is best, and `emf@k` the best EMF variant the same way. Toys add
mode coverage and a classifier two-sample test. Feature metrics (Frechet, KID) use a small classifier
trained here through core.train on the same training split. The tables go to stdout and summary.md.
"""

import time
from typing import Any, Callable, NamedTuple

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
PRIMARY = {"checkerboard": "energy", "8gaussians": "energy", "moons": "energy", "gp": "energy", "mnist1d": "frechet",
           "digits": "frechet", "pointclouds": "mmd_cd"}


HIGHER_BETTER = ("modes", "cov_cd")           # every other score is lower-is-better (c2st / nna: 0.5 ideal)
NOT_SCORES = ("nfe", "chosen_p", "chosen_vc", "chosen_x1", "not_learned")
MODE_SHARE = 0.25                              # a mode is covered when it holds >= 1/4 of its fair share
FLOORS = ("floor_real", "floor_mean", "floor_noise")
EMF_VARIANTS = ("emf_u", "emf_u_vc", "emf_x1", "emf_x1_vc")


class Plan(NamedTuple):
  """Everything the run reads from the config, as plain values (built before anything is written)."""

  datasets: tuple[str, ...]
  methods: tuple[str, ...]
  seeds: tuple[int, ...]
  batch_size: int
  data: dict
  nets: dict                      # domain -> network kind
  generators: dict                # (method, kind, p) -> the package's plain-dict config
  weightings: dict                # method -> adaptive-weight exponents p it trains with
  nfe: dict                       # sampler family -> NFE list
  train: dict                     # core.train settings of the generators
  classifier: dict | None         # feature classifier (digits, mnist1d)
  num_data: int
  select: dict                    # domain -> validation metric that chooses p and the EMF variant


def plan(config) -> Plan:
  """Validates names and reads every config key the run uses (strict configs)."""
  datasets, methods = tuple(config.datasets), tuple(config.methods)
  for d in datasets:
    common.validate_choice(d, DATASETS, "dataset")
  for m in methods:
    common.validate_choice(m, emf.METHODS, "method")
  nets = {d: config.nets[d] for d in dict.fromkeys(_domain(d) for d in datasets)}
  for kind in nets.values():
    common.validate_choice(kind, NETS, "network")
  sections = {k: _read(config[k]) for k in ("emf", "meanflow", "fm", "shortcut", "ct") if k in config}
  # Same weighting for all flow-map methods: each trains once per p in config.weightings (c from its
  # section); flow matching keeps its own section's p. The headline picks p on a validation set.
  sweep = tuple(float(v) for v in config.weightings)
  weightings = {m: ((float(sections["fm"]["p"]),) if m == "fm" else sweep) for m in methods}
  with_p = lambda p: {k: (v if k == "fm" else v | {"p": p}) for k, v in sections.items()}
  generators = {(m, kind, p): {"method": m, "num_classes": 0, "model": _read(config.model[kind]), **with_p(p)}
                for m in methods for kind in set(nets.values()) for p in weightings[m]}
  train = {"optim": _read(config.optim), "num_steps": int(config.num_steps), "log_every": int(config.log_every),
           "checkpoint_every": int(config.checkpoint_every), "steps_per_dispatch": int(config.steps_per_dispatch),
           "ema_decay": float(config.ema_decay)}
  core.make_optimizer(train["optim"])      # a bad optimizer fails here, before anything is written
  classifier = _read(config.classifier) if {"digits", "mnist1d"} & set(datasets) else None
  return Plan(datasets, methods, tuple(range(int(config.seed), int(config.seed) + int(config.num_seeds))),
              int(config.batch_size), _read(config.data), nets, generators, weightings,
              {emf.METHODS[m].sampler: tuple(config.nfe[emf.METHODS[m].sampler]) for m in methods}, train,
              classifier, int(config.mesh.num_data),
              {d: (config.select_metric.get(_domain(d)) or PRIMARY[d]) for d in datasets})


def _read(section) -> dict:
  """A config section as a plain dict, every key read (each one is a field of what it configures)."""
  return {k: (_read(section[k]) if hasattr(section[k], "keys") else section[k]) for k in section.keys()}


def _domain(name: str) -> str:
  return "toy" if name in toys.TOY2D else name


def load_domain(name: str, p: Plan) -> dict[str, Any]:
  """train x (+ y), held-out eval set, a disjoint real 'floor' set of the eval size, and extras."""
  d = p.data
  if name in toys.TOY2D:
    out = toys.toy_domain(name, num_train=d["toy_train"], num_eval=d["toy_eval"])
    out["val"] = ((toys.toy2d(name, d["toy_eval"], 103) - out["mean"]) / out["std"]).astype(np.float32)
    if name == "checkerboard":   # the 8 black unit cells as boxes, in standardised coordinates
      cells = np.array([(i, j) for i in range(4) for j in range(4) if (i + j) % 2 == 0], np.float64) - 2
      out["boxes"] = ((cells - out["mean"]) / out["std"], 1.0 / out["std"])
    return out
  if name == "gp":
    (tr, cov), (ev, _), (fl, _), (va, _) = (
        toys.gp_functions(n, np.random.default_rng(s))
        for n, s in ((d["gp_train"], 200), (d["gp_eval"], 201), (d["gp_eval"], 202), (d["gp_eval"], 203)))
    return {"train": tr, "eval": ev, "floor": fl, "val": va, "cov": cov}
  if name == "pointclouds":
    (tr, ytr), (ev, _), (fl, _), (va, _) = (
        toys.point_clouds(n, np.random.default_rng(s), num_points=d["pc_points"])
        for n, s in ((d["pc_train"], 500), (d["pc_eval"], 501), (d["pc_eval"], 502), (d["pc_eval"], 503)))
    return {"train": tr, "y_train": ytr, "eval": ev, "floor": fl, "val": va}
  if name == "mnist1d":
    raw = offline.load_mnist1d(seed=0)
    mean, std = float(raw["x_train"].mean()), float(raw["x_train"].std())
    prep = lambda a: ((a - mean) / std).astype(np.float32)
    floor_seed = 300
  else:
    raw = offline.load_digits(seed=0)
    img = p.nets["digits"] == "unet"
    prep = lambda a: (2 * a - 1).reshape((len(a), 8, 8, 1) if img else (len(a), 64)).astype(np.float32)
    floor_seed = 400
  # Real-vs-real floor and validation reference: two disjoint test-sized sets of training rows (the
  # validation set that picks weightings and variants never touches the test set).
  n_test = len(raw["x_test"])
  perm = np.random.default_rng(floor_seed).permutation(len(raw["x_train"]))
  floor_rows, val_rows = perm[:n_test], perm[n_test:2 * n_test]
  out = {"train": prep(raw["x_train"]), "y_train": raw["y_train"], "eval": prep(raw["x_test"]),
         "y_eval": raw["y_test"], "floor": prep(raw["x_train"][floor_rows]), "val": prep(raw["x_train"][val_rows]),
         "num_classes": 10}
  if name == "digits":
    out["dequantize"] = 1.0 / 16 if d["dequantize"] else 0.0
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


def train_classifier(name: str, data: dict, p: Plan, workdir: str, mesh):
  """MLP classifier (penultimate width 64) trained by core.train; returns (features_fn, test accuracy)."""
  c = p.classifier
  feat, head = MLP(tuple(c["hidden"])), MLP((data["num_classes"],))
  flat = lambda x: jnp.reshape(x, (x.shape[0], -1))
  features = lambda p, x: jax.nn.relu(feat.apply({"params": p["feat"]}, flat(x)))
  logits = lambda p, x: head.apply({"params": p["head"]}, features(p, x))

  def init(rng, batch):
    r1, r2 = jax.random.split(rng)
    f = feat.init(r1, flat(jnp.asarray(batch["x"])))["params"]
    return {"feat": f, "head": head.init(r2, jnp.zeros((1, c["hidden"][-1])))["params"]}

  def loss_fn(params, batch, rng):
    del rng
    lg = logits(params, batch["x"])
    return (optax.softmax_cross_entropy_with_integer_labels(lg, batch["y"]).mean(),
            {"accuracy": jnp.mean(lg.argmax(-1) == batch["y"])})

  train = {"x": data["train"], "y": data["y_train"]}
  train_cfg = p.train | {"optim": {"name": "adam", "lr": c["lr"]}, "num_steps": c["steps"],
                         "log_every": max(c["steps"] // 2, 1), "ema_decay": None}
  res = core.train(core.Method(init, loss_fn), iterators.epoch_batches(train, c["batch_size"], seed=0), train_cfg,
                   workdir=workdir, name=f"{name}/classifier", seed=0, mesh=mesh,
                   init_params=init(jax.random.key(0), train))
  feat_fn = jax.jit(features)
  acc = float(jnp.mean(jax.jit(logits)(res.params, data["eval"]).argmax(-1) == data["y_eval"]))
  return (lambda x: np.asarray(feat_fn(res.params, jnp.asarray(x)))), acc


def score(name: str, x: np.ndarray, data: dict, feats=None, ref_key: str = "eval") -> dict[str, float]:
  """Every metric of the domain between samples x and the real set data[ref_key]."""
  ref = data[ref_key]
  if name == "pointclouds":
    return gm.point_cloud_scores(x, ref)
  out = {"sw": gm.sliced_wasserstein(x, ref), "energy": gm.energy_distance(x, ref)}
  if name in toys.TOY2D:
    out["mmd"] = gm.mmd_rbf(x, ref)
    out["c2st"] = gm.classifier_two_sample(x, ref)
  if name == "8gaussians":
    out["modes"], out["off_mode"] = gm.mode_coverage(x, data["centers"], data["mode_std"], min_share=MODE_SHARE / 8)
  if name == "checkerboard":
    lows, size = data["boxes"]
    out["modes"], out["off_mode"] = gm.box_coverage(x, lows, size, min_share=MODE_SHARE / len(lows))
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


def floor_rows(name: str, data: dict, feats, extra: dict) -> list[dict]:
  """Floors of every metric: a disjoint real set (real-vs-real), the training mean repeated (where a mean
  sample makes sense: not for unordered point sets) and N(0, I) noise of the data's shape, the output of
  an untrained flow-map model (u = 0) at one step."""
  n, shape = len(data["eval"]), data["train"].shape[1:]
  cands = {"floor_real": data["floor"],
           "floor_noise": np.random.default_rng(900).normal(size=(n,) + shape).astype(np.float32)}
  if name != "pointclouds":
    cands["floor_mean"] = np.broadcast_to(data["train"].mean(0), (n,) + shape).astype(np.float32)
  out = []
  for method in FLOORS:
    if method in cands:
      m = score(name, cands[method], data, feats) | extra
      out.append(common.row(method=method, dataset=name, split=0, seed=0, metrics=m))
      print(f"[emf_generate] {name}: {method} " + " ".join(f"{k}={v:.4g}" for k, v in m.items()), flush=True)
  return out


def _variant(method: str, p: float) -> str:
  return f"{method}/p{p:g}"


def choose(rows: list[dict], name: str, methods: tuple[str, ...], weightings: dict, metric: str | None = None
           ) -> tuple[list[dict], dict[str, str]]:
  """Headline rows `method@k`: per method the weighting p whose 1-NFE validation score (the primary
  metric against the validation set, mean over seeds) is best; `emf@k`: the best over every EMF
  variant (Euler field, parameterisation) and p. The test scores are copied, never used to choose."""
  primary = metric or PRIMARY[name]
  val = lambda v: float(np.mean([r["metrics"][f"val_{primary}"] for r in rows
                                 if r["dataset"] == name and r["method"] == f"{v}@1"]))
  sign = -1.0 if primary in HIGHER_BETTER else 1.0
  picks = {m: min((_variant(m, p) for p in weightings[m]), key=lambda v: sign * np.nan_to_num(val(v), nan=np.inf))
           for m in methods}
  emf_here = [m for m in EMF_VARIANTS if m in methods]
  if emf_here:
    picks["emf"] = min((picks[m] for m in emf_here), key=lambda v: sign * np.nan_to_num(val(v), nan=np.inf))
  out = []
  for head, v in picks.items():
    base, p = v.split("/p")
    tags = {"chosen_p": float(p)}
    if head == "emf":
      tags |= {"chosen_vc": float(base.endswith("_vc")), "chosen_x1": float("_x1" in base)}
    for r in rows:
      if r["dataset"] == name and r["method"].split("@")[0] == v:
        nan = lambda d: {k: (float("nan") if v is None else v) for k, v in d.items()}   # cleaned rows hold None
        out.append(common.row(method=f"{head}@{r['method'].split('@')[1]}", dataset=name, split=r["split"],
                              seed=r["seed"], metrics=nan(r["metrics"]) | tags, cost=nan(r["cost"])))
    print(f"[emf_generate] {name}: headline {head} uses {v} (validation {primary} {val(v):.4g})", flush=True)
  return out, picks


def mark_not_learned(rows: list[dict]) -> None:
  """metrics['not_learned'] = 1 where the primary metric is at or beyond the noise floor's."""
  noise = {r["dataset"]: r["metrics"] for r in rows if r["method"] == "floor_noise"}
  for r in rows:
    if r["method"] in FLOORS or r["dataset"] not in noise:
      continue
    k = PRIMARY[r["dataset"]]
    v, f = r["metrics"].get(k), noise[r["dataset"]].get(k)
    if v is None or f is None:
      r["metrics"]["not_learned"] = 1.0
    else:
      r["metrics"]["not_learned"] = float(v <= f if k in HIGHER_BETTER else v >= f)


def summary(rows: list[dict]) -> str:
  """Markdown per dataset: floors first, then headline rows, then every trained variant; mean ± std over
  seeds; a cell at or beyond the noise floor carries '(nl)' (not learned)."""
  text = []
  for name in dict.fromkeys(r["dataset"] for r in rows):
    rs = [r for r in rows if r["dataset"] == name]
    metrics = [k for k in rs[0]["metrics"] if k not in NOT_SCORES and not k.startswith("val_")]
    noise = next((r["metrics"] for r in rs if r["method"] == "floor_noise"), {})
    methods = list(dict.fromkeys(r["method"] for r in rs))
    order = [m for m in FLOORS if m in methods] + [m for m in methods if "/" not in m and m not in FLOORS] + \
        [m for m in methods if "/" in m]
    text.append(f"\n### {name} (primary: {PRIMARY[name]}; (nl) = at or beyond the N(0, I) noise floor)\n")
    text.append("| method | seeds | " + " | ".join(metrics) + " | chosen p |")
    text.append("|---" * (len(metrics) + 3) + "|")
    for m in order:
      mr = [r for r in rs if r["method"] == m]
      cells = []
      for k in metrics:
        vals = [r["metrics"].get(k) for r in mr]
        vals = [np.nan if v is None else v for v in vals]
        mean = float(np.mean(vals))
        cell = f"{mean:.4g}" + (f" ± {np.std(vals):.2g}" if len(vals) > 1 else "")
        f = noise.get(k)
        if m not in FLOORS and f is not None and (not np.isfinite(mean) or
                                                   (mean <= f if k in HIGHER_BETTER else mean >= f)):
          cell += " (nl)"
        cells.append(cell)
      chosen = mr[0]["metrics"].get("chosen_p")
      text.append(f"| {m} | {len(mr)} | " + " | ".join(cells) + f" | {'' if chosen is None else f'{chosen:g}'} |")
  return "\n".join(text) + "\n"


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  mesh = core.make_mesh(p.num_data or None)
  rows: list[dict] = []
  samples: dict[tuple[str, str], np.ndarray] = {}
  loaded: dict[str, dict] = {}
  for name in p.datasets:
    data = loaded[name] = load_domain(name, p)
    feats, extra = None, {}
    if name in ("digits", "mnist1d"):
      t0 = time.perf_counter()
      feats, extra["classifier_acc"] = train_classifier(name, data, p, workdir, mesh)
      print(f"[emf_generate] {name}: feature classifier test accuracy {extra['classifier_acc']:.3f} "
            f"({time.perf_counter() - t0:.1f}s)", flush=True)
    rows += floor_rows(name, data, feats, extra)
    for seed in p.seeds:
      batches = make_batches(data, p.batch_size, seed)
      shape = (len(data["eval"]),) + data["train"].shape[1:]
      x0 = jax.random.normal(jax.random.key(10_000 + seed), shape)
      x0_val = jax.random.normal(jax.random.key(30_000 + seed), shape)
      for method in p.methods:
        for w in p.weightings[method]:
          gen = emf.make_generator(p.generators[(method, p.nets[_domain(name)], w)])
          params = gen.method.init(jax.random.key(seed), batches(0))
          tag = _variant(method, w)
          res = core.train(gen.method, batches, p.train, workdir=workdir, name=f"{name}/{tag}/s{seed}", seed=seed,
                           mesh=mesh, init_params=params)
          cost = {"train_wall_s": res.wall_s, "steps_per_s": res.steps_per_s, "params": core.param_count(params),
                  "steps": p.train["num_steps"], "final_loss": res.train_metrics.get("loss", float("nan"))}
          sample = jax.jit(gen.sample_fn)
          draw = lambda noise, k: np.asarray(sample(res.params, noise, None, jax.random.key(20_000 + seed),
                                                    jnp.asarray(k, jnp.int32)))
          for k in p.nfe[gen.sampler]:
            x = draw(x0, k)
            metrics = {"nfe": k, **score(name, x, data, feats)}
            if k == 1:   # validation scores (separate real set and noise); val_<primary> chooses p and variant
              val = score(name, draw(x0_val, k), data, feats, ref_key="val")
              metrics |= {f"val_{m}": v for m, v in val.items()}
            rows.append(common.row(method=f"{tag}@{k}", dataset=name, split=0, seed=seed, metrics=metrics,
                                   cost=cost))
            if seed == p.seeds[0]:
              samples[(name, f"{tag}@{k}")] = x
            print(f"[emf_generate] {name} {tag} seed {seed} NFE {k}: "
                  + " ".join(f"{m}={v:.4g}" for m, v in metrics.items() if m != "nfe"), flush=True)
    heads, picks = choose(rows, name, p.methods, p.weightings, p.select[name])
    for (d, tag_k), x in list(samples.items()):
      for head, v in picks.items():
        if d == name and tag_k.split("@")[0] == v:
          samples[(name, f"{head}@{tag_k.split('@')[1]}")] = x
    rows += heads
  mark_not_learned(rows)
  plot_samples(p, loaded, samples, workdir)
  text = summary(rows)
  print(text, flush=True)
  with open(f"{workdir}/summary.md", "w") as f:
    f.write(text)
  return rows


def plot_samples(p: Plan, loaded: dict, samples: dict, workdir: str) -> None:
  methods = list(p.methods)
  toys_here = [d for d in p.datasets if d in toys.TOY2D]
  if toys_here:
    cols = ["real"] + [f"{m}@1" for m in methods] + (["fm@8"] if 8 in p.nfe.get("flow", ()) else [])
    panels = [[(c, loaded[d]["eval"] if c == "real" else samples.get((d, c))) for c in cols] for d in toys_here]
    common.save_plot(report.sample_grid(panels, "scatter"), workdir, "toys_samples.png")
  kinds = {"digits": "image", "mnist1d": "curves", "gp": "curves", "pointclouds": "clouds"}
  for d in (d for d in kinds if d in p.datasets):
    cols = ["real"] + [f"{m}@1" for m in methods] + [f"{m}@2" for m in methods if m != "fm"]
    panels = [[(c, loaded[d]["eval"] if c == "real" else samples.get((d, c))) for c in cols]]
    common.save_plot(report.sample_grid(panels, kinds[d]), workdir, f"{d}_samples.png")


if __name__ == "__main__":
  common.run_main(run, experiment="emf_generate", plan=plan)
