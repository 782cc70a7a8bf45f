"""Decoder properties against independent computations: the pruned top-k against `jax.lax.top_k` where the
column blocks are few (n = 2k), and κ's fit on an evenly strided subset of the training rows."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.sol import decoders


def test_pruned_top_k_equals_lax_top_k_with_few_columns_per_block():
  # n = 2k: k blocks of 2 columns. Ascending values put the top k in the last blocks, so a bound taken over the
  # wrong axis (the smallest column maximum, here the second largest value) would mask true top-k entries.
  for k, n in ((3, 6), (4, 9), (5, 10)):
    ascending = jnp.arange(n, dtype=jnp.float32)[None, :]
    mixed = jnp.asarray(np.random.default_rng(k).permutation(n), jnp.float32)[None, :]
    for values in (ascending, mixed, -ascending):
      np.testing.assert_array_equal(np.asarray(decoders.top_k(values, k)), np.asarray(jax.lax.top_k(values, k)[1]))


def test_fit_kappa_uses_the_evenly_strided_subset_of_max_rows():
  rng = np.random.default_rng(0)
  dists = jnp.asarray(rng.uniform(0.0, 4.0, (6, 3)), jnp.float32)
  labels = jnp.asarray([0, 1, 2, 2, 0, 1], jnp.int32)
  logp = decoders.log_prior(labels, 3)
  # max_rows = 2 of 6 rows: stride ceil(6 / 2) = 3, rows 0 and 3
  sub = decoders.fit_kappa(dists, labels, logp, max_rows=2)
  by_hand = decoders.fit_kappa(dists[::3], labels[::3], logp)
  full = decoders.fit_kappa(dists, labels, logp)
  np.testing.assert_allclose(float(sub), float(by_hand), rtol=1e-6)
  assert abs(float(sub) - float(full)) > 1e-3 * abs(float(full))   # the subset's κ is not the full fit's
