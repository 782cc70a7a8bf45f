"""SOL (stochastic order learning) vs baselines on ordinal benchmarks with noisy train labels.

  python -m experiments.sol_ordinal --config=configs/sol_ordinal.py:smoke --workdir=runs/sol_smoke
  python -m experiments.sol_ordinal --config=configs/sol_ordinal.py:ranks --workdir=runs/sol_ranks
  (suffixes: ":ranks:datasets=abalone+california,methods=sol+l1,noise=gaussian:0.4,partitions=5")

Presets: smoke (toy size); ranks (the paper's protocol: many ranks, open-range Gaussian noise
s = p·range/100, σ = 1, τ = 3, relabelling from step 1000, 10 partitions, p = 10 % and 40 %); full (ranks
with 20 partitions, winequality and the ablations); bins (the 10-bin grid, τ = 1); countdots (K = 30 dots, CNN)."""

import ml_collections

from configs import common

PRESETS = ("smoke", "ranks", "full", "bins", "countdots")

_BASELINES = ("ce", "l2", "l1", "soft_ce", "coral", "corn")
_RANKS = ("abalone", "bostonhousing", "stocksdomain", "bank32nh", "computer", "california")
_BINS = ("bostonhousing", "abalone", "machinecpu", "stocksdomain", "california")


def get_config(arg=None):
  preset, arg = common.parse_arg(arg, PRESETS, datasets="", methods="", noise="", partitions=0)
  config = common.base_config()
  config.preset = preset
  datasets = {"smoke": ("machinecpu",), "ranks": _RANKS, "full": _RANKS + ("winequality",), "bins": _BINS,
              "countdots": ("countdots",)}[preset]
  n_part = {"smoke": 1, "ranks": 10, "full": 20, "bins": 5, "countdots": 3}[preset]
  noise = {"smoke": ("gaussian:0.4",), "bins": ("gaussian:0.4",)}.get(preset, ("gaussian:0.1", "gaussian:0.4"))
  methods = {"smoke": ("sol", "gol", "sol_no_relabel") + _BASELINES + ("poe",),
             "full": ("sol", "sol_no_relabel", "sol_sigma0", "gol") + _BASELINES + ("poe",),
             "bins": ("sol", "sol_no_relabel", "gol") + _BASELINES + ("poe",)}.get(preset, ("sol",) + _BASELINES)
  config.data = ml_collections.ConfigDict(dict(
      datasets=tuple(arg.datasets.split("+")) if arg.datasets else datasets,
      target="bins" if preset in ("smoke", "bins") else "ranks",
      ranks=30,                 # equal-width ranks for continuous targets (target="ranks")
      bins=10,                  # Chu's bins (target="bins")
      partitions=tuple(range(arg.partitions or n_part)),
      val_fraction=0.15,        # held-out training rows with noisy labels, for selection
      countdots=dict(num_train=2000, num_test=1000, num_classes=30, seed=0)))
  config.noise = ml_collections.ConfigDict(dict(
      settings=tuple(arg.noise.split("+")) if arg.noise else noise, seed=0,
      clip="both" if preset == "bins" else "low"))    # "low": open range, clipped only at 0
  config.methods = tuple(arg.methods.split("+")) if arg.methods else methods
  small = preset == "smoke"
  config.train = ml_collections.ConfigDict(dict(
      steps={"smoke": 60, "countdots": 1200}.get(preset, 1600),
      batch_size=32 if small else 64,                  # bases per step (baselines: twice as many rows)
      select_every=20 if small else 200))
  config.sol = ml_collections.ConfigDict(dict(
      sigma=1.0, tau=1 if preset in ("smoke", "bins") else 3, margin=0.25, neighbourhood=1,
      pairs_per_class=32, w_so=1.0, w_d=1.0, w_center=1.0, eta=0.9, relabel=True,
      refresh_every=20 if small else 100,
      relabel_start=20 if small else (600 if preset == "countdots" else 1000),
      relabel_every=20 if small else 200,
      relabel_step="round_mean", relabel_decoder="auto",
      backbone="cnn" if preset == "countdots" else "mlp", hidden=(128, 128), embed_dim=32,
      knn=50, profile_window=4, soft_sigma=1.0, poe_kl=1e-3, poe_margin=0.5, poe_weight=0.1))
  config.optim.lr = 1e-3
  config.optim.weight_decay = 1e-4
  config.optim.schedule = "cosine"
  config.log_every = 100000
  return config
