"""SOL vs baselines on ordinal benchmarks with noisy training labels (clean test labels).

One trainer per method, dataset and rank count, reused for every partition and noise setting;
every method (and SOL's decoder) is selected on a validation split with noisy labels."""

import json
import os
from typing import Any

import numpy as np

from experiments import common, report
from jaxml import core, sol
from jaxml.data import countdots, offline, ordinal_noise
from jaxml.metrics import ranking

DATASETS = offline.ORDINAL_DATASETS + ("countdots",)


def parse_noise(spec: str) -> tuple[str, float]:
  kind, _, rate = spec.partition(":")
  common.validate_choice(kind, ordinal_noise.NOISE_KINDS, "noise kind")
  try:
    return kind, float(rate or 0.0)
  except ValueError as e:
    raise common.ConfigError(f"bad noise setting {spec!r}; expected kind:rate, e.g. gaussian:0.4") from e


def train_config(config) -> dict[str, Any]:
  """What `sol.make_trainer` reads: the loop settings of the base config and the `train` section."""
  return core.loop_config(config) | dict(config.train)


def plan(config) -> None:
  """Validates names and reads every config leaf before anything is written (strict configs)."""
  for name in config.data.datasets:
    common.validate_dataset(name, DATASETS, "dataset")
  for m in config.methods:
    common.validate_choice(m, sol.ALL_METHODS, "method")
  for spec in config.noise.settings:
    parse_noise(spec)
  config.noise.seed, config.seed, config.preset   # read (strict configs); typed by the config
  common.validate_choice(config.noise.clip, ordinal_noise.CLIP_MODES, "noise clip")
  common.validate_choice(config.data.target, offline.ORDINAL_TARGETS, "ordinal target")
  if not 0 < config.data.val_fraction < 1:
    raise common.ConfigError("data.val_fraction must be in (0, 1)")
  config.data.partitions, config.data.bins, config.data.ranks
  if min(dict(config.data.countdots).values()) < 0:
    raise common.ConfigError("data.countdots sizes must be non-negative")
  sol.sol_settings(dict(config.sol))
  core_cfg = train_config(config)
  core.make_optimizer(core_cfg["optim"])   # a bad optimizer name fails here
  if config.data_dir is not None or any(n != "countdots" for n in config.data.datasets):
    offline.data_root(config.data_dir)   # clear error before anything is written


def load(config, name: str, partition: int) -> dict[str, Any]:
  if name == "countdots":
    c = config.data.countdots
    return countdots.make_countdots(num_train=c.num_train, num_test=c.num_test, num_classes=c.num_classes,
                                    seed=c.seed + partition)
  return offline.load_ordinal(name, bins=config.data.bins, partition=partition, root=config.data_dir,
                              target=config.data.target, ranks=config.data.ranks)


def prepare(config, name: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
  """Every partition of one dataset with a validation split and one noisy label draw per noise setting,
  and per noise setting the rank count covering its noisy labels and the clean test labels (so results do
  not depend on which other settings run: padding the rank set changes SOL's, CE's and CORN's predictions)."""
  parts, labels = [], {spec: [] for spec in config.noise.settings}
  for p in config.data.partitions:
    d = load(config, name, p)
    seed = config.seed + 1000 * p
    perm = np.random.default_rng([seed, 7]).permutation(len(d["y_train"]))
    n_val = int(round(config.data.val_fraction * len(perm)))
    val, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    k = int(d["num_classes"])
    clean_range = float(np.ptp(d["y_train"]))
    d.update(x_val=d["x_train"][val], y_val_clean=d["y_train"][val], x_train=d["x_train"][tr],
             y_train=d["y_train"][tr], partition=p, noisy={}, test_labels={})
    for spec in config.noise.settings:
      kind, rate = parse_noise(spec)
      noisy = [ordinal_noise.add_label_noise(y, k, kind, rate, seed=seed + config.noise.seed + j,
                                             x=x, scale=clean_range, clip=config.noise.clip)
               for j, (x, y) in enumerate(((d["x_train"], d["y_train"]), (d["x_val"], d["y_val_clean"])))]
      d["noisy"][spec] = noisy
      d["test_labels"][spec] = d["y_test"]
      labels[spec] += [noisy[0][0], noisy[1][0], d["y_test"]]
    parts.append(d)
  if config.noise.clip == "none":   # shift each setting's label sets to start at rank 0
    for spec in config.noise.settings:
      low = min(0, *(int(np.min(y)) for y in labels[spec]))
      for d in parts:
        ((ytr, c), (yv, cv)) = d["noisy"][spec]
        d["noisy"][spec] = ((ytr - low, c), (yv - low, cv))
        d["test_labels"][spec] = d["y_test"] - low
      labels[spec] = [y - low for y in labels[spec]]
  return parts, {spec: ordinal_noise.noisy_rank_count(*ys) for spec, ys in labels.items()}


def run_dataset(config, name: str, done: dict, cache_path: str) -> list[dict]:
  parts, num_ranks = prepare(config, name)
  train_cfg = train_config(config)
  rows = []
  for method in config.methods:
    trainers = {}   # built on first use: one compilation per method, dataset and rank count
    for spec in config.noise.settings:
      for d in parts:
        k = num_ranks[spec]   # in the key: a cache written under another rank set is not resumed
        key = f"{method}|{name}/{spec}|{d['partition']}|{config.seed}|K{k}"
        if key in done:
          rows += done[key]
          continue
        if k not in trainers:
          trainers[k] = sol.make_trainer(method, {**dict(config.sol), "num_classes": k}, train_cfg)
        trainer = trainers[k]
        (y_noisy, corruption), (y_val, _) = d["noisy"][spec]
        fitted = sol.fit(trainer, d["x_train"], y_noisy, d["x_val"], y_val,
                         seed=config.seed + 1000 * d["partition"], name=key)
        new = rows_for(config, trainer, fitted, d, spec, method, name, y_noisy, corruption)
        rows += new
        with open(cache_path, "a") as f:
          f.write(json.dumps({"key": key, "rows": new}) + "\n")
        print(f"[sol_ordinal] {key}: " + ", ".join(f"{r['method']} {r['metrics']['mae']:.3f}" for r in new) +
              f" ({fitted.wall_s:.1f}s)", flush=True)
  return rows


def rows_for(config, trainer, fitted, d, spec, method, name, y_noisy, corruption) -> list[dict]:
  """One row for the method's validation-chosen decoder, plus one per decoder (SOL family)."""
  y = d["test_labels"][spec]
  cost = {"wall_s": fitted.wall_s, "steps": float(trainer.steps), "steps_per_s": fitted.steps_per_s}
  base = {"noise_rate": parse_noise(spec)[1], "corruption": corruption, "num_ranks": trainer.learner.settings[
      "num_classes"], "best_step": fitted.best_step, "val_mae": fitted.val_mae[fitted.decoder]}
  if fitted.extra is not None and trainer.learner.settings["relabel"]:
    prec, rec = ranking.flag_precision_recall(fitted.extra["flagged"], y_noisy != d["y_train"])
    base.update(flag_precision=prec, flag_recall=rec, label_mae_before=ranking.mae(y_noisy, d["y_train"]),
                label_mae_after=ranking.mae(fitted.extra["labels"], d["y_train"]),
                relabels=len(fitted.refreshes))
  decs = [None] + (list(trainer.learner.decoders) if len(trainer.learner.decoders) > 1 else [])
  out = []
  for dec in decs:
    pred = sol.predict(trainer, fitted, d["x_test"], dec)
    metrics = {"mae": ranking.mae(pred, y), "zero_one": ranking.zero_one(pred, y),
               "cs1": ranking.cumulative_score(pred, y, 1.0), **base}
    if dec is None:
      metrics["decoder"] = trainer.learner.decoders.index(fitted.decoder)
    out.append(common.row(method=method if dec is None else f"{method}[{dec}]", dataset=f"{name}/{spec}",
                          split=d["partition"], seed=config.seed, metrics=metrics, cost=cost))
  return out


def summarise(rows: list[dict], spec: str, target: str = "sol") -> tuple[dict, str]:
  """Per dataset: MAE mean ± std per method, best baseline (non-SOL family), whether `target` is at
  or below it, and the paired two-sided Wilcoxon p over partitions."""
  here = sorted((dict(r, dataset=r["dataset"].rpartition("/")[0]) for r in rows
                 if r["dataset"].rpartition("/")[2] == spec), key=lambda r: r["dataset"])
  methods = sorted({r["method"] for r in rows}, key=lambda m: (m.split("[")[0] not in sol.SOL_FAMILY, m))
  means = report.frame(here).groupby(["dataset", "method"])["mae"].mean()
  out, lines = {}, [f"### {spec}: test MAE (mean ± std over partitions)", "",
                    report.pivot_table(here, "mae", digits=3, methods=methods)]
  for ds in dict.fromkeys(r["dataset"] for r in here):
    base = [m for m in methods if m in sol.BASELINES and (ds, m) in means]
    if (ds, target) not in means or not base:   # a run without the target (e.g. baselines only)
      continue
    best = min(base, key=lambda m: means[ds, m])
    a, b = report.paired(here, target, best, "mae", dataset=ds)   # matched on (split, seed)
    ok = bool(np.mean(a) <= np.mean(b))
    out[ds] = {"best_baseline": best, "target_mae": float(np.mean(a)), "best_mae": float(np.mean(b)),
               "at_or_below": ok, "wilcoxon_p": ranking.wilcoxon_paired(a, b), "pairs": len(a)}
    lines.append(f"- {ds}: {target} {np.mean(a):.3f} vs best baseline {best} {np.mean(b):.3f}; "
                 f"at or below: {ok}; Wilcoxon p = {out[ds]['wilcoxon_p']:.3g} ({len(a)} pairs)")
  wins = sum(v["at_or_below"] for v in out.values())
  lines.append(f"- {target} at or below the best baseline on {wins}/{len(out)} datasets")
  return {"setting": spec, "target": target, "datasets": out, "wins": wins}, "\n".join(lines) + "\n"


def run(config, workdir: str) -> list[dict]:
  plan(config)
  cache_path = os.path.join(workdir, "runs.jsonl")
  done = {r["key"]: r["rows"] for r in map(json.loads, open(cache_path))} if os.path.exists(cache_path) else {}
  rows = [r for name in config.data.datasets for r in run_dataset(config, name, done, cache_path)]
  summaries = [summarise(rows, spec) for spec in config.noise.settings]
  text = "".join(md + "\n" for _, md in summaries)
  with open(os.path.join(workdir, "summary.md"), "w") as f:
    f.write(text)
  common.write_json(os.path.join(workdir, "summary.json"),
                    json.loads(json.dumps([s for s, _ in summaries]).replace("NaN", "null")))
  print(text, flush=True)
  report.bar_plot([r for r in rows if "[" not in r["method"]], "mae", workdir, "mae.png",
                  title="test MAE (validation-chosen decoder)")
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="sol_ordinal", plan=plan)
