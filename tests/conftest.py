"""Test set-up: 8 simulated CPU devices and fast compiles, before anything imports jax."""

import os
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests (and the experiments they launch as subprocesses) never touch the user's compilation cache.
os.environ.setdefault("JAXML_COMPILATION_CACHE", "0")

# Fast, unoptimised XLA compiles: the suite is compile-bound. In the environment too, so that the
# experiments the tests launch as subprocesses (the smoke runs of tests/test_configs.py, the launcher,
# workdir and causal_reward smoke tests) compile the same way.
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"

# One persistent compilation cache per `pytest` run, shared by the xdist workers and the subprocesses they
# launch, in a fresh temporary folder (never the user's cache): the suite is compile-bound and many tests
# compile the same programs (the same model and step built again by another test). Removed when the run ends.
if "JAXML_TEST_JAX_CACHE" not in os.environ:          # the first process (pytest's controller) creates it
  os.environ["JAXML_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="jaxml-test-jax-cache-")
  os.environ["JAXML_TEST_JAX_CACHE_CREATOR"] = str(os.getpid())
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["JAXML_TEST_JAX_CACHE"]
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

import jax  # noqa: E402  (must come after the flags)

jax.config.update("jax_disable_most_optimizations", True)


def pytest_sessionfinish(exitstatus):
  """The process that created the run's compilation cache removes it (not its workers, subprocesses or
  forks: mutmut's forked workers inherit the folder and must not delete it under each other)."""
  del exitstatus
  if os.environ.get("JAXML_TEST_JAX_CACHE_CREATOR") == str(os.getpid()):
    shutil.rmtree(os.environ["JAXML_TEST_JAX_CACHE"], ignore_errors=True)
