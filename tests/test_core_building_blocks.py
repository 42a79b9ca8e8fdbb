"""The core's building blocks against their plain definitions, and their numerical edge
cases: the candidate tables and squared distances of the neighbourhoods, mixed local ratios,
sampled paths against the enumerated sequential draw without replacement, the
matrix-product cumulative sum against ``jnp.cumsum``, the stacked off-path mass against one
log-sum-exp per weight vector, the probability of a path with a precomputed off-path mass,
extreme local ratios, and the fast Gumbel noise against JAX's threefry."""

import contextlib
import itertools
from math import inf

import numpy as np
import pytest
from scipy import stats

import jax
from jax import lax, random
from jax.extend.random import threefry_2x32 as jax_threefry_2x32
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from numpyro_discrete.core import path, path_draw, state
from numpyro_discrete.core.balancing import get_balancing, log_weights
from numpyro_discrete.core.local_ratios import exact_local_fn, gradient_local_fn, mixed_local_fn
from numpyro_discrete.core.neighbourhood import (
    UNBOUNDED,
    CoordinateSupports,
    SupportKind,
    binary_neighbourhood,
    coordinate_neighbourhood,
    squared_distance_fn,
)
from numpyro_discrete.core.noise import gumbel, num_counters, threefry_2x32

from helpers import chi_square_rows, coordinate_space, random_mixed_target

# --- neighbourhoods and local ratios --------------------------------------------------------

CAT, BIN, ORD = SupportKind.CATEGORICAL, SupportKind.BINARY, SupportKind.ORDINAL


def _supports(kind, num_categories, lower, upper):
    return CoordinateSupports(
        *(np.array(a, np.int32) for a in (kind, num_categories, lower, upper))
    )


def test_neighbourhood_tables():
    """Candidates and validity of nominal and ordinal coordinates, boundaries included."""
    supports = _supports([CAT, BIN, ORD, ORD], [4, 2, 0, 0], [0, 0, 0, 0], [3, 1, 2, UNBOUNDED])
    neighbourhood = coordinate_neighbourhood(supports, 2)
    x = jnp.array([2, 1, 0, 5], jnp.int32)
    candidates = np.asarray(neighbourhood.candidates(x))
    valid = np.asarray(neighbourhood.valid(x))
    assert candidates.shape == (4, 4)
    np.testing.assert_array_equal(candidates[0][valid[0]], [0, 1, 3])
    np.testing.assert_array_equal(candidates[1][valid[1]], [0])
    np.testing.assert_array_equal(candidates[2][valid[2]], [1, 2])  # lower boundary
    np.testing.assert_array_equal(candidates[3][valid[3]], [3, 4, 6, 7])  # unbounded above


def test_binary_supports_give_the_flip_neighbourhood():
    """All-binary supports (``CoordinateSupports.binary``) move by flips only (``M = 1``); a
    two-valued categorical coordinate moves like a binary one (its one other value)."""
    assert coordinate_neighbourhood(CoordinateSupports.binary(5), 3) is binary_neighbourhood
    two_valued = _supports([CAT, ORD], [2, 0], [0, 0], [1, 4])
    x = jnp.array([1, 2], jnp.int32)
    candidates = np.asarray(coordinate_neighbourhood(two_valued, 1).candidates(x))
    valid = np.asarray(coordinate_neighbourhood(two_valued, 1).valid(x))
    np.testing.assert_array_equal(candidates[0][valid[0]], [0])
    np.testing.assert_array_equal(candidates[1][valid[1]], [1, 3])


def test_squared_distances():
    """1 for a binary move, 2 for a categorical one (one-hot), ``(v - x)^2`` for an ordinal
    one."""
    x = jnp.array([1, 0, 2], jnp.int32)
    candidates = jnp.array([[0, 2], [1, 0], [0, 4]], jnp.int32)
    supports = _supports([CAT, BIN, ORD], [3, 2, 0], [0, 0, 0], [2, 1, UNBOUNDED])
    table = squared_distance_fn(supports)(x, candidates)
    np.testing.assert_array_equal(table, [[2.0, 2.0], [1.0, 1.0], [4.0, 4.0]])


def test_mixed_local_fn_matches_exact_and_gradient_rows(x64):
    """Mixed weights take the exact rows on the exact coordinates and the gradient rows
    elsewhere, and the same ``log pi``."""
    supports, states = coordinate_space("mixed")
    neighbourhood = coordinate_neighbourhood(supports, 1)
    log_pi = random_mixed_target(len(supports.kind), seed=5)
    exact_rows = supports.kind == SupportKind.CATEGORICAL
    exact_coords = {"gradient": np.zeros(0, np.int32), "exact": None}
    exact_coords["mixed"] = np.flatnonzero(exact_rows)
    x = jnp.asarray(states[7])
    # compiled, as in a step (op by op, its operations compile one by one)
    parts = {
        weights: jax.jit(mixed_local_fn(log_pi, log_pi, neighbourhood, coords))(x)
        for weights, coords in exact_coords.items()
    }
    for log_p, _ in parts.values():
        np.testing.assert_allclose(log_p, jax.jit(log_pi)(x), rtol=1e-12)
    np.testing.assert_array_equal(parts["mixed"][1][exact_rows], parts["exact"][1][exact_rows])
    np.testing.assert_array_equal(parts["mixed"][1][~exact_rows], parts["gradient"][1][~exact_rows])


# --- the path sampler -----------------------------------------------------------------------


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


@pytest.mark.parametrize("chunk_size", [1, 2, None], ids=["chunk-1", "chunk-2", "one-chunk"])
def test_sampled_paths_follow_the_sequential_draw(chunk_size):
    """Ordered paths of 3 of 6 coordinates (one of zero weight, one of half the weight)
    against the enumerated sequential draw, chi-square at level 1e-4. Draws with
    replacement stop once the path holds half the weight, so most paths end by Gumbel-top-k;
    chunks of 1 and 2 draws take several passes of each kind, the default one pass."""
    log_w = jnp.log(jnp.asarray([[4.0], [0.5], [1.0], [0.0], [2.0], [0.25]]))
    path_length, length, draws = 3, 4, 60000
    paths, probs = _exact_path_distribution(log_w[:, 0], path_length)
    sample = jax.jit(
        jax.vmap(
            lambda key: path_draw.sample_path(
                key, log_w, jnp.int32(path_length), length, chunk_size
            )
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
    sample = jax.jit(jax.vmap(lambda key: path_draw.sample_path(key, log_w, jnp.int32(4), 4)))
    sampled = sample(random.split(random.key(1), 1000))
    np.testing.assert_array_equal(np.asarray(sampled.coords), np.tile([1, 3, 4, 0], (1000, 1)))


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("size", [1, 5, 64, 65, 100, 256, 2500, 40000])
def test_cumulative_sum_matches_cumsum(size, x64):
    """Both directions, lengths below, at and above the block size, and beyond the
    products' bound (the scan), to round-off."""
    with jax.enable_x64(x64):
        values = jnp.asarray(np.random.default_rng(size).exponential(size=size))
        rtol = 1e-12 if x64 else 1e-5
        for reverse in (False, True):
            expected = jnp.cumsum(values[::-1])[::-1] if reverse else jnp.cumsum(values)
            # compiled, as it runs in a step (op by op, its blocks compile one by one)
            got = jax.jit(path_draw.cumulative_sum, static_argnames="reverse")(
                values, reverse=reverse
            )
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

    @jax.jit
    def both_ways(key):
        p = path_draw.sample_path(key, log_w, jnp.int32(9), 16)
        off = path.off_path_log_mass(log_w[:, 0], p.on_path)
        return path.path_log_prob(log_w, p, reverse, off), path.path_log_prob(log_w, p, reverse)

    for seed in range(5):
        with_off, without = both_ways(random.key(seed))
        np.testing.assert_allclose(with_off, without, rtol=1e-6)


@pytest.mark.parametrize(
    ("num_candidates", "chunk_size"),
    [(3, 2), (1, 2), (1, 3), (1, 32), (3, 3), (3, 32)],
)
def test_chunked_path_probabilities_equal_the_definition(num_candidates, chunk_size):
    """The kernel's path probabilities, computed a chunk at a time with normalisers carried
    between chunks, equal :func:`path.path_log_prob` of the same forward and reverse paths
    (float64, to 1e-10), for path lengths within one chunk, over several, with a partial last
    chunk, and covering every coordinate."""
    num_coords = 20
    rng = np.random.default_rng(chunk_size * num_candidates)
    with jax.enable_x64(True):
        log_w_x = jnp.asarray(rng.normal(size=(num_coords, num_candidates)) * 2)
        log_w_y = jnp.asarray(rng.normal(size=(num_coords, num_candidates)) * 2)
        # the reverse path's candidate at each coordinate (the kernel's restoring value)
        restoring = jnp.asarray(rng.integers(num_candidates, size=num_coords))
        log_w_coord = jnp.stack([logsumexp(log_w_y, axis=1), logsumexp(log_w_x, axis=1)])
        buffer = path_draw.buffer_size(num_coords, chunk_size)

        # one compiled program for every path length, as in the kernel (R is traced there)
        @jax.jit
        def both_ways(key, length):
            drawn = path_draw.draw_into_buffers(
                key, log_w_x, log_w_coord[1], length, buffer, chunk_size, None
            )
            forward = path_draw.path_from_coords(
                drawn.coords[:num_coords], drawn.choices[:num_coords], length, num_coords
            )
            off = path.off_path_log_mass(log_w_coord, drawn.on_path)
            chunked = path._log_q_ratio(
                drawn,
                length,
                log_w_x,
                log_w_y,
                log_w_coord,
                off,
                restoring.__getitem__,
                chunk_size,
            )
            backward = forward._replace(choices=restoring[forward.coords])
            definition = (
                path.path_log_prob(log_w_y, backward, True),
                path.path_log_prob(log_w_x, forward),
            )
            return drawn.on_path, forward.on_path, chunked, definition

        for seed, length in enumerate([1, 2, 5, 7, 13, 20]):
            drawn_on_path, on_path, chunked, definition = both_ways(
                random.key(seed), jnp.int32(length)
            )
            np.testing.assert_array_equal(drawn_on_path, on_path)
            assert int(on_path.sum()) == length
            # reverse, then forward
            np.testing.assert_allclose(chunked, definition, rtol=1e-10)


# --- numerical edge cases of the path kernel ------------------------------------------------


def _precision(x64):
    return jax.enable_x64(True) if x64 else contextlib.nullcontext()


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("balancing", ["sqrt", "barker"])
def test_extreme_log_ratios_give_finite_proposal_probabilities(x64, balancing):
    """Local log-ratios of size up to 1e4 (weights exp(+-5000), far outside float range)
    give finite path probabilities, forwards and backwards: everything stays in log
    space."""
    with _precision(x64):
        num_coords, length = 64, 8
        d = jnp.asarray(np.random.default_rng(0).choice([-1e4, -3e3, 0.0, 1e4], (num_coords, 1)))
        log_w = log_weights(get_balancing(balancing), d)
        for seed in range(5):
            p = path_draw.sample_path(random.key(seed), log_w, jnp.int32(length), length)
            for reverse in (False, True):
                log_q = path.path_log_prob(log_w, p, reverse)
                assert jnp.isfinite(log_q) and log_q <= 0.0
        if balancing == "sqrt":
            # weights exp(5000) against at most exp(0): the coordinates of ratio 1e4 first
            assert np.all(np.asarray(d[p.coords, 0]) == 1e4)


@pytest.mark.parametrize(
    "x64, weights", [(False, "gradient"), (True, "exact")], ids=["float32", "float64"]
)
def test_extreme_fields_reach_the_mode_with_finite_acceptance(x64, weights):
    """A product target with fields +-1e4 (a point mass up to exp(-1e4)), started at the
    opposite corner: GWG moves one coordinate towards the mode per step with finite
    acceptance probabilities, reaches it after N steps and stays there."""
    with _precision(x64):
        float_dtype = jnp.result_type(float)
        num_coords = 12
        field = jnp.where(jnp.arange(num_coords) % 2 == 0, 1e4, -1e4).astype(float_dtype)

        def log_pi(x):
            return jnp.asarray(x, float_dtype) @ field

        local_fn = {"gradient": gradient_local_fn, "exact": exact_local_fn}[weights](
            log_pi, binary_neighbourhood
        )
        kernel = path.build_kernel(get_balancing("sqrt"), binary_neighbourhood, 1)
        mode = (np.arange(num_coords) % 2 == 0).astype(np.int32)
        start = state.init(jnp.asarray(1 - mode), local_fn)

        def step(current, key):
            current, info = kernel(key, current, local_fn, jnp.int32(1))
            return current, (info.accept_prob, current.position)

        keys = random.split(random.key(0), 2 * num_coords)
        last, (accept, positions) = jax.jit(lambda s: lax.scan(step, s, keys))(start)
        assert accept.dtype == float_dtype
        assert np.all(np.isfinite(accept)) and np.all((accept >= 0) & (accept <= 1))
        distance = np.abs(np.asarray(positions) - mode).sum(1)
        np.testing.assert_array_equal(distance[:num_coords], np.arange(num_coords - 1, -1, -1))
        np.testing.assert_array_equal(distance[num_coords:], 0)
        assert np.isfinite(last.log_density) and np.all(~np.isnan(last.log_ratios))


# --- the fast Gumbel noise ------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [random.key(3), random.PRNGKey(3), random.key(3, impl="rbg")],
    ids=["typed-threefry", "raw-threefry", "rbg"],
)
def test_gumbel_draws_are_standard_gumbel(key):
    draws = np.asarray(gumbel(key, 100001, jnp.float32))
    assert np.all(np.isfinite(draws))
    assert stats.kstest(draws, "gumbel_r").pvalue > 1e-3


@pytest.mark.parametrize("num", [2, 10, 2500, 10001 + 1])
@pytest.mark.parametrize("seed", [0, 7, 2**31 - 1])
def test_threefry_rounds_match_jax_bit_for_bit(seed, num):
    key_data = random.key_data(random.key(seed))
    counters = jnp.arange(num, dtype=jnp.uint32) * jnp.uint32(2654435761)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(threefry_2x32)(key_data, counters)),
        np.asarray(jax_threefry_2x32(key_data, counters)),
    )


def test_gumbel_keys_give_independent_streams():
    a = np.asarray(gumbel(random.key(0), 50000, jnp.float32))
    b = np.asarray(gumbel(random.fold_in(random.key(0), 1), 50000, jnp.float32))
    assert abs(stats.pearsonr(a, b).statistic) < 0.02
    # consecutive draws of one stream are independent too
    assert abs(stats.pearsonr(a[:-1], a[1:]).statistic) < 0.02


def test_gumbel_float64_falls_back_to_jax(x64):
    draws = gumbel(random.key(0), 10, jnp.float64)
    assert draws.dtype == jnp.float64
    np.testing.assert_array_equal(draws, random.gumbel(random.key(0), (10,), jnp.float64))


def test_gumbel_under_jit_and_vmap():
    keys = random.split(random.key(1), 4)
    draws = jax.jit(jax.vmap(lambda k: gumbel(k, 7, jnp.float32)))(keys)
    assert draws.shape == (4, 7)
    assert len(np.unique(np.asarray(draws))) == 28


@pytest.mark.parametrize("num", [1, 7, 2500, 40002])
def test_gumbel_is_the_transform_of_jax_threefry_bits(num):
    key = random.key(11)
    counters = jnp.arange(num_counters(num), dtype=jnp.uint32)
    bits = jax_threefry_2x32(random.key_data(key), counters)
    one_to_two = jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32)
    expected = -jnp.log(-jnp.log(jnp.maximum(one_to_two - 1.0, jnp.finfo(jnp.float32).tiny)))
    np.testing.assert_array_equal(np.asarray(gumbel(key, num, jnp.float32)), expected[:num])
