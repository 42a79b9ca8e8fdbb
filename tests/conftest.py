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


# whether JAX's caches hold programs compiled with 64-bit floats (the `x64` fixture's)
_CACHED_X64 = [False]


def _cache_precision(x64: bool) -> None:
    """Clear JAX's caches where the next test runs at the other precision than the cached
    programs: a numpy array that a compiled program captured as a constant under one
    precision cannot be used by an eager operation under the other (jax 0.10:
    ``RuntimeProgramInputMismatch``, the cached device copy keeps the first precision).
    Programs capture the test models' module-level numpy arrays (the model's reading is one
    compiled program), and a process sets x64 once, tests do not. Between two tests at one
    precision, the caches are kept: clearing them at every 64-bit test compiled the same
    small programs again and again (a fifth of the suite's time was small programs)."""
    if _CACHED_X64[0] != x64:
        jax.clear_caches()
        _CACHED_X64[0] = x64


@pytest.fixture(autouse=True)
def _release_compiled_programs(request):
    if "x64" not in request.fixturenames:
        _cache_precision(False)
    yield
    if _memory_mappings() > MAX_MEMORY_MAPPINGS:
        jax.effects_barrier()
        jax.clear_caches()
        gc.collect()


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats (exact transition-matrix checks need them),
    with JAX's caches cleared where they hold 32-bit programs (:func:`_cache_precision`)."""
    _cache_precision(True)
    with jax.enable_x64(True):
        yield


# The fast tier is mostly XLA compiling small programs that run for milliseconds: there,
# LLVM's optimisation passes cost more than they save (measured: tests/test_kernels.py and
# test_kernels_exact.py, two workers, 86 s with them, 71 s without). The programs compute
# the same values; the slow tier, whose statistical runs are long, keeps them.
FAST_TIER_XLA_FLAGS = "--xla_backend_optimization_level=0"


_CONFIG: pytest.Config | None = None


def pytest_configure(config):
    global _CONFIG
    _CONFIG = config
    # before any computation: JAX reads XLA_FLAGS when it starts its CPU backend
    if config.option.markexpr == "not slow":
        flags = os.environ.get("XLA_FLAGS", "")
        if FAST_TIER_XLA_FLAGS not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} {FAST_TIER_XLA_FLAGS}".strip()


def pytest_collection_modifyitems(config, items):
    """The longest tests run last, the 500 random model-kernel pairs after the soak test:
    CI's slow tier stops at a time budget, so every shorter test gets its turn first. The
    64-bit tests run before the others, so that JAX's caches are cleared once at the change
    of precision rather than around each of them (:func:`_cache_precision`)."""
    items.sort(
        key=lambda item: (
            item.name == "test_many_random_model_kernel_pairs",
            item.path.name == "test_soak.py",
            "x64" not in item.fixturenames,
        )
    )


def pytest_runtest_logreport(report):
    """A failure is named when it happens, not only in the closing summary: CI's slow tier
    stops at a time budget, and a run stopped there prints no summary."""
    if not report.failed or _CONFIG is None or hasattr(_CONFIG, "workerinput"):
        return
    reporter = _CONFIG.pluginmanager.get_plugin("terminalreporter")
    crash = getattr(report.longrepr, "reprcrash", None)
    reason = crash.message.splitlines()[0] if crash is not None and crash.message else ""
    reporter.write("\n")  # off the line of progress characters
    reporter.write_line(f"FAILED {report.nodeid} ({report.when}): {reason}"[:400])
