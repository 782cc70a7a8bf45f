"""Data: numpy in, numpy out. Never imports jax, models or methods.

Each module is one family of datasets or one data utility; they are exported as modules
(`from jaxml.data import toys; toys.toy2d(...)`), since names such as `load` repeat across them.
"""

from jaxml.data import (countdots, csbm, graph_shift, hh_cues, offline, ordinal_noise, spurious_prefs,
                        synthetic, text, tfds, toys, unlearning_splits, verify)

__all__ = ["countdots", "csbm", "graph_shift", "hh_cues", "offline", "ordinal_noise", "spurious_prefs",
           "synthetic", "text", "tfds", "toys", "unlearning_splits", "verify"]
