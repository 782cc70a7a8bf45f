"""Gamma-quantile tuner and gradient-noise preconditioner as pure functions."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from jaxml.smile import adaptation as adapt


def test_gamma_quantile_matches_scipy():
  for shape, scale in [(2.0, 1.5), (10.0, 0.3), (50.0, 2.0)]:
    mean, std = shape * scale, np.sqrt(shape) * scale
    for p in (0.03, 0.5, 0.93, 0.98):
      got = float(adapt.gamma_quantile(jnp.float32(mean), jnp.float32(std), p))
      want = stats.gamma.ppf(p, shape, scale=scale)
      np.testing.assert_allclose(got, want, rtol=0.03 if shape >= 10 else 0.06)


def test_thresholds_ordered():
  st = adapt.TunerState(jnp.float32(3.0), jnp.float32(1.0), jnp.int32(50))
  q_reset, q_hi, q_lo = adapt.tuner_thresholds(st, adapt.RefConfig())
  assert float(q_lo) < float(q_hi) < float(q_reset)


def test_tuner_statistics_converge_to_moments():
  cfg = adapt.RefConfig(beta=0.01)
  draws = np.random.default_rng(0).gamma(4.0, 0.5, size=5000).astype(np.float32)
  st = jax.lax.scan(lambda s, a: (adapt.tuner_update(s, a, cfg), None), adapt.tuner_init(), jnp.asarray(draws))[0]
  assert int(st.t) == 5001
  np.testing.assert_allclose(float(st.mean), 2.0, rtol=0.15)
  np.testing.assert_allclose(float(st.std), 1.0, rtol=0.25)
  # The first statistic is the first draw itself.
  first = adapt.tuner_update(adapt.tuner_init(), jnp.float32(7.0), cfg)
  np.testing.assert_allclose(float(first.mean), 7.0)
  np.testing.assert_allclose(float(first.std), 1e-6, atol=1e-6)


def test_step_size_rule():
  cfg = adapt.RefConfig()
  st = adapt.TunerState(jnp.float32(1.0), jnp.float32(0.3), jnp.int32(20))
  eps, eps0, no = jnp.float32(1e-2), jnp.float32(1e-2), jnp.bool_(False)
  np.testing.assert_allclose(adapt.adapt_step_size(eps, 10.0, st, cfg, eps0, no), 1e-2 * 0.98, rtol=1e-6)
  np.testing.assert_allclose(adapt.adapt_step_size(eps, 1e-3, st, cfg, eps0, no), 1e-2 * 1.02, rtol=1e-6)
  np.testing.assert_allclose(adapt.adapt_step_size(eps, 1.0, st, cfg, eps0, no), 1e-2, rtol=1e-6)
  frozen = st._replace(t=jnp.int32(5))
  np.testing.assert_allclose(adapt.adapt_step_size(eps, 10.0, frozen, cfg, eps0, no), 1e-2, rtol=1e-6)
  np.testing.assert_allclose(adapt.adapt_step_size(eps, 1.0, st, cfg, eps0, jnp.bool_(True)), 5e-3, rtol=1e-6)
  floor = adapt.adapt_step_size(jnp.float32(1e-4), 10.0, st, cfg, eps0, jnp.bool_(True))
  np.testing.assert_allclose(floor, 1e-4, rtol=1e-6)   # ε₀/100 floor


def test_preconditioner_whitens_noise():
  cfg = adapt.PrecondConfig()
  sd = jnp.array([0.5, 1.0, 2.0, 4.0])
  g = 3.0 + sd * jax.random.normal(jax.random.key(0), (4000, 4))
  st = jax.lax.scan(lambda s, x: (adapt.precond_update(s, x, cfg), None), adapt.precond_init(4), g)[0]
  imm = adapt.precond_inverse_mass(st, cfg)
  c = jnp.sqrt(imm)
  # c ⊙ noise is isotropic: c_j sd_j equal across coordinates; r has unit rms.
  ratio = np.asarray(c * sd)
  np.testing.assert_allclose(ratio / ratio.mean(), 1.0, rtol=0.2)
  np.testing.assert_allclose(np.sqrt(np.mean(1.0 / np.asarray(imm))), 1.0, rtol=1e-5)


def test_preconditioner_is_bounded():
  cfg = adapt.PrecondConfig()
  st = adapt.PrecondState(jnp.zeros(5), jnp.array([1e-12, 1.0, 1.0, 1.0, 1e12]))
  imm = np.asarray(adapt.precond_inverse_mass(st, cfg))
  assert np.all(np.isfinite(imm))
  assert imm.min() >= 1 / 100.0 - 1e-6 and imm.max() <= 100.0 + 1e-3
