"""Exact tests of the path proposal over (coordinate, new value) pairs on tiny categorical,
ordinal and mixed spaces: every state, every ordered path with every choice of new values,
the full transition matrix, detailed balance to round-off (in float64)."""

import itertools

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import path
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.core.local_ratios import (
    UNBOUNDED,
    coordinate_neighbourhood,
    mixed_local_fn,
)

from exact import assert_reversible, chi_square_rows, path_transition_matrix, state_lookup

# Spaces: per coordinate (num_categories, lower, upper); num_categories 0 means ordinal.
SPACES = {
    # a K = 3 categorical coordinate beside a binary one
    "categorical": [(3, 0, 2), (2, 0, 1), (3, 0, 2)],
    # ordinal coordinates whose windows hit the support boundaries (window 1 and 2)
    "ordinal": [(0, 0, 3), (0, -1, 1), (0, 2, 4)],
    # everything at once
    "mixed": [(3, 0, 2), (2, 0, 1), (0, 0, 3)],
}
WINDOWS = {"categorical": 1, "ordinal": 2, "mixed": 1}


def _space(name):
    num_categories, lower, upper = (np.array(column) for column in zip(*SPACES[name], strict=True))
    values = [
        np.arange(k) if k else np.arange(lo, hi + 1)
        for k, lo, hi in zip(num_categories, lower, upper, strict=True)
    ]
    states = np.array(list(itertools.product(*values)), dtype=np.int32)
    return num_categories, lower, upper, states


def _random_target(num_coords, seed):
    """A log density with pairwise and softplus terms in the values (differentiable, so
    that the gradient weights apply, and not affine, so that they are only approximate)
    plus a per-coordinate table lookup (a value used as an index)."""
    rng = np.random.default_rng(seed)
    field = jnp.asarray(rng.normal(0.0, 1.0, num_coords))
    coupling = jnp.asarray(np.triu(rng.normal(0.0, 0.4, (num_coords, num_coords)), 1))
    weights = jnp.asarray(rng.normal(0.0, 0.7, (2, num_coords)))
    table = jnp.asarray(rng.normal(0.0, 1.0, (num_coords, 8)))

    def log_pi(x):
        xf = jnp.asarray(x, jnp.result_type(float))
        smooth = field @ xf + xf @ coupling @ xf + jnp.sum(jnp.logaddexp(0.0, weights @ xf))
        # integer coordinates also read a table (ignored by the relaxed density's gradient)
        lookup = table[jnp.arange(num_coords), jnp.asarray(jnp.round(xf), jnp.int32) + 1]
        return smooth + jnp.sum(lookup)

    return log_pi


def _local_fn(log_pi, neighbourhood, weights, num_categories):
    exact_coords = {
        "gradient": np.zeros(0, np.int32),
        "exact": None,
        # categorical coordinates exact, the others from the gradient
        "mixed": np.flatnonzero(num_categories > 2),
    }[weights]
    return mixed_local_fn(log_pi, log_pi, neighbourhood, exact_coords)


def transition_matrix(space, path_length, balancing, weights, seed):
    num_categories, lower, upper, states = _space(space)
    neighbourhood = coordinate_neighbourhood(num_categories, lower, upper, WINDOWS[space])
    log_pi = _random_target(len(num_categories), seed)
    local_fn = _local_fn(log_pi, neighbourhood, weights, num_categories)
    matrix, forward_mass = path_transition_matrix(
        local_fn, neighbourhood, states, path_length, balancing
    )
    pi = np.exp(np.asarray(jax.vmap(log_pi)(jnp.asarray(states))))
    return matrix, forward_mass, pi / pi.sum(), (log_pi, local_fn, neighbourhood, states)


@pytest.mark.parametrize("weights", ["gradient", "exact", "mixed"])
@pytest.mark.parametrize("balancing", ["sqrt", "barker"])
@pytest.mark.parametrize("path_length", [1, 2])
@pytest.mark.parametrize("space", list(SPACES))
def test_detailed_balance(x64, space, path_length, balancing, weights):
    matrix, forward_mass, pi, _ = transition_matrix(
        space, path_length, balancing, weights, seed=path_length
    )
    np.testing.assert_allclose(forward_mass, 1.0, atol=1e-12)
    assert_reversible(matrix, pi)
    # irreducible: every state reaches every other one (detailed balance alone would
    # also hold for a kernel that never moves)
    reach = np.linalg.matrix_power((matrix > 0).astype(float) + np.eye(len(pi)), len(pi))
    assert np.all(reach > 0)


def test_neighbourhood_tables():
    """Candidates and validity of nominal and ordinal coordinates, boundaries included."""
    neighbourhood = coordinate_neighbourhood(
        np.array([4, 2, 0, 0]), np.array([0, 0, 0, 0]), np.array([3, 1, 2, UNBOUNDED]), 2
    )
    x = jnp.array([2, 1, 0, 5], jnp.int32)
    candidates = np.asarray(neighbourhood.candidates(x))
    valid = np.asarray(neighbourhood.valid(x))
    assert candidates.shape == (4, 4)
    np.testing.assert_array_equal(candidates[0][valid[0]], [0, 1, 3])
    np.testing.assert_array_equal(candidates[1][valid[1]], [0])
    np.testing.assert_array_equal(candidates[2][valid[2]], [1, 2])  # lower boundary
    np.testing.assert_array_equal(candidates[3][valid[3]], [3, 4, 6, 7])  # unbounded above


def test_mixed_local_fn_matches_exact_and_gradient_rows(x64):
    """Mixed weights take the exact rows on the exact coordinates and the gradient rows
    elsewhere, and the same ``log pi``."""
    num_categories, lower, upper, states = _space("mixed")
    neighbourhood = coordinate_neighbourhood(num_categories, lower, upper, 1)
    log_pi = _random_target(len(num_categories), seed=5)
    x = jnp.asarray(states[7])
    parts = {
        weights: _local_fn(log_pi, neighbourhood, weights, num_categories)(x)
        for weights in ("gradient", "exact", "mixed")
    }
    exact_rows = num_categories > 2
    for log_p, _ in parts.values():
        np.testing.assert_allclose(log_p, log_pi(x), rtol=1e-12)
    np.testing.assert_array_equal(parts["mixed"][1][exact_rows], parts["exact"][1][exact_rows])
    np.testing.assert_array_equal(parts["mixed"][1][~exact_rows], parts["gradient"][1][~exact_rows])


@pytest.mark.parametrize("space", ["mixed"])
def test_kernel_matches_transition_matrix(x64, space):
    """The jitted kernel (sampled coordinates, then categorical new values) draws
    from the enumerated matrix."""
    path_length, draws = 2, 10000
    matrix, _, _, (_, local_fn, neighbourhood, states) = transition_matrix(
        space, path_length, "sqrt", "mixed", seed=3
    )
    kernel = path.build_kernel(
        get_balancing("sqrt"), neighbourhood, path.path_size_buckets(states.shape[1])
    )
    index_of = state_lookup(states)

    @jax.jit
    def step_from(x, keys):
        state = path.init(x, local_fn)
        return jax.vmap(lambda k: kernel(k, state, local_fn, jnp.int32(path_length)))(keys)

    counts = np.zeros_like(matrix)
    for row, x in enumerate(states):
        new_state, _ = step_from(jnp.asarray(x), random.split(random.key(row), draws))
        np.add.at(counts[row], index_of(new_state.position), 1)
    assert chi_square_rows(counts, matrix) > 1e-4
