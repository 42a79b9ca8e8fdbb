"""Uniform and Gumbel noise for the path sampler, which needs hundreds to thousands of
draws per step.

For float32 and threefry keys (JAX's default), the bits are Threefry-2x32 (Salmon et al.
2011, 20 rounds) of sequential counters, the scheme ``jax.random`` used before
``jax_threefry_partitionable`` became the default, so it is the same generator as
:func:`jax.extend.random.threefry_2x32`, bit for bit. The rounds are written out here, not
called through JAX's primitive, because its CPU lowering is a rolled loop of five
iterations whose every pass copies its carry: written out, XLA fuses hashing, the uniform
and both logarithms into one loop over the coordinates, several times faster for the few
thousand draws of a step on a cheap model. Other key types and dtypes use
:func:`jax.random.uniform` and :func:`jax.random.gumbel`.
"""

from collections.abc import Callable

import jax
from jax import lax, random
import jax.numpy as jnp

__all__ = ["COUNTER_MULTIPLE", "gumbel", "num_counters", "threefry_2x32", "uniform"]

# Threefry-2x32 rotation constants, two alternating groups of four rounds (Salmon et al.
# 2011, Table 4) and the key-schedule parity constant.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = 0x1BD11BDA
#: counters are hashed in multiples of this many (16 blocks of two words)
COUNTER_MULTIPLE = 32


def _rotate_left(x: jax.Array, distance: int) -> jax.Array:
    return (x << jnp.uint32(distance)) | (x >> jnp.uint32(32 - distance))


def _threefry_words(key_data: jax.Array, counters: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The two output words of Threefry-2x32 for the blocks ``(counters[:h], counters[h:])``."""
    half = counters.shape[0] // 2
    ks = (key_data[0], key_data[1], key_data[0] ^ key_data[1] ^ jnp.uint32(_KEY_PARITY))
    x0 = counters[:half] + ks[0]
    x1 = counters[half:] + ks[1]
    # 5 groups of 4 rounds, a key injection after each group
    for group in range(5):
        for distance in _ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, distance) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + jnp.uint32(group + 1)
    return x0, x1


def threefry_2x32(key_data: jax.Array, counters: jax.Array) -> jax.Array:
    """
    Threefry-2x32 of an even-length ``uint32`` counter vector under a ``(2,)`` ``uint32``
    key, with the layout of :func:`jax.extend.random.threefry_2x32`: the first half of
    `counters` are the first words of the blocks, the second half the second words, and
    the output keeps that layout.
    """
    return jnp.concatenate(_threefry_words(key_data, counters))


def _uniform_from_bits(bits: jax.Array) -> jax.Array:
    # 23 random mantissa bits: a float in [1, 2), shifted to [0, 1), as jax.random does
    one_to_two = lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32)
    return one_to_two - 1.0


def _gumbel_from_bits(bits: jax.Array) -> jax.Array:
    uniform = jnp.maximum(_uniform_from_bits(bits), jnp.finfo(jnp.float32).tiny)
    return -jnp.log(-jnp.log(uniform))


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


def num_counters(num: int) -> int:
    """The counters hashed for `num` draws: `num` rounded up to whole blocks of
    :data:`COUNTER_MULTIPLE` (two words per block)."""
    return -(-num // COUNTER_MULTIPLE) * COUNTER_MULTIPLE


def _draws(
    key: jax.Array, num: int, dtype: jnp.dtype, transform: Callable, fallback: Callable
) -> jax.Array:
    key_data = _threefry_key_data(key)
    if key_data is None or jnp.dtype(dtype) != jnp.float32:
        return fallback(key, (num,), dtype)
    # blocks in whole vectors: an odd number of blocks (num = 40002) left XLA's fused loop
    # a scalar remainder that made it about 6x slower (measured on CPU, jax 0.10.2)
    counters = jnp.arange(num_counters(num), dtype=jnp.uint32)
    # each word is transformed before the halves are joined: joined first, XLA's fused loop
    # would hash every block twice, once per output word
    words = _threefry_words(key_data, counters)
    return jnp.concatenate([transform(word) for word in words])[:num]


def gumbel(key: jax.Array, num: int, dtype: jnp.dtype) -> jax.Array:
    """`num` independent standard Gumbel draws of `dtype`."""
    return _draws(key, num, dtype, _gumbel_from_bits, random.gumbel)


def uniform(key: jax.Array, num: int, dtype: jnp.dtype) -> jax.Array:
    """`num` independent draws of `dtype`, uniform on ``[0, 1)``."""
    return _draws(key, num, dtype, _uniform_from_bits, random.uniform)
