import numpy as np
import pytest
from scipy import stats

import jax
from jax import random
from jax.extend.random import threefry_2x32 as jax_threefry_2x32
import jax.numpy as jnp

from numpyro_discrete.core.noise import gumbel, threefry_2x32


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


@pytest.mark.parametrize("num", [1, 7, 2500])
def test_gumbel_is_the_transform_of_jax_threefry_bits(num):
    key = random.key(11)
    bits = jax_threefry_2x32(random.key_data(key), jnp.arange(num + num % 2, dtype=jnp.uint32))
    one_to_two = jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32)
    expected = -jnp.log(-jnp.log(jnp.maximum(one_to_two - 1.0, jnp.finfo(jnp.float32).tiny)))
    np.testing.assert_array_equal(np.asarray(gumbel(key, num, jnp.float32)), expected[:num])
