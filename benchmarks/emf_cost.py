"""Training cost of EMF vs MeanFlow (jax.jvp) vs flow matching on the same network, one run.

  python -m benchmarks.emf_cost                 # MLP (D=64, B=1024) and U-Net (8x8, B=128)
  python -m benchmarks.emf_cost --families=mlp --methods=fm,emf_u,emf_u_vc,meanflow,meanflow_dvjp --arms=B

Per family and method, the full jitted optimiser step (value_and_grad + AdamW + EMA): compiled memory,
FLOPs and the median wall time over `--steps` steps (methods interleaved). Arms: A = auxiliary passes on the
whole batch, B = only on the interval rows. `meanflow_dvjp` gets its JVP from two reverse passes;
`emf_*_vc` steps along the conditional velocity v_c, one stopped forward fewer."""

import argparse
import functools
import statistics

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from benchmarks.timing import flops, timed
from jaxml import core
from jaxml.emf import api
from jaxml.emf.model import make_apply_fn, make_network

FAMILIES = {
    "mlp": (dict(kind="mlp", width=256, depth=4, cond_dim=128), (64,), 1024),
    "unet": (dict(kind="unet", channels=(32, 64), blocks=2, cond_dim=128), (8, 8, 1), 128),
    "setnet": (dict(kind="setnet", width=128, depth=4, cond_dim=128), (128, 3), 64),
}
METHODS = ("fm", "emf_u", "emf_u_vc", "emf_x1", "emf_x1_vc", "meanflow", "meanflow_split", "meanflow_dvjp",
           "shortcut", "ct")
EMF = ("emf_u", "emf_u_vc", "emf_x1", "emf_x1_vc")   # Euler field = model at r = t, or v_c (one pass fewer)


def _config(method, model, aux_rows):
  # meanflow_dvjp: fused MeanFlow whose JVP goes through two reverse passes (double-backward trick).
  jvp_impl = "double_vjp" if method == "meanflow_dvjp" else "forward"
  return ml_collections.ConfigDict({
      "method": "meanflow" if method == "meanflow_dvjp" else method, "num_classes": 0, "model": model,
      "emf": {"delta": 0.01, "rho": 0.5, "aux_rows": aux_rows},
      "meanflow": {"aux_rows": aux_rows, "jvp_impl": jvp_impl},
      "fm": {"p": 0.0}, "shortcut": {}, "ct": {}})


def build(method, model, shape, batch_size, aux_rows):
  """Compiles one full train step; returns (compiled step, state, batch, static cost numbers)."""
  gen = api.make_generator(_config(method, model, aux_rows))
  batch = {"x": jnp.asarray(np.random.default_rng(0).normal(size=(batch_size,) + shape), jnp.float32)}
  params = gen.method.init(jax.random.key(0), batch)
  opt = core.make_optimizer({"name": "adamw", "lr": 1e-4, "b2": 0.95})
  uses_extra = gen.method.init_extra is not None
  extra = gen.method.init_extra(jax.random.key(1), params) if uses_extra else None
  state = core.create_train_state(params, opt, 0, ema=True, extra=extra)
  step = jax.jit(core.make_train_step(gen.method.loss_fn, opt, ema_decay=0.999, uses_extra=uses_extra),
                 donate_argnums=0)
  compile_s, compiled = timed(lambda: step.lower(state, batch).compile())
  mem = compiled.memory_analysis()
  for _ in range(3):
    state, _ = compiled(state, batch)
  jax.block_until_ready(state)
  return compiled, state, batch, {
      "temp": mem.temp_size_in_bytes, "arg": mem.argument_size_in_bytes, "out": mem.output_size_in_bytes,
      "alias": mem.alias_size_in_bytes, "flops": flops(compiled), "compile_s": compile_s}


def time_interleaved(built, steps):
  """Median ms/step per method; methods take turns (2 steps each per round) so that load changes on a
  shared machine hit every method alike."""
  times = {m: [] for m in built}
  states = {m: b[1] for m, b in built.items()}
  for _ in range(max(steps // 2, 1)):
    for m, (compiled, _, batch, _) in built.items():
      t, states[m] = timed(lambda s: compiled(compiled(s, batch)[0], batch)[0], states[m])  # noqa: B023
      times[m].append(t / 2)
  return {m: 1e3 * statistics.median(v) for m, v in times.items()}


def building_blocks(model, shape, batch_size):
  """FLOPs of one forward, one forward+backward (of a squared loss) and one JVP on the full batch."""
  net = make_network(model)
  apply_fn = make_apply_fn(net)
  x = jnp.zeros((batch_size,) + shape)
  t, r = jnp.full((batch_size,), 0.3), jnp.full((batch_size,), 0.7)
  params = net.init(jax.random.key(0), x, t, t)["params"]
  fl = lambda f, *a: flops(jax.jit(f).lower(*a).compile())  # noqa: E731
  tangent = lambda p: jax.jvp(functools.partial(apply_fn, p), (x, t, r), (x, jnp.ones_like(t), jnp.zeros_like(r)))
  return {"forward": fl(lambda p: apply_fn(p, x, t, r), params),
          "fwd+bwd": fl(jax.grad(lambda p: jnp.sum(apply_fn(p, x, t, r) ** 2)), params), "jvp": fl(tangent, params),
          "grad through jvp primal": fl(jax.grad(lambda p: jnp.sum(tangent(p)[0] ** 2)), params)}


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--families", default="mlp,unet")
  ap.add_argument("--methods", default=",".join(METHODS))
  ap.add_argument("--arms", default="A,B")
  ap.add_argument("--steps", type=int, default=20)
  args = ap.parse_args()
  print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {jax.device_count()}")
  for fam in args.families.split(","):
    model, shape, bsz = FAMILIES[fam]
    bb = building_blocks(model, shape, bsz)
    print(f"\n## {fam}: x {shape}, batch {bsz}; FLOPs of building blocks relative to one forward:")
    print("  " + ", ".join(f"{k} {v / bb['forward']:.2f}" for k, v in bb.items()))
    for arm in args.arms.split(","):
      aux_rows = "all" if arm == "A" else "interval"
      built = {m: build(m, model, shape, bsz, aux_rows) for m in args.methods.split(",")   # shortcut and ct have
               if not (arm == "A" and m in ("shortcut", "ct") and "B" in args.arms)}     # no interval rows: arm B only
      ms = time_interleaved(built, args.steps)
      res = {m: {**b[3], "step_ms": ms[m]} for m, b in built.items()}
      del built
      base = res["fm"]
      print(f"\n### arm {arm} (auxiliary passes on {'the full batch' if arm == 'A' else 'interval rows only'})")
      print("| method | temp MiB | temp/FM | FLOPs/FM | ms/step | time/FM | compile s |")
      print("|---|---|---|---|---|---|---|")
      for m, v in res.items():
        print(f"| {m} | {v['temp'] / 2**20:.2f} | {v['temp'] / base['temp']:.2f} | {v['flops'] / base['flops']:.2f} | "
              f"{v['step_ms']:.2f} | {v['step_ms'] / base['step_ms']:.2f} | {v['compile_s']:.1f} |")
      for emf in EMF:
        for mf in ("meanflow", "meanflow_split", "meanflow_dvjp"):
          if emf in res and mf in res:
            e, f = res[emf], res[mf]
            print(f"RATIO {fam} arm {arm} {emf}/{mf}: time {e['step_ms'] / f['step_ms']:.2f}, "
                  f"temp memory {e['temp'] / f['temp']:.2f}, FLOPs {e['flops'] / f['flops']:.2f}")


if __name__ == "__main__":
  main()
