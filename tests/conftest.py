import os

# two host devices, so that chain_method="parallel" really runs in parallel
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import pytest

import jax


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats (exact transition-matrix checks need them)."""
    with jax.enable_x64(True):
        yield
