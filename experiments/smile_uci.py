"""SMILE ensembles and their baselines on UCI regression, at an equal per-chain PEG budget.

For each (dataset, split): train K MAP members through core.fit (one batched run, best
validation epoch per member), then start one chain per member for every sampler (SMILE-naive,
SMILE, pSMILE-naive, pSMILE, SGLD, cyclical SGLD, SGHMC, full-batch MCLMC at equal PEG and at
its own budget), evaluate the posterior predictive on the test rows and write one row per method.
"""

import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import iterators, offline  # noqa: E402
from jaxml.metrics import mcmc  # noqa: E402
from jaxml.smile import api, baselines, chains, kernel, targets  # noqa: E402

METHODS = ("map", "de", "smile_naive", "smile", "psmile_naive", "psmile", "sgld", "csgld", "sghmc", "mclmc",
           "mclmc_native")
SMILE_VARIANTS = {"smile_naive": (False, False), "smile": (False, True), "psmile_naive": (True, False),
                  "psmile": (True, True)}   # (precondition, tuned)
PROTOCOLS = ("smile", "standard", "tfds")


def validate(config) -> None:
  s = config.smile
  common.validate_choice(s.protocol, PROTOCOLS, "protocol")
  for m in s.methods:
    common.validate_choice(m, METHODS, "method")
  if s.protocol == "tfds":
    return
  allowed = offline.UCI_SMILE_DATASETS if s.protocol == "smile" else tuple(
      d for d in offline.UCI_DATASETS if d not in ("airfoil", "bikesharing"))
  for d in s.datasets:
    common.validate_dataset(d, allowed, f"dataset for protocol {s.protocol!r}")
  common.validate_choice(s.noise, ("global", "heteroscedastic"), "noise model")


def sampler_batch_size(config, n: int) -> int:
  s = config.smile
  if s.batch_size:
    return min(int(s.batch_size), n)
  if s.protocol == "standard" and n < 1000:
    return 32
  return 64 if n < 5000 else 256


# ----------------------------------------------------------------------------------------------
# Ensemble members (MAP / DE / chain starts) through the shared loop.

def train_members(config, workdir: str, data: dict, seed: int, name: str) -> tuple[Any, dict]:
  """Trains K members in one core.fit run; returns stacked best-validation params and cost."""
  s = config.smile
  method = api.make_method(s)
  train = {"x": data["x_train"], "y": data["y_train"]}
  n, k = len(train["y"]), int(s.num_members)
  b = min(int(s.member_batch), n)
  per_epoch = iterators.steps_per_epoch(n, b)
  num_steps = int(min(s.member_epochs * per_epoch, s.member_max_steps))
  member_batches = [iterators.epoch_batches(train, b, seed=seed * 1000 + m) for m in range(k)]

  def batches(step: int) -> dict:
    parts = [f(step) for f in member_batches]
    return {key: np.stack([p[key] for p in parts]) for key in ("x", "y")}

  optimizer = core.make_optimizer({"name": "adamw", "lr": s.member_lr, "weight_decay": s.member_weight_decay},
                                  num_steps)
  params = method.init(jax.random.key(seed), batches(0))
  state = core.create_train_state(params, optimizer, seed)
  valid = {"x": jnp.asarray(data["x_valid"]), "y": jnp.asarray(data["y_valid"])}
  eval_fn = jax.jit(method.eval_fn)
  best = {"params": jax.device_get(params), "nll": np.full(k, np.inf), "epoch": np.zeros(k, int)}

  def keep_best(step: int, st) -> None:
    nll = np.asarray(jax.device_get(eval_fn(st.params, valid)["nll"]))
    better = nll < best["nll"]
    if better.any():
      host = jax.device_get(st.params)
      best["params"] = jax.tree.map(
          lambda old, new: np.where(better.reshape((k,) + (1,) * (np.ndim(new) - 1)), new, old), best["params"], host)
      best["nll"] = np.where(better, nll, best["nll"])
      best["epoch"] = np.where(better, step // per_epoch, best["epoch"])

  t0 = time.perf_counter()
  core.fit(state, core.make_train_step(method.loss_fn, optimizer), batches, num_steps=num_steps,
           log_every=max(num_steps // 2, 1), writer=core.MetricWriter(workdir), name=name,
           hooks=[core.Hook(per_epoch, keep_best)], progress=False, shard_batch_rows=False)
  wall = time.perf_counter() - t0
  cost = {"peg": float(k * num_steps * b), "wall_s": wall, "steps": num_steps,
          "best_epoch_mean": float(best["epoch"].mean())}
  return jax.tree.map(jnp.asarray, best["params"]), cost


# ----------------------------------------------------------------------------------------------
# Evaluation.

def evaluate(predict, positions: Any, keep: np.ndarray, logdensity: np.ndarray | None, data: dict, config,
             rng: np.random.Generator, part: str = "test") -> dict[str, float]:
  """Mixture metrics over all kept samples [C, S]; per-chain LPPD; within-chain R-hat / ESS."""
  s = config.smile
  keep = np.asarray(keep, bool)
  mu, log_sigma = (np.asarray(a)[:, keep] for a in predict(positions, jnp.asarray(data[f"x_{part}"])))
  y = data[f"y_{part}"]
  c, n_s, n = mu.shape
  out = targets.predictive_metrics(mu.reshape(c * n_s, n), log_sigma.reshape(c * n_s, n), y, rng=rng,
                                   min_draws=int(s.coverage_draws))
  ll = -0.5 * np.log(2 * np.pi) - log_sigma - 0.5 * ((y - mu) * np.exp(-log_sigma)) ** 2     # [C, S, n]
  per_chain = np.log(np.mean(np.exp(ll - ll.max(1, keepdims=True)), axis=1)) + ll.max(1)
  out["lppd_chain_mean"] = float(per_chain.mean())
  out["num_samples"] = float(c * n_s)
  if part == "test" and s.protocol == "standard":   # anchors of the 20-split protocol: original units
    out["lppd_std"], out["rmse_std"] = out["lppd"], out["rmse"]
    out["lppd"] = out["lppd"] - math.log(data["y_std"])
    out["rmse"] = out["rmse"] * data["y_std"]
  if part == "test" and n_s >= 8:
    q = [mu[:, :, :int(s.rhat_points)], log_sigma.mean(-1, keepdims=True)]
    if logdensity is not None:
      q.append(np.asarray(logdensity)[:, keep][..., None])
    q = np.concatenate(q, axis=-1)
    with np.errstate(all="ignore"):
      rhat = np.stack([mcmc.split_rhat(q[i][None]) for i in range(c)])
      ess = np.stack([mcmc.bulk_ess(q[i][None]) for i in range(c)])
    out["rhat_median"] = float(np.nanmedian(rhat)) if np.isfinite(rhat).any() else float("nan")
    out["ess_median"] = float(np.nanmedian(ess)) if np.isfinite(ess).any() else float("nan")
  return out


# ----------------------------------------------------------------------------------------------
# Samplers.

def make_sg_kernel(group: str, logd, config, total_steps: int) -> chains.ChainKernel:
  """One compiled kernel per group; step sizes (and SMILE variants) are per-chain hyper-parameters."""
  s = config.smile
  default = step_grid(config, group)[0]
  if group == "smile_family":
    sampler = kernel.smile_family(logd, step_size=default, L=math.inf if not s.L else float(s.L),
                                  same_batch_energy=bool(s.same_batch_energy), p_reset=s.p_reset, alpha=s.alpha,
                                  delta=s.delta, beta=s.beta)
    return chains.smile_chain_kernel(sampler)
  if group == "sgld":
    return baselines.sgld_kernel(logd, step_size=default)
  if group == "csgld":
    return baselines.csgld_kernel(logd, step_size=default, total_steps=total_steps, num_cycles=s.csgld_cycles,
                                  explore_frac=s.csgld_explore)
  if group == "sghmc":
    return baselines.sghmc_kernel(logd, step_size=default, momentum_decay=s.sghmc_momentum_decay)
  raise ValueError(group)


def step_grid(config, method: str) -> tuple[float, ...]:
  s = config.smile
  key = "smile_step_size" if method in SMILE_VARIANTS or method == "smile_family" else f"{method}_step_size"
  return tuple(float(e) for e in s[key])


def schedule(budget_peg: int, peg_step: int, warmup_frac: float, num_samples: int) -> tuple[int, int, int, int]:
  """(total, warmup, kept samples, thin) for a per-chain PEG budget."""
  total = max(budget_peg // peg_step, 2)
  sampling = max(total - int(warmup_frac * total), 1)
  kept = min(num_samples, sampling)
  thin = sampling // kept
  return total, total - kept * thin, kept, thin


def run(config, workdir: str) -> list[dict]:
  validate(config)
  s = config.smile
  if s.protocol == "tfds":
    return run_paper(config, workdir)
  rows: list[dict] = []
  runners: dict = {}       # compiled chain runners, reused across splits of equal shapes
  for dataset in s.datasets:
    for split in s.splits:
      data = offline.load_uci(dataset, split, protocol=s.protocol, root=config.data_dir)
      rows += run_split(config, workdir, dataset, split, data, runners)
  make_plot(rows, workdir)
  with open(f"{workdir}/summary.md", "w") as f:
    f.write(summary_table(rows))
  return rows


def summary_table(rows: list[dict]) -> str:
  """Markdown: one line per (dataset, method), mean ± standard error over splits."""
  cols = [("lppd", "LPPD"), ("rmse", "RMSE"), ("coverage_90", "cov90"), ("cal_error", "cal.err"),
          ("lppd_chain_mean", "LPPD/chain"), ("rhat_median", "R-hat"), ("ess_median", "ESS"), ("resets", "resets"),
          ("final_step_size", "final eps"), ("step_size0", "eps0")]
  lines = ["| dataset | method | n | " + " | ".join(c[1] for c in cols) + " | PEG (total) | wall s |",
           "|" + "---|" * (len(cols) + 5)]

  def fmt(vals, se=True):
    vals = [v for v in vals if v is not None]
    if not vals:
      return "–"
    m = float(np.mean(vals))
    text = f"{m:.3g}" if (abs(m) < 1e-2 or abs(m) >= 1e3) and m != 0 else f"{m:.3f}"
    if se and len(vals) > 1:
      text += f" ± {float(np.std(vals, ddof=1) / np.sqrt(len(vals))):.3f}"
    return text

  for ds in dict.fromkeys(r["dataset"] for r in rows):
    for m in METHODS:
      sel = [r for r in rows if r["dataset"] == ds and r["method"] == m]
      if not sel:
        continue
      cells = [fmt([r["metrics"].get(k) for r in sel], se=k in ("lppd", "rmse")) for k, _ in cols]
      lines.append(f"| {ds} | {m} | {len(sel)} | " + " | ".join(cells) + " | "
                   + fmt([r["cost"].get("peg") for r in sel], se=False) + " | "
                   + fmt([r["cost"].get("wall_s") for r in sel], se=False) + " |")
  return "\n".join(lines) + "\n"


def run_split(config, workdir: str, dataset: str, split: int, data: dict, runners: dict) -> list[dict]:
  s = config.smile
  seed = int(config.seed)
  rng = np.random.default_rng([seed, split])
  model = api.make_model(s)
  predict = jax.jit(lambda pos, x: targets.predict(model.apply, pos, x))
  n = len(data["y_train"])
  b = sampler_batch_size(config, n)
  train = {"x": jnp.asarray(data["x_train"]), "y": jnp.asarray(data["y_train"])}
  logd = targets.make_minibatch_logdensity(model.apply, data_size=n, prior_scale=s.prior_scale)
  tag = f"{dataset}/split{split}"
  rows = []

  def emit(method, metrics, cost):
    print(f"[smile_uci] {tag} {method:13s} lppd {metrics['lppd']:+.3f} rmse {metrics['rmse']:.3f} "
          f"peg {cost.get('peg', 0):.3g} wall {cost.get('wall_s', 0):.1f}s", flush=True)
    rows.append(common.row(method=method, dataset=dataset, split=split, seed=seed, metrics=metrics, cost=cost))

  members, mcost = train_members(config, workdir, data, seed * 100 + split, f"members_{dataset}_{split}")
  k = int(s.num_members)
  one = jnp.ones((1,), bool)
  if "map" in s.methods:
    emit("map", evaluate(predict, jax.tree.map(lambda a: a[:1, None], members), one, None, data, config, rng),
         {"peg": mcost["peg"] / k, "wall_s": mcost["wall_s"] / k})
  if "de" in s.methods:
    emit("de", evaluate(predict, jax.tree.map(lambda a: a[:, None], members), one, None, data, config, rng),
         {"peg": mcost["peg"], "wall_s": mcost["wall_s"]})

  budget = int(s.budget_epochs_override.get(dataset, s.budget_epochs) * n)
  key = jax.random.key(seed * 7919 + split)
  groups = [m for m in s.methods if m not in ("map", "de") and m not in SMILE_VARIANTS]
  if any(m in SMILE_VARIANTS for m in s.methods):
    groups = ["smile_family"] + groups
  for group in groups:
    key, mkey = jax.random.split(key)
    t0 = time.perf_counter()
    if group in ("mclmc", "mclmc_native"):
      results = {group: run_mclmc_method(group, config, model, members, data, mkey, budget, predict, rng, runners,
                                         dataset)}
    else:
      results = run_sg_group(group, config, logd, members, train, data, mkey, budget, b, predict, rng, runners, n)
    wall = time.perf_counter() - t0
    for method, (metrics, cost) in results.items():
      cost["wall_s"] = wall * cost.pop("wall_share", 1.0)
      cost["warmstart_peg"] = mcost["peg"]
      cost["peg"] = cost["sampler_peg"] + mcost["peg"]
      emit(method, metrics, cost)
  return rows


def run_sg_group(group, config, logd, members, train, data, key, budget, b, predict, rng, runners, n):
  """Runs every (method, ε₀) of a group as extra chains of one compiled runner; picks ε₀ per
  method by validation LPPD. Returns {method: (metrics, cost)}."""
  s = config.smile
  k = int(s.num_members)
  grid = step_grid(config, group)
  methods = [m for m in SMILE_VARIANTS if m in s.methods] if group == "smile_family" else [group]
  combos = [(m, eps) for m in methods for eps in grid]
  grads = 2 if group == "smile_family" else 1
  total, warm, kept, thin = schedule(budget, grads * b, s.warmup_frac, int(s.num_samples))
  cache_key = (group, n, b, total, kept, thin, len(combos), train["x"].shape[1])
  if cache_key not in runners:
    runners[cache_key] = chains.make_chain_runner(make_sg_kernel(group, logd, config, total),
                                                  num_chains=k * len(combos), data_size=n, batch_size=b,
                                                  num_warmup=warm, num_samples=kept, thin=thin)
  hypers = {"step_size": jnp.repeat(jnp.asarray([e for _, e in combos], jnp.float32), k)}
  if group == "smile_family":
    hypers["variant"] = jnp.repeat(jnp.asarray([SMILE_VARIANTS[m] for m, _ in combos], bool), k, axis=0)
  starts = jax.tree.map(lambda a: jnp.concatenate([a] * len(combos)), members)
  res = runners[cache_key](starts, train, key, hypers)
  out = {}
  for method in methods:
    best = None
    for i, (m, eps) in enumerate(combos):
      if m != method:
        continue
      part = jax.tree.map(lambda a: a[i * k:(i + 1) * k], (res.positions, res.logdensity, res.resets,
                                                            res.nonfinite, res.step_size))
      valid = evaluate(predict, part[0], res.keep, None, data, config, rng, part="valid")
      score = valid["lppd"] if math.isfinite(valid["lppd"]) else -math.inf
      if best is None or score > best[0]:
        best = (score, eps, part)
    score, eps, (pos, logdens, resets, nonfinite, eps_final) = best
    metrics = evaluate(predict, pos, res.keep, logdens, data, config, rng)
    metrics.update(step_size0=eps, valid_lppd=score, resets=float(np.sum(resets)),
                   nonfinite=float(np.sum(nonfinite)), final_step_size=float(np.median(eps_final)))
    cost = {"sampler_peg": float(res.peg_per_chain * k), "grid_peg": float(res.peg_per_chain * k * len(grid)),
            "steps_per_chain": float((res.peg_per_chain - b) // (grads * b)), "wall_share": len(grid) / len(combos)}
    out[method] = (metrics, cost)
  return out


def run_mclmc_method(method, config, model, members, data, key, budget, predict, rng, runners, dataset):
  s = config.smile
  n, p = data["x_train"].shape
  if method == "mclmc":
    total = max(budget // (2 * n), 4)
    tune = max(total // 2, 3)
    kept = min(int(s.num_samples), total - tune)
    thin = max((total - tune) // max(kept, 1), 1)
    starts = members
    frac3 = 0.1 if tune >= 50 else 0.0   # too few steps for phase 3's ESS estimate of L
  else:
    over = s.mclmc_native_override.get(dataset, {})
    tune, kept = int(over.get("tune", s.mclmc_native_tune)), int(s.num_samples)
    thin = max(int(over.get("samples", s.mclmc_native_samples)) // kept, 1)
    starts = jax.tree.map(lambda a: a[:int(over.get("chains", s.mclmc_native_chains))], members)
    frac3 = 0.1 if tune >= 50 else 0.0
  c = jax.tree.leaves(starts)[0].shape[0]
  cache_key = ("mclmc", n, p, c, tune, kept, thin, frac3)
  if cache_key not in runners:
    def make_logdensity(x, y):
      return targets.make_full_logdensity(model.apply, x, y, prior_scale=s.prior_scale)
    runners[cache_key] = chains.make_mclmc_runner(make_logdensity, num_chains=c, data_size=n, num_tune=tune,
                                                  num_samples=kept, thin=thin, desired_energy_var=s.mclmc_energy_var,
                                                  frac_tune3=frac3)
  res = runners[cache_key](starts, {"x": jnp.asarray(data["x_train"]), "y": jnp.asarray(data["y_train"])}, key)
  metrics = evaluate(predict, res.positions, res.keep, res.logdensity, data, config, rng)
  metrics.update(nonfinite=float(np.sum(res.nonfinite)), final_step_size=float(np.median(res.step_size)),
                 resets=0.0)
  return metrics, {"sampler_peg": float(res.peg_per_chain * c),
                   "steps_per_chain": float((res.peg_per_chain - n) // (2 * n))}


def _load_tfds(split: str, config, limit: int) -> dict:
  """Materialises a TFDS split as numpy arrays (chains index the whole training set on device)."""
  from jaxml.data import tfds as tfds_data
  s = config.smile
  it = tfds_data.make_tfds_batches(s.paper_dataset, split=split, batch_size=int(s.paper_load_batch), seed=0,
                                   data_dir=config.data_dir, shuffle=False, num_epochs=1)
  xs, ys = [], []
  for batch in it:
    xs.append(batch["x"])
    ys.append(batch["y"])
    if limit and sum(len(y) for y in ys) >= limit:
      break
  x, y = np.concatenate(xs), np.concatenate(ys)
  return {"x": x[:limit] if limit else x, "y": y[:limit] if limit else y}


def run_paper(config, workdir: str) -> list[dict]:
  """Accelerator preset: K ResNet members (core.fit), then pSMILE and SGLD chains on CIFAR-10."""
  from jaxml.nn.resnet import ResNet
  s = config.smile
  seed = int(config.seed)
  train = _load_tfds("train", config, int(s.paper_train_limit))
  test = _load_tfds("test", config, int(s.paper_test_limit))
  net = ResNet(num_classes=int(s.num_classes), stage_sizes=tuple(s.resnet_stage_sizes), width=int(s.resnet_width))
  apply_fn = lambda p, x: net.apply({"params": p}, x)
  init_fn = lambda r, x: net.init(r, x)["params"]
  k = int(s.num_members)
  method = api.make_classifier_method(apply_fn, init_fn, k)
  n, b = len(train["y"]), min(int(s.paper_batch), len(train["y"]))
  member_batches = [iterators.epoch_batches(train, b, seed=seed * 1000 + m) for m in range(k)]

  def batches(step: int) -> dict:
    parts = [f(step) for f in member_batches]
    return {key: np.stack([p[key] for p in parts]) for key in ("x", "y")}

  steps = int(s.member_max_steps)
  optimizer = core.make_optimizer({"name": "adamw", "lr": s.paper_member_lr, "weight_decay": s.member_weight_decay,
                                   "schedule": "cosine"}, steps)
  state = core.create_train_state(method.init(jax.random.key(seed), batches(0)), optimizer, seed)
  t0 = time.perf_counter()
  result = core.fit(state, core.make_train_step(method.loss_fn, optimizer), batches, num_steps=steps,
                    log_every=int(config.log_every), writer=core.MetricWriter(workdir), name="members",
                    shard_batch_rows=False,
                    checkpoint_manager=core.make_manager(common.workdir_subdir(workdir, "checkpoints", "members")),
                    checkpoint_every=int(config.checkpoint_every))
  member_peg = float(k * steps * b)
  members = result.state.params
  predict = jax.jit(lambda pos, x: jax.vmap(jax.vmap(lambda p: jax.nn.log_softmax(apply_fn(p, x))))(pos))
  xt, yt = jnp.asarray(test["x"]), test["y"]
  rows = []

  def metrics_of(positions):
    return targets.classification_metrics(np.asarray(predict(positions, xt)).reshape(-1, len(yt), int(s.num_classes)), yt)

  rows.append(common.row(method="de", dataset=s.paper_dataset, split=0, seed=seed,
                         metrics=metrics_of(jax.tree.map(lambda a: a[:, None], members)),
                         cost={"peg": member_peg, "wall_s": time.perf_counter() - t0}))
  logd = targets.make_classification_logdensity(apply_fn, data_size=n, prior_scale=s.prior_scale)
  data = {"x": jnp.asarray(train["x"]), "y": jnp.asarray(train["y"])}
  budget = int(s.budget_epochs * n)
  for method_name in s.methods:
    t1 = time.perf_counter()
    if method_name == "psmile":
      kern = chains.smile_chain_kernel(kernel.psmile(logd, step_size=float(s.smile_step_size[0]), p_reset=s.p_reset,
                                                     alpha=s.alpha, delta=s.delta, beta=s.beta))
    elif method_name == "sgld":
      kern = baselines.sgld_kernel(logd, step_size=float(s.sgld_step_size[0]))
    else:
      raise ValueError(f"paper preset supports psmile and sgld, got {method_name!r}")
    total, warm, kept, thin = schedule(budget, kern.grads_per_step * b, s.warmup_frac, int(s.num_samples))
    res = chains.run_chains(kern, members, data, jax.random.key(seed + 17), batch_size=b, num_warmup=warm,
                            num_samples=kept, thin=thin)
    metrics = metrics_of(res.positions)
    metrics.update(resets=float(np.sum(res.resets)), nonfinite=float(np.sum(res.nonfinite)))
    rows.append(common.row(method=method_name, dataset=s.paper_dataset, split=0, seed=seed, metrics=metrics,
                           cost={"peg": member_peg + res.peg_per_chain * k, "sampler_peg": res.peg_per_chain * k,
                                 "wall_s": time.perf_counter() - t1}))
    print(f"[smile_uci] {s.paper_dataset} {method_name}: {metrics}", flush=True)
  return rows


ANCHORS = {"energy": 2.018, "airfoil": 0.28, "bikesharing": 0.132}   # SMILE paper, standardised targets


def make_plot(rows: list[dict], workdir: str) -> None:
  """LPPD (mean ± s.e. over splits) against total PEG per method; dashed line: published SMILE LPPD."""
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  fig, axes = plt.subplots(1, len(datasets), figsize=(4.0 * len(datasets) + 1.6, 3.4), squeeze=False)
  for ax, ds in zip(axes[0], datasets):
    methods = [m for m in METHODS if any(r["method"] == m and r["dataset"] == ds for r in rows)]
    for i, m in enumerate(methods):
      sel = [r for r in rows if r["method"] == m and r["dataset"] == ds and r["metrics"]["lppd"] is not None]
      if not sel:
        continue
      # Small horizontal offsets keep equal-PEG methods apart; the x-axis is logarithmic.
      peg = np.mean([r["cost"]["peg"] for r in sel]) * 1.04 ** (i - len(methods) / 2)
      lppd = np.array([r["metrics"]["lppd"] for r in sel])
      ax.errorbar(peg, lppd.mean(), yerr=lppd.std(ddof=1) / np.sqrt(len(lppd)) if len(lppd) > 1 else 0,
                  fmt="o^sDv<>ph*X"[i % 11], label=m, color=plt.cm.tab20(i / max(len(methods), 1)), capsize=2)
    if ds in ANCHORS and any(r["dataset"] == ds and r["split"] in (1, 2, 3) for r in rows):
      ax.axhline(ANCHORS[ds], ls="--", color="k", lw=0.8, label="published SMILE")
    ax.set_xscale("log")
    ax.set_xlabel("PEG (total, incl. ensemble training)")
    ax.set_title(ds)
    vals = [r["metrics"]["lppd"] for r in rows if r["dataset"] == ds and r["metrics"]["lppd"] is not None]
    hi = max(max(vals), ANCHORS.get(ds, -np.inf))
    ax.set_ylim(np.nanpercentile(vals, 15) - 0.05, hi + 0.05)
  axes[0][0].set_ylabel("test LPPD")
  handles, labels = axes[0][0].get_legend_handles_labels()
  fig.legend(handles, labels, loc="center right", fontsize=7)
  fig.subplots_adjust(right=1 - 1.5 / (4.0 * len(datasets) + 1.6), wspace=0.3)
  common.save_plot(fig, workdir, "lppd_vs_peg.png")


if __name__ == "__main__":
  common.run_main(run, experiment="smile_uci", validate=validate)
