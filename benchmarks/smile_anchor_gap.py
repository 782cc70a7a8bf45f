"""Where the gap between our `ref` energy LPPD and the published 2.018 comes from .

For one UCI set and a list of (split scheme, split), trains the `ref` members and runs the chosen samplers
from them, then prints, per method: the mixture test LPPD / RMSE, the per-chain test LPPD and final log σ,
the mixture LPPD without the chains that left the data region (per-chain LPPD more than `--bad` below the
median chain), and the test points that cost most. Split schemes:
  ours     the fixed `index_smile_*` files, training-row standardisation (the `ref` default);
  authors  the authors' split of seed s (`smile.authors_row_order` into `offline.load_uci(row_order=...)`: their jax
           permutation, 70/10/20, whole-table standardisation, test rows cut to a multiple of b).
Saves the per-chain, per-point log predictive densities to `--out` (npz) for offline analysis.
`--preset uci11` runs a set on its own protocol (the 20-split sets: scheme `ours`, splits from 0), e.g. yacht at the
reduced `uci11` settings:

  python -m benchmarks.smile_anchor_gap --preset uci11 --dataset yacht --runs ours:0 --budget_scale 0.02 \
      --member_epochs 50 --methods smile_naive+psmile_naive+psmile_clamp --smile_eps 1e-2+3e-2+1e-1

  python -m benchmarks.smile_anchor_gap --dataset energy --budget_scale 0.2 --runs ours:1 authors:1
  python -m benchmarks.smile_anchor_gap --budget_scale 1.0 --runs authors:1 --methods psmile_vt \
      --set "vt_step_size=(1e-3,1.000001e-3)"     # one tuned method under two chain keys (ids hash repr(ε₀))
  python -m benchmarks.smile_anchor_gap --budget_scale 1.0 --runs ours:1 --methods psmile_naive+mclmc_native \
      --smile_eps 1e-3
"""

import argparse
import ast
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from configs import smile_uci as smile_cfg
from experiments import smile_uci
from jaxml import smile
from jaxml.data import offline
from jaxml.smile import api, pipeline


def chain_point_lpd(mu: np.ndarray, log_sigma: np.ndarray, y: np.ndarray) -> np.ndarray:
  """[C, S, n] predictive parameters -> [C, n] log of each chain's mixture density at each test point."""
  ll = -0.5 * np.log(2 * np.pi) - log_sigma - 0.5 * ((y - mu) * np.exp(-log_sigma)) ** 2
  return np.asarray(logsumexp(jnp.asarray(ll, jnp.float64 if jax.config.jax_enable_x64 else jnp.float32), axis=1)) \
      - np.log(mu.shape[1])


def mixture_lppd(lpd: np.ndarray) -> float:
  """[C, n] per-chain log densities -> LPPD of the equal-weight mixture over the chains."""
  return float(np.mean(np.asarray(logsumexp(jnp.asarray(lpd), axis=0)) - np.log(lpd.shape[0])))


def report(name: str, lpd: np.ndarray, mu_mean: np.ndarray, y: np.ndarray, log_sigma: np.ndarray, bad: float,
           valid_lpd: np.ndarray) -> dict:
  per_chain = lpd.mean(1)
  ok = per_chain > np.median(per_chain) - bad
  v_chain = valid_lpd.mean(1)
  v_ok = v_chain > np.median(v_chain) - bad     # the same rule on validation rows only (usable in practice)
  mix = mixture_lppd(lpd)
  point = np.asarray(logsumexp(jnp.asarray(lpd), axis=0)) - np.log(lpd.shape[0])
  worst = np.argsort(point)[:5]
  print(f"  {name}: LPPD {mix:.3f} RMSE {np.sqrt(np.mean((mu_mean - y) ** 2)):.4f} | per-chain LPPD "
        f"{np.array2string(per_chain, precision=2)} | log sigma (std units, chain mean) first kept "
        f"{float(np.mean(log_sigma[:, 0])):.2f} -> last {float(np.mean(log_sigma[:, -1])):.2f}, per chain last "
        f"{np.array2string(log_sigma[:, -1], precision=2)}")
  print(f"    without the {int((~ok).sum())} chain(s) > {bad} below the median chain: LPPD "
        f"{mixture_lppd(lpd[ok]):.3f} | worst 5 test points log p {np.array2string(point[worst], precision=2)} "
        f"(share of the LPPD sum below the median point: {np.sum(np.minimum(point - np.median(point), 0)) / len(y):.3f})")
  print(f"    per-chain valid LPPD {np.array2string(v_chain, precision=2)} -> keeping the {int(v_ok.sum())} chains within "
        f"{bad} of the median on validation: test LPPD {mixture_lppd(lpd[v_ok]):.3f}")
  return {"lppd": mix, "lppd_ok": mixture_lppd(lpd[ok]), "per_chain": per_chain}


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--preset", choices=("ref", "uci11"), default="ref")
  ap.add_argument("--member_epochs", type=int, default=0, help="0: the preset's")
  ap.add_argument("--dataset", default="energy")
  ap.add_argument("--budget_scale", type=float, default=0.2)
  ap.add_argument("--runs", nargs="+", default=["ours:1", "authors:1"])
  ap.add_argument("--methods", default="psmile_naive+smile_naive")
  ap.add_argument("--smile_eps", default="", help="ε grid of the naive variants (default: the ref grid)")
  ap.add_argument("--bad", type=float, default=1.0)
  ap.add_argument("--out", default="")
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                  help="pipeline config overrides (Python literals), e.g. vt_step_size=(1e-3,1.000001e-3) for several "
                       "chain keys of one tuned method; an unknown key is an error")
  ap.add_argument("--clamp", choices=("off", "on", "both"), default="off",
                  help="the [0.1, 10] clamp on the preconditioner ratio r (ref: off)")
  args = ap.parse_args()
  config = smile_cfg.get_config(f"{args.preset}:datasets={args.dataset},splits=1,budget_scale={args.budget_scale},"
                                f"methods={args.methods},member_epochs={args.member_epochs}")
  p = smile_uci.plan(config)
  s = p.pipeline | {"protocol": p.protocols[args.dataset]}
  if args.smile_eps:
    s["smile_step_size"] = tuple(float(e) for e in args.smile_eps.split("+"))
  for item in args.set:
    name, sep, value = item.partition("=")
    if not sep:
      raise ValueError(f"--set {item}: expected KEY=VALUE")
    if name not in s:
      raise ValueError(f"--set {name}: not a pipeline config key")
    s[name] = ast.literal_eval(value)
  s = pipeline._c(s)
  saved = {}
  for scheme, split in ((a.split(":")[0], int(a.split(":")[1])) for a in args.runs):
    t0 = time.perf_counter()
    if scheme == "authors" and s.protocol != "smile":
      raise ValueError(f"{args.dataset}: the authors' splits exist only for the 70/10/20 sets")
    data = (offline.load_uci(args.dataset, split, protocol=s.protocol) if scheme == "ours" else
            offline.load_uci(args.dataset, split, protocol="smile", test_batch=int(s.batch_size),
                             row_order=lambda n: smile.authors_row_order(split, n)))
    n = len(data["y_train"])
    b_m, per_epoch, m_steps = smile.member_plan(s, n)
    seed = p.seed * 100 + split
    k = int(s.num_members)
    members, _ = pipeline.fit_ensemble(
        api.make_method(s), smile_uci.member_batches({"x": data["x_train"], "y": data["y_train"]}, b_m, seed, k),
        p.train | {"num_steps": m_steps, "log_every": per_epoch * 50}, steps_per_epoch=per_epoch,
        valid={"x": data["x_valid"], "y": data["y_valid"]}, seed=seed, batch_size=b_m)
    train = {"x": jnp.asarray(data["x_train"]), "y": jnp.asarray(data["y_train"])}
    print(f"{scheme} split {split}: n_train {n}, n_test {len(data['y_test'])}, y_std {data['y_std']:.4f}, "
          f"members {time.perf_counter() - t0:.0f}s", flush=True)
    clamps = {"off": (False,), "on": (True,), "both": (False, True)}[args.clamp]
    jobs = []
    for clamp in clamps:
      sc = pipeline._c(s._cfg | {"precond_clamp": clamp})
      samplers = smile.make_samplers(sc, data_size=n, budget_epochs=1.0, mclmc_native=p.mclmc_native[args.dataset])
      groups = samplers.groups if clamp == clamps[0] else ("smile_family",)
      jobs += [(samplers, sc, g, " +clamp" if clamp else "") for g in groups]
    key = jax.random.key(p.seed * 7919 + split)
    for samplers, sc, group, tag in jobs:
      gkey = pipeline.group_key(key, group)
      t1 = time.perf_counter()
      _, combos, count = samplers.plans[group]      # count: grads per step (SG group) or chains (MCLMC group)
      if combos is not None:     # a stochastic-gradient group: k chains per (method, ε₀), as experiments.smile_uci
        res = samplers.runners[group](jax.tree.map(lambda a: jnp.concatenate([a] * len(combos)), members), train,
                                      gkey, pipeline.group_hypers(sc, group, combos, k), pipeline.combo_chain_ids(combos, k))
        parts = [(f"{m} eps {e!r}{tag}", slice(i * k, (i + 1) * k)) for i, (m, e) in enumerate(combos)]
      else:
        res = samplers.runners[group](jax.tree.map(lambda a: a[:count], members), train, gkey)
        parts = [(group, slice(0, count))]
      jax.block_until_ready(res.positions)
      print(f" {group}{tag}: {time.perf_counter() - t1:.0f}s", flush=True)
      for label, sl in parts:
        pos = jax.tree.map(lambda a: a[sl], res.positions)
        out = {}
        for part in ("valid", "test"):
          mu, ls = (np.asarray(a)[:, np.asarray(res.keep, bool)]
                    for a in samplers.predict(pos, jnp.asarray(data[f"x_{part}"])))
          out[part] = (chain_point_lpd(mu, ls, data[f"y_{part}"]), mu.mean((0, 1)), ls[:, :, 0])
        print(f"  [{label}] valid LPPD {mixture_lppd(out['valid'][0]):.3f} | final step size (median over chains) "
              f"{float(np.median(np.asarray(res.step_size)[sl])):.3g}")
        report(label, out["test"][0], out["test"][1], data["y_test"], out["test"][2], args.bad, out["valid"][0])
        saved[f"{scheme}{split}/{label}"] = out["test"][0]
    print(f" total {time.perf_counter() - t0:.0f}s", flush=True)
  if args.out:
    np.savez(args.out, **saved)


if __name__ == "__main__":
  main()
