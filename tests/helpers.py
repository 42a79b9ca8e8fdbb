"""Exact enumeration helpers shared by the tests."""

import itertools

import numpy as np
from scipy import stats

import jax
import jax.numpy as jnp


def all_binary_states(num_coords: int) -> np.ndarray:
    """All ``2^N`` binary vectors, row ``k`` is the binary expansion of ``k``."""
    return np.array(list(itertools.product([0, 1], repeat=num_coords)), dtype=np.int32)


def state_index(states: jnp.ndarray) -> jnp.ndarray:
    """Inverse of :func:`all_binary_states` (row-major binary number)."""
    num_coords = states.shape[-1]
    powers = 2 ** jnp.arange(num_coords - 1, -1, -1)
    return jnp.sum(states * powers, axis=-1)


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def random_binary_target(num_coords: int, seed: int, num_hidden: int = 3):
    """
    A random log density on ``{0, 1}^N`` with pairwise couplings and a non-linear
    (RBM-like softplus) term, so that gradient-based local ratios are only approximate.
    Returns ``log_pi(x)`` accepting int or float vectors.
    """
    rng = np.random.default_rng(seed)
    field = rng.normal(0.0, 1.0, num_coords)
    coupling = np.triu(rng.normal(0.0, 0.5, (num_coords, num_coords)), 1)
    weights = rng.normal(0.0, 1.0, (num_hidden, num_coords))
    bias = rng.normal(0.0, 1.0, num_hidden)

    def log_pi(x):
        x = jnp.asarray(x, jnp.result_type(float))
        pairwise = x @ jnp.asarray(coupling) @ x
        hidden = jnp.sum(jnp.logaddexp(0.0, jnp.asarray(weights) @ x + jnp.asarray(bias)))
        return jnp.asarray(field) @ x + pairwise + hidden

    return log_pi


def exact_distribution(log_pi, states: np.ndarray) -> np.ndarray:
    """Normalised probabilities of `states` under the unnormalised `log_pi`."""
    log_p = np.asarray(jax.vmap(log_pi)(jnp.asarray(states)), dtype=np.float64)
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def iid_tv_quantile(pi, num_draws, quantile=0.99, reps=200, seed=0):
    """The `quantile` of the total variation between `pi` and the empirical distribution of
    `num_draws` independent exact draws."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(num_draws, pi, size=reps)
    tvs = 0.5 * np.abs(counts / num_draws - pi).sum(1)
    return float(np.quantile(tvs, quantile))


def enumerate_model(model, args, sites):
    """
    Exact posterior of a numpyro model over the joint values of `sites`, a dict
    ``name -> (shape, values)`` listing each site's support (truncated if infinite); every
    other latent site must be enumerated or absent. Returns the states as a flat integer
    array ``(S, N)`` (sites in the given order, row-major) and their probabilities, from
    numpyro's own ``log_density``.
    """
    from numpyro.infer.util import log_density

    names = list(sites)
    shapes = [sites[name][0] for name in names]
    sizes = [int(np.prod(shape)) for shape in shapes]
    per_coord = [
        sites[name][1] for name, size in zip(names, sizes, strict=True) for _ in range(size)
    ]
    states = np.array(list(itertools.product(*per_coord)), dtype=np.int32)

    def log_joint(flat):
        values, start = {}, 0
        for name, shape, size in zip(names, shapes, sizes, strict=True):
            values[name] = flat[start : start + size].reshape(shape)
            start += size
        return log_density(model, args, {}, values)[0]

    log_p = np.asarray(jax.jit(jax.vmap(log_joint))(jnp.asarray(states)), np.float64)
    p = np.exp(log_p - log_p.max())
    return states, p / p.sum()


def chi_square_rows(counts, matrix):
    """Pooled chi-square of observed transition counts against the exact rows."""
    expected = counts.sum(1, keepdims=True) * matrix
    mask = expected > 0
    assert np.all(counts[~mask] == 0), "a transition of probability zero happened"
    statistic = np.sum((counts[mask] - expected[mask]) ** 2 / expected[mask])
    dof = int(mask.sum()) - counts.shape[0]
    return stats.chi2.sf(statistic, dof)


def state_lookup(states: np.ndarray):
    """Map each row of `ys` to its row in the enumeration `states`, through a dict."""
    lookup = {tuple(s): i for i, s in enumerate(np.asarray(states))}
    return lambda ys: np.array([lookup[tuple(y)] for y in np.asarray(ys)], dtype=np.int64)


def path_transition_matrix(local_fn, neighbourhood, states, path_length, balancing, length=None):
    """
    The exact LBP-R transition matrix over the enumerated `states` (rows of the flat
    integer vector): from every state, every ordered path of `path_length` distinct
    coordinates with every choice of candidate value, through the core path functions and
    the M-H test of the kernel. Paths are padded to `length` (default `path_length`) with
    inactive entries that repeat coordinate 0, as the kernel pads them.

    Returns the matrix and, per state, the total forward probability of all paths (which
    must be 1). Also checks that every proposable move is undone by its reverse path.
    """
    from numpyro_discrete.core import path
    from numpyro_discrete.core.balancing import get_balancing, log_weights

    states = np.asarray(states, np.int32)
    num_coords = states.shape[1]
    length = path_length if length is None else length
    log_balancing = get_balancing(balancing)
    num_candidates = neighbourhood.candidates(jnp.asarray(states[0])).shape[1]
    orders = list(itertools.permutations(range(num_coords), path_length))
    picks = list(itertools.product(range(num_candidates), repeat=path_length))
    coords = np.array([c for c in orders for _ in picks], np.int32).reshape(-1, path_length)
    choices = np.array([m for _ in orders for m in picks], np.int32).reshape(-1, path_length)
    coords = jnp.asarray(np.pad(coords, ((0, 0), (0, length - path_length))))
    choices = jnp.asarray(np.pad(choices, ((0, 0), (0, length - path_length))))

    def move(x, coords, choices):
        log_p_x, d_x = local_fn(x)
        forward = path.path_from_coords(coords, choices, path_length, num_coords)
        y = path.apply_path(x, forward, neighbourhood)
        log_q_forward = path.path_log_prob(log_weights(log_balancing, d_x), forward)
        log_p_y, d_y = local_fn(y)
        backward = path.reverse_path(x, y, forward, neighbourhood)
        log_q_reverse = path.path_log_prob(log_weights(log_balancing, d_y), backward, True)
        log_accept = jnp.minimum(log_p_y - log_p_x + log_q_reverse - log_q_forward, 0.0)
        restored = path.apply_path(y, backward, neighbourhood)
        return y, log_q_forward, log_accept, jnp.all(restored == x)

    ys, log_q, log_a, restores = jax.jit(
        jax.vmap(lambda x: jax.vmap(lambda c, m: move(x, c, m))(coords, choices))
    )(jnp.asarray(states))
    log_q, log_a = np.asarray(log_q, np.float64), np.asarray(log_a, np.float64)
    proposable = np.isfinite(log_q)
    assert np.all(np.asarray(restores)[proposable]), "a move is not undone by its reverse"
    num_states, num_paths = len(states), coords.shape[0]
    matrix = np.zeros((num_states, num_states))
    rows = np.repeat(np.arange(num_states), num_paths).reshape(proposable.shape)[proposable]
    cols = state_lookup(states)(np.asarray(ys)[proposable])
    np.add.at(matrix, (rows, cols), np.exp(log_q + log_a)[proposable])
    matrix[np.arange(num_states), np.arange(num_states)] += 1.0 - matrix.sum(1)
    forward_mass = np.where(proposable, np.exp(log_q), 0.0).sum(1)
    return matrix, forward_mass


def assert_reversible(matrix, pi, atol=1e-10):
    """`matrix` is a stochastic matrix in detailed balance with `pi` (and so leaves it
    invariant), to `atol`."""
    assert np.all(matrix >= -1e-15)
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
    flow = pi[:, None] * matrix
    assert np.max(np.abs(flow - flow.T)) < atol
    np.testing.assert_allclose(pi @ matrix, pi, atol=atol)
