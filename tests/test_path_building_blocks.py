"""The path core's fast building blocks against their plain definitions: the top-k sized to
the path length against one full top-k, the matrix-product cumulative sum against
``jnp.cumsum``, the stacked off-path mass against one log-sum-exp per weight vector, and
the probability of a path with a precomputed off-path mass against the one without."""

import numpy as np
import pytest

import jax
from jax import lax, random
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from numpyro_discrete.core import path
from numpyro_discrete.core.balancing import get_balancing, log_weights


@pytest.mark.parametrize("length", [1, 2, 7, 32, 100, 256])
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_top_k_winners_match_a_full_top_k(length, ties):
    """For every path length R a bucket of size k serves (k/2 < R <= k), the first R
    indices equal those of one top-k of size k, order and tie-breaking included, and the
    padding after them is a valid coordinate."""
    num_coords = 600
    rng = np.random.default_rng(length)
    keys = rng.normal(size=num_coords).astype(np.float32)
    if ties:  # few distinct values: ties among the winners, broken by index
        keys = np.round(keys * 2) / 2
    keys[rng.choice(num_coords, 20, replace=False)] = -np.inf  # zero-weight coordinates
    keys = jnp.asarray(keys)
    expected = np.asarray(lax.top_k(keys, length)[1])
    winners = jax.jit(path._top_k_indices, static_argnums=2)
    for num_winners in range(length // 2 + 1, length + 1):
        got = np.asarray(winners(keys, jnp.int32(num_winners), length))
        assert got.shape == (length,)
        np.testing.assert_array_equal(got[:num_winners], expected[:num_winners])
        assert np.all((got >= 0) & (got < num_coords))


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
