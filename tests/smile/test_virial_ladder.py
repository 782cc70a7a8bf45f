"""The `virial_ladder` step-size rule: a pilot ladder of ε, each rung judged by the median of T̂ against 1.1."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.smile import adaptation as adapt
from jaxml.smile import chains, checks, kernel
from tests.smile import analytic


def _choice(cools, rungs, keys=None, **cfg):
  """ladder_choice of every chain, vmapped with CHAIN_AXIS as the chain runner does."""
  cfg = adapt.TunerConfig(tuner="virial_ladder", adapt_steps=10, **cfg)
  keys = jnp.zeros((len(cools), 1)) if keys is None else jnp.asarray(keys, jnp.float32)
  fn = jax.vmap(lambda c, r, k: adapt.ladder_choice(c, r, k, cfg), axis_name=adapt.CHAIN_AXIS)
  return np.asarray(fn(jnp.asarray(cools, jnp.float32), jnp.asarray(rungs), keys))


def test_choice_is_the_top_of_the_unbroken_run_of_rungs_that_are_not_hot():
  rungs = [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
  assert set(_choice([.8, .7, .6, .2, 0, .8, .7, .5, .3, 0], rungs)) == {2}   # rung 2: mean .55 >= .5
  assert set(_choice([.8, .7, .6, .2, 0, .8, .7, .3, .3, 0], rungs)) == {1}   # rung 2: mean .45, hot
  assert set(_choice([.8, .2, .9, .9, .9] * 2, rungs)) == {0}                # a hot rung stops the run
  assert set(_choice([.1] * 10, rungs)) == {-1}                              # rung 0 hot: one below the ladder
  assert set(_choice([.9] * 10, rungs)) == {4}
  assert set(_choice([.9] * 3, [0, 1, 2])) == {2}                            # rungs 3-4 empty: count as hot
  # two pools (different ε₀): each chooses from its own chains
  np.testing.assert_array_equal(_choice([.9, .9, .1, .1], [0, 1, 0, 1], keys=[[1.], [1.], [2.], [2.]], ladder_rungs=2),
                                [1, 1, -1, -1])


def test_rungs_span_the_initial_step_size_symmetrically():
  cfg = adapt.TunerConfig(ladder_rungs=5, ladder_ratio=2.0)
  np.testing.assert_allclose([adapt.ladder_step_size(1.0, r, cfg) for r in range(-1, 5)],
                             [0.125, 0.25, 0.5, 1.0, 2.0, 4.0])
  rank = jax.vmap(lambda k: adapt.ladder_rung(k, cfg), axis_name=adapt.CHAIN_AXIS)
  np.testing.assert_array_equal(rank(jnp.asarray([[1.], [2.], [1.], [1.], [2.]])), [0, 0, 1, 2, 1])


def test_needs_the_warmup_length():
  check = checks.anisotropic_gaussian(dim=4)
  with pytest.raises(ValueError, match="adapt_steps"):
    kernel.psmile(check.logdensity_fn, step_size=0.1, tuner="virial_ladder")


def test_gaussian_pilot_chooses_the_heating_edge_and_restarts_the_hot_rungs():
  """Anisotropic Gaussian (d = 50, full batch, L = √d σ_rms): T̂ stays ≈ 1 up to ε ≈ 0.5–0.7 √d σ_rms and runs hot
  beyond (the `virial` test). 10 chains on 5 rungs (2 each) from ε₀ = 0.5 and 2 × √d σ_rms choose the same ε*, the
  largest rung below the edge; the chains above it resume from their starts at the end of the pilot (counted as
  resets); then every chain runs at ε*, with 2 gradients per step. (The 8 √d σ_rms rung diverges and halves its ε.)"""
  check = checks.anisotropic_gaussian(dim=50)
  scale = float(np.sqrt(np.mean(check.ref_std ** 2))) * math.sqrt(50)
  starts = jnp.asarray(check.ref_mean, jnp.float32) + 0.5 * jnp.asarray(check.ref_std, jnp.float32) * \
      jax.random.normal(jax.random.key(0), (10, 50))
  steps, pilot = 4000, 1600
  chosen = []
  for eps0 in (0.5 * scale, 2.0 * scale):
    sampler = kernel.psmile(check.logdensity_fn, step_size=eps0, precondition=False, L=scale, tuner="virial_ladder",
                            adapt_steps=steps, eps_max=1e3)
    assert chains.smile_chain_kernel(sampler).grads_per_step == 2
    eps, reset, pos = analytic.trace_chains(sampler, check, starts, steps + 1,
                                            record=lambda st, info, start: (info.step_size, info.reset, st.position))
    rung_eps = eps0 * 2.0 ** (np.arange(10) % 5 - 2)
    np.testing.assert_allclose(eps[:, 0], rung_eps, rtol=1e-6)                    # dealt round-robin
    held = eps[:, pilot - 2]                     # held over the pilot, unless a non-finite step halved it
    assert np.all(held <= rung_eps * (1 + 1e-6)) and np.all(held[rung_eps < scale] == eps[rung_eps < scale, 0])
    after = eps[:, pilot - 1:]
    assert np.all(after == after[0, 0]), np.unique(after)                         # one ε* from the pilot's end on
    restarted = rung_eps > after[0, 0] * 1.0001
    np.testing.assert_array_equal(reset.sum(1), restarted.astype(int))
    for c in range(10):
      assert np.allclose(pos[c, pilot - 1], starts[c]) == restarted[c]
    chosen.append(float(after[0, 0]))
  assert chosen[0] == pytest.approx(chosen[1]) and 0.25 * scale < chosen[0] < 1.0 * scale, np.array(chosen) / scale
