"""SOL train-step cost relative to the CE baseline on the same encoder (one run, one process).

  python benchmarks/sol_cost.py [--features 8 --classes 10 --bases 64 --iters 300]

SOL's step embeds B bases + B references (2B rows), builds the expected profiles, samples
≤ 3·32 pairs and evaluates L_SO + L_D; CE's step sees 2B random rows (the experiment's equal
budget). Both are jitted `core.make_train_step` steps timed after warm-up, interleaved in
short rounds so machine load affects both alike; the ratio uses each step's fastest round
(the least-disturbed estimate on a shared machine), the median-round ratio is printed too. The per-epoch
refresh (embed the training set, centroids, decoders, relabelling) is timed separately and
reported amortised over N/B steps.
Prints `sol_step_cost_ratio=<x>` (SOL step time ÷ CE step time).
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxml import core, sol


def _time(fn, state, batch, iters: int) -> tuple[float, object]:
  t0 = time.perf_counter()
  for _ in range(iters):
    state, metrics = fn(state, batch)
  jax.block_until_ready(metrics)
  return (time.perf_counter() - t0) / iters, state


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--features", type=int, default=8)
  ap.add_argument("--classes", type=int, default=10)
  ap.add_argument("--bases", type=int, default=64)
  ap.add_argument("--train_rows", type=int, default=5000)
  ap.add_argument("--iters", type=int, default=20)
  ap.add_argument("--rounds", type=int, default=50)
  ap.add_argument("--backbone", default="mlp", choices=("mlp", "cnn"), help="cnn: 28x28 CountDots-sized inputs")
  ap.add_argument("--pair_pool", type=int, default=0, help="0: all pairs (exact); else random candidate pairs")
  ap.add_argument("--pair_sampler", default="exact", choices=("exact", "replacement"),
                  help="exact: without replacement (top-k per class); replacement: inverse-CDF draws per class")
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  n, b, c = args.train_rows, args.bases, args.classes
  shape = (args.features,) if args.backbone == "mlp" else (28, 28)
  x = rng.normal(size=(n,) + shape).astype(np.float32)
  y = rng.integers(0, c, n).astype(np.int32)
  settings = dict(num_classes=c, pair_pool=args.pair_pool, backbone=args.backbone, pair_sampler=args.pair_sampler)
  opt = core.make_optimizer({"name": "adam", "lr": 1e-3}, 1000)

  sol_l = sol.make_learner("sol", settings)
  idx = rng.integers(0, n, 2 * b).astype(np.int32)
  sol_batch = jax.device_put({"x": x[idx], "idx": idx})
  params = sol_l.method.init(jax.random.key(0), sol_batch)
  refresh = sol_l.refresh
  xv, yv = jnp.asarray(x[:256]), jnp.asarray(y[:256])
  extra = sol.init_extra(settings, params, x, y, refresh, x[:256], y[:256])
  sol_state = core.create_train_state(params, opt, 0, extra=extra)
  sol_step = jax.jit(core.make_train_step(sol_l.method.loss_fn, opt, uses_extra=True))

  ce_l = sol.make_learner("ce", settings)
  ce_batch = jax.device_put({"x": x[idx], "y": y[idx]})
  ce_state = core.create_train_state(ce_l.method.init(jax.random.key(0), ce_batch), opt, 0)
  ce_step = jax.jit(core.make_train_step(ce_l.method.loss_fn, opt))

  _, sol_state = _time(sol_step, sol_state, sol_batch, 20)   # compile + warm-up
  _, ce_state = _time(ce_step, ce_state, ce_batch, 20)
  ratios, sol_ts, ce_ts = [], [], []
  for _ in range(args.rounds):
    ts, sol_state = _time(sol_step, sol_state, sol_batch, args.iters)
    tc, ce_state = _time(ce_step, ce_state, ce_batch, args.iters)
    sol_ts.append(ts)
    ce_ts.append(tc)
    ratios.append(ts / tc)
  x_dev = jnp.asarray(x)
  jax.block_until_ready(refresh(sol_state.params, sol_state.extra, x_dev, xv, yv, jnp.asarray(True)))
  t0 = time.perf_counter()
  for _ in range(5):
    out = refresh(sol_state.params, sol_state.extra, x_dev, xv, yv, jnp.asarray(True))
  jax.block_until_ready(out)
  t_refresh = (time.perf_counter() - t0) / 5
  steps_per_epoch = n // b
  sol_t, ce_t = float(np.min(sol_ts)), float(np.min(ce_ts))
  print(f"devices={jax.devices()[0].platform} rows_per_step={2 * b} classes={c} features={args.features} "
        f"pair_pool={args.pair_pool or 'all'} pair_sampler={args.pair_sampler} backbone={args.backbone}")
  print(f"sol_step_ms={1e3 * sol_t:.3f} ce_step_ms={1e3 * ce_t:.3f} "
        f"refresh_ms={1e3 * t_refresh:.2f} (once per {steps_per_epoch} steps)")
  print(f"sol_step_cost_ratio_median_round={float(np.median(ratios)):.3f}")
  print(f"sol_step_cost_ratio={sol_t / ce_t:.3f}")
  print(f"sol_step_cost_ratio_with_refresh={(sol_t + t_refresh / steps_per_epoch) / ce_t:.3f}")


if __name__ == "__main__":
  main()
