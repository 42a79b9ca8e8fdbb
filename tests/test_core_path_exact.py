"""Exact tests of the LBP-R path proposal (:mod:`numpyro_discrete.core.path`) on tiny binary,
categorical, ordinal and mixed spaces: every state, every ordered path with every choice of
new values, the full transition matrix, detailed balance to round-off (in float64), and the
jitted kernel's draws against the matrix."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import path, path_draw, state
from numpyro_discrete.core.balancing import get_balancing, log_weights
from numpyro_discrete.core.local_ratios import exact_local_fn, gradient_local_fn, mixed_local_fn
from numpyro_discrete.core.neighbourhood import (
    SupportKind,
    binary_neighbourhood,
    coordinate_neighbourhood,
    ladder_offsets,
)

from helpers import (
    LADDER_SCALES,
    all_binary_states,
    assert_irreducible,
    assert_reversible,
    chi_square_rows,
    coordinate_space,
    exact_distribution,
    path_transition_matrix,
    random_binary_target,
    random_mixed_target,
    state_index,
    state_lookup,
)

# --- binary spaces --------------------------------------------------------------------------

NUM_COORDS = 5


def _local_fn(log_pi, weights):
    if weights == "gradient":
        return gradient_local_fn(log_pi, binary_neighbourhood)
    return exact_local_fn(log_pi, binary_neighbourhood)


def lbp_transition_matrix(log_pi, num_coords, path_length, balancing, weights, length):
    """The LBP-R transition matrix over ``{0, 1}^N`` (see
    :func:`helpers.path_transition_matrix`) and the forward mass of all paths per state."""
    return path_transition_matrix(
        _local_fn(log_pi, weights),
        binary_neighbourhood,
        all_binary_states(num_coords),
        path_length,
        balancing,
        length,
    )


@pytest.mark.parametrize("path_length", [1, 2, 3])
def test_reverse_probability_is_the_reversed_path_drawn_forwards(x64, path_length):
    """``path_log_prob(..., reverse=True)`` of a path equals the forward probability of the
    same path written out in reverse order (padded paths included)."""
    log_pi = random_binary_target(NUM_COORDS, seed=path_length)
    local_fn = _local_fn(log_pi, "gradient")
    log_w = log_weights(get_balancing("sqrt"), local_fn(jnp.array([1, 0, 0, 1, 1]))[1])
    order = np.array([3, 0, 4, 1, 2])
    reversed_order = np.r_[np.arange(path_length)[::-1], np.arange(path_length, NUM_COORDS)]
    choices = jnp.zeros(NUM_COORDS, jnp.int32)
    forward = path_draw.path_from_coords(jnp.asarray(order), choices, path_length, NUM_COORDS)
    explicit = forward._replace(coords=jnp.asarray(order[reversed_order]))
    np.testing.assert_allclose(
        path.path_log_prob(log_w, forward, reverse=True),
        path.path_log_prob(log_w, explicit),
        rtol=1e-12,
    )


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("weights", ["gradient", "exact"])
@pytest.mark.parametrize("balancing", ["sqrt", pytest.param("barker", marks=pytest.mark.slow)])
@pytest.mark.parametrize("path_length", [1, 2, 3])
def test_binary_detailed_balance(x64, path_length, balancing, weights, padded):
    log_pi = random_binary_target(NUM_COORDS, seed=path_length)
    length = NUM_COORDS if padded else path_length
    matrix, forward_mass = lbp_transition_matrix(
        log_pi, NUM_COORDS, path_length, balancing, weights, length
    )
    pi = exact_distribution(log_pi, all_binary_states(NUM_COORDS))
    # the forward path probabilities are a distribution over all ordered paths
    np.testing.assert_allclose(forward_mass, 1.0, atol=1e-12)
    assert_reversible(matrix, pi)
    # the gradient weights really are approximate here, so this is not a trivial case
    if weights == "gradient":
        _, d_grad = _local_fn(log_pi, "gradient")(jnp.zeros(NUM_COORDS, jnp.int32))
        _, d_exact = _local_fn(log_pi, "exact")(jnp.zeros(NUM_COORDS, jnp.int32))
        assert np.max(np.abs(d_grad - d_exact)) > 0.1


@pytest.mark.parametrize("chunk_size", [1, None], ids=["chunk-1", "one-chunk"])
@pytest.mark.parametrize("balancing", ["sqrt", "barker"])
def test_binary_kernel_matches_transition_matrix(x64, balancing, chunk_size):
    """The jitted kernel, path sampling included, draws from the enumerated matrix, with
    the path drawn and scored in one chunk or one entry at a time."""
    num_coords, path_length, draws = 4, 2, 20000
    log_pi = random_binary_target(num_coords, seed=7)
    matrix, _ = lbp_transition_matrix(
        log_pi, num_coords, path_length, balancing, "gradient", path_length
    )
    local_fn = _local_fn(log_pi, "gradient")
    kernel = path.build_kernel(
        get_balancing(balancing), binary_neighbourhood, num_coords, chunk_size
    )
    states = jnp.asarray(all_binary_states(num_coords))

    counts = _transition_counts(kernel, local_fn, states, path_length, draws, state_index)
    assert chi_square_rows(counts, matrix) > 1e-4


# --- categorical, ordinal and mixed spaces: moves over (coordinate, new value) pairs -------

SUPPORT_SPACES = ["categorical", "ordinal", "mixed", "ladder"]
WINDOWS = {
    "categorical": 1,
    "ordinal": 2,
    "mixed": 1,
    "ladder": ladder_offsets(LADDER_SCALES, np.array([9.0, 6.0])),
}


def _supports_local_fn(log_pi, neighbourhood, weights, supports):
    exact_coords = {
        "gradient": np.zeros(0, np.int32),
        "exact": None,
        # categorical coordinates exact, the others from the gradient
        "mixed": np.flatnonzero(supports.kind == SupportKind.CATEGORICAL),
    }[weights]
    return mixed_local_fn(log_pi, log_pi, neighbourhood, exact_coords)


def supports_transition_matrix(space, path_length, balancing, weights, seed):
    supports, states = coordinate_space(space)
    neighbourhood = coordinate_neighbourhood(supports, WINDOWS[space])
    log_pi = random_mixed_target(len(supports.kind), seed)
    local_fn = _supports_local_fn(log_pi, neighbourhood, weights, supports)
    matrix, forward_mass = path_transition_matrix(
        local_fn, neighbourhood, states, path_length, balancing
    )
    pi = np.exp(np.asarray(jax.vmap(log_pi)(jnp.asarray(states))))
    return matrix, forward_mass, pi / pi.sum(), (log_pi, local_fn, neighbourhood, states)


@pytest.mark.parametrize("weights", ["gradient", "exact", "mixed"])
# Barker's balancing in the slow tier: the fast one checks sqrt, the default
@pytest.mark.parametrize("balancing", ["sqrt", pytest.param("barker", marks=pytest.mark.slow)])
@pytest.mark.parametrize("path_length", [1, 2])
@pytest.mark.parametrize("space", SUPPORT_SPACES)
def test_supports_detailed_balance(x64, space, path_length, balancing, weights):
    matrix, forward_mass, pi, _ = supports_transition_matrix(
        space, path_length, balancing, weights, seed=path_length
    )
    np.testing.assert_allclose(forward_mass, 1.0, atol=1e-12)
    assert_reversible(matrix, pi)
    assert_irreducible(matrix)


@pytest.mark.parametrize("chunk_size", [1, None], ids=["chunk-1", "one-chunk"])
@pytest.mark.parametrize("space", ["mixed"])
def test_supports_kernel_matches_transition_matrix(x64, space, chunk_size):
    """The jitted kernel (sampled coordinates, then categorical new values) draws
    from the enumerated matrix, with the path drawn and scored in one chunk or one entry
    at a time."""
    path_length, draws = 2, 10000
    matrix, _, _, (_, local_fn, neighbourhood, states) = supports_transition_matrix(
        space, path_length, "sqrt", "mixed", seed=3
    )
    kernel = path.build_kernel(get_balancing("sqrt"), neighbourhood, states.shape[1], chunk_size)
    index_of = state_lookup(states)

    counts = _transition_counts(kernel, local_fn, states, path_length, draws, index_of)
    assert chi_square_rows(counts, matrix) > 1e-4


def _transition_counts(kernel, local_fn, states, path_length, draws, index_of):
    """``counts[i, j]``: how many of `draws` jitted kernel steps from state ``i`` of the
    enumeration `states` landed in state ``j`` (``index_of`` maps states to rows)."""

    @jax.jit
    def step_from(x, keys):
        start = state.init(x, local_fn)
        return jax.vmap(lambda k: kernel(k, start, local_fn, jnp.int32(path_length)))(keys)

    counts = np.zeros((len(states), len(states)))
    for row, x in enumerate(states):
        new_state, _ = step_from(jnp.asarray(x), random.split(random.key(row), draws))
        np.add.at(counts[row], np.asarray(index_of(new_state.position)), 1)
    return counts
