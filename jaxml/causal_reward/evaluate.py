"""Scoring of trained reward models: accuracies, reward-cue dependence, best-of-N, leakage probes and
paired differences over seeds. numpy in, floats out:
    m = evaluate.accuracies(trainer, params, {"anti": pairs_anti, "gold": pairs_gold})
    diffs = evaluate.paired_differences(rows, base="crm_n", variant="crm_n_noadv", metrics=("acc_anti",))"""

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from jaxml.causal_reward import api, bon, losses, probes
from jaxml.causal_reward.training import RewardTrainer, predict
from jaxml.metrics import paired_values

__all__ = ["accuracies", "corr", "cue_effects", "bon_readout", "factor_leakage", "paired_differences",
           "ablation_pairs"]


def accuracies(trainer: RewardTrainer, params: Any, sets: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, float]:
  """`acc_<name>`: pairwise accuracy of the inference reward on each pair set (h_w, h_l)."""
  reward = lambda h: predict(trainer.reward, params, h)  # noqa: E731
  return {f"acc_{k}": float(losses.pairwise_accuracy(reward(d["h_w"]), reward(d["h_l"]))) for k, d in sets.items()}


def corr(x: np.ndarray, y: np.ndarray) -> float:
  """Pearson correlation; 0 when either input is constant."""
  return 0.0 if np.std(x) == 0 or np.std(y) == 0 else float(np.corrcoef(x, y)[0, 1])


def cue_effects(trainer: RewardTrainer, params: Any, pool: Mapping[str, Any],
                pool_do: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
  """On a response pool (h [N, D], gold [N], one array per cue name in pool["cues"]): Spearman with
  gold, corr(r, cue) and the interventional effect E[r(do(c := 1)) - r(do(c := 0))] in sd(r)."""
  r = predict(trainer.reward, params, pool["h"])
  m = {"spearman_gold": probes.spearman(r, pool["gold"])}
  for c in pool["cues"]:
    m[f"corr_{c}"] = corr(r, pool[c])
    hi, lo = (predict(trainer.reward, params, x) for x in pool_do[c])
    m[f"do_{c}"] = float(np.mean(hi - lo) / (np.std(r) + 1e-12))
  return m


def bon_readout(trainer: RewardTrainer, params: Any, bon_pool: Mapping[str, np.ndarray], cues: Sequence[str],
                ns: Sequence[int]) -> tuple[dict[str, float], dict[str, np.ndarray]]:
  """Best-of-N on candidates h [P, M, D] scored with gold [P, M]: readouts at the largest N (gold,
  gold at N = 1, hack-pick rate, cue means, Gao fit alpha / beta) and the whole curves."""
  p, mm = bon_pool["gold"].shape
  proxy = predict(trainer.reward, params, bon_pool["h"].reshape(p * mm, -1)).reshape(p, mm)
  res = bon.best_of_n(proxy, {"gold": bon_pool["gold"], "hack": bon_pool["hack"], **{c: bon_pool[c] for c in cues}},
                      ns)
  alpha, beta = bon.fit_gao(res["kl"], res["gold"] - res["gold"][0])
  m = dict(bon_gold_max=res["gold"][-1], bon_gold_base=res["gold"][0], bon_hack_max=res["hack"][-1],
           gao_alpha=alpha, gao_beta=beta, **{f"bon_{c}_max": res[c][-1] for c in cues})
  return {k: float(v) for k, v in m.items()}, res


def factor_leakage(trainer: RewardTrainer, params: Any, tests: Mapping[str, Mapping[str, np.ndarray]],
                   pool: Mapping[str, Any], probe_trainers: Mapping, *, seed: int, steps: int) -> dict[str, float]:
  """Fresh MLP probes on the frozen factors, fitted and scored on disjoint halves of each split:
  preference from z_n on every test split (and from z_c on "gold"), R^2 of every pool cue from
  either factor. `probe_trainers[(task, dim)]` from `probes.make_probe_trainer`."""
  factors = api.make_factor_fn(trainer.config)
  m = {}
  for split, d in tests.items():
    (zc_w, zn_w), (zc_l, zn_l) = (predict(factors, params, d[k]) for k in ("h_w", "h_l"))
    for fname, zw, zl in (("zn", zn_w, zn_l),) + ((("zc", zc_w, zc_l),) if split == "gold" else ()):
      m[f"{fname}_pref_{split}"] = probes.pref_probe(probe_trainers["pref", zw.shape[1]], zw, zl, seed=seed,
                                                     steps=steps).test_score
  zc, zn = predict(factors, params, pool["h"])
  for cue in pool["cues"]:
    for fname, z in (("zc", zc), ("zn", zn)):
      m[f"{fname}_{cue}_r2"] = probes.regress_probe(probe_trainers["regress", z.shape[1]], z, pool[cue], seed=seed,
                                                    steps=steps).test_score
  return m


def paired_differences(rows: Iterable[Mapping[str, Any]], *, base: str, variant: str,
                       metrics: Sequence[str]) -> dict[str, dict[str, dict[str, float | None]]]:
  """Per data set and metric, variant minus base over the seeds both ran (a paired design: same
  data and initial key per seed): mean, standard error, number of pairs, and how many seeds had a
  non-finite value (a diverged run, left out of the pairs). JSON-ready: se is None for one pair."""
  out = {}
  for dataset in dict.fromkeys(r["dataset"] for r in rows if r["method"] in (base, variant)):
    here = [r for r in rows if r["dataset"] == dataset]
    for name in metrics:
      v, b = paired_values(here, variant, base, name, key=("seed",))
      d = (v - b)[np.isfinite(v) & np.isfinite(b)]
      if not d.size:
        continue
      se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else None   # one pair: no error estimate
      out.setdefault(dataset, {})[name] = {"mean": float(d.mean()), "se": se, "n": len(d), "diverged": v.size - d.size}
  return out


def ablation_pairs(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, dict]:
  """`paired_differences` of every method named `<base>_no<term>` against `<base>` when both ran,
  keyed "<variant> - <base>"."""
  methods = sorted({r["method"] for r in rows})
  return {f"{v} - {b}": paired_differences(rows, base=b, variant=v, metrics=metrics)
          for v in methods for b in methods if v.startswith(b + "_no")}
