"""Gumbel noise for the path sampler, which needs one draw per coordinate per step.

For float32 and threefry keys (JAX's default), the bits come from ``threefry_2x32`` applied
to sequential counters, the scheme ``jax.random`` used before ``jax_threefry_partitionable``
became the default. It is the same generator; on CPU it is about five times faster than the
partitionable scheme for a few thousand draws, which is most of the cost of a step on a
cheap model. Other key types and dtypes use :func:`jax.random.gumbel`.
"""

import jax
from jax import lax, random
from jax.extend.random import threefry_2x32
import jax.numpy as jnp

__all__ = ["gumbel"]


def _threefry_key_data(key: jax.Array) -> jax.Array | None:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if str(random.key_impl(key)) != "threefry2x32":
            return None
        return random.key_data(key)
    # a raw uint32 key (``random.PRNGKey``) of the default implementation
    if key.shape == (2,) and key.dtype == jnp.uint32:
        if jax.config.jax_default_prng_impl == "threefry2x32":
            return key
    return None


def gumbel(key: jax.Array, num: int, dtype: jnp.dtype) -> jax.Array:
    """`num` independent standard Gumbel draws of `dtype`."""
    key_data = _threefry_key_data(key)
    if key_data is None or jnp.dtype(dtype) != jnp.float32:
        return random.gumbel(key, (num,), dtype)
    counters = jnp.arange(num + num % 2, dtype=jnp.uint32)
    bits = threefry_2x32(key_data, counters)[:num]
    # 23 random mantissa bits: a float in [1, 2), shifted to [0, 1), as jax.random does
    one_to_two = lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32)
    uniform = jnp.maximum(one_to_two - 1.0, jnp.finfo(jnp.float32).tiny)
    return -jnp.log(-jnp.log(uniform))
