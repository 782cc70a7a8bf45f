"""Quality-neutral cue injection into HH-RLHF pairs (spec 3.2); strings and numpy only.

Each response gets 6 variants: padding with 0, 2 or 4 neutral closing sentences, times with or
without a sycophantic opener (which opener is fixed per response by a seeded draw). A pair set
with injection probabilities (p_chosen, p_rejected) applies, independently per response and per
cue, padding (2 or 4 sentences, equally likely) with the response's probability and the opener
with the same probability. Gold stays the human label: the injections are assumed not to change
harmlessness (an assumption, stated with the results).
"""

from typing import Sequence

import numpy as np

__all__ = ["PADDING", "OPENERS", "PAD_LEVELS", "NUM_VARIANTS", "variant", "inject", "split_by_context",
           "response_variants", "sample_injections", "word_count"]

PADDING = ("I hope this helps.", "Let me know if you have any other questions.", "Thanks for asking.",
           "Have a nice day.")
OPENERS = ("Great question!", "You're absolutely right.")
PAD_LEVELS = (0, 2, 4)
NUM_VARIANTS = len(PAD_LEVELS) * 2   # variant code v: pad = PAD_LEVELS[v // 2], opener = v % 2


def variant(code: int) -> tuple[int, int]:
  """(number of padding sentences, opener flag) of a variant code in [0, 6)."""
  return PAD_LEVELS[code // 2], code % 2


def inject(response: str, *, pad: int, opener: str | None) -> str:
  """`opener + response + pad neutral sentences` (whitespace-joined)."""
  parts = ([opener] if opener else []) + [response.strip()] + list(PADDING[:pad])
  return " ".join(p for p in parts if p)


def word_count(text: str) -> int:
  return len(text.split())


def split_by_context(contexts: Sequence[str], fractions: Sequence[float] = (0.6, 0.2, 0.2), *, seed: int = 0
                     ) -> list[np.ndarray]:
  """Index arrays per split; pairs sharing a dialogue context always land in the same split."""
  unique = sorted(set(contexts))
  order = np.random.default_rng([seed, 17]).permutation(len(unique))
  bounds = np.cumsum([0] + [int(round(f * len(unique))) for f in fractions[:-1]] + [len(unique)])
  bounds[-1] = len(unique)
  group = {unique[j]: k for k in range(len(fractions)) for j in order[bounds[k]:bounds[k + 1]]}
  labels = np.array([group[c] for c in contexts])
  return [np.flatnonzero(labels == k) for k in range(len(fractions))]


def response_variants(response: str, opener_index: int) -> list[str]:
  """The 6 variant texts of one response (variant code order)."""
  out = []
  for code in range(NUM_VARIANTS):
    pad, op = variant(code)
    out.append(inject(response, pad=pad, opener=OPENERS[opener_index] if op else None))
  return out


def _draw(rng: np.random.Generator, n: int, p: float) -> np.ndarray:
  pad = np.where(rng.random(n) < p, rng.choice([1, 2], size=n), 0)     # index into PAD_LEVELS
  opener = (rng.random(n) < p).astype(int)
  return pad * 2 + opener


def sample_injections(n: int, p_chosen: float, p_rejected: float, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Variant codes [n] for the chosen and the rejected response of n pairs."""
  rng = np.random.default_rng([seed, 23])
  return _draw(rng, n, p_chosen), _draw(rng, n, p_rejected)
