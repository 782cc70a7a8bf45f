"""EMF's evaluation protocol: scores, floors, the validation choice of weighting and variant, 'not learned'
marks and the tables. Variants are `<method>/p<p>@<nfe>`; headline rows `<method>@<nfe>` (and `emf@<nfe>`)
copy the variant with the best 1-NFE *validation* score. Non-finite values are stored as None."""

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml import core
from jaxml.metrics import generative as gm
from jaxml.nn.mlp import MLP

__all__ = ["PRIMARY", "HIGHER_BETTER", "NOT_SCORES", "MODE_SHARE", "FLOORS", "EMF_VARIANTS", "EVAL_CHUNK", "Features",
           "score", "floor_samples", "train_feature_classifier", "variant", "pick", "choose", "mark_not_learned",
           "summary", "headline", "combine"]

PRIMARY = {"checkerboard": "energy", "8gaussians": "energy", "moons": "energy", "gp": "energy", "mnist1d": "frechet",
           "digits": "frechet", "pointclouds": "mmd_cd"}
HIGHER_BETTER = ("modes", "cov_cd")           # every other score is lower-is-better (c2st / nna: 0.5 ideal)
NOT_SCORES = ("nfe", "chosen_p", "chosen_vc", "chosen_x1", "chosen_t_mid", "not_learned")
MODE_SHARE = 0.25                              # a mode is covered when it holds >= 1/4 of its fair share
FLOORS = ("floor_real", "floor_mean", "floor_noise")
EMF_VARIANTS = ("emf_u", "emf_u_vc", "emf_x1", "emf_x1_vc")
EVAL_CHUNK = 4096                              # rows per compiled pass of the feature classifier

Features = Callable[[np.ndarray], np.ndarray]


def score(name: str, x: np.ndarray, data: dict, feats: Features | None = None, ref_key: str = "eval"
          ) -> dict[str, float]:
  """Every metric of the domain between samples x and the real set data[ref_key]; all NaN if x is not finite."""
  ref = data[ref_key]
  if name == "pointclouds":
    return gm.point_cloud_scores(x, ref)
  out = {"sw": gm.sliced_wasserstein(x, ref), "energy": gm.energy_distance(x, ref)}
  if data["train"].shape[1:] == (2,):          # a 2-D toy
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


def floor_samples(name: str, data: dict) -> dict[str, np.ndarray]:
  """The floors' sample sets: a disjoint real set (real-vs-real), N(0, I) noise of the data's shape (what an
  untrained flow-map model, u = 0, emits at one step) and the training mean repeated (not for unordered point
  sets, where a mean sample means nothing)."""
  n, shape = len(data["eval"]), data["train"].shape[1:]
  out = {"floor_real": data["floor"],
         "floor_noise": np.random.default_rng(900).normal(size=(n,) + shape).astype(np.float32)}
  if name != "pointclouds":
    out["floor_mean"] = np.broadcast_to(data["train"].mean(0), (n,) + shape).astype(np.float32)
  return {k: out[k] for k in FLOORS if k in out}


def train_feature_classifier(data: dict, batches: Callable[[int], dict], settings: dict, train_config: dict, *,
                             workdir: str | None, name: str, mesh=None) -> tuple[Features, float]:
  """MLP classifier x -> y trained by core.train on `batches` (step -> {'x', 'y'} of data['train']); its last
  hidden layer is the feature map of Frechet distance and KID. settings: hidden, lr, steps. Returns (features,
  accuracy on data['eval'] / data['y_eval'])."""
  feat, head = MLP(tuple(settings["hidden"])), MLP((data["num_classes"],))
  flat = lambda x: jnp.reshape(x, (x.shape[0], -1))
  features = lambda p, x: jax.nn.relu(feat.apply({"params": p["feat"]}, flat(x)))
  logits = lambda p, x: head.apply({"params": p["head"]}, features(p, x))

  def init(rng, batch):
    r1, r2 = jax.random.split(rng)
    f = feat.init(r1, flat(jnp.asarray(batch["x"])))["params"]
    return {"feat": f, "head": head.init(r2, jnp.zeros((1, settings["hidden"][-1])))["params"]}

  def loss_fn(params, batch, rng):
    del rng
    lg = logits(params, batch["x"])
    return (optax.softmax_cross_entropy_with_integer_labels(lg, batch["y"]).mean(),
            {"accuracy": jnp.mean(lg.argmax(-1) == batch["y"])})

  cfg = core.loop_config(train_config, optim={"name": "adam", "lr": settings["lr"]}, num_steps=settings["steps"],
                         log_every=max(settings["steps"] // 2, 1), ema_decay=None)
  res = core.train(core.Method(init, loss_fn), batches, cfg, workdir=workdir, name=f"{name}/classifier", seed=0,
                   mesh=mesh, init_params=init(jax.random.key(0), {"x": data["train"]}))
  feat_fn, logit_fn = jax.jit(features), jax.jit(logits)
  chunked = lambda fn: (lambda x: core.batched_apply(lambda xb: fn(res.params, xb), x, EVAL_CHUNK, shrink=True))
  acc = float(jnp.mean(jnp.asarray(chunked(logit_fn)(data["eval"]).argmax(-1) == data["y_eval"])))
  return chunked(feat_fn), acc


def variant(method: str, p: float) -> str:
  """Name of one trained variant: method and its adaptive-weight exponent p."""
  return f"{method}/p{p:g}"


def _loss(value: float, metric: str) -> float:
  """A score of `metric` as a quantity to minimise: negated when HIGHER_BETTER; NaN -> inf (never wins)."""
  return float(np.nan_to_num((-1.0 if metric in HIGHER_BETTER else 1.0) * value, nan=np.inf))


def pick(val_scores: dict[float, dict[str, float]], metric: str) -> float:
  """The option (e.g. a sampler's re-noise time) whose validation scores are best on `metric`
  (lower is better unless HIGHER_BETTER; NaN loses; ties go to the first)."""
  return min(val_scores, key=lambda o: _loss(val_scores[o].get(metric, np.nan), metric))


def _mean_val(rows: list[dict], name: str, v: str, metric: str) -> float:
  vals = [r["metrics"][f"val_{metric}"] for r in rows if r["dataset"] == name and r["method"] == f"{v}@1"]
  return float(np.mean([np.nan if x is None else x for x in vals]))


def choose(rows: list[dict], name: str, methods: tuple[str, ...], weightings: dict, metric: str | None = None
           ) -> tuple[list[dict], dict[str, str]]:
  """Headline rows `method@k`: per method the weighting p whose 1-NFE validation score (`metric`, default the
  domain's primary, against the validation set; mean over seeds) is best; `emf@k`: the best over every EMF
  variant (Euler field, parameterisation) and p. Test scores are copied, never used to choose.
  Returns (headline rows, {headline: chosen variant})."""
  primary = metric or PRIMARY[name]
  key = lambda v: _loss(_mean_val(rows, name, v, primary), primary)   # NaN never wins
  picks = {m: min((variant(m, p) for p in weightings[m]), key=key) for m in methods}
  emf_here = [m for m in EMF_VARIANTS if m in methods]
  if emf_here:
    picks["emf"] = min((picks[m] for m in emf_here), key=key)
  out = []
  for head, v in picks.items():
    base, p = v.split("/p")
    tags = {"chosen_p": float(p)}
    if head == "emf":
      tags |= {"chosen_vc": float(base.endswith("_vc")), "chosen_x1": float("_x1" in base)}
    for r in rows:
      if r["dataset"] == name and r["method"].split("@")[0] == v:
        out.append(dict(r, method=f"{head}@{r['method'].split('@')[1]}", metrics=r["metrics"] | tags,
                        cost=dict(r["cost"])))
    print(f"[emf] {name}: headline {head} uses {v} (validation {primary} "
          f"{_mean_val(rows, name, v, primary):.4g})", flush=True)
  return out, picks


def _beyond(value: float | None, floor: float | None, metric: str) -> bool:
  """True when `value` is at or beyond the noise floor (or missing / not finite)."""
  if floor is None:
    return False
  if value is None or not np.isfinite(value):
    return True
  return bool(value <= floor if metric in HIGHER_BETTER else value >= floor)


def mark_not_learned(rows: list[dict]) -> None:
  """metrics['not_learned'] = 1 where the primary metric is at or beyond the noise floor's (in place)."""
  noise = {r["dataset"]: r["metrics"] for r in rows if r["method"] == "floor_noise"}
  for r in rows:
    if r["method"] in FLOORS or r["dataset"] not in noise:
      continue
    k = PRIMARY[r["dataset"]]
    v, f = r["metrics"].get(k), noise[r["dataset"]].get(k)
    r["metrics"]["not_learned"] = 1.0 if f is None else float(_beyond(v, f, k))


def _cell(rows: list[dict], metric: str, noise: dict, is_floor: bool) -> str:
  """mean ± std over seeds; '(nl)' when the mean is at or beyond the noise floor."""
  vals = np.array([np.nan if r["metrics"].get(metric) is None else r["metrics"][metric] for r in rows], float)
  text = f"{vals.mean():.4g}" + (f" ± {vals.std():.2g}" if len(vals) > 1 else "")
  return text + (" (nl)" if not is_floor and _beyond(float(vals.mean()), noise.get(metric), metric) else "")


def summary(rows: list[dict]) -> str:
  """Markdown per dataset: floors first, then headline rows, then every trained variant (mean ± std over seeds)."""
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
      chosen = mr[0]["metrics"].get("chosen_p")
      text.append(f"| {m} | {len(mr)} | " + " | ".join(_cell(mr, k, noise, m in FLOORS) for k in metrics)
                  + f" | {'' if chosen is None else f'{chosen:g}'} |")
  return "\n".join(text) + "\n"


def headline(rows: list[dict], name: str, metrics: tuple[str, ...], methods: tuple[str, ...]) -> str:
  """Compact markdown for the docs: floors, then the rows `methods` (mean ± std over seeds, the chosen
  variant and p, the median training wall time); '(nl)' marks a cell at or beyond the noise floor."""
  rs = [r for r in rows if r["dataset"] == name]
  noise = next(r["metrics"] for r in rs if r["method"] == "floor_noise")
  lines = ["| method@NFE | seeds | " + " | ".join(metrics) + " | chosen | train s |", "|---" * (len(metrics) + 4) + "|"]
  for m in [f for f in FLOORS if any(r["method"] == f for r in rs)] + list(methods):
    mr = [r for r in rs if r["method"] == m]
    if not mr:
      continue
    met = mr[0]["metrics"]
    chosen = "" if "chosen_p" not in met else (
        ("vc" if met.get("chosen_vc") else "model") + ("/x1" if met.get("chosen_x1") else "/u") + ", "
        if "chosen_vc" in met else "") + f"p={met['chosen_p']:g}"
    if "chosen_t_mid" in met:     # one re-noise time per seed (each run picks its own on validation)
      chosen += ", t_mid=" + "/".join(f"{r['metrics'].get('chosen_t_mid', float('nan')):g}" for r in mr)
    walls = [np.nan if r["cost"].get("train_wall_s") is None else r["cost"]["train_wall_s"] for r in mr]
    wall = np.median(walls) if m not in FLOORS else np.nan
    lines.append(f"| {m} | {len(mr) if m not in FLOORS else ''} | "
                 + " | ".join(_cell(mr, k, noise, m in FLOORS) for k in metrics)
                 + f" | {chosen} | {'' if np.isnan(wall) else f'{wall:.0f}'} |")
  return "\n".join(lines) + "\n"


def combine(row_sets: list[list[dict]], select: str | None = None) -> list[dict]:
  """Rows of several runs (e.g. one per seed) as one run over those seeds: floors once (from the first set
  that has them), every variant row from all, then new headline rows chosen on all seeds' validation scores."""
  floors: dict[tuple[str, str], dict] = {}
  variants = []
  for rows in row_sets:
    for r in rows:
      if r["method"] in FLOORS:
        floors.setdefault((r["dataset"], r["method"]), r)
      elif "/p" in r["method"]:
        variants.append(r)
  out = list(floors.values()) + variants
  for name in dict.fromkeys(r["dataset"] for r in variants):
    here = [r for r in variants if r["dataset"] == name]
    methods = tuple(dict.fromkeys(r["method"].split("/p")[0] for r in here))
    weightings = {m: tuple(sorted({float(r["method"].split("/p")[1].split("@")[0]) for r in here
                                   if r["method"].startswith(m + "/p")})) for m in methods}
    out += choose(out, name, methods, weightings, select)[0]
  mark_not_learned(out)
  return out

