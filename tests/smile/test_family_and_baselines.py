"""The family kernel the experiment runs (per-chain precondition flag and `per_chain_tuner`) equals `psmile` /
`smile` for each of its four variants step by step; SGLD, SGHMC and cyclical SGLD on a Gaussian with known moments."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.linalg import solve_discrete_lyapunov

from jaxml.smile import adaptation as adapt
from jaxml.smile import baselines, chains, kernel

DIM = 4
SCALES = jnp.array([0.3, 1.0, 3.0, 10.0])         # anisotropic, so the preconditioner matters


def _logd(theta, mb):
  """Gaussian N(0, diag SCALES^-1) whose gradient carries minibatch noise (mb: [DIM])."""
  return -0.5 * jnp.sum(SCALES * theta ** 2) + jnp.sum(theta * mb)


def _variant(state, precondition, tuned):
  return state._replace(precondition=jnp.asarray(precondition), tuner=state.tuner._replace(on=jnp.asarray(tuned)))


@pytest.mark.parametrize("precondition,tuned", [(False, False), (False, True), (True, False), (True, True)])
def test_smile_family_equals_the_named_variant_step_by_step(precondition, tuned):
  eps0 = 0.3
  tuner = adapt.ref_tuner(freeze_steps=3) if tuned else adapt.fixed_tuner()
  ref = kernel.psmile(_logd, step_size=eps0, precondition=precondition, tuner=tuner)
  fam = kernel.psmile(_logd, step_size=eps0, tuner=adapt.per_chain_tuner(adapt.ref_tuner(freeze_steps=3),
                                                                        adapt.fixed_tuner()))
  if not precondition:
    ref_smile = kernel.smile(_logd, step_size=eps0, tuner=tuner)
  noise = jax.random.normal(jax.random.key(7), (40, DIM))
  x0 = jnp.array([1.0, -0.5, 0.2, 0.1])
  s_ref = ref.init(x0, noise[0], jax.random.key(1))
  s_fam = _variant(fam.init(x0, noise[0], jax.random.key(1)), precondition, tuned)
  s_smile = ref_smile.init(x0, noise[0], jax.random.key(1)) if not precondition else None
  step_ref, step_fam = jax.jit(ref.step), jax.jit(fam.step)
  step_smile = jax.jit(ref_smile.step) if not precondition else None
  for i in range(1, 40):
    key = jax.random.key(100 + i)
    s_ref, info_ref = step_ref(key, s_ref, noise[i])
    s_fam, info_fam = step_fam(key, s_fam, noise[i])
    np.testing.assert_allclose(s_fam.position, s_ref.position, rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
    np.testing.assert_allclose(s_fam.step_size, s_ref.step_size, rtol=1e-6)
    np.testing.assert_allclose(s_fam.precond.mean if hasattr(s_fam.precond, "mean") else 0.0,
                               s_ref.precond.mean if hasattr(s_ref.precond, "mean") else 0.0, rtol=1e-5, atol=1e-7)
    assert bool(info_fam.reset) == bool(info_ref.reset)
    if step_smile is not None:
      s_smile, _ = step_smile(key, s_smile, noise[i])
      np.testing.assert_allclose(s_smile.position, s_ref.position, rtol=1e-6, atol=1e-7)
  # The four variants really differ on this target (otherwise the test would prove nothing).
  other = _variant(fam.init(x0, noise[0], jax.random.key(1)), not precondition, not tuned)
  for i in range(1, 40):
    other, _ = step_fam(jax.random.key(100 + i), other, noise[i])
  assert float(jnp.max(jnp.abs(other.position - s_fam.position))) > 1e-3


# --------------------------------------------------------------------------- SG-MCMC baselines
SIGMA2 = 2.0                                     # target N(0, SIGMA2 I)


def _gauss(theta, mb):
  return -0.5 * jnp.sum(theta ** 2) / SIGMA2 + 0.0 * jnp.sum(mb["x"])


def _run(kern, *, num_chains=256, warmup=300, samples=60, thin=5):
  data = {"x": jnp.zeros((8, 1)), "y": jnp.zeros((8,))}
  runner = chains.make_chain_runner(kern, num_chains=num_chains, data_size=8, batch_size=8, num_warmup=warmup,
                                    num_samples=samples, thin=thin)
  pos = jnp.full((num_chains, 2), 3.0)
  return runner(pos, data, jax.random.key(0))


def test_sgld_stationary_variance_is_the_discrete_ar1_value():
  eps = 0.4
  res = _run(baselines.sgld_kernel(_gauss, step_size=eps))
  # theta' = (1 - eps / s2) theta + sqrt(2 eps) z  ->  Var = 2 eps / (1 - (1 - eps / s2)^2).
  a = 1.0 - eps / SIGMA2
  expected = 2.0 * eps / (1.0 - a * a)
  draws = np.asarray(res.positions).reshape(-1)
  assert abs(draws.mean()) < 0.05
  assert draws.var() == pytest.approx(expected, rel=0.05)
  assert abs(expected - SIGMA2) > 0.1 * SIGMA2          # the discretisation bias is what is checked
  assert int(res.nonfinite.sum()) == 0


@pytest.mark.slow
def test_sghmc_stationary_variance_matches_the_lyapunov_solution():
  eps, m = 0.1, 0.1
  res = _run(baselines.sghmc_kernel(_gauss, step_size=eps, momentum_decay=m))
  # (theta, p)' = A (theta, p) + (0, sqrt(2 m) z),  A = [[1, eps], [-eps / s2, 1 - m]].
  a = np.array([[1.0, eps], [-eps / SIGMA2, 1.0 - m]])
  cov = solve_discrete_lyapunov(a, np.diag([0.0, 2.0 * m]))
  draws = np.asarray(res.positions).reshape(-1)
  assert abs(draws.mean()) < 0.1
  assert draws.var() == pytest.approx(cov[0, 0], rel=0.07)
  assert cov[0, 0] == pytest.approx(SIGMA2, rel=0.1)    # near the target for this small step
  p = np.asarray(res.states["momentum"]).reshape(-1)
  assert p.var() == pytest.approx(cov[1, 1], rel=0.2)


@pytest.mark.slow
def test_cyclical_sgld_keeps_only_sampling_stages_and_recovers_the_variance():
  total, cycles, explore = 2000, 2, 0.25
  kern = baselines.csgld_kernel(_gauss, step_size=0.5, total_steps=total, num_cycles=cycles, explore_frac=explore)
  res = _run(kern, warmup=0, samples=total // 10, thin=10)
  keep = np.asarray(res.keep)
  assert keep.mean() == pytest.approx(1.0 - explore, abs=0.02)
  period = total // cycles
  t_last = 10 * (np.arange(keep.size) + 1)
  np.testing.assert_array_equal(keep, ((t_last - 1) % period) / period >= explore)
  draws = np.asarray(res.positions)[:, keep].reshape(-1)
  assert abs(draws.mean()) < 0.1
  assert 0.75 * SIGMA2 < draws.var() < 1.1 * SIGMA2
  # The exploration stage is noise-free: the chains contract towards the mode there.
  first_explore = np.asarray(res.positions)[:, ~keep][:, 5:keep.size // cycles]
  assert np.abs(first_explore).mean() < 0.2 * math.sqrt(SIGMA2)
  # The final step size is the cosine schedule's value at the last step.
  r = ((total - 1) % period) / period
  np.testing.assert_allclose(res.step_size, 0.5 * 0.5 * (math.cos(math.pi * r) + 1.0), rtol=0, atol=1e-8)
