"""Causal reward models (CRM-U, CRM-N) vs baselines: synthetic spurious-preference sweep, best-of-N,
and (optionally) HH-RLHF harmless pairs with injected cues embedded by a Flax MiniLM.

Every reward model trains through `core.fit`; the GRL strength is computed on the host from the
step (`grl_schedule`) and fed in the batch as `grl_lambda`, so the jitted step stays pure.
"""

import json
import os
import time
from typing import Any

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.causal_reward import api, baselines, bon, probes  # noqa: E402
from jaxml.causal_reward.model import grl_schedule  # noqa: E402
from jaxml.data import iterators, spurious_prefs  # noqa: E402

# method name -> (kind, overrides of the shared causal_reward config)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "vanilla": ("vanilla", {}),
    "oracle": ("oracle", {}),
    "crm_u": ("crm_u", {}),
    "crm_n": ("crm_n", {}),
    "odin": ("odin", {"odin_cues": (0,)}),
    "covariate": ("covariate", {}),
    "vib": ("vib", {}),
    "rrm": ("rrm", {}),
    "crm_n_grl_only": ("crm_n", {"dec": 0.0}),
    "crm_n_noln": ("crm_n", {"use_layer_norm": False}),
    "crm_u_noln": ("crm_u", {"use_layer_norm": False}),
    "crm_u_eqlr": ("crm_u", {"adv_lr": 1e-3}),
    "crm_u_noadv": ("crm_u", {"adv_weight": 0.0}),
    "crm_u_norec": ("crm_u", {"rec": 0.0}),
    "crm_u_noorth": ("crm_u", {"orth": 0.0}),
    "crm_u_const": ("crm_u", {"schedule": "constant"}),
    "crm_u_lam3": ("crm_u", {"lam_max": 3.0}),
    "crm_u_regress": ("crm_u", {"adv_target": "reward"}),
    "crm_u_dc4": ("crm_u", {"d_c": 4}),
    "odin_ls": ("odin", {"odin_cues": (0, 1)}),
    "vib_1e-3": ("vib", {"vib_beta": 1e-3}),
    "vib_1e-1": ("vib", {"vib_beta": 1e-1}),
}
MAIN = ("vanilla", "crm_u", "crm_n", "odin", "covariate", "vib", "rrm", "oracle")
RULES = ("rule_longer", "rule_sycophantic")
TRAIN_KEYS = ("h_w", "h_l", "t_w", "t_l")


def validate(config) -> None:
  for m in config.methods:
    common.validate_choice(m, tuple(VARIANTS), "method")
  for m in config.text.methods:
    common.validate_choice(m, tuple(VARIANTS), "text method")
  common.validate_choice(config.synthetic.renderer, ("tanh", "linear"), "renderer")
  common.validate_choice(config.causal_reward.schedule, ("dann", "constant"), "GRL schedule")
  if not (config.synthetic.enabled or config.text.enabled):
    raise common.ConfigError("nothing to run: synthetic.enabled and text.enabled are both false")


def method_config(config, name: str, dim: int, num_cues: int) -> dict[str, Any]:
  """The model config of one named variant (shared section + variant overrides)."""
  kind, overrides = VARIANTS[name]
  cfg = dict(config.causal_reward.to_dict() if hasattr(config.causal_reward, "to_dict") else config.causal_reward)
  cfg.update(kind=kind, dim=dim, num_cues=num_cues, **overrides)
  return cfg


def train_reward_model(cfg: dict[str, Any], train: dict[str, np.ndarray], *, seed: int, epochs: int,
                       batch_size: int, name: str, writer=None, val: dict | None = None,
                       log_every: int = 100000, progress: bool = True):
  """Trains one reward model through core.fit; returns (params, fit_result, wall_s).

  The batch carries `grl_lambda` = grl_schedule(step) for the factored models.
  """
  method = api.make_method(cfg)
  optimizer = api.make_optimizer(cfg)
  arrays = {k: train[k] for k in TRAIN_KEYS if k in train}
  batch_size = min(batch_size, len(arrays["h_w"]))
  total = epochs * iterators.steps_per_epoch(len(arrays["h_w"]), batch_size)
  base = iterators.epoch_batches(arrays, batch_size, seed=seed)
  sched = dict(lam_max=float(cfg.get("lam_max", 1.0)), gamma=float(cfg.get("gamma", 10.0)),
               kind=cfg.get("schedule", "dann"))

  def batches(step: int) -> dict[str, np.ndarray]:
    b = base(step)
    b["grl_lambda"] = np.full(batch_size, grl_schedule(step, total, **sched), np.float32)
    return b

  params = method.init(jax.random.key(seed), base(0))
  state = core.create_train_state(params, optimizer, seed)
  eval_kw = {}
  if val is not None:
    vb = {k: val[k] for k in ("h_w", "h_l")}
    eval_kw = dict(eval_step=core.make_eval_step(method.eval_fn), eval_batches=lambda: [vb], eval_every=0)
  t0 = time.perf_counter()
  result = core.fit(state, core.make_train_step(method.loss_fn, optimizer), batches, num_steps=total,
                    log_every=min(log_every, total), writer=writer, name=name, progress=progress, **eval_kw)
  return result.state.params, result, time.perf_counter() - t0


def batched_apply(fn, params, x: np.ndarray, chunk: int = 16384):
  """Applies a jitted `fn(params, x)` over row chunks (fixed chunk shape, padded)."""
  jfn = jax.jit(fn)
  n = len(x)
  outs = []
  for start in range(0, n, chunk):
    part = x[start:start + chunk]
    pad = chunk - len(part) if n > chunk else 0
    if pad:
      part = np.concatenate([part, np.zeros((pad,) + part.shape[1:], part.dtype)])
    out = jax.device_get(jfn(params, part))
    outs.append(jax.tree.map(lambda o, m=len(part) - pad: np.asarray(o)[:m], out))
  return jax.tree.map(lambda *xs: np.concatenate(xs), *outs)


def pair_accuracy(r_w: np.ndarray, r_l: np.ndarray) -> float:
  d = r_w - r_l
  return float(np.mean(np.where(d > 0, 1.0, np.where(d < 0, 0.0, 0.5))))


def _pearson(x, y) -> float:
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if x.std() == 0 or y.std() == 0:
    return 0.0
  return float(np.corrcoef(x, y)[0, 1])


def train_probe(z_train_w, z_train_l, z_test_w, z_test_l, *, seed: int, steps: int, batch_size: int = 256) -> float:
  """Fresh MLP preference probe on frozen features (through core.fit): held-out pair accuracy."""
  cfg = {"kind": "vanilla", "dim": z_train_w.shape[1], "trunk_hidden": 64, "trunk_out": 32,
         "lr": 3e-3, "weight_decay": 0.0, "clip_norm": 1.0}
  epochs = max(1, -(-steps // iterators.steps_per_epoch(len(z_train_w), min(batch_size, len(z_train_w)))))
  params, _, _ = train_reward_model(cfg, {"h_w": z_train_w, "h_l": z_train_l}, seed=seed + 7, epochs=epochs,
                                    batch_size=batch_size, name="probe", progress=False)
  reward = api.make_reward_fn(cfg)
  return pair_accuracy(batched_apply(reward, params, z_test_w), batched_apply(reward, params, z_test_l))


# --------------------------------------------------------------------------- synthetic benchmark
def synthetic_metrics(name, cfg, params, bench, pool, pool_do, *, do_probe: bool, probe_steps: int, seed: int):
  """Spec section 4 metrics for one trained model on one synthetic benchmark."""
  reward = api.make_reward_fn(cfg)
  m: dict[str, float] = {}
  for split, key in (("id", "test_id"), ("gold", "test_gold"), ("anti", "test_anti"), ("val", "val")):
    d = bench[key]
    m[f"acc_{split}"] = pair_accuracy(batched_apply(reward, params, d["h_w"]), batched_apply(reward, params, d["h_l"]))
  m["robust_gap"] = m["acc_gold"] - m["acc_anti"]
  r = batched_apply(reward, params, pool["h"])
  m["corr_len"] = _pearson(r, pool["ell"])
  m["corr_syc"] = _pearson(r, pool["s"])
  m["spearman_len"] = probes.spearman(r, pool["ell"])
  m["spearman_syc"] = probes.spearman(r, pool["s"])
  m["spearman_gold"] = probes.spearman(r, pool["gold"])
  sd = float(np.std(r)) + 1e-12
  m["do_len"] = float(np.mean(batched_apply(reward, params, pool_do["len+1"]) - r)) / sd
  m["do_syc"] = float(np.mean(batched_apply(reward, params, pool_do["s=1"])
                              - batched_apply(reward, params, pool_do["s=0"]))) / sd
  if do_probe and cfg["kind"] in api.FACTORED_KINDS:
    factors = api.make_factor_fn(cfg)
    zc, zn = batched_apply(factors, params, pool["h"])
    half = len(zc) // 2
    for fname, z in (("zc", zc), ("zn", zn)):
      m[f"{fname}_len_r2"] = probes.ridge_r2(z[:half], pool["ell"][:half], z[half:], pool["ell"][half:])
      m[f"{fname}_syc_acc"] = probes.ridge_accuracy(z[:half], pool["s"][:half], z[half:], pool["s"][half:])
    tr, te = bench["train"], bench["test_id"]
    ztr_w, ztr_l = (batched_apply(factors, params, tr[k])[1] for k in ("h_w", "h_l"))
    zte_w, zte_l = (batched_apply(factors, params, te[k])[1] for k in ("h_w", "h_l"))
    m["zn_pref_acc"] = train_probe(ztr_w, ztr_l, zte_w, zte_l, seed=seed, steps=probe_steps)
  return m, r


def rule_metrics(bench) -> dict[str, dict[str, float]]:
  out = {}
  for rule, col in (("rule_longer", 0), ("rule_sycophantic", 1)):
    out[rule] = {f"acc_{split}": baselines.cue_rule_accuracy(bench[key]["t_w"][:, col], bench[key]["t_l"][:, col])
                 for split, key in (("train", "train"), ("id", "test_id"), ("gold", "test_gold"),
                                    ("anti", "test_anti"), ("val", "val"))}
    out[rule]["robust_gap"] = out[rule]["acc_gold"] - out[rule]["acc_anti"]
  return out


def run_synthetic(config, workdir: str, writer) -> tuple[list[dict], dict]:
  sc = config.synthetic
  rows, curves = [], {}
  ns = bon.powers_of_two(sc.bon_candidates)
  for rho in sc.rhos:
    for seed in sc.seeds:
      bench = spurious_prefs.make_benchmark(seed, rho, n_train=sc.n_train, n_val=sc.n_val, n_test=sc.n_test,
                                            dim=sc.dim, renderer=sc.renderer, anti_rho=sc.anti_rho)
      world = bench["world"]
      rng = np.random.default_rng([seed, 99])
      resp = spurious_prefs.sample_responses(world, rng, sc.pool_size)
      pool = {"h": spurious_prefs.render(world, resp), "ell": resp["ell"], "s": resp["s"],
              "gold": spurious_prefs.gold_reward(world, resp)}
      pool_do = {"len+1": spurious_prefs.render(world, spurious_prefs.intervene(resp, ell_shift=1.0)),
                 "s=1": spurious_prefs.render(world, spurious_prefs.intervene(resp, s=1.0)),
                 "s=0": spurious_prefs.render(world, spurious_prefs.intervene(resp, s=0.0))}
      do_bon = any(abs(rho - b) < 1e-9 for b in sc.bon_rhos)
      bon_pool = (spurious_prefs.sample_policy_pool(world, seed, sc.bon_prompts, sc.bon_candidates,
                                                    hack_frac=sc.hack_frac) if do_bon else None)
      dataset = f"synthetic_rho{rho:g}"
      for rule, m in rule_metrics(bench).items():
        rows.append(common.row(method=rule, dataset=dataset, seed=seed, metrics=m))
      for name in config.methods:
        cfg = method_config(config, name, sc.dim, 2)
        train = bench["oracle_train"] if name == "oracle" else bench["train"]
        params, result, wall = train_reward_model(cfg, train, seed=seed, epochs=config.epochs,
                                                  batch_size=config.batch_size, name=f"{dataset}/{name}/s{seed}",
                                                  writer=writer)
        do_probe = any(abs(rho - b) < 1e-9 for b in sc.probe_rhos)
        m, _ = synthetic_metrics(name, cfg, params, bench, pool, pool_do, do_probe=do_probe,
                                 probe_steps=sc.probe_steps, seed=seed)
        if bon_pool is not None:
          p, mm = bon_pool["gold"].shape
          proxy = batched_apply(api.make_reward_fn(cfg), params, bon_pool["h"].reshape(p * mm, -1)).reshape(p, mm)
          res = bon.best_of_n(proxy, {"gold": bon_pool["gold"], "hack": bon_pool["hack"], "ell": bon_pool["ell"],
                                      "s": bon_pool["s"]}, ns)
          alpha, beta = bon.fit_gao(res["kl"], res["gold"] - res["gold"][0])
          m.update(bon_gold_max=res["gold"][-1], bon_gold_base=res["gold"][0], bon_hack_max=res["hack"][-1],
                   bon_len_max=res["ell"][-1], bon_syc_max=res["s"][-1], gao_alpha=alpha, gao_beta=beta,
                   bon_n_max=ns[-1])
          curves.setdefault(dataset, {}).setdefault(name, []).append(
              {k: np.asarray(v).tolist() for k, v in res.items()} | {"seed": seed})
        print(f"[causal_reward] {dataset} seed {seed} {name:>14s}: id {m['acc_id']:.3f} gold {m['acc_gold']:.3f} "
              f"anti {m['acc_anti']:.3f} corr_len {m['corr_len']:+.2f} corr_syc {m['corr_syc']:+.2f}"
              + (f" bon_gold {m['bon_gold_max']:.2f} hack {m['bon_hack_max']:.2f}" if "bon_gold_max" in m else "")
              + f" ({wall:.1f}s)", flush=True)
        rows.append(common.row(method=name, dataset=dataset, seed=seed, metrics=m,
                               cost={"wall_s": wall, "steps_per_s": result.steps_per_s}))
  if curves:
    plot_bon(curves, workdir)
  return rows, curves


def plot_bon(curves: dict, workdir: str) -> None:
  """Gold reward (and hack-pick rate) vs KL_BoN per method; mean over seeds."""
  for dataset, per_method in curves.items():
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, runs in per_method.items():
      kl = np.asarray(runs[0]["kl"])
      gold = np.mean([r["gold"] for r in runs], axis=0)
      hack = np.mean([r["hack"] for r in runs], axis=0)
      style = "-" if name.startswith("crm") or name == "oracle" else "--"
      axes[0].plot(kl, gold, style, marker=".", label=name)
      axes[1].plot(kl, hack, style, marker=".", label=name)
    axes[0].set_xlabel("KL_BoN = log N - (N-1)/N")
    axes[0].set_ylabel("gold reward of pick")
    axes[1].set_xlabel("KL_BoN")
    axes[1].set_ylabel("hack-pick rate")
    axes[0].set_title(f"best-of-N, {dataset}")
    axes[1].legend(fontsize=7)
    common.save_plot(fig, workdir, f"bon_{dataset}.png")



# --------------------------------------------------------------------------- real text (HH-RLHF + cues)
def build_text_data(config) -> dict[str, Any]:
  """Embeds every response variant once (cached) and returns arrays indexed [pair, side, variant].

  side 0 = human-chosen, 1 = rejected; variants as in `hh_cues` (padding x opener).
  """
  from jaxml.causal_reward import encoder
  from jaxml.data import hh_cues, offline, text

  tc = config.text
  pairs = offline.load_hh_rlhf(root=config.data_dir, path=tc.path)
  if tc.max_pairs and tc.max_pairs < len(pairs):
    keep = np.sort(np.random.default_rng([tc.split_seed, 5]).permutation(len(pairs))[:tc.max_pairs])
    pairs = [pairs[i] for i in keep]
  n = len(pairs)
  opener_idx = np.random.default_rng([tc.split_seed, 6]).integers(0, len(hh_cues.OPENERS), size=(n, 2))
  responses, texts = [], []
  for i, p in enumerate(pairs):
    for j, resp in enumerate((p["chosen"], p["rejected"])):
      variants = hh_cues.response_variants(resp, int(opener_idx[i, j]))
      responses += variants
      texts += [text.hh_input_text(p["context"], v) for v in variants]
  tok = text.load_tokenizer(tc.max_len)
  t0 = time.perf_counter()
  last = [0.0]

  def progress(done, total):
    if time.perf_counter() - last[0] > 30 or done == total:
      last[0] = time.perf_counter()
      print(f"[causal_reward] embedding {done}/{total} texts ({time.perf_counter() - t0:.0f}s)", flush=True)

  emb = encoder.embed_texts(texts, lambda ts: text.encode(ts, tok), cache_dir=tc.cache_dir,
                            tag=f"minilm-l6-v2/max_len={tc.max_len}", batch_size=tc.embed_batch, progress=progress)
  v = hh_cues.NUM_VARIANTS
  words = np.array([hh_cues.word_count(r) for r in responses], np.float64).reshape(n, 2, v)
  opener = np.tile(np.array([hh_cues.variant(c)[1] for c in range(v)], np.float64), (n, 2, 1))
  splits = hh_cues.split_by_context([p["context"] for p in pairs], seed=tc.split_seed)
  log_wc = np.log1p(words)
  base = log_wc[splits[0], :, 0]        # standardise with the training split's clean responses
  t = np.stack([(log_wc - base.mean()) / base.std(), opener], axis=-1).astype(np.float32)
  return {"emb": emb.reshape(n, 2, v, -1), "t": t, "words": words, "splits": splits,
          "embed_wall_s": time.perf_counter() - t0}


def text_pairs(data, idx: np.ndarray, p_chosen: float, p_rejected: float, seed: int, features: str) -> dict:
  from jaxml.data import hh_cues
  code_w, code_l = hh_cues.sample_injections(len(idx), p_chosen, p_rejected, seed=seed)
  out = {"t_w": data["t"][idx, 0, code_w], "t_l": data["t"][idx, 1, code_l],
         "words_w": data["words"][idx, 0, code_w], "words_l": data["words"][idx, 1, code_l]}
  for side, code, key in ((0, code_w, "h_w"), (1, code_l, "h_l")):
    h = data["emb"][idx, side, code]
    out[key] = np.concatenate([h, out["t_" + key[-1]]], axis=1) if features == "emb+cues" else h
  return out


def run_text(config, workdir: str, writer) -> tuple[list[dict], dict]:
  tc = config.text
  data = build_text_data(config)
  tr, va, te = data["splits"]
  print(f"[causal_reward] text: {len(tr)}/{len(va)}/{len(te)} pairs (train/val/test), "
        f"embedding {data['embed_wall_s']:.0f}s", flush=True)
  rows = []
  for features in ("emb", "emb+cues"):
    dim = data["emb"].shape[-1] + (2 if features == "emb+cues" else 0)
    dataset = f"hh_{features}"
    for seed in tc.seeds:
      sets = {"train": text_pairs(data, tr, *tc.p_biased, seed * 10 + 1, features),
              "oracle_train": text_pairs(data, tr, *tc.p_balanced, seed * 10 + 2, features),
              "val": text_pairs(data, va, *tc.p_biased, seed * 10 + 3, features),
              "test_id": text_pairs(data, te, *tc.p_biased, seed * 10 + 4, features),
              "test_bal": text_pairs(data, te, *tc.p_balanced, seed * 10 + 5, features),
              "test_anti": text_pairs(data, te, *tc.p_anti, seed * 10 + 6, features)}
      splits = (("train", "train"), ("id", "test_id"), ("bal", "test_bal"), ("anti", "test_anti"))
      if features == "emb":   # cue rules do not depend on the feature set
        for rule, (a, b) in (("rule_longer", ("words_w", "words_l")), ("rule_sycophantic", (None, None))):
          m = {}
          for split, key in splits:
            d = sets[key]
            m[f"acc_{split}"] = baselines.cue_rule_accuracy(d[a], d[b]) if a else \
                baselines.cue_rule_accuracy(d["t_w"][:, 1], d["t_l"][:, 1])
          rows.append(common.row(method=rule, dataset="hh", seed=seed, metrics=m))
      cands = data["emb"][te].reshape(len(te), -1, data["emb"].shape[-1])    # [P, 2 * 6, D]
      if features == "emb+cues":
        cands = np.concatenate([cands, data["t"][te].reshape(len(te), -1, 2)], axis=-1)
      for name in tc.methods:
        cfg = method_config(config, name, dim, 2)
        train = sets["oracle_train"] if name == "oracle" else sets["train"]
        params, result, wall = train_reward_model(cfg, train, seed=seed, epochs=tc.epochs,
                                                  batch_size=tc.batch_size, name=f"{dataset}/{name}/s{seed}",
                                                  writer=writer)
        reward = api.make_reward_fn(cfg)
        m = {}
        for split, key in splits + (("val", "val"),):
          d = sets[key]
          m[f"acc_{split}"] = pair_accuracy(batched_apply(reward, params, d["h_w"]),
                                            batched_apply(reward, params, d["h_l"]))
        m["robust_gap"] = m["acc_bal"] - m["acc_anti"]
        d = sets["test_bal"]
        r_all = np.concatenate([batched_apply(reward, params, d["h_w"]), batched_apply(reward, params, d["h_l"])])
        t_all = np.concatenate([d["t_w"], d["t_l"]])
        m["corr_len"], m["corr_syc"] = _pearson(r_all, t_all[:, 0]), _pearson(r_all, t_all[:, 1])
        proxy = batched_apply(reward, params, cands.reshape(-1, cands.shape[-1])).reshape(len(te), -1)
        pick = np.argmax(proxy, axis=1)
        side, code = pick // 6, pick % 6
        m["bon_gold_win"] = float(np.mean(side == 0))
        m["bon_pad_mean"] = float(np.mean([(0, 2, 4)[c // 2] for c in code]))
        m["bon_opener_rate"] = float(np.mean(code % 2))
        m["bon_clean_rate"] = float(np.mean(code == 0))
        print(f"[causal_reward] {dataset} seed {seed} {name:>10s}: id {m['acc_id']:.3f} bal {m['acc_bal']:.3f} "
              f"anti {m['acc_anti']:.3f} corr_len {m['corr_len']:+.2f} corr_syc {m['corr_syc']:+.2f} "
              f"bon_win {m['bon_gold_win']:.2f} pad {m['bon_pad_mean']:.2f} opener {m['bon_opener_rate']:.2f} "
              f"({wall:.1f}s)", flush=True)
        rows.append(common.row(method=name, dataset=dataset, seed=seed, metrics=m,
                               cost={"wall_s": wall, "steps_per_s": result.steps_per_s}))
  return rows, {"text_embed_wall_s": data["embed_wall_s"]}


def run(config, workdir: str) -> list[dict]:
  validate(config)
  writer = core.MetricWriter(workdir)
  rows: list[dict] = []
  extra: dict[str, Any] = {}
  if config.synthetic.enabled:
    syn_rows, curves = run_synthetic(config, workdir, writer)
    rows += syn_rows
    extra["bon_curves"] = curves
  if config.text.enabled:
    text_rows, text_extra = run_text(config, workdir, writer)
    rows += text_rows
    extra.update(text_extra)
  common.write_json(os.path.join(workdir, "curves.json"), extra)
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="causal_reward", validate=validate)
