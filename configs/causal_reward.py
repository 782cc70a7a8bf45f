"""Causal reward models vs baselines on the synthetic spurious-preference benchmark (+ HH text).

  python -m experiments.causal_reward --config=configs/causal_reward.py:smoke --workdir=runs/causal_reward_smoke
  python -m experiments.causal_reward --config=configs/causal_reward.py:small --workdir=runs/causal_reward_small

Presets: smoke; small (rho = 0.9, 5 seeds, best-of-N to N = 1024, probes); text (HH-RLHF harmless with
injected cues, frozen MiniLM); sweep (rho 0.6-0.9, 3 seeds); paper (everything, 30 epochs); hack (the
authors' prefix hack test on HH-RLHF); ablation (one loss term removed at a time, paired by seed)."""

import ml_collections

from configs import common
from jaxml.causal_reward.defaults import default_config

PRESETS = ("smoke", "small", "text", "sweep", "paper", "hack", "ablation")

MAIN_METHODS = ("vanilla", "crm_u", "crm_authors", "crm_n", "odin", "covariate", "vib", "rrm", "oracle")
HACK_METHODS = ("vanilla", "crm_u", "crm_authors", "crm_n", "odin_ls", "oracle")
ABLATION_METHODS = ("vanilla", "crm_n", "crm_n_noadv", "crm_n_norec", "crm_n_noorth", "crm_n_noaux", "crm_n_noadv2",
                    "crm_n_nodec", "crm_authors", "crm_authors_noadv", "crm_authors_norec", "crm_authors_nokl")
ADVERSARY_VARIANTS = ("crm_u_alt", "crm_n_alt", "crm_n_cond", "crm_n_noadv", "crm_n_normed")
ABLATIONS = ("crm_u_normed", "crm_n_nodec", "crm_u_eqlr", "crm_u_noadv", "crm_u_norec", "crm_u_noorth",
             "crm_u_const", "crm_u_lam3", "crm_u_regress", "crm_u_dc4", "odin_ls", "vib_1e-3", "vib_1e-1")


def get_config(arg=None):
  preset, arg = common.parse_arg(arg, PRESETS, seeds=0, epochs=0, ablations=False)
  config = common.base_config()
  config.preset = preset
  pick = lambda **kw: kw.get(preset, kw["small"])  # noqa: E731  (hack and ablation: small's value unless given)

  # Main optimiser of every reward model (spec: AdamW 1e-3, wd 1e-4, clip 1); the adversary heads
  # of the factored models use the same at lr * causal_reward.adv_lr_mult, without weight decay.
  config.optim.update(dict(name="adamw", lr=1e-3, weight_decay=1e-4, clip_norm=1.0))
  config.log_every = 100000       # one progress line per model (the loop always logs the last step)

  # Model / loss hyper-parameters shared by all methods: the package's defaults (one source).
  model = default_config()
  for key in ("kind", "dim", "num_cues"):   # set per method and data set by the experiment
    model.pop(key)
  config.causal_reward = ml_collections.ConfigDict(model)
  methods = {"smoke": MAIN_METHODS + ADVERSARY_VARIANTS, "small": MAIN_METHODS + ADVERSARY_VARIANTS,
             "text": (), "sweep": MAIN_METHODS, "paper": MAIN_METHODS + ADVERSARY_VARIANTS + ABLATIONS, "hack": (),
             "ablation": ABLATION_METHODS}[preset]
  config.methods = methods + (ABLATIONS if arg.ablations and preset != "paper" else ())
  config.batch_size = pick(smoke=128, small=256, text=256, sweep=256, paper=256)
  config.epochs = arg.epochs or pick(smoke=2, small=10, text=10, sweep=10, paper=30)
  num_seeds = arg.seeds or pick(smoke=1, small=5, text=5, sweep=3, paper=5)
  prefix = preset in ("hack", "ablation")   # the text run is the authors' hack test

  config.synthetic = ml_collections.ConfigDict(dict(
      enabled=preset not in ("text", "hack"),
      rhos=pick(smoke=(0.9,), small=(0.9,), text=(0.9,), sweep=(0.6, 0.7, 0.8, 0.9), paper=(0.6, 0.7, 0.8, 0.9)),
      num_seeds=num_seeds,
      n_train=pick(smoke=2048, small=20000, text=20000, sweep=20000, paper=20000),
      n_val=pick(smoke=512, small=2000, text=2000, sweep=2000, paper=2000),
      n_test=pick(smoke=1024, small=5000, text=5000, sweep=5000, paper=5000),
      dim=64, renderer="tanh", anti_rho=0.2,
      pool_size=pick(smoke=1024, small=5000, text=5000, sweep=5000, paper=5000),
      bon_rhos=pick(smoke=(0.9,), small=(0.9,), text=(), sweep=(), paper=(0.6, 0.7, 0.8, 0.9)),
      bon_prompts=pick(smoke=32, small=300, text=300, sweep=300, paper=500),
      bon_candidates=pick(smoke=64, small=1024, text=1024, sweep=1024, paper=1024),
      hack_frac=0.1,
      probe_rhos=pick(smoke=(0.9,), small=(0.9,), text=(), sweep=(), paper=(0.6, 0.7, 0.8, 0.9), ablation=()),
      probe_steps=pick(smoke=40, small=400, text=400, sweep=400, paper=1000),
      probe_lr=3e-3, probe_hidden=64,
  ))

  config.text = ml_collections.ConfigDict(dict(
      enabled=preset in ("text", "paper", "hack", "ablation"),
      cue="prefix" if prefix else "inject",   # inject: padding and openers (spec); prefix: the authors' hack test
      features=("emb",) if prefix else ("emb", "emb+cues"),
      max_pairs=pick(smoke=24, small=0, text=0, sweep=0, paper=0),   # 0: all 2312 pairs
      max_len=128, prompt_tokens=32,
      embed_batch=64,
      cache_dir=ml_collections.config_dict.placeholder(str),   # None: $JAXML_CACHE_DIR or ~/.cache/jaxml
      path=ml_collections.config_dict.placeholder(str),   # your preferences JSONL; None: shipped HH-RLHF pairs
      num_seeds=arg.seeds or pick(ablation=3, small=num_seeds),
      # chosen / rejected injection probabilities; p_hacked: the authors' hack-test rate (0.3 on both sides)
      p_biased=(0.8, 0.2), p_balanced=(0.5, 0.5), p_anti=(0.2, 0.8), p_hacked=(0.3, 0.3),
      epochs=pick(smoke=2, small=30, text=30, sweep=30, paper=30),
      batch_size=pick(smoke=8, small=64, text=64, sweep=64, paper=64),
      split_seed=0,
      methods={"hack": HACK_METHODS, "ablation": ABLATION_METHODS}.get(preset, MAIN_METHODS + ("oracle_clean",)),
  ))
  return config
