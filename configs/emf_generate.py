"""Euler Mean Flows vs flow matching, MeanFlow (JVP), shortcut and consistency training.

  python -m experiments.emf_generate --config=configs/emf_generate.py:smoke --workdir=/tmp/emf_smoke
  python -m experiments.emf_generate --config=configs/emf_generate.py:small:datasets=checkerboard+moons,seeds=3 \
      --workdir=runs/emf_toys
  python -m experiments.emf_generate --config=configs/emf_generate.py:paper --workdir=runs/emf_paper  # accelerator

Presets: smoke (toy size), small (CPU: 2-D toys, mnist1d, digits; 10k steps, 3 seeds), paper (spec Sec. 3).
Arguments: datasets ('+'-separated), seeds (count), steps (0 = preset default), methods ('+'-separated).
Flow-map methods train once per entry of `weightings`; the headline row takes the p best on validation."""

from configs import common

PRESETS = ("smoke", "small", "paper")
DATASETS = ("checkerboard", "8gaussians", "moons", "gp", "mnist1d", "digits", "pointclouds")
TOY2D = ("checkerboard", "8gaussians", "moons")
METHODS = ("emf_u", "emf_u_vc", "emf_x1", "emf_x1_vc", "fm", "meanflow", "meanflow_split", "shortcut", "ct")


def get_config(arg=None):
  preset, arg = common.parse_arg(arg, PRESETS, datasets="", seeds=0, steps=0, methods="")
  config = common.base_config(data_dir=False)   # toys are generated, digits/mnist1d need no data root
  config.preset = preset
  smoke, paper = preset == "smoke", preset == "paper"
  default_sets = {"smoke": "digits",
                  "small": "checkerboard+8gaussians+moons+mnist1d+digits",
                  "paper": "+".join(DATASETS)}[preset]
  config.datasets = tuple((arg.datasets or default_sets).split("+"))
  default_methods = ("emf_u+emf_x1_vc+fm+meanflow+shortcut+ct" if smoke
                     else "emf_u+emf_u_vc+fm+meanflow+shortcut")
  config.methods = tuple((arg.methods or default_methods).split("+"))
  config.num_seeds = arg.seeds or {"smoke": 1, "small": 3, "paper": 3}[preset]   # seeds seed .. seed + n - 1
  config.num_steps = arg.steps or {"smoke": 40, "small": 10000, "paper": 10000}[preset]
  config.batch_size = {"smoke": 64, "small": 256, "paper": 512}[preset]
  config.ema_decay = {"smoke": 0.9, "small": 0.999, "paper": 0.999}[preset]
  config.log_every = {"smoke": 30, "small": 2000, "paper": 1000}[preset]
  config.optim = dict(name="adamw", lr=1e-3, b1=0.9, b2=0.95, weight_decay=0.0, clip_norm=1.0,
                      schedule="constant", warmup_steps={"smoke": 0, "small": 500, "paper": 500}[preset])
  # Same weighting for every flow-map method (EMF variants, MeanFlow, shortcut, CT): each trains once per
  # adaptive-weight exponent p here (its section's c); the headline keeps the p that wins on validation.
  config.weightings = (0.0, 1.0)
  # Validation metric that chooses p and the EMF variant, per domain ("" = the domain's primary metric;
  # on checkerboard energy distance prefers collapsed one-step samples that c2st rejects).
  domains = list(dict.fromkeys("toy" if d in TOY2D else d for d in config.datasets))
  config.select_metric = {d: "" for d in domains}
  # Only the sections the chosen datasets and methods read are present (every key is read).
  # Data sizes: training pool / held-out evaluation set (and the same number of generated samples).
  data = {}
  if "toy" in domains:
    data.update(toy_train=2000 if smoke else 20000, toy_eval=500 if smoke else (10000 if paper else 3000))
  if "gp" in domains:
    data.update(gp_train=1000 if smoke else 10000, gp_eval=500 if smoke else 2000)
  if "pointclouds" in domains:
    data.update(pc_train=64 if smoke else (4000 if paper else 1000), pc_eval=32 if smoke else (500 if paper else 100),
                pc_points=16 if smoke else (256 if paper else 64))
  if "digits" in domains:
    data.update(dequantize=True)
  config.data = data
  # NFE per sampler family: flow_map (EMF, MeanFlow, shortcut), flow (flow matching), consistency (CT).
  families = {"fm": "flow", "ct": "consistency"}
  nfe = dict(flow_map=(1, 2, 4), flow=(1, 2, 4, 8, 16, 32) if not smoke else (1, 2), consistency=(1, 2))
  config.nfe = {k: v for k, v in nfe.items() if k in {families.get(m, "flow_map") for m in config.methods}}
  if "ct" in config.methods:
    # Consistency sampler with K >= 2: candidate first re-noise times t_mid (then evenly up to 1). Each run picks
    # one per trained variant and K on the validation set, by the metric that picks p; never on test samples.
    config.ct_t_mid = (0.1, 0.3, 0.5, 0.7, 0.9)
  # Which network each domain uses (all methods share it): mlp | unet | setnet.
  nets = dict(toy="mlp", gp="mlp", mnist1d="mlp", digits="unet" if paper else "mlp", pointclouds="setnet")
  config.nets = {d: nets[d] for d in domains if d in nets}
  width = 32 if smoke else (256 if paper else 128)
  model = dict(
      mlp=dict(kind="mlp", width=width, depth=2 if smoke else (4 if paper else 3), cond_dim=32 if smoke else 64),
      unet=dict(kind="unet", channels=(16, 32) if smoke else (32, 64), blocks=1 if smoke else 2, attention=True,
                cond_dim=64),
      setnet=dict(kind="setnet", width=32 if smoke else (128 if paper else 64), depth=2 if smoke else 4,
                  cond_dim=32 if smoke else 64))
  config.model = {k: v for k, v in model.items() if k in config.nets.values()}
  # EMF (Sec. 2-3 of the spec); every "inferred" knob is here.
  # (p comes from config.weightings; euler_field is the field of emf_u / emf_x1, the *_vc methods use v_c.)
  config.emf = dict(delta=0.01, rho=0.5, time_law="uniform", ln_mu=0.0, ln_sigma=1.0, c=1e-3, eps=0.02,
                    euler_field="model", form="linear", aux_rows="interval", label_dropout=0.1,
                    guidance_w=1.0, guidance_k=0.0, target_clip=0.0)
  # Baseline sections, present when their method runs. MeanFlow overrides of the emf section
  # (same rho / time law by default; official JAX c = 0.01).
  baselines = dict(meanflow=dict(c=1e-3), fm=dict(p=0.0),
                   shortcut=dict(max_steps=32, boot_frac=0.25, target_clip=4.0, fm_d="smallest", c=1e-3),
                   ct=dict(grid_start=10, grid_end=1280, c_scale=0.00054, c=1e-3))
  for key, section in baselines.items():
    if any(m.startswith(key) for m in config.methods):
      config[key] = section
  if {"digits", "mnist1d"} & set(domains):
    # Feature classifier for Frechet / KID (trained by core.train on the same training split).
    config.classifier = dict(hidden=(128, 64), steps=40 if smoke else 1500, batch_size=64 if smoke else 128,
                             lr=1e-3)
  return config
