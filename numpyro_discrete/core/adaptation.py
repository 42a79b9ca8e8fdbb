"""Adaptive path length of ALBP (Sun, Dai, Schuurmans 2022, Sec. 4 and Alg. 2).

The scale ``R_t`` is real. Each step draws the integer path length by probabilistic rounding,
so that ``E[R] = R_t``, and during warmup only ``R_t`` follows a Robbins-Monro recursion
towards the target acceptance rate (0.574 is optimal for locally balanced proposals).
"""

import jax
from jax import random
import jax.numpy as jnp

__all__ = ["round_path_length", "update_scale"]


def round_path_length(rng_key: jax.Array, scale: jax.Array) -> jax.Array:
    """
    ``floor(R_t) + Bernoulli(R_t - floor(R_t))``, an integer with mean ``R_t``.

    (One reference implementation has this test reversed, which biases ``E[R]`` away from
    ``R_t``: the Bernoulli success adds one.)
    """
    floor = jnp.floor(scale)
    round_up = random.uniform(rng_key, dtype=jnp.result_type(scale)) < scale - floor
    return (floor + round_up).astype(jnp.int32)


def update_scale(
    scale: jax.Array,
    accept_prob: jax.Array,
    target_accept_prob: float,
    max_scale: int,
) -> jax.Array:
    """Alg. 2: ``R_{t+1} = clip(R_t + (a_t - target), 1, R_max)``."""
    return jnp.clip(scale + (accept_prob - target_accept_prob), 1.0, max_scale)
