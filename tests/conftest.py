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


def pytest_collection_modifyitems(config, items):
    """The longest tests run last, the 500 random model-kernel pairs after the soak test:
    CI's slow tier stops at a time budget, so every shorter test gets its turn first."""
    items.sort(
        key=lambda item: (
            item.name == "test_many_random_model_kernel_pairs",
            item.path.name == "test_soak.py",
        )
    )
