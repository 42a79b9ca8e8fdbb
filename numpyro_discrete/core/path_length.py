"""The path length of LBP-R as a real scale: its probabilistic rounding, its adaptation during
warmup (ALBP; Sun, Dai, Schuurmans 2022, Sec. 4 and Alg. 2) and the ALBP step that joins them
to :mod:`~numpyro_discrete.core.path`.

The path length ``R_t`` is real. Each step draws the integer path length by probabilistic
rounding, so that ``E[R] = R_t``, and during warmup only ``R_t`` follows a Robbins-Monro
recursion towards the target acceptance rate (0.574 is optimal for locally balanced
proposals). A fixed integer ``R_t`` (LBP) rounds to itself.

The adaptation is an ``(init, update, final)`` triple of pure functions. The recursion has a
constant gain, so ``R_t`` keeps fluctuating around the value whose acceptance is the target
(by several percent of ``R`` on a 1000-coordinate target). Rather than freezing whichever
``R_t`` the last warmup step happens to reach, :func:`final` is the average of ``R_t`` over
the second half of warmup (Polyak-Ruppert averaging, as dual averaging does for HMC's step
size); the recursion itself is Alg. 2's.

The state also averages the acceptance rate over the second half of warmup, which tells
whether even ``R = 1`` accepts far below the target.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import path
from numpyro_discrete.core.balancing import LogBalancing
from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.state import Info, State

__all__ = [
    "PathLengthState",
    "build_kernel",
    "final",
    "init",
    "robbins_monro_step",
    "round_path_length",
    "update",
]


class PathLengthState(NamedTuple):
    """
    - **path_length** - ``R_t``, the real path length the next step rounds.
    - **mean_path_length** - average of ``R_t`` over the second half of warmup so far.
    - **window_accept_prob** - average acceptance rate over the same steps.
    """

    path_length: jax.Array
    mean_path_length: jax.Array
    window_accept_prob: jax.Array


def round_path_length(rng_key: jax.Array, path_length: jax.Array) -> jax.Array:
    """
    Alg. 2, line 5: ``floor(R_t) + Bernoulli(R_t - floor(R_t))``, an integer with mean
    ``R_t``.

    (One reference implementation has this test reversed, which biases ``E[R]`` away from
    ``R_t``: the Bernoulli success adds one.)
    """
    floor = jnp.floor(path_length)
    round_up = random.uniform(rng_key, dtype=jnp.result_type(path_length)) < path_length - floor
    return (floor + round_up).astype(jnp.int32)


def robbins_monro_step(
    path_length: jax.Array,
    accept_prob: jax.Array,
    target_accept_prob: jax.Array | float,
    max_path_length: jax.Array | int,
) -> jax.Array:
    """Alg. 2, line 17: ``R_{t+1} = clip(R_t + (a_t - target), 1, R_max)``."""
    return jnp.clip(path_length + (accept_prob - target_accept_prob), 1.0, max_path_length)


def init(path_length: jax.Array | float) -> PathLengthState:
    """The adaptation state at the initial path length ``R_1``."""
    path_length = jnp.asarray(path_length, jnp.result_type(float))
    return PathLengthState(path_length, path_length, jnp.zeros_like(path_length))


def update(
    state: PathLengthState,
    i: jax.Array,
    accept_prob: jax.Array,
    num_warmup: jax.Array | int,
    target_accept_prob: jax.Array | float,
    max_path_length: jax.Array | int,
) -> PathLengthState:
    """
    Warmup step ``i < num_warmup`` of the adaptation, after a step that accepted with
    probability `accept_prob`: :func:`robbins_monro_step`, and the running averages of the
    path length and the acceptance rate over the second half of warmup. At the last warmup
    step the path length becomes :func:`final`'s frozen value. Callers gate it with
    ``i < num_warmup``.
    """
    new_path_length = robbins_monro_step(
        state.path_length, accept_prob, target_accept_prob, max_path_length
    )
    start = num_warmup // 2
    count = jnp.maximum(i - start + 1, 1)
    averaging = i >= start
    mean = state.mean_path_length
    mean = jnp.where(averaging, mean + (new_path_length - mean) / count, new_path_length)
    rate = state.window_accept_prob
    rate = jnp.where(averaging, rate + (accept_prob - rate) / count, accept_prob)
    adapted = PathLengthState(new_path_length, mean, rate.astype(mean.dtype))
    return adapted._replace(
        path_length=jnp.where(i == num_warmup - 1, final(adapted), new_path_length)
    )


def final(state: PathLengthState) -> jax.Array:
    """The frozen path length: the second-half average, moved down by 1/2 where it is an
    integer above 1 (see the module notes)."""
    mean = state.mean_path_length
    is_integer = (mean > 1.0) & (mean == jnp.floor(mean))
    return jnp.where(is_integer, mean - 0.5, mean)


def build_kernel(
    log_balancing: LogBalancing,
    neighbourhood: Neighbourhood,
    max_path_length: int,
) -> Callable[[jax.Array, State, LocalFn, jax.Array], tuple[State, Info, jax.Array]]:
    """
    One step of LBP-R at a real path length (Alg. 2, lines 5-16): round ``R_t``, then one
    :func:`~numpyro_discrete.core.path.build_kernel` step. The adaptation (:func:`update`)
    is the caller's, so that any acceptance statistic (one chain's, a batch's mean) can
    drive it.

    :param log_balancing: log balancing function.
    :param neighbourhood: candidate values per coordinate.
    :param max_path_length: static bound of the path length; ``R_t`` must be at most this.
    :return: ``kernel(rng_key, state, local_fn, path_length) -> (state, info, R)``, ``R`` the
        integer path length of the step.
    """
    path_kernel = path.build_kernel(log_balancing, neighbourhood, max_path_length)

    def kernel(
        rng_key: jax.Array, state: State, local_fn: LocalFn, path_length: jax.Array
    ) -> tuple[State, Info, jax.Array]:
        key_round, key_path = random.split(rng_key)
        length = round_path_length(key_round, path_length)
        new_state, info = path_kernel(key_path, state, local_fn, length)
        return new_state, info, length

    return kernel
