"""ε trace of tuned pSMILE (`tuner="energy_quantile"` or `"virial"`) on one `ref` (dataset, split) at a budget scale.

Trains the `ref` members, runs one tuned chain per member at the `ref` schedule of `psmile_eq` / `psmile_vt`
(3 / 2 batch gradients per step, equal PEG), and prints ε every 1/20 of the warmup, the frozen ε, resets,
`eps_drift`, the final log σ, the preconditioner's largest velocity scale c and the test LPPD.
`--set key=value` overrides TunerConfig fields; `--clamp` turns the [0.1, 10] clamp on r on.

  python -m benchmarks.smile_tuner_trace [--dataset energy] [--eps0 1e-3] [--clamp] [--set quantile_gain=0.03]
      [--preset uci11 --dataset naval --member_epochs 50] [--set pool_chains=1 --set pool_stat=midmean]
      [--tuner virial --set pool_chains=1 --set quantile_gain=0.02 --set decay_steps=100]
"""

import argparse
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from configs import smile_uci as smile_cfg
from experiments import smile_uci
from jaxml import smile
from jaxml.data import offline
from jaxml.smile import adaptation, api, chains, kernel, pipeline, targets


def _value(text: str) -> float | str:
  """A `--set` value: a number if it parses as one (booleans as 0 / 1), else the string (e.g. pool_stat=midmean)."""
  try:
    return float(text)
  except ValueError:
    return text


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--dataset", default="energy")
  ap.add_argument("--split", type=int, default=1)
  ap.add_argument("--budget_scale", type=float, default=0.2)
  ap.add_argument("--eps0", type=float, default=1e-3)
  ap.add_argument("--clamp", action="store_true")
  ap.add_argument("--tuner", default="energy_quantile", choices=("energy_quantile", "virial"))
  ap.add_argument("--set", action="append", default=[])
  ap.add_argument("--preset", default="ref", help="configs/smile_uci.py preset (ref or uci11)")
  ap.add_argument("--member_epochs", type=int, default=0, help="> 0: member epochs (as uci11's reduced runs)")
  args = ap.parse_args()
  over = {k: _value(v) for k, v in (s.split("=") for s in args.set)}
  epochs = f",member_epochs={args.member_epochs}" if args.member_epochs else ""
  config = smile_cfg.get_config(f"{args.preset}:datasets={args.dataset},splits={args.split},"
                                f"budget_scale={args.budget_scale},methods=de+psmile_eq{epochs}")
  p = smile_uci.plan(config)
  s = pipeline._c(p.pipeline | {"protocol": p.protocols[args.dataset], "precond_clamp": args.clamp})
  data = offline.load_uci(args.dataset, args.split, protocol=s.protocol, root=p.data_dir)
  n = len(data["y_train"])
  b_m, per_epoch, m_steps = smile.member_plan(s, n)
  seed = p.seed * 100 + args.split
  k = int(s.num_members)
  members, _ = pipeline.fit_ensemble(
      api.make_method(s), smile_uci.member_batches({"x": data["x_train"], "y": data["y_train"]}, b_m, seed, k),
      p.train | {"num_steps": m_steps, "log_every": per_epoch * 50}, steps_per_epoch=per_epoch,
      valid={"x": data["x_valid"], "y": data["y_valid"]}, seed=seed, batch_size=b_m)
  b = pipeline.sampler_batch_size(s, n)
  budget = int(s.budget_steps) * 2 * b
  model = api.make_model(s)
  logd = targets.make_minibatch_logdensity(model.apply, data_size=n, prior_scale=s.prior_scale, floor_scale=True)
  opts = pipeline._smile_options(s)
  grads = kernel.psmile(logd, step_size=args.eps0, tuned=True, tuner=args.tuner).grads_per_step
  total, warm, kept, thin = pipeline.schedule(budget, grads * b, s.warmup_frac, int(s.num_samples))
  sampler = kernel.psmile(logd, step_size=args.eps0, tuned=True, tuner=args.tuner,
                          adapt_steps=warm - warm % thin, **opts, **over)
  runner = chains.make_chain_runner(chains.smile_chain_kernel(sampler), num_chains=k, data_size=n, batch_size=b,
                                    num_warmup=warm, num_samples=kept, thin=thin)
  t0 = time.perf_counter()
  res = runner(members, {"x": jnp.asarray(data["x_train"]), "y": jnp.asarray(data["y_train"])},
               jax.random.key(p.seed * 7919 + args.split), {"step_size": jnp.full((k,), args.eps0)})
  jax.block_until_ready(res.step_size)
  print(f"{k} chains x {total} steps (warmup {warm}, thin {thin}), {time.perf_counter() - t0:.1f}s")
  np.set_printoptions(formatter={"float": "{:.1e}".format}, linewidth=200)
  w = np.asarray(res.warmup_step_size)
  for i in range(0, w.shape[0], max(w.shape[0] // 20, 1)):
    print(f"step {i * thin:6d} eps {w[i]}")
  print("frozen eps", np.asarray(res.step_size))
  print("resets", np.asarray(res.resets), "non-finite", np.asarray(res.nonfinite))
  print(f"eps_drift {pipeline.eps_drift(w):.3g}")
  print("log sigma (last sample)", np.asarray(res.positions["log_sigma"])[:, -1])
  pc = adaptation.PrecondConfig() if args.clamp else adaptation.PrecondConfig(r_min=0.0, r_max=math.inf)
  c = np.sqrt(np.asarray(jax.vmap(lambda st: adaptation.precond_inverse_mass(st, pc))(res.states.precond)))
  print("largest c per chain", c.max(1), "share of c > 10", (c > 10).mean(1))
  ev = pipeline.evaluate(jax.jit(lambda ps, x: targets.predict(model.apply, ps, x)), res.positions, res.keep, None,
                         data, s, np.random.default_rng(0))
  print(f"test LPPD {ev['lppd']:.3f} RMSE {ev['rmse']:.3f}")


if __name__ == "__main__":
  main()
