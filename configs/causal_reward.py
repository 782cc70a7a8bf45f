"""Causal reward models vs baselines on the synthetic spurious-preference benchmark (+ HH text).

  python -m experiments.causal_reward --config=configs/causal_reward.py:smoke --workdir=/tmp/causal_reward_smoke
  python -m experiments.causal_reward --config=configs/causal_reward.py:small --workdir=runs/causal_reward_small
  python -m experiments.causal_reward --config=configs/causal_reward.py:small:text=true --workdir=runs/cr_text
  python -m experiments.causal_reward --config=configs/causal_reward.py:paper --workdir=runs/causal_reward_paper

`paper` is the full spec protocol (rho sweep x 5 seeds x 30 epochs, all ablations, HH text with
all 2312 pairs); sized for an accelerator or a long CPU run.
"""

import ml_collections

from configs import common

PRESETS = ("smoke", "small", "paper")

MAIN_METHODS = ("vanilla", "crm_u", "crm_n", "odin", "covariate", "vib", "rrm", "oracle")
ABLATIONS = ("crm_n_noln", "crm_u_noln", "crm_n_grl_only", "crm_u_eqlr", "crm_u_noadv", "crm_u_norec", "crm_u_noorth", "crm_u_const",
             "crm_u_lam3", "crm_u_regress", "crm_u_dc4", "odin_ls", "vib_1e-3", "vib_1e-1")


def get_config(arg=None):
  preset, arg = common.parse_arg(arg, PRESETS, seeds=0, epochs=0, text=False, synthetic=True,
                                 text_pairs=0, ablations=False)
  config = common.base_config()
  config.preset = preset
  pick = lambda **kw: kw[preset]  # noqa: E731

  # Model / loss hyperparameters shared by all methods (see jaxml.causal_reward.api.DEFAULTS).
  config.causal_reward = ml_collections.ConfigDict(dict(
      trunk_hidden=128, trunk_out=64, d_c=16, d_n=16, adv_hidden=32, dec_hidden=128, use_layer_norm=True,
      rec=0.1, orth=0.01, beta_c=0.0, aux=1.0, adv2=1.0, dec=1.0,
      lr=1e-3, weight_decay=1e-4, adv_lr=1e-2, clip_norm=1.0,
      lam_max=1.0, gamma=10.0, schedule="dann",
      odin_weight=1.0, vib_beta=1e-2, rrm_weight=1.0,
  ))
  config.methods = MAIN_METHODS + (ABLATIONS if (arg.ablations or preset == "paper") else ())
  config.batch_size = pick(smoke=128, small=256, paper=256)
  config.epochs = arg.epochs or pick(smoke=2, small=10, paper=30)
  config.log_every = 100000  # one progress line per model (the loop always logs the last step)

  config.synthetic = ml_collections.ConfigDict(dict(
      enabled=arg.synthetic,
      rhos=pick(smoke=(0.9,), small=(0.6, 0.7, 0.8, 0.9), paper=(0.6, 0.7, 0.8, 0.9)),
      seeds=tuple(range(arg.seeds or pick(smoke=1, small=3, paper=5))),
      n_train=pick(smoke=2048, small=20000, paper=20000),
      n_val=pick(smoke=512, small=2000, paper=2000),
      n_test=pick(smoke=1024, small=5000, paper=5000),
      dim=64, renderer="tanh", anti_rho=0.2,
      pool_size=pick(smoke=1024, small=5000, paper=5000),
      bon_rhos=pick(smoke=(0.9,), small=(0.9,), paper=(0.6, 0.7, 0.8, 0.9)),
      bon_prompts=pick(smoke=32, small=300, paper=500),
      bon_candidates=pick(smoke=64, small=1024, paper=1024),
      hack_frac=0.1,
      probe_steps=pick(smoke=40, small=400, paper=1000),
      probe_rhos=pick(smoke=(0.9,), small=(0.9,), paper=(0.6, 0.7, 0.8, 0.9)),
  ))

  config.text = ml_collections.ConfigDict(dict(
      enabled=arg.text or preset == "paper",
      max_pairs=arg.text_pairs or pick(smoke=24, small=600, paper=0),   # 0: all 2312
      max_len=pick(smoke=64, small=128, paper=256),
      embed_batch=64,
      cache_dir=ml_collections.config_dict.placeholder(str),   # None: <workdir>/../.cache or ~/.cache/jaxml
      path=ml_collections.config_dict.placeholder(str),   # your preferences JSONL; None: shipped HH-RLHF pairs
      seeds=tuple(range(arg.seeds or pick(smoke=1, small=3, paper=5))),
      p_biased=(0.8, 0.2), p_balanced=(0.5, 0.5), p_anti=(0.2, 0.8),
      epochs=pick(smoke=2, small=30, paper=30),
      batch_size=pick(smoke=8, small=64, paper=64),
      split_seed=0,
      methods=MAIN_METHODS,
  ))
  return config
