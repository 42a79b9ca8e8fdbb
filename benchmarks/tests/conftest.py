import pytest

import jax


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats (exact transition-matrix checks need them)."""
    with jax.enable_x64(True):
        yield
