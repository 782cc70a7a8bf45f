"""pSMILE vs SGLD throughput in per-example gradient evaluations per second (PEG/s), one run.

Same BNN (d = 706), data (N = 4096), 8 vmapped chains and PEG budget per batch size in `--batch`;
compiles excluded, samplers timed in alternation, best of `repeats`. Prints `ratio_b<b>=<x>` per batch
size and, last, `peg_per_s_ratio=<x>`. `--per-step`: µs per vmapped kernel step and fused XLA ops of one
step for pSMILE, pSMILE-naive, SMILE-naive and SGLD.

  python -m benchmarks.smile_cost [--epochs 40] [--repeats 5] [--batch 64,256]
  python -m benchmarks.smile_cost --per-step [--steps 300]
"""

import argparse
import collections
import re

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import repeat_time, timed
from jaxml.smile import adaptation, baselines, chains, kernel, targets


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--epochs", type=int, default=40, help="PEG budget per chain, in epochs")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--chains", type=int, default=8)
  parser.add_argument("--batch", type=str, default="64,256", help="comma-separated batch sizes; the first is reported")
  parser.add_argument("--per-step", action="store_true", help="µs and fused ops per step instead of PEG/s")
  parser.add_argument("--steps", type=int, default=300, help="--per-step: steps per timed scan")
  args = parser.parse_args()

  n, p = 4096, 8
  rng = np.random.default_rng(0)
  x = rng.standard_normal((n, p)).astype(np.float32)
  y = (np.sin(x[:, 0]) + 0.1 * rng.standard_normal(n)).astype(np.float32)
  data = {"x": jnp.asarray(x), "y": jnp.asarray(y)}
  model = targets.make_regression_model((16, 16, 16))
  logd = targets.make_minibatch_logdensity(model.apply, data_size=n)
  starts = jax.vmap(lambda r: model.init(r, data["x"][:1]))(jax.random.split(jax.random.key(0), args.chains))
  if args.per_step:
    per_step(args, logd, starts, data, int(args.batch.split(",")[0]))
    return
  budget = args.epochs * n
  ratios = {}
  for b in (int(v) for v in args.batch.split(",")):
    runners, best, peg = {}, {}, {}
    for name, kern in [("psmile", chains.smile_chain_kernel(kernel.psmile(logd, step_size=1e-3))),
                       ("sgld", baselines.sgld_kernel(logd, step_size=1e-5))]:
      steps = budget // (kern.grads_per_step * b)
      runners[name] = chains.make_chain_runner(kern, num_chains=args.chains, data_size=n, batch_size=b,
                                               num_warmup=0, num_samples=10, thin=steps // 10)
      res = runners[name](starts, data, jax.random.key(1))   # compile
      jax.block_until_ready(res.positions)
      best[name], peg[name] = float("inf"), res.peg_per_chain * args.chains
    for r in range(args.repeats):
      for name, runner in runners.items():
        best[name] = min(best[name], timed(lambda: runner(starts, data, jax.random.key(2 + r)).positions)[0])  # noqa: B023
    rates = {name: peg[name] / best[name] for name in runners}
    for name in runners:
      print(f"b={b} {name}: {peg[name]:.3g} PEG in {best[name]:.3f}s -> {rates[name]:.3g} PEG/s", flush=True)
    ratios[b] = rates["psmile"] / rates["sgld"]
    print(f"ratio_b{b}={ratios[b]:.3f}", flush=True)
  print(f"peg_per_s_ratio={next(iter(ratios.values())):.3f}")


def per_step(args, logd, starts, data, b: int) -> None:
  """µs per vmapped step and fused ops of one compiled step, per kernel, on one fixed minibatch."""
  c, p = args.chains, data["x"].shape[1]
  mb = {"x": jnp.broadcast_to(data["x"][:b], (c, b, p)), "y": jnp.broadcast_to(data["y"][:b], (c, b))}
  fixed = adaptation.fixed_tuner()
  kernels = {"psmile": chains.smile_chain_kernel(kernel.psmile(logd, step_size=1e-3)),
             "psmile_naive": chains.smile_chain_kernel(kernel.psmile(logd, step_size=1e-3, tuner=fixed)),
             "smile_naive": chains.smile_chain_kernel(kernel.smile(logd, step_size=1e-3, tuner=fixed)),
             "sgld": baselines.sgld_kernel(logd, step_size=1e-5)}
  seconds = {}
  for name, k in kernels.items():
    vstep = jax.vmap(k.step, in_axes=(0, 0, 0, None))
    state = jax.vmap(k.init, in_axes=(0, 0, 0, None))(starts, mb, jax.random.split(jax.random.key(1), c), {})
    one = jax.jit(lambda s, key, vstep=vstep: vstep(jax.random.split(key, c), s, mb, 0))
    hlo = one.lower(state, jax.random.key(2)).compile().as_text()
    fusions = collections.Counter(re.findall(r"= \S+ (\w[\w-]*)\(", hlo[hlo.index("ENTRY"):]))["fusion"]

    @jax.jit
    def run(s, key, vstep=vstep):
      body = lambda s, t: (vstep(jax.random.split(jax.random.fold_in(key, t), c), s, mb, t)[0], None)
      return jax.lax.scan(body, s, jnp.arange(args.steps))[0]

    seconds[name] = repeat_time(lambda: run(state, jax.random.key(3)), args.repeats, min) / args.steps  # noqa: B023
    print(f"{name:13s} {seconds[name] * 1e6:7.1f} us/step  {k.grads_per_step} grads/step  {fusions} fused ops/step",
          flush=True)
  print(f"step_peg_per_s_ratio={seconds['sgld'] * 2 / seconds['psmile']:.3f}")


if __name__ == "__main__":
  main()
