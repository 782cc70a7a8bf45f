"""Causal reward models: factored causal / non-causal representation with gradient reversal."""

__all__: list[str] = []
