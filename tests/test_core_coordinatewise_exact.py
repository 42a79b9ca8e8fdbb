"""Exact tests of the coordinate-wise proposal of ACS and DMALA
(:mod:`numpyro_discrete.core.coordinatewise`) on tiny binary, categorical, ordinal and mixed
spaces: every state, every joint choice of new values, the full transition matrix at several
(step size, balancing) pairs of a cyclical schedule, detailed balance to round-off (in
float64), and the jitted kernel's draws against the matrix."""

import functools

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import coordinatewise, cyclical, state
from numpyro_discrete.core.local_ratios import mixed_local_fn
from numpyro_discrete.core.neighbourhood import (
    SupportKind,
    coordinate_neighbourhood,
    ladder_offsets,
    squared_distance_fn,
)

from helpers import (
    LADDER_SCALES,
    SPACES,
    assert_irreducible,
    assert_reversible,
    chi_square_rows,
    coordinate_space,
    coordinatewise_transition_matrices,
    random_mixed_target,
    state_lookup,
)

WINDOWS = {
    "binary": 1,
    "categorical": 1,
    "ordinal": 2,
    "mixed": 2,
    "ladder": ladder_offsets(LADDER_SCALES, np.array([9.0, 6.0])),
}

# positions 0, 3 and 7 of a cycle of 8 steps from step_size_max = 3 to step_size_min = 0.1, with a
# non-increasing balancing schedule; and DMALA's beta = 0.5 at a large step size
SCHEDULE = np.asarray(cyclical.cosine_schedule(3.0, 0.1, 8))
PARAMETERS = [(SCHEDULE[0], 0.95), (SCHEDULE[3], 0.7), (SCHEDULE[7], 0.5), (20.0, 0.5)]


def _setup(space, weights, seed):
    supports, states = coordinate_space(space)
    neighbourhood = coordinate_neighbourhood(supports, WINDOWS[space])
    log_pi = random_mixed_target(len(supports.kind), seed)
    exact_coords = {
        "gradient": np.zeros(0, np.int32),
        "exact": None,
        "mixed": np.flatnonzero(supports.kind != SupportKind.BINARY),
    }[weights]
    local_fn = mixed_local_fn(log_pi, log_pi, neighbourhood, exact_coords)
    scales = LADDER_SCALES if space == "ladder" else None
    return states, neighbourhood, local_fn, squared_distance_fn(supports, scales), log_pi


@functools.cache
def _matrices(space, weights, seed):
    """The transition matrices of every move from every state, compiled once for every
    (alpha, beta); the target's probabilities; the pieces of the kernel."""
    states, neighbourhood, local_fn, distance, log_pi = _setup(space, weights, seed)
    matrix_at = coordinatewise_transition_matrices(local_fn, neighbourhood, distance, states)
    pi = np.exp(np.asarray(jax.vmap(log_pi)(jnp.asarray(states))))
    return matrix_at, pi / pi.sum(), (states, neighbourhood, local_fn, distance)


def transition_matrix(space, weights, step_size, balancing, seed):
    matrix_at, pi, parts = _matrices(space, weights, seed)
    matrix, forward_mass = matrix_at(step_size, balancing)
    return matrix, forward_mass, pi, parts


FAST = {
    ("binary", "gradient"),
    ("categorical", "exact"),
    ("ordinal", "gradient"),
    ("mixed", "mixed"),
    ("ladder", "gradient"),
}


@pytest.mark.parametrize(
    "space, weights",
    [
        pytest.param(space, weights, marks=() if (space, weights) in FAST else pytest.mark.slow)
        for space in SPACES
        for weights in ("gradient", "exact", "mixed")
    ],
)
def test_detailed_balance(x64, space, weights):
    for step_size, balancing in PARAMETERS:
        matrix, forward_mass, pi, _ = transition_matrix(space, weights, step_size, balancing, 1)
        np.testing.assert_allclose(forward_mass, 1.0, atol=1e-12)
        assert_reversible(matrix, pi)
        assert_irreducible(matrix)


def test_full_cycle_keeps_target(x64):
    """The product of the kernels of a whole cycle (the ACS step) keeps the target."""
    alphas = np.asarray(cyclical.cosine_schedule(4.0, 0.2, 5))
    betas = np.linspace(0.95, 0.5, 5)
    cycle = None
    for alpha, beta in zip(alphas, betas, strict=True):
        matrix, _, pi, _ = transition_matrix("mixed", "mixed", alpha, beta, seed=1)
        cycle = matrix if cycle is None else cycle @ matrix
    np.testing.assert_allclose(pi @ cycle, pi, atol=1e-10)


def test_binary_flip_probability(x64):
    """Binary coordinates flip with probability ``sigmoid(beta d - 1 / (2 alpha))``."""
    d = jnp.array([[0.7], [-1.3], [-jnp.inf]])
    log_q = coordinatewise.proposal_log_probs(d, jnp.ones_like(d), 0.4, 0.6)
    expected = jax.nn.sigmoid(0.6 * d[:, 0] - 1.0 / 0.8)
    np.testing.assert_allclose(np.exp(log_q[:, 1]), expected, rtol=1e-12)


@pytest.mark.parametrize("space", ["mixed", pytest.param("ordinal", marks=pytest.mark.slow)])
@pytest.mark.parametrize("sampled_in", ["float64", "float32"])
def test_kernel_matches_transition_matrix(x64, space, sampled_in):
    """The jitted kernel (independent categorical draws per coordinate, then the M-H test)
    draws from the enumerated matrix, in 64-bit floats and in the 32-bit floats users run
    (where the draws take the package's own Gumbel noise, `core.noise`)."""
    step_size, balancing, draws = 1.5, 0.8, 2500
    matrix = transition_matrix(space, "mixed", step_size, balancing, seed=1)[0]
    with jax.enable_x64(sampled_in == "float64"):
        # the target and kernel built again in the sampling precision
        states, neighbourhood, local_fn, distance, _ = _setup(space, "mixed", seed=1)
        kernel = coordinatewise.build_kernel(neighbourhood, distance)

        @jax.jit
        def step_from(x, keys):
            start = state.init(x, local_fn)
            return jax.vmap(lambda k: kernel(k, start, local_fn, step_size, balancing))(keys)

        keys = random.split(random.key(0), (len(states), draws))
        new_state, info = jax.vmap(step_from)(jnp.asarray(states), keys)
    positions = np.asarray(new_state.position)
    counts = np.zeros_like(matrix)
    index_of = state_lookup(states)
    for row in range(len(states)):
        np.add.at(counts[row], index_of(positions[row]), 1)
    changed = np.sum(positions != states[:, None, :], axis=2)
    np.testing.assert_array_equal(np.asarray(info.num_changed), changed)
    assert chi_square_rows(counts, matrix) > 1e-4
