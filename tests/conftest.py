import os

# two host devices, so that chain_method="parallel" really runs in parallel
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import gc

import pytest

import jax

# XLA's CPU backend maps memory for every program it compiles, and JAX's caches keep the
# programs of earlier tests alive: a worker that runs a few hundred tests passes the
# kernel's limit on memory mappings (vm.max_map_count, 65530 by default) and LLVM crashes
# in a later compilation (seen as a segfault in `backend_compile_and_load`, twice, late in
# the suite). Between tests, the caches are dropped once the mappings pass this many.
MAX_MEMORY_MAPPINGS = 30_000


def _memory_mappings() -> int:
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux
        return 0


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    yield
    if _memory_mappings() > MAX_MEMORY_MAPPINGS:
        jax.effects_barrier()
        jax.clear_caches()
        gc.collect()


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
