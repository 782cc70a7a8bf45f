"""Test set-up: 8 simulated CPU devices and fast compiles, before anything imports jax."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests (and the experiments they launch as subprocesses) never touch the user's compilation cache.
os.environ.setdefault("JAXML_COMPILATION_CACHE", "0")

import jax  # noqa: E402  (must come after the flag)

jax.config.update("jax_disable_most_optimizations", True)
