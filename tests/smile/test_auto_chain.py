"""`chains.auto_chain_kernel`: `smile.psmile` (automatic L) with ε₀ per chain from the runner's hypers."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.smile import auto_l, chains


def _logdensity(theta, minibatch):
  x, y = minibatch
  return -0.5 * jnp.sum(theta ** 2) - 0.5 * jnp.sum((y - x @ theta) ** 2)


def test_the_adapter_steps_each_chain_as_psmile_built_with_its_own_step_size():
  make = lambda eps: auto_l.psmile(_logdensity, step_size=eps, num_steps=20)
  adapter = chains.auto_chain_kernel(make)
  x = jax.random.normal(jax.random.key(0), (8, 3))
  batch = (x, x @ jnp.array([1.0, -1.0, 0.5]))
  theta = jnp.array([0.3, -0.2, 0.1])
  for eps in (1e-2, 3e-1):
    direct = make(jnp.float32(eps))
    state_a = adapter.init(theta, batch, jax.random.key(1), {"step_size": eps})
    state_d = direct.init(theta, batch, jax.random.key(1))
    np.testing.assert_allclose(state_a.initial_step_size, eps, rtol=1e-6)
    for t in range(3):
      state_a, info = adapter.step(jax.random.key(2 + t), state_a, batch, t)
      state_d, _ = direct.step(jax.random.key(2 + t), state_d, batch)
    jax.tree.map(lambda a, d: np.testing.assert_allclose(a, d, rtol=1e-6), state_a, state_d)
    assert float(info["step_size"]) == float(state_d.smile.step_size)
  assert adapter.grads_per_step == 2
