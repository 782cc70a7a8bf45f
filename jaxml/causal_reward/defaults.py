"""The spec's model and loss defaults of every causal reward model: plain data, no jax. The one source of these
values: `api.resolve` fills missing keys from here and `configs/causal_reward.py` builds its `causal_reward`
section from here (configs may import a method's `defaults` module only)."""

from typing import Any

__all__ = ["default_config", "authors_config"]


def default_config() -> dict[str, Any]:
  """The spec's model and loss defaults (section 1, 2 and the corrections of section 9)."""
  return {
      "kind": "crm_n", "dim": 64, "num_cues": 2,
      "trunk_hidden": 128, "trunk_out": 64, "d_c": 16, "d_n": 16, "adv_hidden": 32, "dec_hidden": 128,
      "norm_c": False,            # spec 9.1: a norm on z_c bounds the reward (ablation: True)
      "norm_n": True,
      "adv_weight": 1.0,          # lambda_adv (0 = ablation without adversary)
      "adv_target": "pref",       # "pref" (BT on a) or "reward" (regress a on stop_grad(r))
      "adv_mode": "grl",          # "grl" or "alternating" (k adversary steps on frozen z_n, then the encoder)
      "adv_steps": 5, "adv_inner_lr": 0.1,   # alternating: inner SGD steps and rate
      "adv_condition": False,     # CRM-N: the adversary also sees the cues (conditional adversary)
      "adv_lr_mult": 10.0,        # adversary optimiser group's rate = optim.lr * adv_lr_mult
      "lam_max": 1.0, "gamma": 10.0, "schedule": "dann",
      "rec": 0.1, "orth": 0.01, "beta_c": 0.0,
      "beta_n": 0.0,              # crm_authors: weight of KL(q(z_n | h) || N(0, I))
      "aux": 1.0, "adv2": 1.0, "dec": 1.0,    # CRM-N weights of L_aux, L_adv2, L_dec
      "odin_cues": (0,), "odin_weight": 1.0,
      "vib_beta": 1e-2, "vib_latent": 16,
      "rrm_weight": 1.0,
  }


# `authors_config`: the authors' CausalRM as their training script runs it (public code, `train_crm.sh` and
# `crm_trainer.py`): VAE-style causal and non-causal latents of sizes 128 and 512, a reconstruction
# of the embedding from both, KL terms on both, a bias-free linear adversary on the sampled z_n
# behind a constant-strength (1.0) gradient reversal, one optimiser group for everything.
def authors_config() -> dict[str, Any]:
  """Overrides of `default_config()` that give the authors' `crm_authors` settings."""
  return {"kind": "crm_authors", "d_c": 128, "d_n": 512, "rec": 1e-3, "adv_weight": 0.05, "beta_c": 1e-3,
          "beta_n": 1e-3, "lam_max": 1.0, "schedule": "constant"}
