import numpy as np

from jax import random
import jax.numpy as jnp

from numpyro_discrete.core.adaptation import adapt_scale, round_path_length, update_scale


def test_probabilistic_rounding_has_mean_scale():
    keys = random.split(random.key(0), 40000)
    draws = np.asarray([round_path_length(k, jnp.float32(3.3)) for k in keys[:2000]])
    assert set(np.unique(draws)) == {3, 4}
    import jax

    draws = np.asarray(jax.vmap(lambda k: round_path_length(k, jnp.float32(3.3)))(keys))
    assert abs(draws.mean() - 3.3) < 0.01
    assert np.all(jax.vmap(lambda k: round_path_length(k, jnp.float32(5.0)))(keys) == 5)


def test_robbins_monro_step_and_clipping():
    np.testing.assert_allclose(update_scale(10.0, 1.0, 0.574, 100), 10.426, rtol=1e-6)
    np.testing.assert_allclose(update_scale(10.0, 0.0, 0.574, 100), 9.426, rtol=1e-6)
    assert update_scale(1.2, 0.0, 0.574, 100) == 1.0
    assert update_scale(99.9, 1.0, 0.574, 100) == 100.0


def test_frozen_value_is_the_mean_of_the_second_half():
    num_warmup, scale, mean = 10, jnp.float32(1.0), jnp.float32(1.0)
    history = []
    for i in range(num_warmup):
        scale, mean = adapt_scale(i, scale, mean, 0.9, num_warmup, 0.5, 100)
        history.append(float(scale))
    # R_t = 1.4, 1.8, ..., 4.6 during warmup, then the mean of steps 5..9 (R = 3.4, ..., 5)
    np.testing.assert_allclose(history[:-1], 1.0 + 0.4 * np.arange(1, 10), rtol=1e-6)
    np.testing.assert_allclose(history[-1], np.mean(1.0 + 0.4 * np.arange(6, 11)), rtol=1e-6)


def test_frozen_scale_is_never_an_integer_above_one():
    """At the bound ``R_max = 4`` through the second half of warmup the frozen scale is 3.5
    (an even integer path length would keep the parity of binary states); 1 stays 1."""
    num_warmup = 10
    for start, accept, frozen in ((4.0, 1.0, 3.5), (1.0, 0.0, 1.0)):
        scale = mean = jnp.asarray(start)
        for i in range(num_warmup):
            scale, mean = adapt_scale(
                jnp.asarray(i), scale, mean, jnp.asarray(accept), num_warmup, 0.574, 4
            )
        assert float(scale) == frozen
