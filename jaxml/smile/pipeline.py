"""The SMILE pipeline on a regression data set: ensemble → warmup → sampling, at an equal PEG budget.

`run_split` chains `fit_ensemble` (K MAP members in one `core.train` run, each at its best validation-NLL epoch),
`make_samplers` (one compiled runner per sampler group; every (variant, ε₀) runs as extra chains of one compile)
and `sample_split` (one chain per member for every sampler, ε₀ per method by validation LPPD, test metrics).
`cfg` is the `smile` section of configs/smile_uci.py; data holds x/y_train, x/y_valid, x/y_test (+ "y_std")."""

import functools
import math
import time
import zlib
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxml import core
from jaxml.metrics import mcmc
from jaxml.smile import adaptation, api, auto_l, baselines, chains, kernel, targets

__all__ = ["METHODS", "SMILE_VARIANTS", "TUNED_PSMILE", "Samplers", "sampler_batch_size", "schedule", "step_grid",
           "member_plan", "eps_drift", "per_chain_lppd", "chain_filter", "authors_row_order", "combo_chain_ids",
           "family_hypers", "group_hypers", "config_keys", "row_key", "check_extension", "extend_grid", "fit_ensemble",
           "evaluate", "make_samplers", "sample_split", "run_split", "run_classification"]

METHODS = ("map", "de", "smile_naive", "smile", "psmile_naive", "psmile", "psmile_vt", "psmile_clamp", "psmile_auto",
           "sgld", "csgld", "sghmc", "mclmc", "mclmc_native")
# The methods of the `smile_family` group: (precondition, tuned). `psmile_clamp` is pSMILE-naive with the r clamp
# always on (the clamp ablation of an unclamped run, beside `psmile_naive` in one compile).
SMILE_VARIANTS = {"smile_naive": (False, False), "smile": (False, True), "psmile_naive": (True, False),
                  "psmile": (True, True), "psmile_clamp": (True, False)}
CLAMPED = ("psmile_clamp",)
# Tuned pSMILE methods with their own tuner (one group each) -> the prefix of their config keys: the virial rule.
TUNED_PSMILE = {"psmile_vt": "vt"}
# `smile.psmile` with its defaults (L from the chains, fixed ε₀ under the noise cap) on the ε₀ grid of the variants.
AUTO = "psmile_auto"

Result = tuple[dict[str, float], dict[str, float]]


def _c(cfg: Any) -> Any:
  """A plain dict as a ConfigDict (attribute access), so a dict works wherever a ConfigDict does."""
  return ml_collections.ConfigDict(cfg) if isinstance(cfg, dict) else cfg


def sampler_batch_size(cfg: Any, n: int) -> int:
  """Spec: 32 if N < 1000 (standard protocol), 64 if N < 5000, else 256; `batch_size` > 0 overrides."""
  cfg = _c(cfg)
  if cfg.batch_size:
    return min(int(cfg.batch_size), n)
  if cfg.protocol == "standard" and n < 1000:
    return 32
  return 64 if n < 5000 else 256


def schedule(budget_peg: int, peg_step: int, warmup_frac: float, num_samples: int) -> tuple[int, int, int, int]:
  """(total, warmup, kept samples, thin) for a per-chain PEG budget."""
  total = max(budget_peg // peg_step, 2)
  sampling = max(total - int(warmup_frac * total), 1)
  kept = min(num_samples, sampling)
  thin = sampling // kept
  return total, total - kept * thin, kept, thin


def step_grid(cfg: Any, group: str) -> tuple[float, ...]:
  """The ε₀ grid of a method or group: `smile_step_size` for every SMILE variant, else `<prefix>_step_size`."""
  key = "smile_step_size" if group in SMILE_VARIANTS or group in ("smile_family", AUTO) else (
      f"{TUNED_PSMILE.get(group, group)}_step_size")
  return tuple(float(e) for e in getattr(_c(cfg), key))


def member_plan(cfg: Any, n: int) -> tuple[int, int, int]:
  """(member batch size, steps per epoch, training steps) of the ensemble on n training rows."""
  cfg = _c(cfg)
  b = min(int(cfg.member_batch), n)
  per_epoch = max(n // b, 1)
  return b, per_epoch, int(min(cfg.member_epochs * per_epoch, cfg.member_max_steps))


_SMILE = set(SMILE_VARIANTS)                     # the `smile_family` group
_ALL_SMILE = _SMILE | set(TUNED_PSMILE)
# Config keys of the `smile` section by what runs: (condition on (methods, regression protocol), keys).
_KEYS = ((lambda m, reg: True, ("protocol", "methods", "prior_scale", "num_members", "member_max_steps",
                                "budget_epochs", "warmup_frac", "num_samples")),
         (lambda m, reg: reg, ("hidden", "noise", "member_batch", "member_epochs", "batch_size", "coverage_draws",
                               "rhat_points", "chain_filter_nats", "member_fixed_sigma", "budget_steps", "epoch_wise_sampling",
                               "likelihood_scale", "precond_clamp", "nonfinite_halving", "split_source")),
         (lambda m, reg: bool(m & (_SMILE | {AUTO})), ("smile_step_size",)),
         (lambda m, reg: bool(m & _SMILE), ("p_reset", "alpha", "delta", "beta")),
         (lambda m, reg: reg and bool(m & _ALL_SMILE), ("L", "same_batch_energy")),
         (lambda m, reg: "psmile_vt" in m, ("vt_step_size", "vt_target", "vt_gain", "vt_settle_frac")),
         (lambda m, reg: "sgld" in m, ("sgld_step_size",)),
         (lambda m, reg: "csgld" in m, ("csgld_step_size", "csgld_cycles", "csgld_explore")),
         (lambda m, reg: "sghmc" in m, ("sghmc_step_size", "sghmc_momentum_decay")),
         (lambda m, reg: bool(m & {"mclmc", "mclmc_native"}), ("mclmc_energy_var",)),
         (lambda m, reg: "mclmc_native" in m, ("mclmc_native_tune", "mclmc_native_samples", "mclmc_native_chains")),
         (lambda m, reg: not reg, ("num_classes", "resnet_stage_sizes", "resnet_width", "paper_dataset",
                                   "paper_batch", "paper_load_batch", "paper_train_limit", "paper_test_limit")))


def config_keys(methods: Sequence[str], protocol: str) -> tuple[str, ...]:
  """The keys of the `smile` section that a run of `methods` under `protocol` reads (strict configs)."""
  methods, regression = set(methods), protocol != "tfds"
  return tuple(k for cond, keys in _KEYS if cond(methods, regression) for k in keys)


def row_key(r: dict) -> tuple:
  """The identity of a results row: (method, dataset, split, seed)."""
  return r["method"], r["dataset"], r["split"], r["seed"]


def check_extension(base: dict, extra: dict) -> None:
  """ValueError unless the `smile` config `extra` is `base`'s protocol on other ε₀ values: every key both have is
  equal, except the run's data sets / splits / methods and the ε₀ grids, which must be disjoint."""
  for k in sorted(base.keys() & extra.keys()):
    if k.endswith("step_size"):
      if set(base[k]) & set(extra[k]):
        raise ValueError(f"{k}: the extension repeats ε₀ values {sorted(set(base[k]) & set(extra[k]))}")
    elif k not in ("datasets", "splits", "methods") and base[k] != extra[k]:
      raise ValueError(f"{k}: {extra[k]!r} in the extension, {base[k]!r} in the base run")


def _valid(r: dict) -> float:
  """A row's validation LPPD; null (non-finite: every chain diverged) is -inf, as in `pipeline`'s ε₀ choice."""
  v = r["metrics"]["valid_lppd"]
  return -float("inf") if v is None else float(v)


def extend_grid(base: list[dict], extra: list[dict]) -> list[dict]:
  """`base` rows extended by runs on other ε₀ values (`extra`): each method keeps the row with the higher validation
  LPPD (ties: base), grid_peg and wall_s add up; only cells `extra` covers are kept, an unmatched extra row errs."""
  if bad := [row_key(r) for r in extra if "step_size0" not in r["metrics"]]:
    raise ValueError(f"extension row {bad[0]} has no ε₀ grid")
  more = {row_key(r): r for r in extra}
  cells = {k[1:] for k in more}
  out, used = [], set()
  for r in base:
    e = more.get(row_key(r))
    if "step_size0" not in r["metrics"]:     # no ε₀ grid (MAP, DE, MCLMC): kept where the extension ran
      out += [r] if row_key(r)[1:] in cells else []
    elif e is not None:
      used.add(row_key(r))
      best = e if _valid(e) > _valid(r) else r
      out.append(dict(best, metrics=dict(best["metrics"]),
                      cost=best["cost"] | {k: r["cost"][k] + e["cost"][k] for k in ("grid_peg", "wall_s")}))
  if set(more) - used:
    raise ValueError(f"extension rows without a base row: {sorted(set(more) - used)}")
  return out


def fit_ensemble(method: core.Method, member_batches: Sequence[Callable[[int], dict]], train_cfg: Any, *,
                 steps_per_epoch: int, valid: dict | None, seed: int, batch_size: int, workdir: str | None = None,
                 name: str = "members", mesh: Any = None) -> tuple[Any, dict[str, float]]:
  """Trains K stacked members (`api.make_method`) in one `core.train` run; member k draws `member_batches[k]`,
  and with `valid` keeps its best validation-NLL parameters. Returns (params [K, ...], cost: PEG, wall s, best epoch)."""
  def batches(step: int) -> dict:
    parts = [f(step) for f in member_batches]
    return {key: np.stack([p[key] for p in parts]) for key in parts[0]}

  select = None if valid is None else core.Selection(metric="nll", mode="min", every=steps_per_epoch)
  evals = None if valid is None else [{"x": jnp.asarray(valid["x"]), "y": jnp.asarray(valid["y"])}]
  res = core.train(method, batches, train_cfg, workdir=workdir, name=name, seed=seed, mesh=mesh,
                   init_params=method.init(jax.random.key(seed), batches(0)), select=select,
                   eval_batches=None if valid is None else (lambda: evals), shard_batch_rows=False)
  steps = int(train_cfg["num_steps"])
  cost = {"peg": float(len(member_batches) * steps * batch_size), "wall_s": res.wall_s, "steps": steps}
  if select is not None:
    cost["best_epoch_mean"] = float(np.mean(np.asarray(res.best.step) // steps_per_epoch))
  return res.params, cost


def evaluate(predict: Callable, positions: Any, keep: np.ndarray, logdensity: np.ndarray | None, data: dict,
             cfg: Any, rng: np.random.Generator, part: str = "test") -> dict[str, float]:
  """Mixture metrics over all kept samples [C, S]; per-chain LPPD; within-chain R-hat / ESS."""
  cfg = _c(cfg)
  keep = np.asarray(keep, bool)
  mu, log_sigma = (np.asarray(a)[:, keep] for a in predict(positions, jnp.asarray(data[f"x_{part}"])))
  y = data[f"y_{part}"]
  c, n_s, n = mu.shape
  out = targets.predictive_metrics(mu.reshape(c * n_s, n), log_sigma.reshape(c * n_s, n), y, rng=rng,
                                   min_draws=int(cfg.coverage_draws))
  out["lppd_chain_mean"] = float(per_chain_lppd(mu, log_sigma, y).mean())
  out["num_samples"] = float(c * n_s)
  if part == "test" and cfg.protocol == "standard":   # anchors of the 20-split protocol: original units
    out["lppd_std"], out["rmse_std"] = out["lppd"], out["rmse"]
    out["lppd"], out["rmse"] = out["lppd"] - math.log(data["y_std"]), out["rmse"] * data["y_std"]
  if part == "test" and n_s >= 8:
    q = [mu[:, :, :int(cfg.rhat_points)], log_sigma.mean(-1, keepdims=True)]
    if logdensity is not None:
      q.append(np.asarray(logdensity)[:, keep][..., None])
    q = np.concatenate(q, axis=-1)
    for name, stat in (("rhat_median", mcmc.split_rhat), ("ess_median", mcmc.bulk_ess)):
      with np.errstate(all="ignore"):
        v = np.stack([stat(q[i][None]) for i in range(c)])
      out[name] = float(np.nanmedian(v)) if np.isfinite(v).any() else float("nan")
  return out


def authors_row_order(seed: int, n: int) -> np.ndarray:
  """The row order of the SMILE authors' tabular loader for their config seed `seed` (`rng` 1-3), reconstructed
  from EmanuelSommer/SMILE (src/training/trainer.py, src/dataset/base.py) with jax 0.4.33's non-partitionable
  threefry; not checked against split files of theirs (none are published)."""
  with jax.threefry_partitionable(False):
    key = jax.random.key(int(seed))
    for _ in range(3):
      key, sub = jax.random.split(key)
    loader = sub
    for _ in range(2):
      loader, sub = jax.random.split(loader)
    return np.asarray(jax.random.permutation(sub, n))


def per_chain_lppd(mu: np.ndarray, log_sigma: np.ndarray, y: np.ndarray) -> np.ndarray:
  """[C, S, n] predictive parameters -> [C] LPPD of each chain's own equal-weight mixture over its samples."""
  ll = -0.5 * np.log(2 * np.pi) - log_sigma - 0.5 * ((y - mu) * np.exp(-log_sigma)) ** 2     # [C, S, n]
  top = ll.max(1)
  return (np.log(np.mean(np.exp(ll - top[:, None]), axis=1)) + top).mean(-1)


def chain_filter(predict: Callable, positions: Any, keep: np.ndarray, data: dict, nats: float) -> np.ndarray:
  """Chains to keep: per-chain *validation* LPPD (no test rows) within `nats` of the median chain (a chain that left
  the data region falls far below); a non-finite chain counts as -inf: dropped without making the median NaN."""
  keep = np.asarray(keep, bool)
  mu, log_sigma = (np.asarray(a)[:, keep] for a in predict(positions, jnp.asarray(data["x_valid"])))
  v = per_chain_lppd(mu, log_sigma, data["y_valid"])
  v = np.where(np.isfinite(v), v, -np.inf)
  return v >= np.median(v) - nats


def stable_id(name: str) -> int:
  """A run-independent int32 id of a name (CRC-32, top bit cleared), for keys and seeds independent of the others."""
  return zlib.crc32(name.encode()) & 0x7FFFFFFF


def combo_chain_ids(combos: Sequence[tuple[str, float]], k: int) -> jnp.ndarray:
  """int32 [len(combos) · k] chain ids, combo-major: member j of (method, ε₀) gets stable_id("method|ε₀|j")."""
  ids = [stable_id(f"{m}|{float(eps)!r}|{j}") for m, eps in combos for j in range(k)]
  if len(set(ids)) != len(ids):
    raise ValueError(f"chain id collision among {combos}")
  return jnp.asarray(ids, jnp.int32)


def _method_rng(seed: int, method: str) -> np.random.Generator:
  """The numpy generator of one method's metric draws (coverage), independent of the other methods."""
  return core.numpy_rng(seed, stable_id(method))


class Samplers(NamedTuple):
  """Compiled chain runners of one data shape: `runners[group]`, with what each was built for."""

  data_size: int
  batch_size: int
  budget: int
  groups: tuple[str, ...]
  runners: dict[str, Callable[..., chains.ChainResult]]
  plans: dict[str, tuple]       # group -> (methods, combos, grads per step)
  predict: Callable


def _groups(methods: Sequence[str]) -> list[str]:
  groups = [m for m in methods if m not in ("map", "de") and m not in SMILE_VARIANTS]
  return (["smile_family"] if any(m in SMILE_VARIANTS for m in methods) else []) + groups


def _precond_clamp(cfg: Any) -> bool:
  """`precond_clamp`: r clamped to PrecondConfig's [r_min, r_max] in every SMILE method but `CLAMPED` (always on)."""
  return bool(cfg.get("precond_clamp", True))


def _smile_options(cfg: Any) -> dict:
  """Kernel options shared by every SMILE group: L and the preconditioner clamp."""
  return {"L": math.inf if not cfg.L else float(cfg.L), "clamp": _precond_clamp(cfg)}


def family_hypers(cfg: Any, combos: Sequence[tuple[str, float]], k: int) -> dict[str, jnp.ndarray]:
  """Per-chain hypers of the `smile_family` runner for `combos` [(method, ε₀)], k chains each (combo-major):
  ε₀, the variant (precondition, tuned) and the r clamp (`precond_clamp`, on for `CLAMPED`)."""
  clamp = _precond_clamp(_c(cfg))
  variants = np.repeat(np.asarray([SMILE_VARIANTS[m] for m, _ in combos], bool), k, axis=0)
  return {"step_size": jnp.repeat(jnp.asarray([e for _, e in combos], jnp.float32), k),
          "precondition": jnp.asarray(variants[:, 0]), "tuned": jnp.asarray(variants[:, 1]),
          "clamp": jnp.repeat(jnp.asarray([clamp or m in CLAMPED for m, _ in combos], bool), k)}


def group_hypers(cfg: Any, group: str, combos: Sequence[tuple[str, float]], k: int) -> dict[str, jnp.ndarray]:
  """Per-chain hypers of one stochastic-gradient group's runner, k chains per (method, ε₀) of `combos` (combo-major):
  `family_hypers` for the SMILE family, ε₀ alone for the others."""
  if group == "smile_family":
    return family_hypers(cfg, combos, k)
  return {"step_size": jnp.repeat(jnp.asarray([e for _, e in combos], jnp.float32), k)}


def _sg_kernel(group: str, logd: Callable, cfg: Any, total_steps: int, warmup_steps: int = 0) -> chains.ChainKernel:
  """One kernel per group, ε₀ (and the SMILE variant) per-chain `hypers`: `smile_family` runs every SMILE variant
  in one compile (`adaptation.per_chain_tuner`), `psmile_vt` pSMILE with the pooled virial rule."""
  default = step_grid(cfg, group)[0]
  if group == "smile_family":
    ref = adaptation.ref_tuner(p_reset=cfg.p_reset, alpha=cfg.alpha, delta=cfg.delta, beta=cfg.beta)
    # the naive variants' fixed ε is halved on a non-finite step unless `nonfinite_halving` is off
    fixed = adaptation.fixed_tuner(halve_nonfinite=bool(cfg.get("nonfinite_halving", True)))
    return chains.smile_chain_kernel(kernel.psmile(logd, step_size=default, tuner=adaptation.per_chain_tuner(
        ref, fixed), same_batch_energy=bool(cfg.same_batch_energy), **_smile_options(cfg)))
  if group == "psmile_vt":
    tuner = adaptation.virial_tuner(adapt_steps=int(warmup_steps), gain=float(cfg.vt_gain),
                                    target=float(cfg.vt_target), settle_frac=float(cfg.vt_settle_frac),
                                    pool_chains=True)
    return chains.smile_chain_kernel(kernel.psmile(logd, step_size=default, tuner=tuner, **_smile_options(cfg)))
  if group == AUTO:    # ε₀ per chain from the hypers; L and the noise cap adapt over the first half of the run
    return chains.auto_chain_kernel(lambda eps: auto_l.psmile(logd, step_size=eps, num_steps=total_steps,
                                                              clamp=_precond_clamp(cfg)))
  if group == "sgld":
    return baselines.sgld_kernel(logd, step_size=default)
  if group == "csgld":
    return baselines.csgld_kernel(logd, step_size=default, total_steps=total_steps, num_cycles=cfg.csgld_cycles,
                                  explore_frac=cfg.csgld_explore)
  return baselines.sghmc_kernel(logd, step_size=default, momentum_decay=cfg.sghmc_momentum_decay)


def make_samplers(cfg: Any, *, data_size: int, budget_epochs: float) -> Samplers:
  """Builds (does not yet compile) one runner per sampler group for `data_size` training rows."""
  cfg = _c(cfg)
  if _precond_clamp(cfg) and any(m in CLAMPED for m in cfg.methods):
    raise ValueError(f"{CLAMPED} are the r-clamp ablation of an unclamped run: with precond_clamp=True they "
                     "would copy psmile_naive; set precond_clamp=False")
  model = api.make_model(cfg)
  n, k = int(data_size), int(cfg.num_members)
  b = sampler_batch_size(cfg, n)
  budget = int(budget_epochs * n)
  if cfg.get("budget_steps", 0):   # SMILE steps per chain (2b PEG each); epoch-wise: the number counts epochs
    budget = int(cfg.budget_steps) * (n // b if cfg.get("epoch_wise_sampling", False) else 1) * 2 * b
  logd = targets.make_minibatch_logdensity(model.apply, data_size=n, prior_scale=cfg.prior_scale,
                                           floor_scale=cfg.get("likelihood_scale", "ratio") == "floor")
  runners, plans = {}, {}
  for group in _groups(cfg.methods):
    if group in ("mclmc", "mclmc_native"):
      runners[group], plans[group] = _mclmc_runner(group, cfg, model, n, budget)
      continue
    methods = [m for m in SMILE_VARIANTS if m in cfg.methods] if group == "smile_family" else [group]
    combos = [(m, eps) for m in methods for eps in step_grid(cfg, group)]
    grads = _sg_kernel(group, logd, cfg, 1).grads_per_step
    total, warm, kept, thin = schedule(budget, grads * b, cfg.warmup_frac, int(cfg.num_samples))
    runners[group] = chains.make_chain_runner(_sg_kernel(group, logd, cfg, total, warm - warm % thin),
                                              num_chains=k * len(combos), data_size=n, batch_size=b,
                                              num_warmup=warm, num_samples=kept, thin=thin)
    plans[group] = (methods, combos, grads)
  predict = jax.jit(lambda pos, x: targets.predict(model.apply, pos, x))
  return Samplers(n, b, budget, tuple(runners), runners, plans, predict)


def _mclmc_runner(group: str, cfg: Any, model: targets.RegressionModel, n: int, budget: int):
  if group == "mclmc":
    total = max(budget // (2 * n), 4)
    tune = max(total // 2, 3)
    kept = min(int(cfg.num_samples), total - tune)
    thin = max((total - tune) // max(kept, 1), 1)
    c = int(cfg.num_members)
  else:
    tune, kept = int(cfg.mclmc_native_tune), int(cfg.num_samples)
    thin = max(int(cfg.mclmc_native_samples) // kept, 1)
    c = int(cfg.mclmc_native_chains)
  frac3 = 0.1 if tune >= 50 else 0.0   # too few steps for phase 3's ESS estimate of L
  make_logdensity = functools.partial(targets.make_full_logdensity, model.apply, prior_scale=cfg.prior_scale)
  runner = chains.make_mclmc_runner(make_logdensity, num_chains=c, data_size=n, num_tune=tune, num_samples=kept,
                                    thin=thin, desired_energy_var=cfg.mclmc_energy_var, frac_tune3=frac3)
  return runner, ([group], None, c)


def sample_split(samplers: Samplers, cfg: Any, members: Any, data: dict, key: jax.Array,
                 rng: np.random.Generator, *, progress: str | None = None) -> dict[str, Result]:
  """Runs every sampler group from the members; returns {method: (metrics, cost)} (sampler PEG only). Group keys,
  chain ids and metric generators are per name, so a method's rows do not depend on what runs beside it."""
  cfg = _c(cfg)
  train = {"x": jnp.asarray(data["x_train"]), "y": jnp.asarray(data["y_train"])}
  seed = int(rng.integers(2 ** 63))
  out: dict[str, Result] = {}
  say = progress if progress and core.is_main_process() else None
  for group in samplers.groups:
    gkey = jax.random.fold_in(key, stable_id(group))    # not a split in group order
    t0 = time.perf_counter()
    if say:
      methods, combos, num = samplers.plans[group]
      size = (f"{num} chains" if combos is None else f"{int(cfg.num_members) * len(combos)} chains "
              f"({len(methods)} method(s) x {len(step_grid(cfg, group))} step sizes)")
      print(f"[{say}] sampler group {group}: {size} ...", flush=True)
    if group in ("mclmc", "mclmc_native"):
      results = {group: _run_mclmc(samplers, cfg, group, members, train, data, gkey, _method_rng(seed, group))}
    else:
      results = _run_sg_group(samplers, cfg, group, members, train, data, gkey, seed)
    wall = time.perf_counter() - t0
    if say:
      print(f"[{say}] sampler group {group}: done in {wall:.1f}s", flush=True)
    for method, (metrics, cost) in results.items():
      cost["wall_s"] = wall * cost.pop("wall_share", 1.0)
      out[method] = (metrics, cost)
  return out


def _run_sg_group(samplers, cfg, group, members, train, data, key, seed) -> dict[str, Result]:
  """Every (method, ε₀) of a group as extra chains of one runner; ε₀ per method by validation LPPD."""
  k, b = int(cfg.num_members), samplers.batch_size
  methods, combos, grads = samplers.plans[group]
  grid = step_grid(cfg, group)
  starts = jax.tree.map(lambda a: jnp.concatenate([a] * len(combos)), members)
  res = samplers.runners[group](starts, train, key, group_hypers(cfg, group, combos, k), combo_chain_ids(combos, k))
  chains_of = lambda i, tree: jax.tree.map(lambda a: a[i * k:(i + 1) * k], tree)
  out = {}
  for method in methods:
    rng = _method_rng(seed, method)
    scores = {}
    for i in (i for i, (m, _) in enumerate(combos) if m == method):
      valid = evaluate(samplers.predict, chains_of(i, res.positions), res.keep, None, data, cfg, rng, part="valid")
      scores[i] = valid["lppd"] if math.isfinite(valid["lppd"]) else -math.inf
    best = max(scores, key=scores.get)           # the first of equal scores
    pos, logdens, resets, nonfinite, eps_final = chains_of(best, (res.positions, res.logdensity, res.resets,
                                                                  res.nonfinite, res.step_size))
    metrics = evaluate(samplers.predict, pos, res.keep, logdens, data, cfg, rng)
    metrics.update(step_size0=combos[best][1], valid_lppd=scores[best], resets=float(np.sum(resets)),
                   nonfinite=float(np.sum(nonfinite)), final_step_size=float(np.median(eps_final)),
                   eps_spread=float(np.max(eps_final) / max(float(np.min(eps_final)), 1e-30)),
                   eps_drift=eps_drift(np.asarray(res.warmup_step_size)[:, best * k:(best + 1) * k]))
    if float(cfg.get("chain_filter_nats", 0.0)) > 0:   # diagnostic: the mixture without chains lost on validation
      kept = chain_filter(samplers.predict, pos, res.keep, data, float(cfg.chain_filter_nats))
      sub = evaluate(samplers.predict, jax.tree.map(lambda a: a[np.flatnonzero(kept)], pos), res.keep, None, data,
                     cfg, rng)
      metrics.update(chains_kept=float(kept.sum()), lppd_kept=sub["lppd"], rmse_kept=sub["rmse"])
    cost = {"sampler_peg": float(res.peg_per_chain * k), "grid_peg": float(res.peg_per_chain * k * len(grid)),
            "steps_per_chain": float((res.peg_per_chain - b) // (grads * b)), "wall_share": len(grid) / len(combos)}
    out[method] = (metrics, cost)
  return out


def eps_drift(warmup_step_size: np.ndarray) -> float:
  """Largest max/min ratio of ε over the second half of warmup, over chains ([W, C] trace; 1 = no change)."""
  half = np.asarray(warmup_step_size)[warmup_step_size.shape[0] // 2:]
  if half.size == 0:
    return float("nan")
  return float(np.max(half.max(0) / np.maximum(half.min(0), 1e-30)))


def _run_mclmc(samplers, cfg, group, members, train, data, key, rng) -> Result:
  c, n = samplers.plans[group][2], samplers.data_size
  starts = members if group == "mclmc" else jax.tree.map(lambda a: a[:c], members)
  res = samplers.runners[group](starts, train, key)
  metrics = evaluate(samplers.predict, res.positions, res.keep, res.logdensity, data, cfg, rng)
  metrics.update(nonfinite=float(np.sum(res.nonfinite)), final_step_size=float(np.median(res.step_size)),
                 resets=0.0)
  return metrics, {"sampler_peg": float(res.peg_per_chain * c),
                   "steps_per_chain": float((res.peg_per_chain - n) // (2 * n))}


def run_split(cfg: Any, train_cfg: Any, samplers: Samplers, data: dict, member_batches: Sequence[Callable],
              *, seed: int, chain_key: jax.Array, rng: np.random.Generator, steps_per_epoch: int,
              workdir: str | None = None, name: str = "members", mesh: Any = None,
              progress: bool = False) -> dict[str, Result]:
  """Ensemble → MAP / DE metrics → every sampler from the members. Total PEG includes the ensemble's.
  `progress`: print a line per sampler group as it starts and ends (`sample_split`), under `name`."""
  cfg = _c(cfg)
  members, mcost = fit_ensemble(api.make_method(cfg), member_batches, train_cfg, steps_per_epoch=steps_per_epoch,
                                valid={"x": data["x_valid"], "y": data["y_valid"]}, seed=seed,
                                batch_size=min(int(cfg.member_batch), len(data["y_train"])), workdir=workdir,
                                name=name, mesh=mesh)
  k = int(cfg.num_members)
  one = jnp.ones((1,), bool)
  eval_seed = int(rng.integers(2 ** 63))   # one draw, whatever the methods: each method's metric draws are its own
  out: dict[str, Result] = {}
  for method, size in (("map", 1), ("de", k)):     # the first member alone, then all K
    if method in cfg.methods:
      out[method] = (evaluate(samplers.predict, jax.tree.map(lambda a: a[:size, None], members), one, None, data,
                              cfg, _method_rng(eval_seed, method)),
                     {"peg": mcost["peg"] / (k // size), "wall_s": mcost["wall_s"] / (k // size)})
  for method, (metrics, cost) in sample_split(samplers, cfg, members, data, chain_key,
                                              np.random.default_rng(eval_seed),
                                              progress=name if progress else None).items():
    cost["warmstart_peg"] = mcost["peg"]
    cost["peg"] = cost["sampler_peg"] + mcost["peg"]
    out[method] = (metrics, cost)
  return out


def run_classification(cfg: Any, train_cfg: Any, apply_fn: Callable, init_fn: Callable, train: dict, test: dict,
                       member_batches: Sequence[Callable[[int], dict]], *, seed: int, batch_size: int,
                       workdir: str | None = None, mesh: Any = None) -> dict[str, Result]:
  """The pipeline for softmax classifiers (e.g. `jaxml.nn.resnet.ResNet` on CIFAR-10): K members by `core.train`,
  then pSMILE and/or SGLD chains (first ε₀ of each grid). init_fn(rng, x) -> params, apply_fn(params, x) ->
  logits; train / test: {"x", "y"}. Returns {"de": ..., method: ...} with mixture LPPD and test accuracy."""
  cfg = _c(cfg)
  k, n, b = int(cfg.num_members), len(train["y"]), batch_size
  t0 = time.perf_counter()
  members, mcost = fit_ensemble(api.make_classifier_method(apply_fn, init_fn, k), member_batches, train_cfg,
                                steps_per_epoch=max(n // b, 1), valid=None, seed=seed, batch_size=b,
                                workdir=workdir, mesh=mesh)
  predict = jax.jit(lambda pos, x: jax.vmap(jax.vmap(lambda p: jax.nn.log_softmax(apply_fn(p, x))))(pos))
  xt, yt = jnp.asarray(test["x"]), test["y"]

  def metrics_of(positions):
    logp = np.asarray(predict(positions, xt)).reshape(-1, len(yt), int(cfg.num_classes))
    return targets.classification_metrics(logp, yt)

  out = {"de": (metrics_of(jax.tree.map(lambda a: a[:, None], members)),
                {"peg": mcost["peg"], "wall_s": time.perf_counter() - t0})}
  logd = targets.make_classification_logdensity(apply_fn, data_size=n, prior_scale=cfg.prior_scale)
  data = {"x": jnp.asarray(train["x"]), "y": jnp.asarray(train["y"])}
  for method in cfg.methods:
    t1 = time.perf_counter()
    if method == "psmile":
      tuner = adaptation.ref_tuner(p_reset=cfg.p_reset, alpha=cfg.alpha, delta=cfg.delta, beta=cfg.beta)
      kern = chains.smile_chain_kernel(kernel.psmile(logd, step_size=step_grid(cfg, "psmile")[0], tuner=tuner))
    elif method == "sgld":
      kern = baselines.sgld_kernel(logd, step_size=step_grid(cfg, "sgld")[0])
    else:
      raise ValueError(f"the classification pipeline runs psmile and sgld, got {method!r}")
    _, warm, kept, thin = schedule(int(cfg.budget_epochs * n), kern.grads_per_step * b, cfg.warmup_frac,
                                   int(cfg.num_samples))
    res = chains.run_chains(kern, members, data, jax.random.key(seed + 17), batch_size=b, num_warmup=warm,
                            num_samples=kept, thin=thin)
    metrics = metrics_of(res.positions)
    metrics.update(resets=float(np.sum(res.resets)), nonfinite=float(np.sum(res.nonfinite)))
    out[method] = (metrics, {"peg": mcost["peg"] + res.peg_per_chain * k, "sampler_peg": res.peg_per_chain * k,
                             "wall_s": time.perf_counter() - t1})
  return out
