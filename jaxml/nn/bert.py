"""A Flax Linen BERT encoder with sentence-transformers mean pooling (all-MiniLM-L6-v2 shape).

    x_0 = LN(E_word[ids] + E_pos[0..T) + E_type[0])
    x_{k+1} = LN(y + FFN(y)),  y = LN(x_k + MHA(x_k, mask)),  FFN = W_2 GELU(W_1 .)   (post-LN BERT)
    e = normalise( sum_t m_t x_L[t] / sum_t m_t )                                       (mean pooling + L2)

GELU is the exact (erf) form, as in HF `hidden_act="gelu"`. Defaults: 6 layers, hidden 384, 12 heads, FFN 1536,
LayerNorm eps 1e-12, 512 positions, 2 token types, vocab 30522."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
from einops import rearrange

__all__ = ["BertEncoder", "SentenceEncoder", "mean_pool"]


class _SelfAttention(nn.Module):
  hidden: int
  heads: int

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
    split = lambda y: rearrange(y, "b t (h d) -> b t h d", h=self.heads)  # noqa: E731
    q, k, v = (split(nn.Dense(self.hidden, name=n)(x)) for n in ("query", "key", "value"))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.asarray(self.hidden // self.heads, x.dtype))
    # Additive mask on padded keys; the large finite value keeps all-padding rows finite.
    logits = logits + jnp.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(x.dtype)
    attn = jax.nn.softmax(logits, axis=-1)
    return rearrange(jnp.einsum("bhqk,bkhd->bqhd", attn, v), "b q h d -> b q (h d)")


class _Layer(nn.Module):
  hidden: int
  heads: int
  intermediate: int
  eps: float

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
    a = _SelfAttention(self.hidden, self.heads, name="attention")(x, mask)
    x = nn.LayerNorm(epsilon=self.eps, name="attention_ln")(x + nn.Dense(self.hidden, name="attention_out")(a))
    f = nn.Dense(self.hidden, name="output")(nn.gelu(nn.Dense(self.intermediate, name="intermediate")(x),
                                                      approximate=False))
    return nn.LayerNorm(epsilon=self.eps, name="output_ln")(x + f)


class BertEncoder(nn.Module):
  """Token ids [B, T] int32 and attention mask [B, T] -> hidden states [B, T, hidden]."""

  vocab_size: int = 30522
  hidden: int = 384
  layers: int = 6
  heads: int = 12
  intermediate: int = 1536
  max_positions: int = 512
  type_vocab: int = 2
  eps: float = 1e-12

  @nn.compact
  def __call__(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
    x = nn.Embed(self.vocab_size, self.hidden, name="word_embeddings")(ids)
    x = x + nn.Embed(self.max_positions, self.hidden, name="position_embeddings")(jnp.arange(ids.shape[1]))[None]
    x = x + nn.Embed(self.type_vocab, self.hidden, name="token_type_embeddings")(jnp.zeros_like(ids))
    x = nn.LayerNorm(epsilon=self.eps, name="embeddings_ln")(x)
    for i in range(self.layers):
      x = _Layer(self.hidden, self.heads, self.intermediate, self.eps, name=f"layer_{i}")(x, mask)
    return x


def mean_pool(hidden: jax.Array, mask: jax.Array, *, normalize: bool = True) -> jax.Array:
  """Mask-aware mean over tokens ([B, T, H], [B, T] -> [B, H]), then L2 normalisation."""
  m = mask.astype(hidden.dtype)[..., None]
  pooled = jnp.sum(hidden * m, axis=1) / jnp.clip(jnp.sum(m, axis=1), 1e-9)
  if normalize:
    pooled = pooled / jnp.clip(jnp.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
  return pooled


class SentenceEncoder(BertEncoder):
  """BERT + mean pooling + L2 norm: (ids [B, T], mask [B, T]) -> unit embeddings [B, hidden]; `BertEncoder`'s
  hyper-parameters (inherited fields), the encoder in scope "bert"."""

  @nn.compact
  def __call__(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
    fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(BertEncoder)
              if f.init and f.name not in ("parent", "name")}
    h = BertEncoder(**fields, name="bert")(ids, mask)
    return mean_pool(h, mask)
