"""The path core's fast building blocks against their plain definitions: sampled paths
against the enumerated sequential draw without replacement, the matrix-product cumulative
sum against ``jnp.cumsum``, the stacked off-path mass against one log-sum-exp per weight
vector, and the probability of a path with a precomputed off-path mass against the one
without."""

import itertools
from math import inf

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from numpyro_discrete.core import path
from numpyro_discrete.core.balancing import get_balancing, log_weights

from exact import chi_square_rows


def _exact_path_distribution(log_w_coord, path_length):
    """Probabilities of every ordered path of `path_length` distinct coordinates under the
    sequential draw without replacement, by the definition (not through ``path_log_prob``)."""
    weights = np.exp(np.asarray(log_w_coord, np.float64))
    paths, probs = [], []
    for path_coords in itertools.permutations(range(len(weights)), path_length):
        prob, left = 1.0, weights.sum()
        for j in path_coords:
            prob *= weights[j] / left
            left -= weights[j]
        paths.append(path_coords)
        probs.append(prob)
    return paths, np.asarray(probs)


@pytest.mark.parametrize(
    "num_draws", [1, 3, None, 64], ids=["completion", "mixed", "default", "draws-only"]
)
def test_sampled_paths_follow_the_sequential_draw(num_draws):
    """Ordered paths of 3 of 6 coordinates (one of zero weight, one of most of the weight)
    against the enumerated sequential draw, chi-square at level 1e-4. One draw leaves the
    path to the Gumbel-top-k completion; 64 draws almost never need it; 3 and the default
    mix both."""
    log_w = jnp.log(jnp.asarray([[4.0], [0.5], [1.0], [0.0], [2.0], [0.25]]))
    path_length, length, draws = 3, 4, 60000
    paths, probs = _exact_path_distribution(log_w[:, 0], path_length)
    sample = jax.jit(
        jax.vmap(
            lambda key: path.sample_path(key, log_w, jnp.int32(path_length), length, num_draws)
        )
    )
    sampled = sample(random.split(random.key(0), draws))
    assert np.all(np.asarray(sampled.active) == (np.arange(length) < path_length))
    coords = np.asarray(sampled.coords)[:, :path_length]
    on_path = np.zeros((draws, log_w.shape[0]), bool)
    np.put_along_axis(on_path, coords, True, axis=1)
    np.testing.assert_array_equal(np.asarray(sampled.on_path), on_path)
    index = {p: i for i, p in enumerate(paths)}
    counts = np.bincount([index[tuple(row)] for row in coords], minlength=len(paths))
    assert chi_square_rows(counts[None, :], probs[None, :]) > 1e-4


def test_completion_reaches_coordinates_whose_weight_underflows():
    """Weights ``1, e^-50, e^-200, e^-300`` and a zero: in float32 ``e^-200`` and ``e^-300``
    underflow against the first, and ``e^-50`` is drawn with probability ``2e-22``, so the
    draws with replacement find one coordinate and Gumbel-top-k completes the path, in
    weight order (log-weight gaps of 50 or more are crossed with probability below
    ``e^-50``)."""
    log_w = jnp.asarray([[-300.0], [0.0], [-inf], [-50.0], [-200.0]], jnp.float32)
    sample = jax.jit(jax.vmap(lambda key: path.sample_path(key, log_w, jnp.int32(4), 4)))
    sampled = sample(random.split(random.key(1), 1000))
    np.testing.assert_array_equal(np.asarray(sampled.coords), np.tile([1, 3, 4, 0], (1000, 1)))


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("size", [1, 5, 32, 33, 100, 256, 2500])
def test_cumulative_sum_matches_cumsum(size, x64):
    """Both directions, lengths below, at and above the block size, to round-off."""
    with jax.enable_x64(x64):
        values = jnp.asarray(np.random.default_rng(size).exponential(size=size))
        rtol = 1e-12 if x64 else 1e-5
        for reverse in (False, True):
            expected = jnp.cumsum(values[::-1])[::-1] if reverse else jnp.cumsum(values)
            got = path.cumulative_sum(values, reverse=reverse)
            assert got.dtype == values.dtype
            np.testing.assert_allclose(got, expected, rtol=rtol)


def test_stacked_off_path_mass_matches_one_reduction_per_vector():
    """The off-path mass of two weight vectors in one reduction equals a log-sum-exp of
    each; a path covering every coordinate of positive weight leaves ``-inf``."""
    rng = np.random.default_rng(0)
    log_w = jnp.asarray(rng.normal(size=(2, 50)) * 30)
    on_path = jnp.asarray(rng.random(50) < 0.3)
    got = path.off_path_log_mass(log_w, on_path)
    for row in range(2):
        expected = logsumexp(jnp.where(on_path, -jnp.inf, log_w[row]))
        np.testing.assert_allclose(got[row], expected, rtol=1e-6)
    zero_off_path = jnp.where(on_path, log_w[0], -jnp.inf)
    assert path.off_path_log_mass(zero_off_path, on_path) == -jnp.inf


@pytest.mark.parametrize("reverse", [False, True])
def test_path_log_prob_with_precomputed_off_path_mass(reverse):
    """Passing the off-path mass (as the kernel does) changes nothing."""
    d = jnp.asarray(np.random.default_rng(1).normal(size=(40, 1)) * 3)
    log_w = log_weights(get_balancing("sqrt"), d)
    for seed in range(5):
        p = path.sample_path(random.key(seed), log_w, jnp.int32(9), 16)
        off = path.off_path_log_mass(log_w[:, 0], p.on_path)
        np.testing.assert_allclose(
            path.path_log_prob(log_w, p, reverse, off),
            path.path_log_prob(log_w, p, reverse),
            rtol=1e-6,
        )
