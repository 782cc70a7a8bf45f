"""Data: numpy in, numpy out; never imports jax, models or methods. One module per dataset family or data utility,
exported as modules (`from jaxml.data import toys; toys.toy2d(...)`) since names such as `load` repeat."""

from jaxml.data import (countdots, csbm, graph_shift, hh_cues, offline, ordinal_noise, spurious_prefs,
                        synthetic, text, tfds, toys, unlearning_splits, verify)

__all__ = ["countdots", "csbm", "graph_shift", "hh_cues", "offline", "ordinal_noise", "spurious_prefs",
           "synthetic", "text", "tfds", "toys", "unlearning_splits", "verify"]
