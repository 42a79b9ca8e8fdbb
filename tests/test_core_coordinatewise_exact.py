"""Exact tests of the ACS/DMALA coordinate-wise proposal on tiny binary, categorical, ordinal
and mixed spaces: every state, every joint choice of new values, the full transition matrix
at several (step size, balancing) pairs of a cyclical schedule, detailed balance to
round-off (in float64), and the jitted kernel's draws against the matrix."""

import functools
import itertools

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import cyclical
from numpyro_discrete.core.local_ratios import coordinate_neighbourhood, mixed_local_fn

from exact import chi_square_rows

# Spaces: per coordinate (num_categories, lower, upper); num_categories 0 means ordinal.
SPACES = {
    "binary": [(2, 0, 1)] * 4,
    # K = 3 categorical coordinates beside a binary one
    "categorical": [(3, 0, 2), (2, 0, 1), (3, 0, 2)],
    # ordinal coordinates whose windows (half-width 2) hit the support boundaries
    "ordinal": [(0, 0, 3), (0, -1, 1), (0, 2, 4)],
    "mixed": [(3, 0, 2), (2, 0, 1), (0, 0, 3)],
}
WINDOWS = {"binary": 1, "categorical": 1, "ordinal": 2, "mixed": 2}

# positions 0, 3 and 7 of a cycle of 8 steps from alpha_max = 3 to alpha_min = 0.1, with a
# non-increasing balancing schedule; and DMALA's beta = 0.5 at a large step size
SCHEDULE = np.asarray(cyclical.cosine_schedule(3.0, 0.1, 8))
PARAMETERS = [(SCHEDULE[0], 0.95), (SCHEDULE[3], 0.7), (SCHEDULE[7], 0.5), (20.0, 0.5)]


def _space(name):
    num_categories, lower, upper = (np.array(column) for column in zip(*SPACES[name], strict=True))
    values = [
        np.arange(k) if k else np.arange(lo, hi + 1)
        for k, lo, hi in zip(num_categories, lower, upper, strict=True)
    ]
    states = np.array(list(itertools.product(*values)), dtype=np.int32)
    return num_categories, lower, upper, states


def _index_of(states):
    lookup = {tuple(s): i for i, s in enumerate(states)}
    return lambda ys: np.array([lookup[tuple(y)] for y in np.asarray(ys)])


def _random_target(num_coords, seed):
    """Pairwise and softplus terms (differentiable, not affine: gradient ratios are only
    approximate) plus a table lookup by value (invisible to the gradient)."""
    rng = np.random.default_rng(seed)
    field = jnp.asarray(rng.normal(0.0, 1.0, num_coords))
    coupling = jnp.asarray(np.triu(rng.normal(0.0, 0.4, (num_coords, num_coords)), 1))
    weights = jnp.asarray(rng.normal(0.0, 0.7, (2, num_coords)))
    table = jnp.asarray(rng.normal(0.0, 1.0, (num_coords, 8)))

    def log_pi(x):
        xf = jnp.asarray(x, jnp.result_type(float))
        smooth = field @ xf + xf @ coupling @ xf + jnp.sum(jnp.logaddexp(0.0, weights @ xf))
        lookup = table[jnp.arange(num_coords), jnp.asarray(jnp.round(xf), jnp.int32) + 1]
        return smooth + jnp.sum(lookup)

    return log_pi


def _setup(space, weights, seed):
    num_categories, lower, upper, states = _space(space)
    neighbourhood = coordinate_neighbourhood(num_categories, lower, upper, WINDOWS[space])
    log_pi = _random_target(len(num_categories), seed)
    exact_coords = {
        "gradient": np.zeros(0, np.int32),
        "exact": None,
        "mixed": np.flatnonzero(num_categories != 2),
    }[weights]
    local_fn = mixed_local_fn(log_pi, log_pi, neighbourhood, exact_coords)
    distance = cyclical.squared_distance_fn(num_categories)
    return states, neighbourhood, local_fn, distance, log_pi


@functools.cache
def _moves(space, weights, seed):
    """The jitted enumeration of every move from every state, for traced (alpha, beta)."""
    states, neighbourhood, local_fn, distance, log_pi = _setup(space, weights, seed)
    num_coords = states.shape[1]
    num_columns = neighbourhood.candidates(jnp.asarray(states[0])).shape[1] + 1
    choice_vectors = jnp.asarray(
        np.array(list(itertools.product(range(num_columns), repeat=num_coords)), np.int32)
    )

    def moves(step_size, balancing):
        def log_probs(x):
            log_p, d = local_fn(x)
            candidates = neighbourhood.candidates(x)
            log_q = cyclical.proposal_log_probs(d, distance(x, candidates), step_size, balancing)
            return log_p, candidates, log_q

        def move(x, choices):
            log_p_x, candidates_x, log_q_x = log_probs(x)
            y = cyclical.apply_choices(x, choices, candidates_x)
            log_p_y, candidates_y, log_q_y = log_probs(y)
            back = cyclical.reverse_choices(x, y, candidates_y)
            log_q_forward = cyclical.proposal_log_prob(log_q_x, choices)
            log_q_reverse = cyclical.proposal_log_prob(log_q_y, back)
            log_accept = jnp.minimum(log_p_y - log_p_x + log_q_reverse - log_q_forward, 0.0)
            restored = cyclical.apply_choices(y, back, candidates_y)
            return y, log_q_forward, log_accept, jnp.all(restored == x)

        return jax.vmap(lambda x: jax.vmap(lambda c: move(x, c))(choice_vectors))(
            jnp.asarray(states)
        )

    pi = np.exp(np.asarray(jax.vmap(log_pi)(jnp.asarray(states))))
    return jax.jit(moves), pi / pi.sum(), (states, neighbourhood, local_fn, distance)


def transition_matrix(space, weights, step_size, balancing, seed):
    moves, pi, parts = _moves(space, weights, seed)
    states = parts[0]
    ys, log_q, log_a, restores = moves(step_size, balancing)
    log_q, log_a = np.asarray(log_q), np.asarray(log_a)
    proposable = np.isfinite(log_q)
    # every proposable move is undone by its reverse choices and stays in the support
    assert np.all(np.asarray(restores)[proposable])
    num_states = len(states)
    matrix = np.zeros((num_states, num_states))
    rows = np.broadcast_to(np.arange(num_states)[:, None], proposable.shape)
    cols = _index_of(states)(np.asarray(ys)[proposable])
    np.add.at(matrix, (rows[proposable], cols), np.exp(log_q + log_a)[proposable])
    # staying put (all choices 0) is counted once in the diagonal, with the rejections
    matrix[np.arange(num_states), np.arange(num_states)] += 1.0 - matrix.sum(1)
    forward_mass = np.where(proposable, np.exp(log_q), 0.0).sum(1)
    return matrix, forward_mass, pi, parts


FAST = {
    ("binary", "gradient"),
    ("categorical", "exact"),
    ("ordinal", "gradient"),
    ("mixed", "mixed"),
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
        assert np.all(matrix >= -1e-15)
        np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
        flow = pi[:, None] * matrix
        assert np.max(np.abs(flow - flow.T)) < 1e-10
        np.testing.assert_allclose(pi @ matrix, pi, atol=1e-10)
        # irreducible (detailed balance alone also holds for a kernel that never moves)
        reach = np.linalg.matrix_power((matrix > 0).astype(float) + np.eye(len(pi)), len(pi))
        assert np.all(reach > 0)


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
    log_q = cyclical.proposal_log_probs(d, jnp.ones_like(d), 0.4, 0.6)
    expected = jax.nn.sigmoid(0.6 * d[:, 0] - 1.0 / 0.8)
    np.testing.assert_allclose(np.exp(log_q[:, 1]), expected, rtol=1e-12)


def test_squared_distances():
    x = jnp.array([1, 0, 2], jnp.int32)
    candidates = jnp.array([[0, 2], [1, 0], [0, 4]], jnp.int32)
    table = cyclical.squared_distance_fn(np.array([3, 2, 0]))(x, candidates)
    np.testing.assert_array_equal(table, [[2.0, 2.0], [1.0, 1.0], [4.0, 4.0]])


@pytest.mark.parametrize("space", ["mixed", pytest.param("ordinal", marks=pytest.mark.slow)])
def test_kernel_matches_transition_matrix(x64, space):
    """The jitted kernel (independent categorical draws per coordinate, then the M-H test)
    draws from the enumerated matrix."""
    step_size, balancing, draws = 1.5, 0.8, 2500
    matrix, _, _, (states, neighbourhood, local_fn, distance) = transition_matrix(
        space, "mixed", step_size, balancing, seed=1
    )
    kernel = cyclical.build_kernel(neighbourhood, distance)

    @jax.jit
    def step_from(x, keys):
        state = cyclical.init(x, local_fn)
        return jax.vmap(lambda k: kernel(k, state, local_fn, step_size, balancing))(keys)

    keys = random.split(random.key(0), (len(states), draws))
    new_state, info = jax.vmap(step_from)(jnp.asarray(states), keys)
    positions = np.asarray(new_state.position)
    counts = np.zeros_like(matrix)
    index_of = _index_of(states)
    for row in range(len(states)):
        np.add.at(counts[row], index_of(positions[row]), 1)
    changed = np.sum(positions != states[:, None, :], axis=2)
    np.testing.assert_array_equal(np.asarray(info.num_changed), changed)
    assert chi_square_rows(counts, matrix) > 1e-4
