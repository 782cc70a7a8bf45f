"""The selection record keeps its structure across updates: the best step stays int32 (the dtype `init_selection`
gives it), so the train state, its checkpoints and the compiled step see the same tree."""

import jax.numpy as jnp
import numpy as np

from jaxml.core import select as sel


def test_selection_record_step_stays_int32_with_the_best_step():
  s = sel.Selection("acc", mode="max")
  params = {"w": jnp.zeros(2)}
  record = sel.init_selection(s, params, ())
  for step, value, best in ((10, 0.5, 10), (20, 0.4, 10), (30, 0.9, 30)):
    record, _ = sel.selection_update(s, record, {"w": jnp.full(2, float(step))}, np.float32(value), step)
    assert record.step.dtype == jnp.int32 and int(record.step) == best
  np.testing.assert_array_equal(record.params["w"], [30.0, 30.0])
