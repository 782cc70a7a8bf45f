"""fit() properties against its documented cadences and placement: evaluation at every multiple of eval_every
(also between logging steps), one multi-step scan per train_step across fits, and parameters placed by the
sharding rules, also when a hook returns a new state."""

import jax.numpy as jnp
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
