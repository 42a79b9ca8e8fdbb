"""A sampler that cannot move a coordinate says so: the warning names the site and index
under every chain method, with and without a progress bar, and stays silent on samplers
that move every coordinate."""

import warnings

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ALBP, ChromaticGibbs, LBPGibbs
from numpyro_discrete.gallery import GALLERY
from numpyro_discrete.kernels.stuck_coordinates import is_check_step
from numpyro_discrete.model.layout import layout_from_params


def trap_model():
    """``x[3]``'s exact conditional is that of its neighbours' coupling, but the factor
    ``100 (x_3 - 1/2)^2`` (equal at 0 and 1) gives it a gradient ratio of -100 for either
    move, so gradient-ranked path moves never pick it: ALBP with gradient weights is stuck
    in it (exact, but not irreducible)."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([10]))
    s = 2.0 * x - 1.0
    numpyro.factor("coupling", 0.3 * s[1:] * s[:-1])
    numpyro.factor("trap", 100.0 * (x[3] - 0.5) ** 2)


def run(
    kernel,
    chain_method="sequential",
    progress_bar=False,
    num_samples=1100,
    num_chains=2,
    model_args=(),
    model_kwargs=None,
):
    mcmc = MCMC(
        kernel,
        num_warmup=500,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        progress_bar=progress_bar,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mcmc.run(random.key(0), *model_args, **(model_kwargs or {}))
        # parallel chains return before their callbacks ran
        jax.block_until_ready(mcmc.get_samples())
        jax.effects_barrier()
    stuck = [str(w.message) for w in caught if "never changed" in str(w.message)]
    return mcmc, stuck


@pytest.mark.parametrize(
    "chain_method, progress_bar",
    [
        ("sequential", False),
        pytest.param("vectorized", False, marks=pytest.mark.slow),
        pytest.param("parallel", False, marks=pytest.mark.slow),
        ("sequential", True),
    ],
)
def test_a_stuck_coordinate_is_named(chain_method, progress_bar):
    mcmc, stuck = run(ALBP(trap_model, weights="gradient"), chain_method, progress_bar)
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["x"])
    assert np.all(np.diff(draws[:, :, 3], axis=1) == 0)
    assert len(stuck) == 1, stuck
    assert "ALBP: coordinate x[3] never changed in 500 warmup steps" in stuck[0]
    assert "weights={'x': 'exact'}" in stuck[0]


def test_a_coordinate_stuck_during_sampling_is_named():
    """Without warmup the first check is after 1024 sampling steps."""
    mcmc = MCMC(ALBP(trap_model, weights="gradient"), num_warmup=0, num_samples=1100)
    mcmc.progress_bar = False
    with pytest.warns(RuntimeWarning, match=r"x\[3\] never changed in 1024 sampling steps"):
        mcmc.run(random.key(1))


@pytest.mark.parametrize(
    "kernel",
    [lambda: ChromaticGibbs(trap_model), lambda: ALBP(trap_model)],
    ids=["chromatic", "albp"],
)
def test_samplers_that_move_every_coordinate_are_silent(kernel):
    _, stuck = run(kernel(), num_samples=2100)
    assert not stuck


def test_check_steps():
    """The end of warmup and 2^k >= 1024 sampling steps; nothing at the start."""
    steps = jnp.arange(6000)
    checked = np.flatnonzero(np.asarray(is_check_step(steps, 500)))
    np.testing.assert_array_equal(checked, [500, 500 + 1024, 500 + 2048, 500 + 4096])
    checked = np.flatnonzero(np.asarray(is_check_step(steps, 0)))
    np.testing.assert_array_equal(checked, [1024, 2048, 4096])


def test_coordinate_names():
    layout = layout_from_params({"a": jnp.zeros((), jnp.int32), "b": jnp.zeros((2, 3), jnp.int32)})
    assert layout.coordinate_name(0) == ("a", "")
    assert layout.coordinate_name(1) == ("b", "[0, 0]")
    assert layout.coordinate_name(6) == ("b", "[1, 2]")


def test_the_check_costs_no_dispatch():
    """The gated ``pure_callback`` keeps JAX's fast dispatch (a ``jax.debug.callback``
    would not): the step of a progress-bar run is compiled without side effects."""
    kernel = ALBP(trap_model)
    state = kernel.init(random.key(0), 10, None, (), {})
    jaxpr = jax.make_jaxpr(lambda s: kernel.sample(s, (), {}))(state)
    assert not jaxpr.effects


def mostly_frozen_model():
    """Independent coordinates: 20 fair coins (the odd ones below 40, none among the
    check's 8 spread coordinates) and 80 whose conditional leaves the likely value with
    probability 0.0025. The average coordinate changes 0.1 times per step (the coins'
    rate); a near-frozen one stays put for 500 steps with probability 0.29."""
    logits = np.full(100, 6.0)
    logits[::2] *= -1
    logits[1:40:2] = 0.0
    numpyro.sample("x", dist.Bernoulli(logits=jnp.asarray(logits)))


def test_an_exact_sweep_is_not_called_stuck_where_few_coordinates_move():
    """ChromaticGibbs draws every coordinate from its exact conditional each step (here,
    exact independent draws): a coordinate that rarely leaves its value is not stuck. The
    check's count from the average rate alone (50 changes "expected" in 500 steps) called
    such coordinates stuck; a sweep's count is at most steps x leave probability (1.25)."""
    _, stuck = run(ChromaticGibbs(mostly_frozen_model), num_samples=1100)
    assert not stuck, stuck


@pytest.mark.slow
def test_block_draws_are_not_called_stuck_where_a_state_is_well_determined():
    """BlockGibbs draws each hidden chain of the gallery's factorial HMM jointly: segments
    move at once, so the average coordinate changes far more often than a well-determined
    state's one-site leave probability (0.01-0.03) says, and the count from the average
    rate called three such states stuck after 500 warmup steps (52 and 106 changes
    "expected"). A sweep of exact conditionals, block or not, is bounded by the steps times
    that probability."""
    entry = GALLERY["fhmm"]
    data = entry.simulate(0, "example")
    mcmc, stuck = run(
        LBPGibbs(NUTS(entry.model)),
        num_samples=10,
        num_chains=4,
        model_args=data.args,
        model_kwargs=data.kwargs,
    )
    assert type(mcmc.sampler.discrete_kernel).__name__ == "BlockGibbs"
    assert not stuck, stuck
