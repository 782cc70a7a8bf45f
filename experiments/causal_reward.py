"""Causal reward models (CRM-U, the authors' CausalRM, CRM-N) vs baselines on synthetic spurious preferences
(best-of-N, leakage probes) and HH-RLHF pairs with injected cues or the authors' hack-test prefix (frozen MiniLM
embeddings); term ablations paired by seed. Writes rows, results.json, curves.json (curves, paired differences).
"""

import os
import time
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import common  # noqa: E402
from jaxml import causal_reward as crm  # noqa: E402
from jaxml import core  # noqa: E402
from jaxml.data import spurious_prefs as sp  # noqa: E402

# method name -> (kind, overrides of the shared causal_reward section)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "vanilla": ("vanilla", {}), "oracle": ("oracle", {}), "oracle_clean": ("oracle", {}), "crm_u": ("crm_u", {}),
    "crm_n": ("crm_n", {}), "crm_authors": ("crm_authors", crm.authors_config()), "covariate": ("covariate", {}),
    "vib": ("vib", {}), "rrm": ("rrm", {}), "odin": ("odin", {"odin_cues": (0,)}),
    "odin_ls": ("odin", {"odin_cues": (0, 1)}), "vib_1e-3": ("vib", {"vib_beta": 1e-3}),
    "vib_1e-1": ("vib", {"vib_beta": 1e-1}), "crm_u_alt": ("crm_u", {"adv_mode": "alternating"}),
    "crm_n_alt": ("crm_n", {"adv_mode": "alternating", "adv_condition": True}),
    # conditional GRL adversary, weight and rate chosen on a validation world (seed 100), not on test seeds
    "crm_n_cond": ("crm_n", {"adv_condition": True, "adv_weight": 3.0, "adv_lr_mult": 30.0}),
    "crm_n_normed": ("crm_n", {"norm_c": True}), "crm_u_normed": ("crm_u", {"norm_c": True}),
    "crm_u_eqlr": ("crm_u", {"adv_lr_mult": 1.0}), "crm_u_const": ("crm_u", {"schedule": "constant"}),
    "crm_u_lam3": ("crm_u", {"lam_max": 3.0}), "crm_u_regress": ("crm_u", {"adv_target": "reward"}),
    "crm_u_dc4": ("crm_u", {"d_c": 4}),
    # one term removed at a time (weights only, so each shares its base model's compiled step)
    **{f"{b}_no{t}": (b, {w: 0.0}) for b, terms in (("crm_u", "adv rec orth"), ("crm_n", "adv rec orth aux adv2 dec"))
       for t in terms.split() for w in ({"adv": "adv_weight"}.get(t, t),)},
    **{f"crm_authors_no{t}": ("crm_authors", {**crm.authors_config(), **o}) for t, o in
       (("adv", {"adv_weight": 0.0}), ("rec", {"rec": 0.0}), ("kl", {"beta_c": 0.0, "beta_n": 0.0}))},
}
ORACLE_DATA = {"oracle": "oracle_train", "oracle_clean": "clean_train"}
PAIRED_METRICS = ("acc_gold", "acc_anti", "bon_gold_max", "acc_clean", "acc_hacked", "acc_fooled")


def plan(config) -> None:
  """Checks (and so reads) every leaf of every section before anything is written."""
  sc, tc = config.synthetic, config.text
  for value, allowed, what in ([(m, tuple(VARIANTS), "method") for m in (*config.methods, *tc.methods)]
                               + [(f, ("emb", "emb+cues"), "text features") for f in tc.features]
                               + [(sc.renderer, ("tanh", "linear"), "renderer"), (tc.cue, ("inject", "prefix"), "cue")]):
    common.validate_choice(value, allowed, what)
  crm.resolve({**config.causal_reward.to_dict(), "kind": "crm_n"})
  crm.make_optimizer({"kind": "crm_n"}, config.optim)
  if not any([sc.enabled, tc.enabled]):
    raise common.ConfigError("nothing to run: synthetic.enabled and text.enabled are both false")
  for p in (*sc.rhos, *sc.bon_rhos, *sc.probe_rhos, sc.anti_rho, sc.hack_frac, *tc.p_biased, *tc.p_balanced,
            *tc.p_anti, *tc.p_hacked):
    if not 0.0 <= p <= 1.0:
      raise common.ConfigError(f"rates and injection probabilities must lie in [0, 1], got {p}")
  sizes = (sc.num_seeds, sc.n_train, sc.n_val, sc.n_test, sc.dim, sc.pool_size, sc.bon_prompts, sc.probe_steps,
           sc.probe_hidden, tc.max_len, tc.prompt_tokens, tc.embed_batch, tc.num_seeds, tc.epochs, tc.batch_size,
           config.epochs, config.batch_size, config.log_every, tc.split_seed + 1, tc.max_pairs + 1)
  if min(sizes) < 1 or sc.bon_candidates & (sc.bon_candidates - 1) or sc.probe_lr <= 0:
    raise common.ConfigError("sizes must be positive and bon_candidates a power of two")
  if min(config.checkpoint_every, config.steps_per_dispatch, config.mesh.num_data, config.seed) < 0:
    raise common.ConfigError("checkpoint_every, steps_per_dispatch, mesh.num_data and seed must be >= 0")
  for path in (config.data_dir, tc.cache_dir, tc.path):
    if path is not None and not isinstance(path, str):
      raise common.ConfigError(f"paths must be strings, got {path!r}")


def _trainers(config, names, dim: int, num_cues: int) -> dict[str, crm.RewardTrainer]:
  shared = config.causal_reward.to_dict()
  return {n: crm.make_trainer({**shared, "kind": VARIANTS[n][0], "dim": dim, "num_cues": num_cues, **VARIANTS[n][1]},
                              config.optim) for n in names}


def _fit(config, trainer, data, rows, *, seed, epochs, batch_size, name, workdir, writer, mesh):
  """The trained model, or None (and a row saying so) when its loss stopped being finite."""
  try:
    return crm.train(trainer, data, seed=seed, epochs=epochs, batch_size=batch_size, name=name, writer=writer,
                     log_every=config.log_every, mesh=mesh, workdir=workdir, checkpoint_every=config.checkpoint_every,
                     steps_per_dispatch=config.steps_per_dispatch)
  except core.NonFiniteLossError as e:
    print(f"[causal_reward] {name}: diverged, left out ({e})", flush=True)
    rows.append(common.row(method=name.split("/")[1], dataset=name.split("/")[0], seed=seed, metrics={"diverged": 1.0}))
    return None


def _record(rows, dataset, seed, name, m, out, keys=None) -> None:
  """Logs one trained model's metrics (`keys`, default all) and appends its row."""
  print(f"[causal_reward] {dataset} s{seed} {name:>13s}: " + " ".join(
      f"{k} {m[k]:.3f}" for k in (keys or m) if k in m) + f" ({out.wall_s:.1f}s)", flush=True)
  rows.append(common.row(method=name, dataset=dataset, seed=seed, metrics=m,
                         cost={"wall_s": out.wall_s, "steps_per_s": out.steps_per_s}))


def run_synthetic(config, workdir, writer, mesh) -> tuple[list[dict], dict]:
  sc, rows, curves = config.synthetic, [], {}
  ns = crm.powers_of_two(sc.bon_candidates)
  trainers = _trainers(config, config.methods, sc.dim, len(sp.DEFAULT_CUES))
  dims = {(t.config["d_c"], t.config["d_n"]) for t in trainers.values() if t.config["kind"] in crm.FACTORED_KINDS}
  probe_trainers = {(task, d): crm.make_probe_trainer(task, d, hidden=sc.probe_hidden, lr=sc.probe_lr)
                    for task in ("pref", "regress") for d in {d for pair in dims for d in pair}}
  for rho in sc.rhos:
    do_bon, do_probe = rho in tuple(sc.bon_rhos), rho in tuple(sc.probe_rhos)
    for seed in range(config.seed, config.seed + sc.num_seeds):
      bench = sp.make_benchmark(seed, rho, n_train=sc.n_train, n_val=sc.n_val, n_test=sc.n_test, dim=sc.dim,
                                renderer=sc.renderer, anti_rho=sc.anti_rho)
      world, names = bench["world"], sp.cue_names(bench["world"])
      resp = sp.sample_responses(world, np.random.default_rng([seed, 99]), sc.pool_size)
      pool = {"h": sp.render(world, resp), "gold": sp.gold_reward(world, resp), "cues": names,
              **{c: resp[c] for c in names}}
      pool_do = {c: (sp.render(world, sp.intervene(world, resp, **{c: 1.0})),
                     sp.render(world, sp.intervene(world, resp, **{c: 0.0}))) for c in names}
      bon_pool = sp.sample_policy_pool(world, seed, sc.bon_prompts, sc.bon_candidates, hack_frac=sc.hack_frac) \
          if do_bon else None
      dataset = f"synthetic_rho{rho:g}"
      for k, c in enumerate(names):
        rows.append(common.row(method=f"rule_{c}", dataset=dataset, seed=seed, metrics={
            f"acc_{s}": crm.cue_rule_accuracy(bench[key]["t_w"][:, k], bench[key]["t_l"][:, k]) for s, key in
            (("train", "train"), ("id", "test_id"), ("gold", "test_gold"), ("anti", "test_anti"))}))
      tests = {s: bench[k] for s, k in (("id", "test_id"), ("gold", "test_gold"), ("anti", "test_anti"), ("val", "val"))}
      for name, trainer in trainers.items():
        out = _fit(config, trainer, bench[ORACLE_DATA.get(name, "train")], rows, seed=seed, epochs=config.epochs,
                   batch_size=config.batch_size, name=f"{dataset}/{name}/s{seed}", workdir=workdir, writer=writer,
                   mesh=mesh)
        if out is None:
          continue
        m = crm.evaluate.accuracies(trainer, out.params, tests)
        m["robust_gap"] = m["acc_gold"] - m["acc_anti"]
        m.update(crm.evaluate.cue_effects(trainer, out.params, pool, pool_do))
        if do_probe and trainer.config["kind"] in crm.FACTORED_KINDS:
          m.update(crm.evaluate.factor_leakage(trainer, out.params, {s: tests[s] for s in ("id", "gold", "anti")},
                                               pool, probe_trainers, seed=seed, steps=sc.probe_steps))
        if bon_pool is not None:
          bon_m, res = crm.evaluate.bon_readout(trainer, out.params, bon_pool, names, ns)
          m.update(bon_m)
          curves.setdefault(dataset, {}).setdefault(name, []).append(
              {k: np.asarray(v).tolist() for k, v in res.items()} | {"seed": seed})
        _record(rows, dataset, seed, name, m, out, ("acc_id", "acc_gold", "acc_anti", "bon_gold_max", "zn_pref_gold"))
  for dataset, per_method in curves.items():
    plot_bon(per_method, workdir, dataset)
  return rows, curves


def plot_bon(per_method: dict, workdir: str, dataset: str) -> None:
  """Gold gain over N = 1 (points: mean over seeds; lines: Gao fit d (alpha - beta d), d = sqrt(KL))
  and hack-pick rate vs KL_BoN."""
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
  for i, (name, runs) in enumerate(per_method.items()):
    kl, color = np.asarray(runs[0]["kl"]), plt.get_cmap("tab20")(i % 20)
    gain = np.mean([np.asarray(r["gold"]) - r["gold"][0] for r in runs], axis=0)
    (alpha, beta), d = crm.fit_gao(kl, gain), np.sqrt(np.linspace(0, kl[-1], 100))
    style = "-" if name.startswith(("crm", "oracle")) else "--"
    axes[0].plot(kl, gain, "o", color=color, ms=3)
    axes[0].plot(d * d, d * (alpha - beta * d), style, color=color, label=f"{name} (a={alpha:.2f}, b={beta:.2f})")
    axes[1].plot(kl, np.mean([r["hack"] for r in runs], axis=0), style, marker=".", color=color, label=name)
  axes[0].set(xlabel="KL_BoN = log N - (N-1)/N", ylabel="gold(N) - gold(1)", title=f"best-of-N, {dataset}")
  axes[1].set(xlabel="KL_BoN", ylabel="hack-pick rate"), axes[0].legend(fontsize=6)
  common.save_plot(fig, workdir, f"bon_{dataset}.png")


def _hh_data(config):
  """HH pairs, their cue variants (the spec's padding and openers, or the authors' prefix alone) embedded
  by MiniLM, and the context-grouped train / val / test split."""
  from jaxml.causal_reward import encoder
  from jaxml.data import hh_cues, offline, text
  tc = config.text
  pairs = offline.load_hh_rlhf(root=config.data_dir, path=tc.path)
  if tc.max_pairs and tc.max_pairs < len(pairs):
    pairs = [pairs[i] for i in np.sort(np.random.default_rng([tc.split_seed, 5]).permutation(len(pairs))[:tc.max_pairs])]
  n = len(pairs)
  cue = {"inject": {}, "prefix": {"openers": (hh_cues.HACK_PREFIX,), "pad_levels": (0,)}}[tc.cue]
  opener = np.random.default_rng([tc.split_seed, 6]).integers(0, len(cue.get("openers", hh_cues.OPENERS)), size=(n, 2))
  counter = text.load_tokenizer(10 ** 6)
  counter.no_truncation()
  fit = hh_cues.fit_variants(pairs, opener, counter, max_len=tc.max_len, prompt_tokens=tc.prompt_tokens, **cue)
  tok, t0 = text.load_tokenizer(tc.max_len), time.perf_counter()
  emb = encoder.embed_texts(fit["texts"], lambda ts: text.encode(ts, tok), cache_dir=tc.cache_dir,
                            tag=f"minilm-l6-v2/max_len={tc.max_len}", batch_size=tc.embed_batch)
  embed_s = time.perf_counter() - t0
  splits = hh_cues.split_by_context([p["context"] for p in pairs], seed=tc.split_seed)
  data = hh_cues.variant_arrays(emb.reshape(n, 2, fit["tokens"].shape[2], -1), fit["tokens"], fit["opener"], splits[0])
  print(f"[causal_reward] text: {n} pairs, {[len(s) for s in splits]} train/val/test, {fit['cut'].mean():.1%} "
        f"responses cut to fit, {fit['overflow']} overflow, embedding {embed_s:.0f}s", flush=True)
  return data, splits, {"text_embed_wall_s": embed_s, "text_cut_fraction": float(fit["cut"].mean()),
                        "text_overflow": fit["overflow"]}


def run_text(config, workdir, writer, mesh) -> tuple[list[dict], dict]:
  from jaxml.data import hh_cues
  tc = config.text
  data, (tr, va, te), extra = _hh_data(config)
  pad_levels = hh_cues.PAD_LEVELS if tc.cue == "inject" else (0,)
  rows, probs = [], {"biased": tc.p_biased, "balanced": tc.p_balanced, "anti": tc.p_anti, "clean": (0.0, 0.0),
                     "hacked": tc.p_hacked}
  tag = "hh" if tc.cue == "inject" else "hh_prefix"
  for features in tc.features:
    dataset = f"{tag}_{features}"
    trainers = _trainers(config, tc.methods, data["emb"].shape[-1] + (2 if features == "emb+cues" else 0), 2)
    for seed in range(config.seed, config.seed + tc.num_seeds):
      mk = lambda idx, p, s: hh_cues.pair_set(data, idx, *probs[p], seed=10 * seed + s, with_cues=features != "emb")  # noqa: E731
      sets = {"train": mk(tr, "biased", 1), "oracle_train": mk(tr, "balanced", 2), "clean_train": mk(tr, "clean", 3),
              "val": mk(va, "biased", 4), "test_id": mk(te, "biased", 5), "test_bal": mk(te, "balanced", 6),
              "test_anti": mk(te, "anti", 7), "test_clean": mk(te, "clean", 8), "test_hacked": mk(te, "hacked", 9)}
      h = sets["test_hacked"]   # hacked pairs where only the rejected response carries the opener / prefix
      sets["test_fooled"] = {k: v[(h["t_l"][:, 1] > h["t_w"][:, 1])] for k, v in h.items()}
      evals = tuple((k[5:], k) for k in sets if k.startswith("test_"))
      if features == tc.features[0]:   # cue rules do not depend on the feature set
        for k, rule in enumerate(("rule_length", "rule_opener")):
          rows.append(common.row(method=rule, dataset=tag, seed=seed, metrics={
              f"acc_{s}": crm.cue_rule_accuracy(sets[key]["t_w"][:, k], sets[key]["t_l"][:, k])
              for s, key in (("train", "train"),) + evals}))
      cands = hh_cues.candidates(data, te, with_cues=features != "emb")     # [P, 2 * variants, D]
      for name, trainer in trainers.items():
        out = _fit(config, trainer, sets[ORACLE_DATA.get(name, "train")], rows, seed=seed, epochs=tc.epochs,
                   batch_size=tc.batch_size, name=f"{dataset}/{name}/s{seed}", workdir=workdir, writer=writer, mesh=mesh)
        if out is None:
          continue
        m = crm.evaluate.accuracies(trainer, out.params, {s: sets[k] for s, k in evals + (("val", "val"),)})
        d = sets["test_bal"]
        r = np.concatenate([crm.predict(trainer.reward, out.params, d[k]) for k in ("h_w", "h_l")])
        t = np.concatenate([d["t_w"], d["t_l"]])
        m["corr_length"], m["corr_opener"] = crm.evaluate.corr(r, t[:, 0]), crm.evaluate.corr(r, t[:, 1])
        proxy = crm.predict(trainer.reward, out.params, cands.reshape(-1, cands.shape[-1])).reshape(len(te), -1)
        m.update(hh_cues.pick_stats(np.argmax(proxy, axis=1), pad_levels))
        _record(rows, dataset, seed, name, m, out)
  return rows, extra


def run(config, workdir: str) -> list[dict]:
  plan(config)
  writer, mesh = core.MetricWriter(workdir), core.make_mesh(config.mesh.num_data or None)
  rows, extra = [], {}
  if config.synthetic.enabled:
    rows, extra["bon_curves"] = run_synthetic(config, workdir, writer, mesh)
  if config.text.enabled:
    text_rows, text_extra = run_text(config, workdir, writer, mesh)
    rows, extra = rows + text_rows, {**extra, **text_extra}
  extra["paired"] = crm.evaluate.ablation_pairs(rows, PAIRED_METRICS)   # every <base>_no<term> against <base>
  common.write_json(os.path.join(workdir, "curves.json"), extra)
  return rows


if __name__ == "__main__":
  common.run_main(run, experiment="causal_reward", plan=plan)
