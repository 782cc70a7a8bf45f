"""Per-step cost of the SMILE kernels vs SGLD without the chain runner: µs per vmapped step and the
number of fused XLA ops of one compiled step (a load-independent proxy for the fixed per-step cost).

Same BNN and batch as `smile_cost.py` (16-16-16 net, d = 706, b = 64, 8 chains), a fixed minibatch,
`steps` steps in one jitted `lax.scan`, compile excluded, best of 5.

  python benchmarks/smile_step_cost.py [--steps 300] [--batch 64]
"""

import argparse
import collections
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.smile import adaptation, baselines, chains, kernel, targets


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--chains", type=int, default=8)
  args = parser.parse_args()
  n, p, c, b = 4096, 8, args.chains, args.batch
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.standard_normal((n, p)).astype(np.float32))
  y = jnp.asarray(rng.standard_normal(n).astype(np.float32))
  model = targets.make_regression_model((16, 16, 16))
  logd = targets.make_minibatch_logdensity(model.apply, data_size=n)
  starts = jax.vmap(lambda r: model.init(r, x[:1]))(jax.random.split(jax.random.key(0), c))
  mb = {"x": jnp.broadcast_to(x[:b], (c, b, p)), "y": jnp.broadcast_to(y[:b], (c, b))}
  kernels = {"psmile": chains.smile_chain_kernel(kernel.psmile(logd, step_size=1e-3)),
             "psmile_naive": chains.smile_chain_kernel(kernel.psmile(logd, step_size=1e-3, tuner=adaptation.fixed_tuner())),
             "smile_naive": chains.smile_chain_kernel(kernel.smile(logd, step_size=1e-3, tuner=adaptation.fixed_tuner())),
             "sgld": baselines.sgld_kernel(logd, step_size=1e-5)}
  per_step = {}
  for name, k in kernels.items():
    vstep = jax.vmap(k.step, in_axes=(0, 0, 0, None))
    state = jax.vmap(k.init, in_axes=(0, 0, 0, None))(starts, mb, jax.random.split(jax.random.key(1), c), {})
    one = jax.jit(lambda s, key: vstep(jax.random.split(key, c), s, mb, 0))
    hlo = one.lower(state, jax.random.key(2)).compile().as_text()
    fusions = collections.Counter(re.findall(r"= \S+ (\w[\w-]*)\(", hlo[hlo.index("ENTRY"):]))["fusion"]

    @jax.jit
    def run(s, key):
      body = lambda s, t: (vstep(jax.random.split(jax.random.fold_in(key, t), c), s, mb, t)[0], None)
      return jax.lax.scan(body, s, jnp.arange(args.steps))[0]

    jax.block_until_ready(run(state, jax.random.key(2)))
    best = float("inf")
    for r in range(5):
      t0 = time.perf_counter()
      jax.block_until_ready(run(state, jax.random.key(3 + r)))
      best = min(best, time.perf_counter() - t0)
    per_step[name] = best / args.steps
    print(f"{name:13s} {per_step[name] * 1e6:7.1f} us/step  {k.grads_per_step} grads/step  "
          f"{fusions} fused ops/step", flush=True)
  print(f"step_peg_per_s_ratio={per_step['sgld'] * 2 / per_step['psmile']:.3f}")


if __name__ == "__main__":
  main()
