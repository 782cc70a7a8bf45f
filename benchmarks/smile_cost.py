"""pSMILE vs SGLD throughput in per-example gradient evaluations per second (PEG/s), one run.

Same BNN (16-16-16 ReLU -> mu + global log sigma, d = 706 for 8 inputs), same data (synthetic,
N = 4096), same batch (64) and number of vmapped chains (8), same PEG budget per chain. Both
samplers run through the same jitted lax.scan runner; the compile is excluded (each runner is
called once to compile, then timed over `repeats` calls, best time kept). Prints the ratio
last as `peg_per_s_ratio=<x>` (pSMILE PEG/s ÷ SGLD PEG/s).

  python benchmarks/smile_cost.py [--epochs 40] [--repeats 3]
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.smile import baselines, chains, kernel, targets


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--epochs", type=int, default=40, help="PEG budget per chain, in epochs")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--chains", type=int, default=8)
  parser.add_argument("--batch", type=int, default=64)
  args = parser.parse_args()

  n, p = 4096, 8
  rng = np.random.default_rng(0)
  x = rng.standard_normal((n, p)).astype(np.float32)
  y = (np.sin(x[:, 0]) + 0.1 * rng.standard_normal(n)).astype(np.float32)
  data = {"x": jnp.asarray(x), "y": jnp.asarray(y)}
  model = targets.make_regression_model((16, 16, 16))
  logd = targets.make_minibatch_logdensity(model.apply, data_size=n)
  starts = jax.vmap(lambda r: model.init(r, data["x"][:1]))(jax.random.split(jax.random.key(0), args.chains))
  budget = args.epochs * n
  rates = {}
  for name, kern in [("psmile", chains.smile_chain_kernel(kernel.psmile(logd, step_size=1e-3))),
                     ("sgld", baselines.sgld_kernel(logd, step_size=1e-5))]:
    steps = budget // (kern.grads_per_step * args.batch)
    runner = chains.make_chain_runner(kern, num_chains=args.chains, data_size=n, batch_size=args.batch,
                                      num_warmup=0, num_samples=10, thin=steps // 10)
    jax.block_until_ready(runner(starts, data, jax.random.key(1)).positions)   # compile
    best = float("inf")
    for r in range(args.repeats):
      t0 = time.perf_counter()
      res = runner(starts, data, jax.random.key(2 + r))
      jax.block_until_ready(res.positions)
      best = min(best, time.perf_counter() - t0)
    rates[name] = res.peg_per_chain * args.chains / best
    print(f"{name}: {res.peg_per_chain * args.chains:.3g} PEG in {best:.3f}s -> {rates[name]:.3g} PEG/s", flush=True)
  print(f"peg_per_s_ratio={rates['psmile'] / rates['sgld']:.3f}")


if __name__ == "__main__":
  main()
