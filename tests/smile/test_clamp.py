"""The preconditioner's r clamp as a per-chain flag: `psmile_clamp` (pSMILE-naive, r clamped to [0.1, 10]) runs in
the family compile (per-chain flags) beside the unclamped variants and really clamps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.smile import adaptation as adapt
from jaxml.smile import kernel, pipeline

NOISE = jnp.array([0.03, 1.0, 1.0, 3.0])         # per-coordinate gradient-noise scale: r_0 ≈ 0.02 < 0.1


def _logd(theta, mb):
  """Isotropic Gaussian whose minibatch gradient noise is anisotropic (mb: [4] standard normal)."""
  return -0.5 * jnp.sum(theta ** 2) + jnp.sum(theta * mb * NOISE)


def test_precond_inverse_mass_clamps_only_when_asked():
  cfg = adapt.PrecondConfig()
  # r = q / rms(q) <= √d: d = 400 coordinates, one very noisy (r ≈ 20) and one nearly noise-free (r ≈ 0.002).
  var = jnp.concatenate([jnp.array([1e-6, 1e4]), jnp.ones(398)])
  st = adapt.PrecondState(grad_mean=jnp.zeros(400), grad_var=var)
  free, clamped = adapt.precond_inverse_mass(st, cfg, False), adapt.precond_inverse_mass(st, cfg, True)
  r_free, r_clamped = 1 / np.sqrt(np.asarray(free)), 1 / np.sqrt(np.asarray(clamped))
  assert r_free.min() < cfg.r_min and r_free.max() > cfg.r_max        # the target is outside the clamp
  np.testing.assert_allclose(r_clamped, np.clip(r_free, cfg.r_min, cfg.r_max), rtol=1e-6)
  # The traced per-chain flag (what the kernel reads) gives the same as the static one.
  traced = jax.jit(jax.vmap(lambda c: adapt.precond_inverse_mass(st, cfg, c)))(jnp.array([False, True]))
  np.testing.assert_array_equal(np.asarray(traced), np.stack([free, clamped]))


@pytest.mark.slow
@pytest.mark.parametrize("clamp", [False, True])
def test_family_clamp_flag_equals_psmile_naive_with_that_clamp(clamp):
  eps0 = 0.2
  ref = kernel.psmile(_logd, step_size=eps0, tuner=adapt.fixed_tuner(), clamp=clamp)
  family_tuner = adapt.per_chain_tuner(adapt.ref_tuner(), adapt.fixed_tuner())
  fam = kernel.psmile(_logd, step_size=eps0, tuner=family_tuner, clamp=not clamp)   # the flag, not the default, must act
  noise = jax.random.normal(jax.random.key(7), (60, 4))
  x0 = jnp.array([1.0, -0.5, 0.2, 0.1])
  learnt = adapt.PrecondState(grad_mean=jnp.zeros(4), grad_var=NOISE ** 2)   # start from the noise it would learn
  s_ref = ref.init(x0, noise[0], jax.random.key(1))._replace(precond=learnt)
  s_fam = fam.init(x0, noise[0], jax.random.key(1))
  s_fam = s_fam._replace(tuner=s_fam.tuner._replace(on=jnp.array(False)), clamp=jnp.array(clamp), precond=learnt)
  other = s_fam._replace(clamp=jnp.array(not clamp))
  step_ref, step_fam = jax.jit(ref.step), jax.jit(fam.step)
  for i in range(1, 60):
    key = jax.random.key(100 + i)
    s_ref, _ = step_ref(key, s_ref, noise[i])
    s_fam, _ = step_fam(key, s_fam, noise[i])
    other, _ = step_fam(key, other, noise[i])
    np.testing.assert_allclose(s_fam.position, s_ref.position, rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
  r0 = 1 / np.sqrt(np.asarray(adapt.precond_inverse_mass(learnt, adapt.PrecondConfig(), False)))
  assert r0.min() < 0.1                            # the clamp cuts the starting preconditioner
  assert float(jnp.max(jnp.abs(other.position - s_fam.position))) > 1e-3     # so the flag changes the chain


def test_family_hypers_clamp_only_psmile_clamp_when_precond_clamp_is_off():
  combos = [("psmile_naive", 1e-2), ("psmile_clamp", 1e-2), ("smile_naive", 1e-3)]
  h = pipeline.family_hypers({"precond_clamp": False}, combos, 2)
  np.testing.assert_array_equal(h["clamp"], [False, False, True, True, False, False])
  np.testing.assert_array_equal(h["precondition"], [True] * 4 + [False] * 2)
  np.testing.assert_array_equal(h["tuned"], [False] * 6)
  np.testing.assert_array_equal(pipeline.family_hypers({"precond_clamp": True}, combos, 2)["clamp"], [True] * 6)


def test_group_hypers_give_each_chain_its_combos_step_size():
  """Non-family groups get ε₀ alone, combo-major; ε₀ that differ by 1e-6 stay distinct in float32, so such combos
  (one pooled tuned method under several chain keys) keep their own tuner pools."""
  combos = [("psmile_vt", 1e-3), ("psmile_vt", 1.000001e-3)]
  h = pipeline.group_hypers({}, "psmile_vt", combos, 3)
  assert set(h) == {"step_size"}
  np.testing.assert_array_equal(h["step_size"], np.float32([1e-3] * 3 + [1.000001e-3] * 3))
  assert len(set(np.asarray(h["step_size"]).tolist())) == 2
  family = [("psmile_naive", 1e-2), ("smile_naive", 1e-3)]
  for k, v in pipeline.family_hypers({"precond_clamp": False}, family, 2).items():
    np.testing.assert_array_equal(pipeline.group_hypers({"precond_clamp": False}, "smile_family", family, 2)[k], v)


def test_psmile_clamp_with_precond_clamp_on_is_refused():
  cfg = {"protocol": "standard", "methods": ("psmile_naive", "psmile_clamp"), "precond_clamp": True}
  with pytest.raises(ValueError, match="precond_clamp=False"):
    pipeline.make_samplers(cfg, data_size=100, budget_epochs=1)
