"""SMILE ensembles and their baselines on UCI regression, at an equal per-chain PEG budget.

For each (dataset, split): `jaxml.smile.run_split` trains K MAP members through core.train (best
validation epoch per member), then starts one chain per member for every sampler (SMILE-naive,
SMILE, pSMILE-naive, pSMILE, SGLD, cyclical SGLD, SGHMC, full-batch MCLMC at equal PEG and at its
own budget) and evaluates the posterior predictive on the test rows; one row per method.
The `paper` preset runs `jaxml.smile.run_classification` on CIFAR-10 through TFDS.
"""

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common, report  # noqa: E402
from jaxml import core, smile  # noqa: E402
from jaxml.data import iterators, offline  # noqa: E402

PROTOCOLS = ("smile", "standard", "tfds")
ANCHORS = {"energy": 2.018, "airfoil": 0.28, "bikesharing": 0.132}   # SMILE paper, standardised targets


def validate(config) -> None:
  s = config.smile
  common.validate_choice(s.protocol, PROTOCOLS, "protocol")
  for m in s.methods:
    common.validate_choice(m, smile.METHODS, "method")
  if s.protocol == "tfds":
    return
  allowed = offline.UCI_SMILE_DATASETS if s.protocol == "smile" else tuple(
      d for d in offline.UCI_DATASETS if d not in ("airfoil", "bikesharing"))
  for d in s.datasets:
    common.validate_dataset(d, allowed, f"dataset for protocol {s.protocol!r}")
  common.validate_choice(s.noise, ("global", "heteroscedastic"), "noise model")


def train_cfg(config, num_steps: int, log_every: int) -> dict:
  """The ensemble's training settings: config.optim reaches the members' optimizer here."""
  return {"optim": config.optim, "num_steps": num_steps, "log_every": log_every, "eval_every": 0,
          "checkpoint_every": config.checkpoint_every}


def member_batches(train: dict, batch_size: int, seed: int, k: int) -> list:
  """Member m walks its own seeded permutation of the training rows."""
  return [iterators.epoch_batches(train, batch_size, seed=seed * 1000 + m) for m in range(k)]


def run(config, workdir: str) -> list[dict]:
  validate(config)
  s = config.smile
  mesh = core.make_mesh(int(config.mesh.num_data) or None)
  if s.protocol == "tfds":
    return run_paper(config, workdir, mesh)
  seed = int(config.seed)
  rows: list[dict] = []
  for dataset in s.datasets:
    samplers = None       # one set of compiled runners serves every split of the same shapes
    for split in s.splits:
      data = offline.load_uci(dataset, split, protocol=s.protocol, root=config.data_dir)
      n = len(data["y_train"])
      if samplers is None or samplers.data_size != n:
        samplers = smile.make_samplers(s, data_size=n, budget_epochs=s.budget_epochs_override.get(dataset, s.budget_epochs),
                                       mclmc_native=s.mclmc_native_override.get(dataset, {}))
      b, per_epoch, steps = smile.member_plan(s, n)
      member_seed = seed * 100 + split
      train = {"x": data["x_train"], "y": data["y_train"]}
      log_every = per_epoch * max(int(config.log_every) // per_epoch, 1)   # epoch-aligned: K steps per dispatch
      results = smile.run_split(s, train_cfg(config, steps, log_every), samplers, data,
                                member_batches(train, b, member_seed, int(s.num_members)), seed=member_seed,
                                chain_key=jax.random.key(seed * 7919 + split), rng=np.random.default_rng([seed, split]),
                                steps_per_epoch=per_epoch, workdir=workdir, name=f"members_{dataset}_{split}",
                                mesh=mesh)
      for method, (metrics, cost) in results.items():
        print(f"[smile_uci] {dataset}/split{split} {method:13s} lppd {metrics['lppd']:+.3f} rmse {metrics['rmse']:.3f} "
              f"peg {cost.get('peg', 0):.3g} wall {cost.get('wall_s', 0):.1f}s", flush=True)
        rows.append(common.row(method=method, dataset=dataset, split=split, seed=seed, metrics=metrics, cost=cost))
  make_plot(rows, workdir)
  cols = [("lppd", "LPPD"), ("rmse", "RMSE"), ("coverage_90", "cov90"), ("cal_error", "cal.err"),
          ("lppd_chain_mean", "LPPD/chain"), ("rhat_median", "R-hat"), ("ess_median", "ESS"), ("resets", "resets"),
          ("final_step_size", "final eps"), ("step_size0", "eps0")]
  with open(f"{workdir}/summary.md", "w") as f:
    f.write(report.mean_se_table(rows, smile.METHODS, cols, se_cols=("lppd", "rmse")))
  return rows


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


def run_paper(config, workdir: str, mesh) -> list[dict]:
  """Accelerator preset: K ResNet members (core.train), then pSMILE and SGLD chains on CIFAR-10."""
  from jaxml.nn.resnet import ResNet
  s = config.smile
  seed = int(config.seed)
  train = _load_tfds("train", config, int(s.paper_train_limit))
  test = _load_tfds("test", config, int(s.paper_test_limit))
  net = ResNet(num_classes=int(s.num_classes), stage_sizes=tuple(s.resnet_stage_sizes), width=int(s.resnet_width))
  b = min(int(s.paper_batch), len(train["y"]))
  results = smile.run_classification(
      s, train_cfg(config, int(s.member_max_steps), int(config.log_every)), lambda p, x: net.apply({"params": p}, x),
      lambda r, x: net.init(r, x)["params"], train, test, member_batches(train, b, seed, int(s.num_members)),
      seed=seed, batch_size=b, workdir=workdir, mesh=mesh)
  for method, (metrics, _) in results.items():
    print(f"[smile_uci] {s.paper_dataset} {method}: {metrics}", flush=True)
  return [common.row(method=m, dataset=s.paper_dataset, split=0, seed=seed, metrics=met, cost=cost)
          for m, (met, cost) in results.items()]


def make_plot(rows: list[dict], workdir: str) -> None:
  """LPPD (mean ± s.e. over splits) against total PEG per method; dashed line: published SMILE LPPD."""
  datasets = list(dict.fromkeys(r["dataset"] for r in rows))
  fig, axes = plt.subplots(1, len(datasets), figsize=(4.0 * len(datasets) + 1.6, 3.4), squeeze=False)
  for ax, ds in zip(axes[0], datasets):
    methods = [m for m in smile.METHODS if any(r["method"] == m and r["dataset"] == ds for r in rows)]
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
