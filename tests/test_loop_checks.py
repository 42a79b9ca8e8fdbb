"""``enable_loop_checks(False)`` leaves the kernels' in-run checks out of the compiled step:
no host callback is left in it (so that JAX's persistent compilation cache stores and
reloads numpyro's sampling loop, checked in a fresh process), the draws are the same, and
the checks' warnings are gone; with the checks on (the default), every step holds them."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_collapsed import COUNTS, count_model
from test_stuck_coordinates import run, trap_model

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import NUTS

from numpyro_discrete import (
    ACS,
    ALBP,
    BlockGibbs,
    ChromaticGibbs,
    LBPGibbs,
    enable_loop_checks,
    loop_checks_enabled,
)


@pytest.fixture
def restore_loop_checks():
    yield
    enable_loop_checks(True)


def chain_model(coupling=0.4):
    x = numpyro.sample("x", dist.Categorical(jnp.ones(3) / 3).expand([6]))
    numpyro.factor("coupling", coupling * (x[1:] == x[:-1]))


def mixed_model(y):
    loc = numpyro.sample("loc", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Bernoulli(0.5))
        numpyro.sample("y", dist.Normal(loc * (2 * z - 1), 1.0), obs=y)


Y = jnp.asarray([-1.2, 0.3, 2.1, 1.7, -0.4])

KERNELS = {
    "ALBP": (lambda: ALBP(trap_model), ()),
    "ACS": (lambda: ACS(trap_model), ()),
    "ChromaticGibbs": (lambda: ChromaticGibbs(trap_model), ()),
    "BlockGibbs": (lambda: BlockGibbs(chain_model), ()),
    "LBPGibbs": (lambda: LBPGibbs(NUTS(mixed_model)), (Y,)),
    # a Poisson count summed out to a truncated support: the truncation check too
    "CollapsedDraw": (lambda: LBPGibbs(NUTS(count_model)), (jnp.asarray(COUNTS),)),
}


def step_program(kernel, model_args):
    state = kernel.init(random.key(0), 100, None, model_args, {})
    return jax.jit(lambda s: kernel.sample(s, model_args, {})).lower(state).as_text()


@pytest.mark.parametrize("name", list(KERNELS))
def test_the_step_holds_host_callbacks_only_with_loop_checks(name, restore_loop_checks):
    make_kernel, model_args = KERNELS[name]
    assert loop_checks_enabled()
    assert "callback" in step_program(make_kernel(), model_args)
    enable_loop_checks(False)
    assert not loop_checks_enabled()
    assert "callback" not in step_program(make_kernel(), model_args)


@pytest.mark.parametrize(
    "chain_method",
    [
        "sequential",
        pytest.param("vectorized", marks=pytest.mark.slow),
        pytest.param("parallel", marks=pytest.mark.slow),
    ],
)
def test_without_loop_checks_the_draws_are_the_same_and_nothing_warns(
    chain_method, restore_loop_checks
):
    def draws():
        mcmc, stuck = run(ALBP(trap_model, weights="gradient"), chain_method, num_samples=300)
        return np.asarray(mcmc.get_samples(group_by_chain=True)["x"]), stuck

    checked, stuck = draws()
    assert len(stuck) == 1
    enable_loop_checks(False)
    unchecked, silent = draws()
    assert not silent
    np.testing.assert_array_equal(checked, unchecked)


PERSISTENT_CACHE_SCRIPT = """
import sys
import jax
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
from jax import monitoring, random
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC
import numpyro_discrete
from numpyro_discrete import ALBP

numpyro_discrete.enable_loop_checks(sys.argv[2] == "on")
events = []
monitoring.register_event_listener(lambda event, **kwargs: events.append(event))


def model():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([8]))
    numpyro.factor("coupling", 0.3 * jax.numpy.sum(x[1:] * x[:-1]))


mcmc = MCMC(ALBP(model), num_warmup=50, num_samples=50, progress_bar=False)
mcmc.run(random.key(0))
mcmc.post_warmup_state = mcmc.last_state
mcmc.run(mcmc.last_state.rng_key)  # a loop of another length: compiled
mcmc.post_warmup_state = mcmc.last_state
events.clear()
mcmc.run(mcmc.last_state.rng_key)  # the same loop again
print(events.count("/jax/compilation_cache/cache_hits"))
"""


@pytest.mark.parametrize("checks", ["off", pytest.param("on", marks=pytest.mark.slow)])
def test_the_persistent_cache_reloads_the_loop_only_without_checks(tmp_path, checks):
    """numpyro compiles its loop again at every ``run`` with the progress bar off; a run of
    the loop's length seen before loads it from JAX's persistent cache, unless the loop
    holds the checks' callbacks."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(PERSISTENT_CACHE_SCRIPT))
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "cache"), checks],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    cache_hits = int(result.stdout.split()[-1])
    loops = [p.name for p in (tmp_path / "cache").iterdir() if "fori_collect_loop" in p.name]
    if checks == "off":
        assert cache_hits >= 1 and loops
    else:
        assert not loops
