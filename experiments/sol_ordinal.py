"""SOL vs baselines on ordinal benchmarks with noisy training labels (clean test labels).

For every (noise setting, dataset, partition, method): corrupt the training ranks with a seeded
noise model, train through core.fit (SOL: centroid refresh + relabelling as a Hook; baselines:
same encoder, same number of steps and of embeddings per step), predict the clean test ranks,
and record MAE, zero-one error, CS(1), and for SOL the precision/recall of flagged labels.
Finished runs are cached in <workdir>/runs.jsonl, so a rerun skips them.
"""

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import core, sol  # noqa: E402
from jaxml.data import countdots, iterators, offline, ordinal_noise  # noqa: E402
from jaxml.metrics import ranking  # noqa: E402
from jaxml.sol.pairs import LabelBook, make_pair_batches  # noqa: E402

DATASETS = offline.ORDINAL_DATASETS + ("countdots",)
# SOL and its ablations (both inference rules); GOL counts as a baseline.
NOT_BASELINES = tuple(m + r for m in ("sol", "sol_no_so", "sol_no_d", "sol_sigma0", "sol_no_relabel")
                      for r in ("", "_knn"))


def parse_noise(spec: str) -> tuple[str, float]:
  kind, _, rate = spec.partition(":")
  common.validate_choice(kind, ordinal_noise.NOISE_KINDS, "noise kind")
  try:
    return kind, float(rate or 0.0)
  except ValueError as e:
    raise common.ConfigError(f"bad noise setting {spec!r}; expected kind:rate, e.g. gaussian:0.4") from e


def validate(config) -> None:
  for name in tuple(config.data.datasets) + tuple(config.noise.sweep_datasets):
    common.validate_dataset(name, DATASETS, "dataset")
  for m in tuple(config.methods) + tuple(config.noise.sweep_methods):
    common.validate_choice(m, sol.ALL_METHODS, "method")
  for spec in config.noise.settings:
    parse_noise(spec)
  common.validate_choice(config.noise.sweep_kind, ordinal_noise.NOISE_KINDS, "noise kind")
  if any(n != "countdots" for n in config.data.datasets):
    offline.data_root(config.data_dir)   # clear error before anything is written


def load_data(config, name: str, partition: int) -> dict[str, Any]:
  if name == "countdots":
    c = config.data.countdots
    return countdots.make_countdots(num_train=c.num_train, num_test=c.num_test, num_classes=c.num_classes,
                                    seed=c.seed + partition)
  return offline.load_ordinal(name, bins=config.data.bins, partition=partition, root=config.data_dir)


def schedule(config, n_train: int) -> tuple[int, int, int]:
  """(bases per step B, steps per epoch, total steps); B is a multiple of 8 and ≤ n_train."""
  b = min(int(config.train.batch_size), max(8, (n_train // 8) * 8))
  spe = n_train // b
  epochs = int(config.train.epochs)
  if config.train.max_steps:   # whole epochs only, so the last refresh sees the final params
    epochs = max(1, min(epochs, int(config.train.max_steps) // spe))
  return b, spe, epochs * spe


class Parts:
  """Per (method, settings, total steps) pieces, built once and reused across partitions so
  jax's compilation cache is hit (same function objects -> no recompiles)."""

  def __init__(self, learner: sol.RankLearner, config, total: int):
    self.learner = learner
    self.optimizer = core.make_optimizer(config.optim, total)
    self.train_step = core.make_train_step(learner.method.loss_fn, self.optimizer, uses_extra=learner.uses_extra)
    variant = learner.name if learner.name in sol.SOL_FAMILY else "sol"
    self.refresh = sol.make_refresh_fn(learner.settings, variant) if learner.uses_extra else None
    self.predictors = {k: jax.jit(f) for k, f in learner.predictors.items()}


def fit_learner(learner: sol.RankLearner, x_train: np.ndarray, y_noisy: np.ndarray, config, *, seed: int,
                name: str, ckpt_dir: str | None = None, writer: core.MetricWriter | None = None,
                progress: bool = True, log_refresh: bool = False,
                parts: Parts | None = None) -> tuple[core.TrainState, dict[str, float]]:
  """Trains one method through core.fit. SOL family: B bases + B references per step, labels in
  `state.extra`; others: 2B random rows per step. Same total steps for every method."""
  b, spe, total = schedule(config, len(x_train))
  parts = parts or Parts(learner, config, total)
  optimizer = parts.optimizer
  rng = jax.random.key(seed)
  hooks: list[core.Hook] = []
  variant = learner.name if learner.name in sol.SOL_FAMILY else "sol"
  if learner.batch_kind == "pairs":
    book = LabelBook(y_noisy)
    batches = make_pair_batches(x_train, book, b, seed=seed, tau=int(learner.settings["tau"]))
    params = learner.method.init(rng, batches(0))
    extra = sol.init_extra(learner.settings, params, x_train, y_noisy, variant=variant, refresh=parts.refresh)
    state = core.create_train_state(params, optimizer, seed, extra=extra)
    if learner.refresh:
      log = (lambda s, st: print(f"[{name}] step {s} refresh: flagged {int(st['flagged'])} "
                                 f"changed {int(st['changed'])}", flush=True)) if log_refresh else None
      hooks.append(sol.make_refresh_hook(learner.settings, x_train, spe, variant=variant,
                                         on_labels=book.update, log=log, refresh=parts.refresh))
  else:
    plain = {"x": x_train, "y": np.asarray(y_noisy, np.int32)}
    batches = iterators.epoch_batches(plain, min(2 * b, (len(x_train) // 8) * 8), seed=seed)
    params = learner.method.init(rng, batches(0))
    state = core.create_train_state(params, optimizer, seed)
  manager = core.make_manager(ckpt_dir) if ckpt_dir else None
  if manager is not None and learner.batch_kind == "pairs":
    restored, resumed = core.restore_or_init(manager, state)
    if resumed:   # the sampler must see the labels the checkpoint had
      book.update(np.asarray(jax.device_get(restored.extra["labels"])))
  t0 = time.perf_counter()
  result = core.fit(state, parts.train_step, batches, num_steps=total, log_every=int(config.log_every),
                    writer=writer, checkpoint_manager=manager, checkpoint_every=int(config.checkpoint_every),
                    hooks=hooks, name=name, progress=progress)
  wall = time.perf_counter() - t0
  return result.state, {"wall_s": wall, "steps": float(total), "steps_per_s": result.steps_per_s,
                        "epochs": total / spe}


def predict(learner: sol.RankLearner, state: core.TrainState, x: np.ndarray, rule: str = "",
            parts: Parts | None = None) -> np.ndarray:
  fn = parts.predictors[rule] if parts is not None else jax.jit(learner.predictors[rule])
  out = [np.asarray(fn(state.params, state.extra, jnp.asarray(x[i:i + 4096]))) for i in range(0, len(x), 4096)]
  return np.concatenate(out)


def run_one(config, workdir: str, method: str, dataset: str, partition: int, kind: str, rate: float,
            data: dict[str, Any], cache: dict | None = None) -> list[dict[str, Any]]:
  """Corrupt, train, evaluate one (method, dataset, partition, noise) cell; returns a row."""
  c = int(data["num_classes"])
  seed = int(config.seed) + 1000 * partition
  y_clean = data["y_train"]
  y_noisy, realised = ordinal_noise.add_label_noise(y_clean, c, kind, rate, seed=seed + int(config.noise.seed),
                                                    x=data["x_train"])
  settings = dict(config.sol)
  settings["num_classes"] = c
  total = schedule(config, len(y_clean))[2]
  key = (method, dataset, c, total)
  if cache is None or key not in cache:
    parts = Parts(sol.make_learner(method, settings), config, total)
    if cache is not None:
      cache[key] = parts
  parts = cache[key] if cache is not None else parts
  learner = parts.learner
  tag = f"{method}_{dataset}_p{partition}_{kind}{rate:g}"
  ckpt = common.workdir_subdir(workdir, "checkpoints", tag) if config.train.checkpoints else None
  state, cost = fit_learner(learner, data["x_train"], y_noisy, config, seed=seed, name=tag, ckpt_dir=ckpt,
                            progress=False, parts=parts)
  y = data["y_test"]
  base = {"noise_rate": rate, "corruption": realised}
  if learner.batch_kind == "pairs" and learner.settings["relabel"]:
    extra = jax.device_get(state.extra)
    prec, rec = ranking.flag_precision_recall(extra["flagged"], y_noisy != y_clean)
    base.update(flag_precision=prec, flag_recall=rec, label_mae_before=ranking.mae(y_noisy, y_clean),
                label_mae_after=ranking.mae(extra["labels"], y_clean))
  rows = []
  for rule in learner.predictors:
    pred = predict(learner, state, data["x_test"], rule, parts)
    metrics = {"mae": ranking.mae(pred, y), "zero_one": ranking.zero_one(pred, y),
               "cs1": ranking.cumulative_score(pred, y, 1.0), **base}
    rows.append(common.row(method=method + rule, dataset=f"{dataset}/{kind}:{rate:g}", split=partition,
                           seed=int(config.seed), metrics=metrics, cost=cost))
  return rows


def _cache(workdir: str) -> tuple[dict[str, dict], str]:
  path = os.path.join(workdir, "runs.jsonl")
  done = {}
  if os.path.exists(path):
    for line in open(path):
      r = json.loads(line)
      done[r["key"]] = r["rows"]
  return done, path


def summarise(rows: list[dict], setting: str, sol_name: str = "sol") -> dict[str, Any]:
  """Per dataset: mean ± std MAE per method, best baseline, SOL win, Wilcoxon p (paired over
  partitions); plus a pooled Wilcoxon over all (dataset, partition) pairs vs each dataset's
  best baseline."""
  out: dict[str, Any] = {"setting": setting, "sol": sol_name, "datasets": {}}
  pooled_sol, pooled_base = [], []
  datasets = sorted({r["dataset"] for r in rows if r["dataset"].endswith("/" + setting)})
  for ds in datasets:
    table: dict[str, dict[int, float]] = {}
    for r in rows:
      if r["dataset"] == ds:
        table.setdefault(r["method"], {})[r["split"]] = r["metrics"]["mae"]
    stats = {m: (float(np.mean(list(v.values()))), float(np.std(list(v.values()))), len(v)) for m, v in table.items()}
    baselines = [m for m in stats if m not in NOT_BASELINES]
    entry: dict[str, Any] = {"mae": stats}
    if sol_name in table and baselines:
      best = min(baselines, key=lambda m: stats[m][0])
      common_splits = sorted(set(table[sol_name]) & set(table[best]))
      a = [table[sol_name][s] for s in common_splits]
      b = [table[best][s] for s in common_splits]
      entry.update(best_baseline=best, sol_wins=stats[sol_name][0] < stats[best][0],
                   beats_all=all(stats[sol_name][0] < stats[m][0] for m in baselines),
                   wilcoxon_p=ranking.wilcoxon_paired(a, b))
      pooled_sol += a
      pooled_base += b
    out["datasets"][ds.rsplit("/", 1)[0]] = entry
  wins = [e for e in out["datasets"].values() if "sol_wins" in e]
  out["sol_wins"] = int(sum(e["beats_all"] for e in wins))
  out["num_datasets"] = len(wins)
  out["pooled_wilcoxon_p"] = ranking.wilcoxon_paired(pooled_sol, pooled_base) if pooled_sol else float("nan")
  out["pooled_sol_minus_best"] = float(np.mean(np.subtract(pooled_sol, pooled_base))) if pooled_sol else float("nan")
  return out


def markdown(summary: dict[str, Any], methods: tuple[str, ...], table: bool = True) -> str:
  ds = list(summary["datasets"])
  lines = [f"### {summary['setting']}: MAE (mean ± std over partitions)", "", "| method | " + " | ".join(ds) + " |",
           "|---|" + "---|" * len(ds)] if table else [f"#### {summary['sol']} vs baselines ({summary['setting']})", ""]
  for m in methods if table else ():
    cells = []
    for d in ds:
      s = summary["datasets"][d]["mae"].get(m)
      cells.append("—" if s is None else f"{s[0]:.3f} ± {s[1]:.3f}")
    lines.append(f"| {m} | " + " | ".join(cells) + " |")
  lines.append("")
  for d in ds:
    e = summary["datasets"][d]
    if "best_baseline" in e:
      lines.append(f"- {d}: best baseline {e['best_baseline']}; {summary['sol']} beats every baseline: "
                   f"{e['beats_all']}; Wilcoxon p ({summary['sol']} vs best, paired over partitions) = "
                   f"{e['wilcoxon_p']:.4g}")
  lines.append(f"- {summary['sol']} beats every baseline on {summary['sol_wins']}/{summary['num_datasets']} datasets; pooled "
               f"Wilcoxon p = {summary['pooled_wilcoxon_p']:.4g}, mean({summary['sol']} − best) = "
               f"{summary['pooled_sol_minus_best']:+.4f}")
  return "\n".join(lines) + "\n"


def relabel_table(rows: list[dict], setting: str) -> str:
  """Mean over partitions of SOL's flagged-label precision/recall and label MAE before/after."""
  lines = [f"#### SOL relabelling ({setting}; mean over partitions)", "",
           "| dataset | corruption rate | flag precision | flag recall | train-label MAE before | after |",
           "|---|---|---|---|---|---|"]
  by_ds: dict[str, list[dict]] = {}
  for r in rows:
    if r["method"] == "sol" and r["dataset"].endswith("/" + setting):
      by_ds.setdefault(r["dataset"].rsplit("/", 1)[0], []).append(r["metrics"])
  def mean(ms, k):
    vals = np.array([np.nan if m.get(k) is None else m[k] for m in ms], np.float64)
    return float(np.mean(vals[np.isfinite(vals)])) if np.isfinite(vals).any() else float("nan")
  for ds, ms in sorted(by_ds.items()):
    lines.append(f"| {ds} | {mean(ms, 'corruption'):.3f} | {mean(ms, 'flag_precision'):.3f} | "
                 f"{mean(ms, 'flag_recall'):.3f} | {mean(ms, 'label_mae_before'):.3f} | {mean(ms, 'label_mae_after'):.3f} |")
  return "\n".join(lines) + "\n"


def plot_sweep(rows: list[dict], config, workdir: str) -> None:
  kind = config.noise.sweep_kind
  datasets = tuple(config.noise.sweep_datasets)
  if not datasets:
    return
  fig, axes = plt.subplots(1, len(datasets), figsize=(4.5 * len(datasets), 3.4), squeeze=False)
  shown = list(config.noise.sweep_methods) + [m + "_knn" for m in ("sol", "gol") if m in config.noise.sweep_methods]
  for ax, name in zip(axes[0], datasets):
    for m in shown:
      pts = {}
      for r in rows:
        ds, _, setting = r["dataset"].rpartition("/")
        if ds == name and r["method"] == m and setting.startswith(kind + ":") and \
            r["split"] in tuple(config.noise.sweep_partitions):
          pts.setdefault(r["metrics"]["noise_rate"], []).append(r["metrics"]["mae"])
      if pts:
        xs = sorted(pts)
        ax.errorbar([100 * x for x in xs], [np.mean(pts[x]) for x in xs], yerr=[np.std(pts[x]) for x in xs],
                    marker="o", capsize=2, label=m, lw=2.2 if m.startswith("sol") else 1.2,
                    ls="--" if m.endswith("_knn") else "-")
    ax.set_title(f"{name} ({kind} noise)")
    ax.set_xlabel("noise rate p (%)")
    ax.set_ylabel("test MAE (ranks)")
  axes[0][0].legend(fontsize=7)
  common.save_plot(fig, workdir, "mae_vs_noise.png")


def run(config, workdir: str) -> list[dict]:
  validate(config)
  done, cache_path = _cache(workdir)
  rows: list[dict] = []
  jobs: list[tuple[str, str, int, str, float]] = []
  for spec in config.noise.settings:
    kind, rate = parse_noise(spec)
    for name in config.data.datasets:
      for p in config.data.partitions:
        for m in config.methods:
          jobs.append((m, name, int(p), kind, rate))
  for rate in config.noise.sweep_rates:
    for name in config.noise.sweep_datasets:
      for p in config.noise.sweep_partitions:
        for m in config.noise.sweep_methods:
          jobs.append((m, name, int(p), config.noise.sweep_kind, float(rate)))
  seen, loaded, compiled = set(), {}, {}
  t0 = time.perf_counter()
  for i, (m, name, p, kind, rate) in enumerate(jobs):
    key = f"{m}|{name}/{kind}:{rate:g}|{p}|{int(config.seed)}"
    if key in seen:
      continue
    seen.add(key)
    if key in done:
      rows += done[key]
      continue
    if (name, p) not in loaded:
      loaded = {(name, p): load_data(config, name, p)}   # keep one dataset in memory
    new = run_one(config, workdir, m, name, p, kind, rate, loaded[(name, p)], compiled)
    rows += new
    with open(cache_path, "a") as f:
      f.write(json.dumps({"key": key, "rows": new}) + "\n")
    r = new[-1]
    maes = ", ".join(f"{x['method']} {x['metrics']['mae']:.3f}" for x in new)
    print(f"[sol_ordinal] {i + 1}/{len(jobs)} {name}/{kind}:{rate:g} p{p}: MAE {maes} "
          f"(corruption {r['metrics']['corruption']:.2f}, {r['cost']['wall_s']:.1f}s, "
          f"total {time.perf_counter() - t0:.0f}s)", flush=True)
  order = list(sol.ALL_METHODS)
  methods = tuple(sorted({r["method"] for r in rows},
                         key=lambda m: (m.endswith("_knn"), order.index(m.replace("_knn", "")))))
  summaries, text = [], ""
  for spec in config.noise.settings:
    setting = f"{parse_noise(spec)[0]}:{parse_noise(spec)[1]:g}"
    for j, sol_name in enumerate(("sol", "sol_knn")):
      summaries.append(summarise(rows, setting, sol_name))
      text += markdown(summaries[-1], methods, table=j == 0) + "\n"
    text += relabel_table(rows, setting) + "\n"
  with open(os.path.join(workdir, "summary.md"), "w") as f:
    f.write(text)
  common.write_json(os.path.join(workdir, "summary.json"),
                    json.loads(json.dumps(summaries, default=float).replace("NaN", "null")))
  print(text, flush=True)
  plot_sweep(rows, config, workdir)
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="sol_ordinal", validate=validate)
