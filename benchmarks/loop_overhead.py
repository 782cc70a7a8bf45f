"""Steps/s of core.fit vs a hand-written jitted loop, same model, batches and step, one run.

  python -m benchmarks.loop_overhead [--steps=2000 --repeats=3]

Prints `loop_overhead_ratio=<fit steps/s ÷ hand-written steps/s>` (1.0 = no overhead); `fit` runs
K = 50 steps per dispatch, the hand-written loop one."""

import jax
import jax.numpy as jnp
from absl import app, flags

from benchmarks.timing import timed
from jaxml import classifier, core
from jaxml.data import offline

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 2000, "Steps per timed run.")
flags.DEFINE_integer("repeats", 5, "Timed runs per loop (best is kept).")
flags.DEFINE_integer("batch_size", 64, "Batch size.")


def main(argv):
  del argv
  data = offline.load_digits()
  train = {"x": data["x_train"].reshape(len(data["x_train"]), -1), "y": data["y_train"]}
  get = core.epoch_batches(train, FLAGS.batch_size, seed=0)
  batches = [get(i) for i in range(FLAGS.steps)]
  method = classifier.make_method({"kind": "mlp", "hidden": (64, 64), "num_classes": 10})
  optimizer = core.make_optimizer({"name": "adam", "lr": 1e-3})
  params = method.init(jax.random.key(0), train)
  train_step = core.make_train_step(method.loss_fn, optimizer)

  def handwritten() -> float:
    # Copy: this loop donates its state, which must not delete the shared `params`.
    state = jax.tree.map(jnp.copy, core.create_train_state(params, optimizer, 0))
    step = jax.jit(train_step, donate_argnums=0)
    state, m = step(state, jax.device_put(batches[0]))      # compile outside the timing
    jax.block_until_ready(m)

    def loop(state):
      for b in batches:
        state, m = step(state, jax.device_put(b))
      return state, m

    return len(batches) / timed(loop, state)[0]

  def with_fit() -> float:
    state = core.create_train_state(params, optimizer, 0)
    # Warm the compile cache with one dispatch of the same K (the largest K <= 50 dividing
    # log_every=500, i.e. 50) so both loops time steady-state work only.
    k = core.auto_steps_per_dispatch([500])
    core.fit(state, train_step, lambda i: batches[i], num_steps=k, log_every=500, progress=False)
    state = core.create_train_state(params, optimizer, 0)
    return len(batches) / timed(lambda: core.fit(state, train_step, lambda i: batches[i], num_steps=len(batches),
                                                 log_every=500, progress=False).state)[0]

  # Interleaved repeats, best of each: slow drifts of a shared machine hit both loops alike.
  hand, fitted = 0.0, 0.0
  for _ in range(FLAGS.repeats):
    hand = max(hand, handwritten())
    fitted = max(fitted, with_fit())
  print(f"devices={jax.device_count()} steps={FLAGS.steps} batch={FLAGS.batch_size}")
  print(f"handwritten_steps_per_s={hand:.1f}")
  print(f"fit_steps_per_s={fitted:.1f}")
  print(f"loop_overhead_ratio={fitted / hand:.3f}")


if __name__ == "__main__":
  app.run(main)
