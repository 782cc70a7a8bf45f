"""MLP classifier on sklearn's 8x8 digits: the template every experiment copies.

  python -m experiments.mlp_digits --config=configs/mlp_digits.py:smoke --workdir=runs/mlp_digits_smoke
  python -m experiments.mlp_digits --config=configs/mlp_digits.py:small --workdir=runs/mlp_digits_small \
      --config.optim.lr=3e-3
"""

from configs import common

PRESETS = ("smoke", "small")


def get_config(arg=None):
  preset, arg = common.parse_arg(arg, PRESETS, dataset="digits")
  config = common.base_config(data_dir=False)   # sklearn's digits ship with sklearn
  config.preset = preset
  config.data = dict(name=arg.dataset, batch_size=64, test_fraction=0.25)
  config.model = dict(hidden=(64, 64), dropout=0.0)
  config.methods = ("mlp", "linear")
  config.optim.lr = 3e-3
  config.num_steps = {"smoke": 150, "small": 2000}[preset]
  # config.seed: the train/test split; config.seeds: one training run (init, batches) per seed.
  config.seeds = {"smoke": (0,), "small": (0, 1, 2)}[preset]
  config.log_every = {"smoke": 50, "small": 250}[preset]
  config.eval_every = {"smoke": 150, "small": 500}[preset]
  config.checkpoint_every = {"smoke": 75, "small": 500}[preset]
  return config
