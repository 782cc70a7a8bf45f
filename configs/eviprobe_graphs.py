"""X-EviProbe vs post-hoc / trained uncertainty baselines on frozen GNNs (GPN-style OOD benchmark).

  python -m experiments.eviprobe_graphs --config=configs/eviprobe_graphs.py:smoke --workdir=runs/eviprobe_smoke
  python -m experiments.eviprobe_graphs --config=configs/eviprobe_graphs.py:small --workdir=runs/eviprobe_small
  python -m experiments.eviprobe_graphs --config=configs/eviprobe_graphs.py:full --workdir=runs/eviprobe_full  # accelerator
  # any gnn-benchmark npz graph:
  python -m experiments.eviprobe_graphs --config=configs/eviprobe_graphs.py:smoke:path=/data/amazon_photo.npz ...

Presets: smoke = one dataset (Cora-ML), one split, LOC only, short training (CI, < 1 min);
small = Cora-ML, CiteSeer, Cora x {LOC, normal, bernoulli} + isolated variants (40 nodes) on Cora-ML,
2 splits, backbone training capped at 150 epochs with patience 20 (reduced from the spec's 5 splits,
1000 epochs, patience 50 to fit ~12 min on 2 CPU cores shared by several jobs); full = 10 splits x
10 inits with spec training (1000 epochs, patience 50), meant for an accelerator.
"""

from configs import common

PRESETS = ("smoke", "small", "full")

ALL_BASELINES = ("msp", "entropy", "temp_scaling", "energy", "gnnsafe", "maha_q", "maha_z", "gkde",
                 "mc_dropout", "mc_dropout_mi", "ensemble", "ensemble_var", "epn")
ALL_ABLATIONS = ("A1_latent_only", "A2_output_only", "A3_no_prop", "A3b_tau_only", "A4_classwise", "A5_sym_norm",
                 "A6_chi2", "A6_conformal", "A6_cosine", "A7_temperature", "A8_z", "A8_q_and_z", "A9_log",
                 "a0.3", "a0.5", "ours_mi", "ours_neg_log_evidence")


def get_config(arg=None):
  preset, arg = common.parse_arg(arg, PRESETS, dataset="", path="", backbone="gcn", splits=0)
  config = common.base_config()
  config.preset = preset
  datasets = {"smoke": ("cora_ml",), "small": ("cora_ml", "citeseer", "cora"),
              "full": ("cora_ml", "citeseer", "cora")}[preset]
  if arg.dataset:
    datasets = tuple(arg.dataset.split("+"))
  if arg.path:
    datasets = ("npz",)
  config.data = dict(datasets=datasets, path=arg.path, features="dense",
                     csbm=dict(num_nodes=3000, num_classes=5, num_features=64, p_in=0.01, p_out=0.001,
                               mean_scale=3.0, seed=0))
  config.settings = {"smoke": ("loc",), "small": ("loc", "normal", "bernoulli", "normal_isolated", "bernoulli_isolated"),
                     "full": ("loc", "normal", "bernoulli", "normal_isolated", "bernoulli_isolated")}[preset]
  # isolated variants are run on these datasets only (each isolated node needs its own forward pass)
  config.isolated_datasets = {"smoke": (), "small": datasets[:1], "full": datasets}[preset]
  n_splits = arg.splits or {"smoke": 1, "small": 2, "full": 10}[preset]
  config.splits = tuple(range(n_splits))
  config.inits = {"smoke": (0,), "small": (0,), "full": tuple(range(10))}[preset]
  config.shift = dict(loc_fraction=0.45, budget=0.1, isolated_nodes={"smoke": 20, "small": 40, "full": 200}[preset],
                      normal_scale=1.0, bernoulli_p=0.5, train=0.05, val=0.15)
  hidden = {"gcn": 64, "gat": 8, "appnp": 64}[arg.backbone]
  dropout = {"gcn": 0.8, "gat": 0.6, "appnp": 0.5}[arg.backbone]
  config.backbone = dict(name=arg.backbone, hidden=hidden, dropout=dropout, heads=8, k_steps=10, teleport=0.1)
  config.train = dict(max_epochs={"smoke": 40, "small": 150, "full": 1000}[preset],
                      patience={"smoke": 20, "small": 20, "full": 50}[preset],
                      eval_every={"smoke": 1, "small": 2, "full": 1}[preset], l2=1e-4)
  config.optim.lr = 0.01
  config.eviprobe = dict(typicality="rbf", fusion="product", propagation="strength", teleport=0.1, k_prop=10,
                         norm="row", temperature=False, latent="q")
  config.baselines = ALL_BASELINES
  config.ablations = ALL_ABLATIONS
  config.mc_samples = 10
  config.ensemble_size = 5
  config.gnnsafe = dict(steps=2, alpha=0.5)
  config.gkde = dict(sigma=1.0, max_hops=10)
  config.epn = dict(hidden=64, steps={"smoke": 100, "small": 200, "full": 500}[preset], lr=0.01, l2=1e-4)
  config.log_every = 100
  config.progress = preset == "full"
  return config
