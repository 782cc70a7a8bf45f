"""jaxml: functional JAX research code for six ICML 2026 methods on one training loop."""

__version__ = "0.1.0"
