"""Test set-up: 8 simulated CPU devices and fast compiles, before anything imports jax."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests (and the experiments they launch as subprocesses) never touch the user's compilation cache.
os.environ.setdefault("JAXML_COMPILATION_CACHE", "0")

# Fast, unoptimised XLA compiles: the suite is compile-bound. In the environment too, so that the
# experiments the tests launch as subprocesses (the smoke runs of tests/test_configs.py, the launcher,
# workdir and causal_reward smoke tests) compile the same way.
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"

import jax  # noqa: E402  (must come after the flags)

jax.config.update("jax_disable_most_optimizations", True)
