"""Per-chain LPPD and the validation chain filter (the diagnostic behind `lppd_kept` / `chains_kept`)."""

import math

import numpy as np

from jaxml.smile import pipeline


def _normal_logpdf(y, mu, sigma):
  return -0.5 * math.log(2 * math.pi) - math.log(sigma) - 0.5 * ((y - mu) / sigma) ** 2


def test_per_chain_lppd_by_hand():
  # 2 chains x 2 samples x 2 points; chain 1's samples are far from the data.
  mu = np.array([[[0.0, 1.0], [0.2, 0.8]], [[5.0, -4.0], [6.0, -5.0]]])
  log_sigma = np.log(np.array([[[1.0, 1.0], [0.5, 0.5]], [[1.0, 1.0], [2.0, 2.0]]]))
  y = np.array([0.1, 0.9])
  want = []
  for c in range(2):
    pts = [math.log(0.5 * sum(math.exp(_normal_logpdf(y[i], mu[c, s, i], math.exp(log_sigma[c, s, i])))
                              for s in range(2))) for i in range(2)]
    want.append(sum(pts) / 2)
  np.testing.assert_allclose(pipeline.per_chain_lppd(mu, log_sigma, y), want, rtol=1e-12)


def test_chain_filter_drops_the_chain_that_left_the_data_on_validation_rows_only():
  rng = np.random.default_rng(0)
  y_valid = rng.standard_normal(40)
  offset = np.array([0.0, 0.01, -0.02, 3.0, 0.03])          # chain 3 predicts 3 sigma off

  def predict(positions, x):
    c = positions["c"].shape[0]
    mu = np.broadcast_to(y_valid[None, None, :] + offset[positions["c"]][:, None, None], (c, 4, len(y_valid)))
    assert x.shape[0] == len(y_valid)                        # only validation inputs are asked for
    return mu, np.log(np.full(mu.shape, 0.1))

  data = {"x_valid": np.zeros((40, 2)), "y_valid": y_valid, "x_test": np.zeros((7, 2)), "y_test": np.zeros(7)}
  keep = np.ones(4, bool)
  kept = pipeline.chain_filter(predict, {"c": np.arange(5)}, keep, data, nats=1.0)
  np.testing.assert_array_equal(kept, [True, True, True, False, True])
  kept_all = pipeline.chain_filter(predict, {"c": np.arange(5)}, keep, data, nats=1e4)   # a wide band keeps all
  assert kept_all.all()


def test_chain_filter_drops_a_non_finite_chain_and_keeps_the_rest():
  """One chain gone non-finite (a diverged ε₀): dropped, the others kept (a NaN median used to drop them all)."""
  y_valid = np.linspace(-1.0, 1.0, 20)

  def predict(positions, x):
    mu = np.broadcast_to(y_valid[None, None, :] + positions["c"][:, None, None], (3, 4, len(y_valid)))
    return mu, np.zeros(mu.shape)

  data = {"x_valid": np.zeros((20, 2)), "y_valid": y_valid}
  kept = pipeline.chain_filter(predict, {"c": np.array([0.0, np.nan, 0.1])}, np.ones(4, bool), data, nats=1.0)
  np.testing.assert_array_equal(kept, [True, False, True])
  every = pipeline.chain_filter(predict, {"c": np.full(3, np.nan)}, np.ones(4, bool), data, nats=1.0)
  assert every.all()         # all non-finite: nothing to choose between; the row's LPPD is non-finite anyway
