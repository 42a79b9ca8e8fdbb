"""Exact tests of the LBP-R path proposal on tiny binary spaces: every state, every ordered
path, the full transition matrix, detailed balance to round-off (in float64)."""

import itertools

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
    chi_square_rows,
    exact_distribution,
    random_binary_target,
    state_index,
)

NUM_COORDS = 5


def _local_fn(log_pi, weights):
    if weights == "gradient":
        return gradient_local_fn(log_pi, binary_neighbourhood)
    return exact_local_fn(log_pi, binary_neighbourhood)


def lbp_transition_matrix(log_pi, num_coords, path_length, balancing, weights, length):
    """
    The LBP-R transition matrix, summing over every ordered path of `path_length` distinct
    coordinates from every state; paths are padded to `length` with inactive entries that
    repeat coordinate 0, as the kernel pads them. Returns the matrix and, per state, the
    total forward probability of all paths (which must be 1).
    """
    local_fn = _local_fn(log_pi, weights)
    log_balancing = get_balancing(balancing)
    states = jnp.asarray(all_binary_states(num_coords))
    orders = np.array(list(itertools.permutations(range(num_coords), path_length)))
    coords = jnp.asarray(np.pad(orders, ((0, 0), (0, length - path_length))))
    choices = jnp.zeros(length, jnp.int32)

    def move(x, coords):
        log_p_x, d_x = local_fn(x)
        forward = path.path_from_coords(coords, choices, path_length, num_coords)
        y = path.apply_path(x, forward, binary_neighbourhood)
        log_q_forward = path.path_log_prob(log_weights(log_balancing, d_x), forward)
        log_p_y, d_y = local_fn(y)
        backward = path.reverse_path(x, y, forward, binary_neighbourhood)
        log_w_y = log_weights(log_balancing, d_y)
        log_q_reverse = path.path_log_prob(log_w_y, backward, reverse=True)
        # the reverse path written out in reverse order, drawn forwards, has the same law
        reversed_order = np.r_[np.arange(path_length)[::-1], np.arange(path_length, length)]
        explicit = forward._replace(coords=coords[reversed_order], choices=backward.choices)
        log_q_explicit = path.path_log_prob(log_w_y, explicit)
        log_accept = log_p_y - log_p_x + log_q_reverse - log_q_forward
        return y, log_q_forward, jnp.minimum(log_accept, 0.0), log_q_reverse - log_q_explicit

    ys, log_q, log_a, reverse_gap = jax.vmap(lambda x: jax.vmap(lambda c: move(x, c))(coords))(
        states
    )
    np.testing.assert_allclose(reverse_gap, 0.0, atol=1e-12)
    num_states = states.shape[0]
    matrix = np.zeros((num_states, num_states))
    rows = np.repeat(np.arange(num_states), coords.shape[0])
    cols = np.asarray(state_index(ys)).reshape(-1)
    np.add.at(matrix, (rows, cols), np.exp(np.asarray(log_q + log_a)).reshape(-1))
    matrix[np.arange(num_states), np.arange(num_states)] += 1.0 - matrix.sum(1)
    return matrix, np.exp(np.asarray(log_q)).sum(1)


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
    assert np.all(matrix >= -1e-15)
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
    flow = pi[:, None] * matrix
    assert np.max(np.abs(flow - flow.T)) < 1e-10
    np.testing.assert_allclose(pi @ matrix, pi, atol=1e-10)
    # the gradient weights really are approximate here, so this is not a trivial case
    if weights == "gradient":
        _, d_grad = _local_fn(log_pi, "gradient")(jnp.zeros(NUM_COORDS, jnp.int32))
        _, d_exact = _local_fn(log_pi, "exact")(jnp.zeros(NUM_COORDS, jnp.int32))
        assert np.max(np.abs(d_grad - d_exact)) > 0.1


@pytest.mark.parametrize("balancing", ["sqrt", "barker"])
def test_kernel_matches_transition_matrix(x64, balancing):
    """The jitted kernel, Gumbel-top-k sampling included, draws from the enumerated matrix."""
    num_coords, path_length, draws = 4, 2, 20000
    log_pi = random_binary_target(num_coords, seed=7)
    matrix, _ = lbp_transition_matrix(
        log_pi, num_coords, path_length, balancing, "gradient", path_length
    )
    local_fn = _local_fn(log_pi, "gradient")
    kernel = path.build_kernel(
        get_balancing(balancing), binary_neighbourhood, path.top_k_buckets(num_coords)
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
    counts = np.zeros_like(mixture)
    for row, x in enumerate(states):
        init = jax.vmap(lambda k, x=x: kernel.init(k, 0, {"x": jnp.asarray(x)}, (), None))
        new_state = sample(init(random.split(random.key(100 + row), draws)))
        np.testing.assert_allclose(new_state.num_flips, 1.5)
        np.add.at(counts[row], np.asarray(state_index(new_state.z["x"])), 1)
    assert chi_square_rows(counts, mixture) > 1e-4
