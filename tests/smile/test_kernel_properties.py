"""pSMILE's per-chain switches: the flags passed to the sampler are the flags its state carries."""

import itertools

import jax
import jax.numpy as jnp

from jaxml.smile import kernel


def _logd(position, minibatch):
  return -0.5 * jnp.sum(position ** 2) + 0.0 * jnp.sum(minibatch)


def test_state_carries_the_requested_precondition_and_clamp_flags():
  # every combination, so a flag fixed to one value (or taken from the other flag) shows
  for precondition, clamp in itertools.product((False, True), repeat=2):
    sampler = kernel.psmile(_logd, step_size=0.1, precondition=precondition, clamp=clamp)
    st = sampler.init(jnp.ones(3), jnp.zeros(2), jax.random.key(0))
    assert (bool(st.precondition), bool(st.clamp)) == (precondition, clamp)
