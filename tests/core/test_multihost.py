"""Two processes on localhost (jax.distributed + gloo), each reading half of every batch,
reach the same parameters as one process reading whole batches."""

import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxml import core
from tests.core import toy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.multidevice
def test_two_process_run_equals_single_process(tmp_path):
  port = _free_port()
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  procs = [subprocess.Popen([sys.executable, "-m", "tests.core.multihost_worker", str(port), str(i), "2",
                             str(tmp_path)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True) for i in range(2)]
  outputs = []
  for p in procs:
    try:
      out, _ = p.communicate(timeout=150)
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      pytest.fail("two-process run timed out")
    outputs.append(out)
  for p, out in zip(procs, outputs):
    assert p.returncode == 0, out[-3000:]

  state, optimizer, data = toy.fresh_state()
  expected = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data),
                      num_steps=toy.MULTIHOST_STEPS, log_every=6, progress=False)
  got = np.load(tmp_path / "params.npz")
  for path, leaf in jax.tree_util.tree_leaves_with_path(expected.state.params):
    key = "/".join(str(k.key) for k in path)
    np.testing.assert_allclose(got[key], np.asarray(leaf), rtol=1e-5, atol=1e-6)
  assert float(got["loss"]) == pytest.approx(expected.train_metrics["loss"], rel=1e-5)
  assert sorted(os.listdir(tmp_path / "ckpt")) == ["12", "6"]
