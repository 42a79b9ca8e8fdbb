"""Adaptive path length of ALBP (Sun, Dai, Schuurmans 2022, Sec. 4 and Alg. 2).

The scale ``R_t`` is real. Each step draws the integer path length by probabilistic rounding,
so that ``E[R] = R_t``, and during warmup only ``R_t`` follows a Robbins-Monro recursion
towards the target acceptance rate (0.574 is optimal for locally balanced proposals).

The recursion has a constant gain, so ``R_t`` keeps fluctuating around the value whose
acceptance is the target (by several percent of ``R`` on a 1000-coordinate target). Rather
than freezing whichever ``R_t`` the last warmup step happens to reach, the frozen value is the
average of ``R_t`` over the second half of warmup (Polyak-Ruppert averaging, as dual
averaging does for HMC's step size); the recursion itself is Alg. 2's.

A frozen scale above 1 is never an integer: an integer ``R`` would make every step move
exactly ``R`` coordinates, and on binary sites (or ordinal ones moved by +-1) an even ``R``
never changes the parity of ``sum(x)``, leaving the chain in half of the space. That happens
when ``R_t`` sits at its bound ``R_max`` through the second half of warmup; the frozen value
is then moved down by 1/2, so the rounding draws two consecutive path lengths.
"""

import jax
from jax import random
import jax.numpy as jnp

__all__ = ["adapt_scale", "round_path_length", "update_scale"]


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


def adapt_scale(
    i: jax.Array,
    scale: jax.Array,
    mean_scale: jax.Array,
    accept_prob: jax.Array,
    num_warmup: int,
    target_accept_prob: float,
    max_scale: int,
) -> tuple[jax.Array, jax.Array]:
    """
    One warmup step (``i < num_warmup``) of the scale adaptation.

    :return: the next scale ``R_{t+1}`` (at the last warmup step, the frozen value: the
        average of ``R_t`` over the second half of warmup) and that running average.
    """
    new_scale = update_scale(scale, accept_prob, target_accept_prob, max_scale)
    start = num_warmup // 2
    count = jnp.maximum(i - start + 1, 1)
    mean_scale = jnp.where(i >= start, mean_scale + (new_scale - mean_scale) / count, new_scale)
    new_scale = jnp.where(i == num_warmup - 1, _non_integer(mean_scale), new_scale)
    return new_scale, mean_scale


def _non_integer(scale: jax.Array) -> jax.Array:
    """`scale`, moved down by 1/2 where it is an integer above 1 (see the module notes)."""
    is_integer = (scale > 1.0) & (scale == jnp.floor(scale))
    return jnp.where(is_integer, scale - 0.5, scale)
