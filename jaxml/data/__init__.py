"""Data: numpy in, numpy out. Never imports jax, models or methods."""
