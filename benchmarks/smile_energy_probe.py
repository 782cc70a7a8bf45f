"""Why does an absolute energy-error target drift on UCI? Per-step same-batch ΔE of pSMILE-naive vs ε.

Trains the `ref` members of one (dataset, split), then runs pSMILE-naive chains at a grid of fixed ε
with the same-batch energy error (ℓ_old, g_old re-evaluated on the current batch, as the
`energy_var` tuner sees it) and records every step's ΔE, log σ and ε. Prints, per ε and window
of steps, the mean, median and 10 %-trimmed mean of ΔE²/d, the share of Σ ΔE² carried by the top
1 % of steps, the median log σ, and the test / validation LPPD of the chains' last 20 % of steps.
It also prints the median of the virial temperature T̂ = −(θ − θ₀)·∇log p̂/d per ε and window (the signal of
`tuner="virial"`; 1 under the target). `--family_tuner ref` runs the plain naive step (ℓ_old from the previous
batch, as `psmile_naive` in the experiment) instead of the same-batch one.

  python -m benchmarks.smile_energy_probe [--dataset energy] [--split 1] [--steps 10000] [--members 5]
      [--family_tuner ref --eps 1e-3,5e-4,2.5e-4,1.25e-4 --steps 40000]
"""

import argparse
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from configs import smile_uci as smile_cfg
from experiments import smile_uci
from jaxml import smile
from jaxml.data import offline
from jaxml.smile import adaptation, api, kernel, pipeline, targets


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--dataset", default="energy")
  ap.add_argument("--split", type=int, default=1)
  ap.add_argument("--steps", type=int, default=10000)
  ap.add_argument("--members", type=int, default=5)
  ap.add_argument("--eps", default="3e-2,1e-2,3e-3,1e-3,3e-4,1e-4")
  ap.add_argument("--out", default="")
  ap.add_argument("--family_tuner", default="energy_var", choices=("energy_var", "ref"))
  args = ap.parse_args()
  config = smile_cfg.get_config(f"ref:datasets={args.dataset},splits={args.split},methods=de+psmile_naive,"
                                f"members={args.members}")
  p = smile_uci.plan(config)
  s = p.pipeline | {"protocol": p.protocols[args.dataset]}
  data = offline.load_uci(args.dataset, args.split, protocol=s["protocol"], root=p.data_dir)
  n = len(data["y_train"])
  b_m, per_epoch, m_steps = smile.member_plan(s, n)
  seed = p.seed * 100 + args.split
  t0 = time.perf_counter()
  members, _ = pipeline.fit_ensemble(
      api.make_method(pipeline._c(s)), smile_uci.member_batches({"x": data["x_train"], "y": data["y_train"]}, b_m, seed,
                                                                 args.members),
      p.train | {"num_steps": m_steps, "log_every": per_epoch * 50}, steps_per_epoch=per_epoch,
      valid={"x": data["x_valid"], "y": data["y_valid"]}, seed=seed, batch_size=b_m)
  print(f"members: {time.perf_counter() - t0:.1f}s", flush=True)

  model = api.make_model(pipeline._c(s))
  logd = targets.make_minibatch_logdensity(model.apply, data_size=n, prior_scale=1.0, floor_scale=True)
  opts = pipeline._smile_options(pipeline._c(s))
  fam = kernel.smile_family(logd, step_size=1e-3, tuner=args.family_tuner, **opts)
  grid = [float(e) for e in args.eps.split(",")]
  k = args.members
  eps0 = jnp.repeat(jnp.asarray(grid, jnp.float32), k)
  c = eps0.shape[0]
  starts = jax.tree.map(lambda a: jnp.concatenate([a] * len(grid)), members)
  flat_starts = jax.vmap(lambda p: ravel_pytree(p)[0])(starts)
  b = pipeline.sampler_batch_size(pipeline._c(s), n)
  per = n // b
  x, y = jnp.asarray(data["x_train"]), jnp.asarray(data["y_train"])
  thin, keep_from = 10, int(0.8 * args.steps)

  @jax.jit
  def run(key):
    def perms(e):
      ks = jax.random.split(jax.random.fold_in(key, e), c)
      return jax.vmap(lambda kk: jax.random.permutation(kk, n))(ks)

    def batch(pm, j):
      idx = jax.lax.dynamic_slice_in_dim(pm, j * b, b, axis=1)
      return {"x": x[idx], "y": y[idx]}

    pm = perms(0)
    st = jax.vmap(fam.init)(starts, batch(pm, 0), jax.random.split(key, c))
    st = st._replace(step_size=eps0, initial_step_size=eps0,
                     variant=jnp.broadcast_to(jnp.array([True, False]), (c, 2)))

    def step(carry, t):
      st, pm = carry
      e, j = t // per, t % per
      pm = jax.lax.cond(j == 0, lambda: perms(e), lambda: pm)
      st, info = jax.vmap(fam.step)(jax.random.split(jax.random.fold_in(key, 10 ** 6 + t), c), st, batch(pm, j))
      flat = jax.vmap(lambda p, g: (ravel_pytree(p)[0], ravel_pytree(g)[0]))(st.integrator.position,
                                                                             st.integrator.logdensity_grad)
      temp = jax.vmap(adaptation.virial_temperature)(flat[0] - flat_starts, flat[1])
      return (st, pm), (info.energy_change, st.integrator.position["log_sigma"], info.nonans, temp)

    def block(carry, s0):
      carry, rec = jax.lax.scan(step, carry, 1 + s0 * thin + jnp.arange(thin))
      return carry, (rec, carry[0].integrator.position)

    _, (rec, pos) = jax.lax.scan(block, (st, pm), jnp.arange(args.steps // thin))
    return rec, pos

  t0 = time.perf_counter()
  (de, log_sigma, ok, temp), pos = jax.block_until_ready(run(jax.random.key(7)))
  print(f"chains: {c} x {args.steps} steps, {time.perf_counter() - t0:.1f}s", flush=True)
  de = np.asarray(de).reshape(-1, c)                     # [T, C]
  log_sigma = np.asarray(log_sigma).reshape(-1, c)
  ok = np.asarray(ok).reshape(-1, c)
  dim = sum(a[0].size for a in jax.tree.leaves(members))
  x2 = de ** 2 / dim
  t = x2.shape[0]
  windows = [w for w in ((0, 100), (100, 1000), (1000, t // 4), (t // 4, t // 2), (t // 2, t)) if w[0] < w[1]]
  print(f"d = {dim}, b = {b}, N = {n}; ΔE²/d per window (pooled over {k} chains per ε)")
  print("| ε | steps | mean | median | trim10 mean | top-1% share | log σ median | non-finite |")
  print("|---|---|---|---|---|---|---|---|")
  for g, eps in enumerate(grid):
    sl = slice(g * k, (g + 1) * k)
    for a, z in windows:
      v = x2[a:z, sl].ravel()
      srt = np.sort(v)
      lo, hi = int(0.1 * len(srt)), int(0.9 * len(srt))
      top = srt[-max(len(srt) // 100, 1):].sum() / max(srt.sum(), 1e-30)
      print(f"| {eps:.3g} | {a}-{z} | {v.mean():.3g} | {np.median(v):.3g} | {srt[lo:hi].mean():.3g} | {top:.2f} | "
            f"{np.median(log_sigma[a:z, sl]):.3f} | {int((~ok[a:z, sl]).sum())} |")
  temp = np.asarray(temp).reshape(-1, c)
  print("| ε | steps | median T̂ (virial temperature, 1 under the target) | mean T̂ |")
  print("|---|---|---|---|")
  t_windows = [(i * t // 4, (i + 1) * t // 4) for i in range(4)]
  for g, eps in enumerate(grid):
    sl = slice(g * k, (g + 1) * k)
    for a, z in t_windows:
      print(f"| {eps:.2e} | {a}-{z} | {np.median(temp[a:z, sl]):.3g} | {np.mean(temp[a:z, sl]):.3g} |")
  kept = slice(keep_from // thin, None)
  predict = jax.jit(lambda ps, xx: targets.predict(model.apply, ps, xx))
  print("| ε | test LPPD (last 20 %) | valid LPPD |")
  print("|---|---|---|")
  rng = np.random.default_rng(0)
  for g, eps in enumerate(grid):
    chain_pos = jax.tree.map(lambda a: jnp.swapaxes(a[kept, g * k:(g + 1) * k], 0, 1), pos)
    keep = np.ones(jax.tree.leaves(chain_pos)[0].shape[1], bool)
    cfg = {"coverage_draws": 100, "protocol": s["protocol"], "rhat_points": 10}
    te = pipeline.evaluate(predict, chain_pos, keep, None, data, cfg, rng)
    va = pipeline.evaluate(predict, chain_pos, keep, None, data, cfg, rng, part="valid")
    print(f"| {eps:.3g} | {te['lppd']:.3f} | {va['lppd']:.3f} |")
  if args.out:
    np.savez_compressed(args.out, de=de, log_sigma=log_sigma, grid=np.asarray(grid), dim=dim, k=k)


if __name__ == "__main__":
  main()
