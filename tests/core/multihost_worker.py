"""One process of the two-process test: the TPU-pod code path on localhost CPUs.

Usage: python -m tests.core.multihost_worker PORT PROCESS_ID NUM_PROCESSES OUT_DIR
Each process has 2 CPU devices, initialises jax.distributed with gloo collectives, passes
only ITS half of every global batch to core.fit, and checkpoints through orbax. Process 0
writes the final parameters to OUT_DIR/params.npz.
"""

import os
import sys

if __name__ == "__main__":  # never when imported: the flag would leak into the importer
  os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
  os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxml import core  # noqa: E402
from tests.core import toy  # noqa: E402

NUM_STEPS = toy.MULTIHOST_STEPS


def train(out_dir: str, process_id: int, num_processes: int):
  state, optimizer, data = toy.fresh_state()
  global_batches = toy.batch_fn(data)
  local = lambda step: core.batches.process_slice(global_batches(step), process_id, num_processes)  # noqa: E731
  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), local, num_steps=NUM_STEPS,
                    log_every=6, checkpoint_manager=core.checkpoint.make_manager(os.path.join(out_dir, "ckpt")),
                    checkpoint_every=6, progress=process_id == 0)
  return result


def main():
  port, pid, nproc, out_dir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
  core.maybe_initialize(True, coordinator_address=f"127.0.0.1:{port}", num_processes=nproc,
                        process_id=pid, cpu_collectives="gloo")
  assert jax.process_count() == nproc and jax.device_count() == 2 * nproc
  result = train(out_dir, pid, nproc)
  flat = {"/".join(str(k.key) for k in path): np.asarray(jax.device_get(leaf))
          for path, leaf in jax.tree_util.tree_leaves_with_path(result.state.params)}
  if pid == 0:
    np.savez(os.path.join(out_dir, "params.npz"), loss=result.train_metrics["loss"], **flat)
  jax.distributed.shutdown()


if __name__ == "__main__":
  main()
