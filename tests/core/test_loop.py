"""fit(): resume equals an uninterrupted run, checkpoint round trip, NaN stop, hooks."""

import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml import core
from tests.core import toy


class _Interrupt(Exception):
  pass


def _run(tmp_path, num_steps, *, interrupt_at=None, ckpt_every=10, name="run"):
  state, optimizer, data = toy.fresh_state()
  hooks = []
  if interrupt_at is not None:
    def stop(step, state):
      if step == interrupt_at:
        raise _Interrupt()
    hooks.append(core.Hook(1, stop))
  manager = core.checkpoint.make_manager(str(tmp_path / name))
  return core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data),
                  num_steps=num_steps, log_every=5, checkpoint_manager=manager, checkpoint_every=ckpt_every,
                  hooks=hooks, progress=False, writer=core.MetricWriter(str(tmp_path / name)))


def test_resume_after_interruption_equals_uninterrupted(tmp_path):
  full = _run(tmp_path, 30, name="full")
  with pytest.raises(_Interrupt):
    _run(tmp_path, 30, interrupt_at=17, name="cut")   # dies after the step-10 checkpoint
  resumed = _run(tmp_path, 30, name="cut")
  assert resumed.resumed_from == 10
  chex.assert_trees_all_close(resumed.state.params, full.state.params, rtol=1e-6, atol=1e-7)
  assert resumed.train_metrics["loss"] == pytest.approx(full.train_metrics["loss"], rel=1e-6)
  rows = [json.loads(line) for line in open(tmp_path / "full" / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [5, 10, 15, 20, 25, 30]


def test_kill_at_every_step_with_a_torn_write_resumes_to_the_uninterrupted_run(tmp_path):
  """A kill -9 at any moment leaves the last finished checkpoint and, if it hit a write, that write's
  temporary folder. Stopping after each of 6 steps (checkpoints every 2) with a torn folder of the next
  checkpoint left behind, then rerunning, gives the uninterrupted parameters every time."""
  state, optimizer, data = toy.fresh_state()
  step = core.make_train_step(toy.mlp_loss, optimizer)     # one compiled dispatch for every run

  def run(name, stop_at=None):
    def hook(s, st):
      if s == stop_at:
        raise _Interrupt()
    manager = core.checkpoint.make_manager(str(tmp_path / name))
    return core.fit(state, step, toy.batch_fn(data), num_steps=6, log_every=6, checkpoint_manager=manager,
                    checkpoint_every=2, hooks=[core.Hook(1, hook)], progress=False)

  full = run("full")
  for stop in range(1, 7):
    with pytest.raises(_Interrupt):
      run(f"cut{stop}", stop_at=stop)
    torn = tmp_path / f"cut{stop}" / f"{(stop + 1) // 2 * 2}.orbax-checkpoint-tmp-1"   # the write it cut
    torn.mkdir()
    (torn / "garbage").write_bytes(b"\x00half")
    resumed = run(f"cut{stop}")
    assert resumed.resumed_from == ((stop - 1) // 2 * 2 or None), stop
    chex.assert_trees_all_equal(resumed.state.params, full.state.params)
    assert int(resumed.state.step) == 6


def test_checkpoint_round_trip(tmp_path):
  state, _, _ = toy.fresh_state()
  state = state.replace(step=jnp.asarray(7, jnp.int32), extra={"c": jnp.arange(3.0)})
  manager = core.checkpoint.make_manager(str(tmp_path / "ck"))
  core.checkpoint.save(manager, 7, state)
  blank = jax.tree.map(jnp.zeros_like, state)
  restored = core.checkpoint.restore(manager, core.checkpoint.latest_step(manager), blank)
  chex.assert_trees_all_equal(restored, state)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
  state, optimizer, data = toy.fresh_state()
  get = toy.batch_fn(data)

  def poisoned(step):
    batch = get(step)
    if step >= 12:
      batch["y"] = np.full_like(batch["y"], np.nan)
    return batch

  manager = core.checkpoint.make_manager(str(tmp_path / "nan"))
  with pytest.raises(core.NonFiniteLossError, match="last good checkpoint"):
    core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), poisoned, num_steps=30,
             log_every=1, checkpoint_manager=manager, checkpoint_every=5, progress=False)
  assert core.checkpoint.latest_step(manager) == 10
  good = core.checkpoint.restore(manager, 10, state)
  assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(good.params))


def test_hook_can_replace_extra_state():
  state, optimizer, data = toy.fresh_state()
  state = state.replace(extra={"count": jnp.zeros(())})

  def bump(step, state):
    return state.replace(extra={"count": state.extra["count"] + 1})

  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data),
                    num_steps=12, log_every=6, hooks=[core.Hook(4, bump)], progress=False)
  assert float(result.state.extra["count"]) == 3.0


def test_fit_with_eval_and_iterator(tmp_path):
  state, optimizer, data = toy.fresh_state()
  batches = (toy.batch_fn(data)(i) for i in range(100))
  eval_step = core.step.make_eval_step(lambda p, b: toy.mlp_loss(p, b, None)[1])
  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), batches, num_steps=8,
                    log_every=4, eval_step=eval_step, eval_batches=lambda: [data], eval_every=4,
                    progress=False)
  assert set(result.eval_metrics) == {"mae"} and np.isfinite(result.eval_metrics["mae"])


def test_fit_leaves_the_callers_arrays_alive():
  """The loop donates its state; the params the caller passed in must stay usable."""
  state, optimizer, data = toy.fresh_state()
  params = state.params
  core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data),
           num_steps=3, log_every=3, progress=False)
  assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(params))


def test_hook_can_stop_training_early(tmp_path):
  state, optimizer, data = toy.fresh_state()

  def stop_at_seven(step, state):
    if step == 7:
      raise core.StopTraining()

  manager = core.checkpoint.make_manager(str(tmp_path / "stop"))
  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data),
                    num_steps=50, log_every=5, hooks=[core.Hook(1, stop_at_seven)], checkpoint_manager=manager,
                    checkpoint_every=5, progress=False)
  assert int(result.state.step) == 7 and core.checkpoint.latest_step(manager) == 7
  assert np.isfinite(result.train_metrics["loss"])
