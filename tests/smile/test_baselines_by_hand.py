"""One step of each SG-MCMC baseline against its update formula (module doc of `smile/baselines.py`),
on a two-leaf position with a non-isotropic target; the Gaussian draw is blackjax's own for the key."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from blackjax.util import generate_gaussian_noise

from jaxml.smile import baselines

# numpy at import time (no XLA client before mutmut's fork server forks its workers); float32 like JAX.
_SCALE = {"a": np.array([0.5, 2.0, 1.5], np.float32), "b": np.array([[1.0, 0.3], [4.0, 0.8]], np.float32)}
_POS = {"a": np.array([0.3, -1.2, 2.0], np.float32), "b": np.array([[0.5, 1.5], [-0.7, 0.1]], np.float32)}
_MB = {"shift": np.float32(0.25)}


def _logdensity(theta, mb):
  """Σ −s (θ − shift)² / 2 over both leaves: gradient −s (θ − shift)."""
  return sum(jnp.sum(-0.5 * s * (x - mb["shift"]) ** 2) for x, s in zip(jax.tree.leaves(theta), jax.tree.leaves(_SCALE)))


def _grad(theta):
  return jax.tree.map(lambda x, s: -s * (x - _MB["shift"]), theta, _SCALE)


def _close(a, b):
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _check_state(kern, state, new):
  """The step returns the state's own structure (a lax.scan carry) and `position` reads the position."""
  assert jax.tree.structure(new) == jax.tree.structure(state)
  _close(kern.position(new), new["position"])


def _check_info(info, logdensity, eps, bad=False):
  np.testing.assert_allclose(info["logdensity"], logdensity, rtol=1e-6)
  assert info["reset"].dtype == jnp.bool_ and not bool(info["reset"]) and bool(info["nonfinite"]) == bad
  np.testing.assert_allclose(info["step_size"], eps, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("hyper", [{}, {"step_size": 0.05}])
def test_sgld_step_is_the_overdamped_euler_update(hyper):
  eps0, temperature = 0.1, 0.5
  kern = baselines.sgld_kernel(_logdensity, step_size=eps0, temperature=temperature)
  assert kern.grads_per_step == 1 and kern.keep is None
  state = kern.init(_POS, _MB, jax.random.key(9), hyper)
  eps = hyper.get("step_size", eps0)
  np.testing.assert_allclose(state["logdensity"], _logdensity(_POS, _MB), rtol=1e-6)
  np.testing.assert_allclose(state["step_size"], eps)
  key = jax.random.key(3)
  new, info = kern.step(key, state, _MB, jnp.asarray(7))
  noise = generate_gaussian_noise(key, _POS)
  want = jax.tree.map(lambda x, g, n: x + eps * g + math.sqrt(2 * temperature * eps) * n, _POS, _grad(_POS), noise)
  _close(kern.position(new), want)
  np.testing.assert_allclose(new["step_size"], eps)
  np.testing.assert_allclose(new["logdensity"], _logdensity(_POS, _MB), rtol=1e-6)   # ℓ at the step's start
  _check_state(kern, state, new)
  _check_info(info, _logdensity(_POS, _MB), eps)
  bad = dict(_POS, b=jnp.asarray(_POS["b"]).at[1, 0].set(jnp.inf))
  _, info = kern.step(key, dict(state, position=bad), _MB, jnp.asarray(7))
  assert bool(info["nonfinite"])


def test_sgld_default_temperature_is_one():
  kern = baselines.sgld_kernel(_logdensity, step_size=0.1)
  state = kern.init(_POS, _MB, jax.random.key(0), {})
  key = jax.random.key(4)
  new, _ = kern.step(key, state, _MB, jnp.asarray(1))
  noise = generate_gaussian_noise(key, _POS)
  _close(new["position"], jax.tree.map(lambda x, g, n: x + 0.1 * g + math.sqrt(0.2) * n, _POS, _grad(_POS), noise))


@pytest.mark.parametrize("t", [1, 3, 4, 9, 10, 11, 40])
def test_csgld_step_follows_the_cosine_schedule_and_drops_exploration(t):
  eps0, temperature, total, cycles, explore = 0.2, 0.7, 40, 4, 0.3    # period 10
  kern = baselines.csgld_kernel(_logdensity, step_size=eps0, total_steps=total, num_cycles=cycles,
                                explore_frac=explore, temperature=temperature)
  r = ((t - 1) % 10) / 10
  eps = 0.5 * eps0 * (math.cos(math.pi * r) + 1.0)
  temp = 0.0 if r < explore else temperature
  assert bool(kern.keep(jnp.asarray(t))) == (r >= explore)
  state = kern.init(_POS, _MB, jax.random.key(1), {})
  key = jax.random.key(t)
  new, info = kern.step(key, state, _MB, jnp.asarray(t))
  noise = generate_gaussian_noise(key, _POS)
  _close(new["position"], jax.tree.map(lambda x, g, n: x + eps * g + math.sqrt(2 * temp * eps) * n, _POS, _grad(_POS),
                                       noise))
  _check_info(info, _logdensity(_POS, _MB), eps)
  np.testing.assert_allclose(new["step_size"], eps0)     # the base step is carried, the schedule recomputed


def test_csgld_defaults_and_a_run_shorter_than_its_cycles():
  kern = baselines.csgld_kernel(_logdensity, step_size=0.2, total_steps=42)   # 4 cycles of 42 // 4 = 10, explore 0.33, T = 1
  keep = [bool(kern.keep(jnp.asarray(t))) for t in range(1, 11)]
  assert keep == [((t - 1) % 10) / 10 >= 0.33 for t in range(1, 11)]
  state = kern.init(_POS, _MB, jax.random.key(1), {})
  key = jax.random.key(2)
  new, info = kern.step(key, state, _MB, jnp.asarray(6))                     # r = 0.5: sampling stage
  eps = 0.1 * (math.cos(math.pi * 0.5) + 1.0)
  noise = generate_gaussian_noise(key, _POS)
  _close(new["position"], jax.tree.map(lambda x, g, n: x + eps * g + math.sqrt(2 * eps) * n, _POS, _grad(_POS), noise))
  short = baselines.csgld_kernel(_logdensity, step_size=0.2, total_steps=3, num_cycles=4, explore_frac=0.5)
  assert not any(bool(short.keep(jnp.asarray(t))) for t in range(1, 5))     # period 1: every step is phase 0
  _, info = short.step(key, short.init(_POS, _MB, key, {}), _MB, jnp.asarray(3))
  np.testing.assert_allclose(info["step_size"], 0.2, rtol=1e-6)


@pytest.mark.parametrize("hyper", [{}, {"step_size": 0.02}])
def test_sghmc_init_and_step_are_the_momentum_euler_update(hyper):
  eps0, decay, temperature = 0.1, 0.2, 0.6
  kern = baselines.sghmc_kernel(_logdensity, step_size=eps0, momentum_decay=decay, temperature=temperature)
  assert kern.grads_per_step == 1 and kern.keep is None
  init_key = jax.random.key(5)
  state = kern.init(_POS, _MB, init_key, hyper)
  eps = hyper.get("step_size", eps0)
  leaves, treedef = jax.tree.flatten(_POS)
  keys = jax.random.split(init_key, len(leaves))
  p0 = jax.tree.unflatten(treedef, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])
  _close(state["momentum"], p0)
  np.testing.assert_allclose(state["logdensity"], _logdensity(_POS, _MB), rtol=1e-6)
  np.testing.assert_allclose(state["step_size"], eps)
  key = jax.random.key(6)
  new, info = kern.step(key, state, _MB, jnp.asarray(2))
  noise = generate_gaussian_noise(key, _POS)
  _close(new["position"], jax.tree.map(lambda x, p: x + eps * p, _POS, p0))
  _close(new["momentum"], jax.tree.map(lambda p, g, n: (1 - decay) * p + eps * g + math.sqrt(2 * decay * temperature) * n,
                                       p0, _grad(_POS), noise))
  np.testing.assert_allclose(new["logdensity"], _logdensity(_POS, _MB), rtol=1e-6)
  np.testing.assert_allclose(new["step_size"], eps)
  _check_state(kern, state, new)
  _check_info(info, _logdensity(_POS, _MB), eps)
  bad = dict(_POS, a=jnp.asarray(_POS["a"]).at[0].set(jnp.nan))
  _, info = kern.step(key, dict(state, position=bad), _MB, jnp.asarray(2))
  assert bool(info["nonfinite"])


def test_sghmc_defaults():
  kern = baselines.sghmc_kernel(_logdensity, step_size=0.1)     # momentum decay 0.05, T = 1
  state = kern.init(_POS, _MB, jax.random.key(7), {})
  key = jax.random.key(8)
  new, _ = kern.step(key, state, _MB, jnp.asarray(1))
  noise = generate_gaussian_noise(key, _POS)
  _close(new["momentum"], jax.tree.map(lambda p, g, n: 0.95 * p + 0.1 * g + math.sqrt(0.1) * n, state["momentum"],
                                       _grad(_POS), noise))


def test_sghmc_initial_momentum_has_one_key_per_leaf():
  """Three leaves of different shapes: leaf i's momentum is normal(split(rng, 3)[i])."""
  pos = dict(_POS, c=np.array([[0.1], [0.2]], np.float32))
  logd = lambda theta, mb: -0.5 * sum(jnp.sum(x ** 2) for x in jax.tree.leaves(theta))
  kern = baselines.sghmc_kernel(logd, step_size=0.1)
  state = kern.init(pos, _MB, jax.random.key(12), {})
  leaves, treedef = jax.tree.flatten(pos)
  keys = jax.random.split(jax.random.key(12), 3)
  _close(state["momentum"], jax.tree.unflatten(treedef, [jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)]))
