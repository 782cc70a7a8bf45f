"""Euler Mean Flows (EMF) and its baselines on 2-D toys, GP functions, mnist1d, digits and point clouds.

Every method comes from `jaxml.emf.make_generator` with the same network, optimiser, batch, steps, EMA
and seed per domain, and is evaluated with EMA weights at several NFE next to three floors (real-vs-real,
the data mean, N(0, I) noise; a row at or beyond the noise floor is marked not learned). Headline rows
`method@k` / `emf@k` use the adaptive-weight p / EMF variant best on a validation set."""

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")

from experiments import common, report  # noqa: E402
from jaxml import core, emf  # noqa: E402
from jaxml.data import toys  # noqa: E402
from experiments import emf_domains as domains  # noqa: E402
from jaxml.emf import evaluate as ev  # noqa: E402

DATASETS = ("checkerboard", "8gaussians", "moons", "gp", "mnist1d", "digits", "pointclouds")
NETS = ("mlp", "unet", "setnet")


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
  t_mid: tuple[float, ...]        # consistency sampler (K >= 2): candidate first re-noise times (() = 1/K)


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
  train = core.loop_config(config)
  core.make_optimizer(train["optim"])      # a bad optimizer fails here, before anything is written
  classifier = _read(config.classifier) if {"digits", "mnist1d"} & set(datasets) else None
  samplers = {emf.REGISTRY[m].sampler for m in methods}
  return Plan(datasets, methods, tuple(range(config.seed, config.seed + config.num_seeds)),
              config.batch_size, _read(config.data), nets, generators, weightings,
              {k: tuple(config.nfe[k]) for k in samplers}, train, classifier, config.mesh.num_data,
              {d: (config.select_metric.get(_domain(d)) or ev.PRIMARY[d]) for d in datasets},
              tuple(float(v) for v in config.get("ct_t_mid", ())))


def _read(section) -> dict:
  """A config section as a plain dict, every key read (each one is a field of what it configures)."""
  return {k: (_read(section[k]) if hasattr(section[k], "keys") else section[k]) for k in section.keys()}


def _domain(name: str) -> str:
  return "toy" if name in toys.TOY2D else name


def floor_rows(name: str, data: dict, feats, extra: dict) -> list[dict]:
  """One row per floor (real-vs-real, data mean, N(0, I) noise) with every metric of the domain."""
  out = []
  for method, x in ev.floor_samples(name, data).items():
    m = ev.score(name, x, data, feats) | extra
    out.append(common.row(method=method, dataset=name, split=0, seed=0, metrics=m))
    print(f"[emf_generate] {name}: {method} " + " ".join(f"{k}={v:.4g}" for k, v in m.items()), flush=True)
  return out


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  mesh = core.make_mesh(p.num_data or None)
  rows: list[dict] = []
  samples: dict[tuple[str, str], np.ndarray] = {}
  loaded: dict[str, dict] = {}
  for name in p.datasets:
    data = loaded[name] = domains.load_domain(name, p.data, digits_as_images=p.nets.get("digits") == "unet")
    feats, extra = None, {}
    if name in ("digits", "mnist1d"):
      t0 = time.perf_counter()
      labelled = core.epoch_batches({"x": data["train"], "y": data["y_train"]}, p.classifier["batch_size"], seed=0)
      feats, extra["classifier_acc"] = ev.train_feature_classifier(data, labelled, p.classifier, p.train,
                                                                    workdir=workdir, name=name, mesh=mesh)
      print(f"[emf_generate] {name}: feature classifier test accuracy {extra['classifier_acc']:.3f} "
            f"({time.perf_counter() - t0:.1f}s)", flush=True)
    rows += floor_rows(name, data, feats, extra)
    for seed in p.seeds:
      batches = domains.make_batches(data, p.batch_size, seed)
      shape = (len(data["eval"]),) + data["train"].shape[1:]
      x0 = jax.random.normal(jax.random.key(10_000 + seed), shape)
      x0_val = jax.random.normal(jax.random.key(30_000 + seed), shape)
      for method in p.methods:
        for w in p.weightings[method]:
          gen = emf.make_generator(p.generators[(method, p.nets[_domain(name)], w)])
          params = gen.method.init(jax.random.key(seed), batches(0))
          tag = ev.variant(method, w)
          res = core.train(gen.method, batches, p.train, workdir=workdir, name=f"{name}/{tag}/s{seed}", seed=seed,
                           mesh=mesh, init_params=params)
          cost = {"train_wall_s": res.wall_s, "steps_per_s": res.steps_per_s, "params": core.param_count(params),
                  "steps": p.train["num_steps"], "final_loss": res.train_metrics.get("loss", float("nan"))}
          sample = jax.jit(gen.sample_fn)
          draw = lambda noise, k, key, **kw: np.asarray(sample(res.params, noise, None, jax.random.key(key + seed),
                                                               jnp.asarray(k, jnp.int32), **kw))
          for k in p.nfe[gen.sampler]:
            opt, chosen = {}, {}
            if gen.sampler == "consistency" and k > 1 and p.t_mid:
              # The re-noise time of the K-step consistency sampler is chosen on validation (separate real set,
              # noise and re-noising keys), by the metric that chooses p; the test draw uses the winner.
              vals = {tm: ev.score(name, draw(x0_val, k, 40_000, t_mid=tm), data, feats, ref_key="val")
                      for tm in p.t_mid}
              tm = ev.pick(vals, p.select[name])
              opt, chosen = {"t_mid": tm}, {"chosen_t_mid": tm} | {f"val_{m}": v for m, v in vals[tm].items()}
            x = draw(x0, k, 20_000, **opt)
            metrics = {"nfe": k, **ev.score(name, x, data, feats)} | chosen
            if k == 1:   # validation scores (separate real set and noise); val_<primary> chooses p and variant
              val = ev.score(name, draw(x0_val, k, 40_000), data, feats, ref_key="val")
              metrics |= {f"val_{m}": v for m, v in val.items()}
            rows.append(common.row(method=f"{tag}@{k}", dataset=name, split=0, seed=seed, metrics=metrics,
                                   cost=cost))
            if seed == p.seeds[0]:
              samples[(name, f"{tag}@{k}")] = x
            print(f"[emf_generate] {name} {tag} seed {seed} NFE {k}: "
                  + " ".join(f"{m}={v:.4g}" for m, v in metrics.items() if m != "nfe"), flush=True)
    heads, picks = ev.choose(rows, name, p.methods, p.weightings, p.select[name])
    for (d, tag_k), x in list(samples.items()):
      for head, v in picks.items():
        if d == name and tag_k.split("@")[0] == v:
          samples[(name, f"{head}@{tag_k.split('@')[1]}")] = x
    rows += heads
  ev.mark_not_learned(rows)
  plot_samples(p, loaded, samples, workdir)
  text = ev.summary(rows)
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
