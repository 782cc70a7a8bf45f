"""SOL (stochastic order learning) vs baselines on ordinal benchmarks with noisy train labels.

  python -m experiments.sol_ordinal --config=configs/sol_ordinal.py:smoke --workdir=runs/sol_smoke
  python -m experiments.sol_ordinal --config=configs/sol_ordinal.py:small --workdir=runs/sol_small
  python -m experiments.sol_ordinal --config=configs/sol_ordinal.py:full --workdir=runs/sol_full
  python -m experiments.sol_ordinal --config=configs/sol_ordinal.py:countdots --workdir=runs/sol_countdots
  (suffixes: ":small:datasets=abalone+california,methods=sol+ce,noise=gaussian:0.4+symmetric:0.2")

Presets: smoke (< 1 min, every method at toy size); small (primary 10-bin grid: 5 datasets,
5 partitions, 40 % Gaussian noise, plus a Gaussian noise-rate sweep for the MAE plot);
full (all ordinal sets, 20 partitions, all five noise models; hours on CPU, meant for a
bigger machine); countdots (offline CountDots images with the small CNN; full size is slow on CPU).
The small preset took 17 min wall / 6 min CPU on 2 shared cores; results in docs/results/sol.md.
Inferred settings (spec §9): Adam 1e-3 cosine, τ = 1, 32-d embedding, baselines get the same
number of embeddings per step (2B rows) and the same number of steps as SOL (B bases + B refs).
"""

import ml_collections

from configs import common

PRESETS = ("smoke", "small", "full", "countdots")

_ALL = ("sol", "sol_no_so", "sol_no_d", "sol_sigma0", "sol_no_relabel", "gol",
        "ce", "l2", "l1", "soft_ce", "coral", "corn", "poe")
_PRIMARY = ("bostonhousing", "abalone", "machinecpu", "stocksdomain", "california")
_ALL_SETS = ("pyrimidines", "machinecpu", "bostonhousing", "abalone", "stocksdomain", "wisconsin",
             "bank32nh", "computer", "california", "winequality")


def get_config(arg=None):
  preset, arg = common.parse_arg(arg, PRESETS, datasets="", methods="", noise="", partitions=0)
  config = common.base_config()
  config.preset = preset
  datasets = {"smoke": ("machinecpu",), "small": _PRIMARY, "full": _ALL_SETS,
              "countdots": ("countdots",)}[preset]
  n_part = {"smoke": 1, "small": 5, "full": 20, "countdots": 1}[preset]
  noise = {"smoke": ("gaussian:0.4",), "small": ("gaussian:0.4",),
           "full": ("gaussian:0.1", "gaussian:0.2", "gaussian:0.3", "gaussian:0.4", "adjacent:0.2",
                    "adjacent:0.4", "symmetric:0.2", "symmetric:0.4", "skewed:0.2", "input_dependent:0.4"),
           "countdots": ("gaussian:0.4",)}[preset]
  if arg.datasets:
    datasets = tuple(arg.datasets.split("+"))
  if arg.noise:
    noise = tuple(arg.noise.split("+"))
  if arg.partitions:
    n_part = arg.partitions
  config.data = ml_collections.ConfigDict(dict(
      datasets=datasets, bins=10, partitions=tuple(range(n_part)),
      countdots=dict(num_train=6000, num_test=2000, num_classes=10, seed=0)))
  config.noise = ml_collections.ConfigDict(dict(
      settings=noise, seed=0,
      # Noise-rate sweep for the MAE-vs-noise plot (empty rates: no sweep).
      sweep_kind="gaussian",
      sweep_rates={"smoke": (0.0,), "small": (0.0, 0.2), "full": (0.0,),
                   "countdots": ()}[preset],
      sweep_datasets={"smoke": ("machinecpu",), "small": ("abalone", "stocksdomain"),
                      "full": (), "countdots": ()}[preset],
      sweep_partitions={"smoke": (0,), "small": (0, 1, 2), "full": (), "countdots": ()}[preset],
      sweep_methods={"smoke": ("sol", "ce"),
                     "small": ("sol", "ce", "l1", "soft_ce", "corn", "gol"),
                     "full": (), "countdots": ()}[preset]))
  config.methods = tuple(arg.methods.split("+")) if arg.methods else _ALL
  config.train = ml_collections.ConfigDict(dict(
      epochs={"smoke": 3, "small": 60, "full": 100, "countdots": 20}[preset],
      max_steps={"smoke": 0, "small": 1000, "full": 0, "countdots": 0}[preset],  # 0: no cap
      batch_size={"smoke": 32, "small": 64, "full": 64, "countdots": 64}[preset],  # bases per step
      checkpoints=False))
  config.sol = ml_collections.ConfigDict(dict(
      sigma=1.0, tau=1, margin=0.25, neighbourhood=1, pairs_per_class=32, w_so=1.0, w_d=1.0,
      w_center=1.0, eta=0.9, relabel=True, start_epoch=0, relabel_step="constant_rate_mean",
      backbone="cnn" if preset == "countdots" else "mlp", hidden=(128, 128), embed_dim=32,
      knn=50, soft_sigma=1.0, poe_kl=1e-3, poe_margin=0.5, poe_weight=0.1))
  config.optim.lr = 1e-3
  config.optim.weight_decay = 1e-4
  config.optim.schedule = "cosine"
  config.log_every = {"smoke": 20, "small": 500, "full": 500, "countdots": 200}[preset]
  return config
