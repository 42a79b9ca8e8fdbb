"""Exact tests of the LBP-R path proposal on tiny binary spaces: every state, every ordered
path, the full transition matrix, detailed balance to round-off (in float64)."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete import ALBP
from numpyro_discrete.core import path
from numpyro_discrete.core.balancing import get_balancing, log_weights
from numpyro_discrete.core.local_ratios import (
    binary_neighbourhood,
    exact_local_fn,
    gradient_local_fn,
)

from exact import (
    all_binary_states,
    assert_reversible,
    chi_square_rows,
    exact_distribution,
    path_transition_matrix,
    random_binary_target,
    state_index,
)

NUM_COORDS = 5


def _local_fn(log_pi, weights):
    if weights == "gradient":
        return gradient_local_fn(log_pi, binary_neighbourhood)
    return exact_local_fn(log_pi, binary_neighbourhood)


def lbp_transition_matrix(log_pi, num_coords, path_length, balancing, weights, length):
    """The LBP-R transition matrix over ``{0, 1}^N`` (see
    :func:`exact.path_transition_matrix`) and the forward mass of all paths per state."""
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
    forward = path.path_from_coords(jnp.asarray(order), choices, path_length, NUM_COORDS)
    explicit = forward._replace(coords=jnp.asarray(order[reversed_order]))
    np.testing.assert_allclose(
        path.path_log_prob(log_w, forward, reverse=True),
        path.path_log_prob(log_w, explicit),
        rtol=1e-12,
    )


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("weights", ["gradient", "exact"])
@pytest.mark.parametrize("balancing", ["sqrt", "barker"])
@pytest.mark.parametrize("path_length", [1, 2, 3])
def test_detailed_balance(x64, path_length, balancing, weights, padded):
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


@pytest.mark.parametrize("balancing", ["sqrt", "barker"])
def test_kernel_matches_transition_matrix(x64, balancing):
    """The jitted kernel, path sampling included, draws from the enumerated matrix."""
    num_coords, path_length, draws = 4, 2, 20000
    log_pi = random_binary_target(num_coords, seed=7)
    matrix, _ = lbp_transition_matrix(
        log_pi, num_coords, path_length, balancing, "gradient", path_length
    )
    local_fn = _local_fn(log_pi, "gradient")
    kernel = path.build_kernel(
        get_balancing(balancing), binary_neighbourhood, path.path_size_buckets(num_coords)
    )
    states = jnp.asarray(all_binary_states(num_coords))

    @jax.jit
    def step_from(x, keys):
        state = path.init(x, local_fn)
        return jax.vmap(lambda k: kernel(k, state, local_fn, jnp.int32(path_length)))(keys)

    counts = np.zeros_like(matrix)
    for row, x in enumerate(states):
        keys = random.split(random.key(row), draws)
        new_state, info = step_from(x, keys)
        np.add.at(counts[row], np.asarray(state_index(new_state.position)), 1)
    assert chi_square_rows(counts, matrix) > 1e-4


def test_albp_frozen_scale_is_a_mixture_of_lbp_kernels(x64):
    """ALBP after warmup with R_t = 1.5 moves by 0.5 LBP-1 + 0.5 LBP-2 (through the
    numpyro kernel's own `init`/`sample`)."""
    num_coords, draws = 4, 20000
    log_pi = random_binary_target(num_coords, seed=11)
    matrices = [
        lbp_transition_matrix(log_pi, num_coords, r, "sqrt", "gradient", r)[0] for r in (1, 2)
    ]
    mixture = 0.5 * (matrices[0] + matrices[1])
    kernel = ALBP(potential_fn=lambda z: -log_pi(z["x"]), init_num_flips=1.5)
    states = all_binary_states(num_coords)
    kernel.init(random.key(0), 0, {"x": jnp.asarray(states[0])}, (), None)
    sample = jax.jit(jax.vmap(lambda s: kernel.sample(s, (), None)))
    # one compiled program for every starting state (an eager vmap of `init` per state
    # would dispatch its operations one by one)
    init = jax.jit(jax.vmap(lambda k, x: kernel.init(k, 0, {"x": x}, (), None), (0, None)))
    counts = np.zeros_like(mixture)
    for row, x in enumerate(states):
        new_state = sample(init(random.split(random.key(100 + row), draws), jnp.asarray(x)))
        np.testing.assert_allclose(new_state.num_flips, 1.5)
        np.add.at(counts[row], np.asarray(state_index(new_state.z["x"])), 1)
    assert chi_square_rows(counts, mixture) > 1e-4
