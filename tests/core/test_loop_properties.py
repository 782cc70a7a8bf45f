"""fit() properties against its documented cadences and placement: evaluation at every multiple of eval_every
(also between logging steps), one multi-step scan per train_step across fits, parameters placed by the
sharding rules, also when a hook returns a new state, and logged numbers that are what they say."""

import time

import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxml import core
from tests.core import toy

RULES = [(r"params/Dense_0/kernel", P(None, "model")), (r"opt_state/.*Dense_0/kernel", P(None, "model"))]


class _Rows:
  """A MetricWriter stand-in that keeps (step, keys) of every write."""

  def __init__(self):
    self.rows = []

  def write(self, step, metrics):
    self.rows.append((int(step), sorted(metrics)))


def test_eval_runs_at_every_multiple_of_eval_every_between_log_steps():
  # log every 4, eval every 2 of 8 steps: the evaluations at 2 and 6 are not logging steps.
  state, optimizer, data = toy.fresh_state()
  eval_step = core.step.make_eval_step(lambda p, b: toy.mlp_loss(p, b, None)[1])
  writer = _Rows()
  core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data), num_steps=8, log_every=4,
           eval_step=eval_step, eval_batches=lambda: [data], eval_every=2, writer=writer, progress=False)
  assert [s for s, keys in writer.rows if keys == ["eval/mae"]] == [2, 4, 6, 8]
  assert [s for s, keys in writer.rows if "train/loss" in keys] == [4, 8]


class _Values:
  """A MetricWriter stand-in that keeps every written value."""

  def __init__(self):
    self.values = []

  def write(self, step, metrics):
    self.values.append(dict(metrics))


def test_logged_means_of_float32_metrics_are_accumulated_in_float64():
  # 2**24 + 1 is not a float32: summed in float32 the three ones vanish and the mean is 2**22 exactly.
  rows = [{"x": np.array([2.0**24, 1.0], np.float32)}, {"x": np.array([1.0, 1.0], np.float32)}]
  assert core.loop._mean_stacked(rows) == {"x": (2.0**24 + 3.0) / 4}


def test_the_logged_rate_is_steps_over_the_time_they_took_also_for_a_sub_second_run():
  state, optimizer, data = toy.fresh_state()
  step = core.make_train_step(toy.mlp_loss, optimizer)
  core.fit(state, step, toy.batch_fn(data), num_steps=4, log_every=4, progress=False)  # compiles the scan
  writer = _Values()
  t0 = time.perf_counter()
  core.fit(state, step, toy.batch_fn(data), num_steps=4, log_every=4, writer=writer, progress=False)
  wall = time.perf_counter() - t0
  rate = writer.values[-1]["train/steps_per_s"]
  assert 4 / wall <= rate < float("inf")  # the run's own clock sits inside the wall time around it


def test_a_second_fit_of_the_same_train_step_reuses_its_multi_step():
  state, optimizer, data = toy.fresh_state()
  step = core.make_train_step(toy.mlp_loss, optimizer)
  core.fit(state, step, toy.batch_fn(data), num_steps=2, log_every=2, progress=False)
  first = step.multi_step
  core.fit(state, step, toy.batch_fn(data), num_steps=2, log_every=2, progress=False)
  assert step.multi_step is first


@pytest.mark.multidevice
def test_fit_places_params_by_the_sharding_rules():
  state, optimizer, data = toy.fresh_state()
  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data), num_steps=2,
                    log_every=2, mesh=core.make_mesh(num_model=2), sharding_rules=RULES, progress=False)
  assert result.state.params["Dense_0"]["kernel"].sharding.spec == P(None, "model")
  assert result.state.params["Dense_1"]["kernel"].sharding.spec == P()


@pytest.mark.multidevice
def test_a_state_a_hook_returns_is_placed_by_the_sharding_rules():
  # The hook runs after the last step, so the state it returns is the result.
  state, optimizer, data = toy.fresh_state()
  state = state.replace(extra={"count": jnp.zeros(())})
  bump = core.Hook(2, lambda step, st: st.replace(extra={"count": st.extra["count"] + 1}))
  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data), num_steps=2,
                    log_every=2, mesh=core.make_mesh(num_model=2), sharding_rules=RULES, hooks=[bump],
                    progress=False)
  assert float(result.state.extra["count"]) == 1.0
  assert result.state.params["Dense_0"]["kernel"].sharding.spec == P(None, "model")


@pytest.mark.multidevice
def test_the_best_record_is_placed_by_the_sharding_rules():
  # A model that needs its kernels split needs its best copy split too, or the copy alone can outgrow a device.
  state, optimizer, data = toy.fresh_state()
  eval_step = core.step.make_eval_step(lambda p, b: toy.mlp_loss(p, b, None)[1])
  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data), num_steps=2,
                    log_every=2, eval_step=eval_step, eval_batches=lambda: [data], eval_every=2,
                    select=core.Selection("mae", "min"), mesh=core.make_mesh(num_model=2), sharding_rules=RULES,
                    progress=False)
  assert int(result.state.best.step) == 2
  assert result.state.best.params["Dense_0"]["kernel"].sharding.spec == P(None, "model")


def test_a_cadence_that_steps_per_dispatch_does_not_divide_is_still_kept():
  # Dispatches of 4 steps with logging every 6: the dispatch before step 6 is cut short to land on it.
  state, optimizer, data = toy.fresh_state()
  writer = _Rows()
  core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data), num_steps=12, log_every=6,
           steps_per_dispatch=4, writer=writer, progress=False)
  assert [s for s, keys in writer.rows if "train/loss" in keys] == [6, 12]


def test_selection_logs_the_checked_value_and_the_best_so_far():
  state, optimizer, data = toy.fresh_state()
  eval_step = core.step.make_eval_step(lambda p, b: toy.mlp_loss(p, b, None)[1])
  writer = _Values()
  result = core.fit(state, core.make_train_step(toy.mlp_loss, optimizer), toy.batch_fn(data), num_steps=4,
                    log_every=2, eval_step=eval_step, eval_batches=lambda: [data], eval_every=2,
                    select=core.Selection("mae", "min"), writer=writer, progress=False)
  checks = [v for v in writer.values if "select/mae" in v]
  evals = [v["eval/mae"] for v in writer.values if "eval/mae" in v]
  assert [c["select/mae"] for c in checks] == pytest.approx(evals)
  assert checks[-1]["select/best"] == pytest.approx(min(evals))
  assert checks[-1]["select/best"] == pytest.approx(float(result.state.best.metric))
