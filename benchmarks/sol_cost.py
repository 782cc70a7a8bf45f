"""SOL train-step cost relative to the CE baseline on the same encoder (one run, one process).

  python benchmarks/sol_cost.py [--features 8 --classes 10 --bases 64 --rounds 30]

Both steps run as `core.train` runs them (donated state, K steps per dispatch) plus the host-side
batches of `sol.fit`; process CPU time, interleaved rounds, fastest kept; refreshes amortised over their
cadences. Prints `sol_step_cost_ratio=<x>`: (SOL step + batch) ÷ (CE step + batch)."""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import timed
from jaxml import core, sol


def _cpu_ms(fn, *args, n: int = 1) -> tuple[float, object]:
  t, out = timed(fn, *args, clock=time.process_time)
  return 1e3 * t / n, out


class _Stepper:
  """A donated, jitted K-step scan (or a single step for K = 1) with its own state and batches."""

  def __init__(self, loss_fn, uses_extra, params, extra, opt, batches: list[dict], k: int):
    step = core.make_train_step(loss_fn, opt, uses_extra=uses_extra)
    self.k = k
    fn = core.make_multi_step(step) if k > 1 else step
    self.fn = jax.jit(fn, donate_argnums=0)
    self.state = core.create_train_state(jax.tree.map(jnp.copy, params), opt, 0,
                                         extra=None if extra is None else jax.tree.map(jnp.copy, extra))
    stack = (lambda bs: jax.tree.map(lambda *a: np.stack(a), *bs)) if k > 1 else (lambda bs: bs[0])
    self.batches = [jax.device_put(stack(batches[i:i + k])) for i in range(0, len(batches) - k + 1, k)]
    self.i, self.times = 0, []
    self.round()   # compile + warm-up
    self.times = []

  def round(self) -> None:
    batch = self.batches[self.i % len(self.batches)]
    self.i += 1
    t, (self.state, _) = _cpu_ms(self.fn, self.state, batch, n=self.k)
    self.times.append(t)


def main() -> None:
  ap = argparse.ArgumentParser()
  for flag, default in (("features", 8), ("classes", 10), ("bases", 64), ("train_rows", 5000),
                        ("steps_per_dispatch", 50), ("rounds", 30), ("refresh_every", 100), ("relabel_every", 200),
                        ("relabel_start", 1000)):
    ap.add_argument(f"--{flag}", type=int, default=default)
  ap.add_argument("--backbone", default="mlp", choices=("mlp", "cnn"), help="cnn: 28x28 CountDots-sized inputs")
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  n, b, c, k = args.train_rows, args.bases, args.classes, args.steps_per_dispatch
  shape = (args.features,) if args.backbone == "mlp" else (28, 28)
  x = rng.normal(size=(n,) + shape).astype(np.float32)
  y = rng.integers(0, c, n).astype(np.int32)
  settings = dict(num_classes=c, backbone=args.backbone)
  opt = core.make_optimizer({"name": "adam", "lr": 1e-3}, 1000)

  sol_l = sol.make_learner("sol", settings)
  s = sol_l.settings
  pair_batches = sol.make_pair_batches(x, sol.LabelBook(y), b, seed=0, tau=s["tau"],
                                       pairs_per_class=sol.host_pair_count(s), block=args.refresh_every)
  ce_batches = core.epoch_batches({"x": x, "y": y}, 2 * b, seed=0)
  host_steps = 4 * args.refresh_every
  sol_host, sol_list = _cpu_ms(lambda: [pair_batches(i) for i in range(host_steps)], n=host_steps)
  plain_pairs = sol.make_pair_batches(x, sol.LabelBook(y), b, seed=0, tau=s["tau"], block=args.refresh_every)
  in_step_host, in_step = _cpu_ms(lambda: [plain_pairs(i) for i in range(host_steps)], n=host_steps)
  ce_host, ce_list = _cpu_ms(lambda: [ce_batches(i) for i in range(host_steps)], n=host_steps)
  params, refresh = sol_l.method.init(jax.random.key(0), sol_list[0]), sol_l.refresh
  xv, yv = jnp.asarray(x[:256]), jnp.asarray(y[:256])
  extra = sol.init_extra(settings, params, x, y, refresh, x[:256], y[:256])
  ce_l = sol.make_learner("ce", settings)
  ce_params = ce_l.method.init(jax.random.key(0), ce_list[0])
  steppers = {
      "sol": _Stepper(sol_l.method.loss_fn, True, params, extra, opt, sol_list, k),
      "ce": _Stepper(ce_l.method.loss_fn, False, ce_params, None, opt, ce_list, k),
      "sol_in_step_pairs": _Stepper(sol_l.method.loss_fn, True, params, extra, opt, in_step, k),
      "sol_1": _Stepper(sol_l.method.loss_fn, True, params, extra, opt, sol_list, 1),
      "ce_1": _Stepper(ce_l.method.loss_fn, False, ce_params, None, opt, ce_list, 1),
  }
  for _ in range(args.rounds):
    for st in steppers.values():
      for _ in range(1 if st.k > 1 else 20):
        st.round()
  best = {name: float(np.min(st.times)) for name, st in steppers.items()}
  x_dev = jnp.asarray(x)
  state = steppers["sol"].state
  t_refresh, t_relabel = (min(_cpu_ms(refresh, state.params, state.extra, x_dev, xv, yv, jnp.asarray(r))[0]
                              for _ in range(5)) for r in (False, True))
  sol_t, ce_t = best["sol"] + sol_host, best["ce"] + ce_host
  print(f"devices={jax.devices()[0].platform} rows_per_step={2 * b} classes={c} features={args.features} "
        f"backbone={args.backbone} steps_per_dispatch={k} rounds={args.rounds} (process CPU time, fastest round)")
  print(f"device step ms: sol={best['sol']:.4f} ce={best['ce']:.4f} sol_in_step_pairs={best['sol_in_step_pairs']:.4f} "
        f"| one step per dispatch: sol={best['sol_1']:.4f} ce={best['ce_1']:.4f}")
  print(f"host batch ms: sol={sol_host:.4f} ce={ce_host:.4f} sol_without_pairs={in_step_host:.4f}; refresh_ms={t_refresh:.2f} (every {args.refresh_every} steps) "
        f"relabel_refresh_ms={t_relabel:.2f} (every {args.relabel_every} steps from step {args.relabel_start})")
  print(f"sol_device_step_cost_ratio={best['sol'] / best['ce']:.3f}")
  print(f"sol_in_step_pairs_cost_ratio={(best['sol_in_step_pairs'] + in_step_host) / ce_t:.3f}")
  print(f"sol_single_dispatch_cost_ratio={(best['sol_1'] + sol_host) / (best['ce_1'] + ce_host):.3f}")
  print(f"sol_step_cost_ratio={sol_t / ce_t:.3f}")
  amortised = (t_refresh * (1 / args.refresh_every - 1 / args.relabel_every) + t_relabel / args.relabel_every)
  print(f"sol_step_cost_ratio_with_refresh={(sol_t + amortised) / ce_t:.3f} (after the relabelling warm-up)")


if __name__ == "__main__":
  main()
