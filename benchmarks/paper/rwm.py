"""Random-walk Metropolis over ``R`` distinct binary coordinates (RWM-R), pure JAX.

The baseline of Sun, Dai and Schuurmans (2022, Sec. 3.5 and Appendix C, Alg. 3), which the
library does not ship. One step from ``x``:

1. pick ``R`` distinct coordinates uniformly at random (Alg. 3, line 6): the ``R`` largest
   of ``N`` i.i.d. Gumbel keys, so every ``R``-subset has probability ``1 / C(N, R)``;
2. ``y`` is ``x`` with those coordinates flipped (line 7);
3. the proposal is symmetric (``y`` proposes ``x`` through the same subset), so
   ``log A = log pi(y) - log pi(x)``; accept with probability ``min(1, A)`` (lines 8-13).

One compiled step serves every ``R`` up to a static maximum: the subset is drawn by a top-k
of a static size, the smallest of `buckets` that is ``>= R``, in a :func:`jax.lax.switch`.
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
from jax import lax, random
import jax.numpy as jnp
from jax.scipy.special import gammaln

from numpyro_discrete.core.noise import gumbel
from numpyro_discrete.core.state import Info

__all__ = [
    "RWMState",
    "build_kernel",
    "init",
    "log_accept_prob",
    "sample_flips",
    "subset_log_prob",
]

LogDensity = Callable[[jax.Array], jax.Array]


class RWMState(NamedTuple):
    """
    - **position** - flat binary state ``x``, shape ``(N,)``.
    - **log_density** - ``log pi(x)``, scalar.
    """

    position: jax.Array
    log_density: jax.Array


def init(position: jax.Array, log_density_fn: LogDensity) -> RWMState:
    """The state at `position`, with ``log pi`` cached."""
    return RWMState(position, jnp.asarray(log_density_fn(position), jnp.result_type(float)))


def sample_flips(
    rng_key: jax.Array, num_coords: int, path_length: jax.Array, length: int
) -> jax.Array:
    """
    A uniformly random subset of ``path_length`` distinct coordinates, as a boolean mask.

    :param rng_key: random key.
    :param num_coords: ``N``.
    :param path_length: ``R``, integer scalar, ``0 <= R <= length``.
    :param length: static top-k size ``k >= R``.
    :return: mask of shape ``(N,)`` with exactly ``R`` entries set.
    """
    # Alg. 3, line 6: the top-R of i.i.d. keys is a uniform R-subset (the library's fast
    # Gumbel draws, as the LBP path uses: Gumbel-top-k with equal weights)
    keys = gumbel(rng_key, num_coords, jnp.float32)
    coords = lax.top_k(keys, length)[1]
    active = jnp.arange(length) < path_length
    return jnp.zeros(num_coords, bool).at[coords].max(active)


def subset_log_prob(num_coords: int, path_length: int) -> jax.Array:
    """``log(1 / C(N, R))``: the probability that :func:`sample_flips` returns one given
    ``R``-subset (used to build exact transition matrices in tests)."""
    n, r = jnp.asarray(num_coords, float), jnp.asarray(path_length, float)
    return -(gammaln(n + 1) - gammaln(r + 1) - gammaln(n - r + 1))


def log_accept_prob(log_density_x: jax.Array, log_density_y: jax.Array) -> jax.Array:
    """``log min(1, pi(y) / pi(x))`` of the symmetric proposal; an undefined ``log pi(y)``
    (NaN) rejects."""
    log_accept = jnp.minimum(log_density_y - log_density_x, 0.0)
    return jnp.where(jnp.isnan(log_accept), -jnp.inf, log_accept)


def build_kernel(
    buckets: Sequence[int],
) -> Callable[[jax.Array, RWMState, LogDensity, jax.Array], tuple[RWMState, Info]]:
    """
    The RWM-R transition kernel.

    :param buckets: increasing static top-k sizes; every step's ``R`` must be at most
        ``buckets[-1]`` (and at most ``N``).
    :return: ``kernel(rng_key, state, log_density_fn, path_length) -> (state, info)``, the
        info the core's kernels report (:class:`~numpyro_discrete.core.state.Info`; its
        ``num_changed`` is ``path_length`` if the flips were accepted, else 0).
    """
    buckets = tuple(buckets)

    def kernel(
        rng_key: jax.Array,
        state: RWMState,
        log_density_fn: LogDensity,
        path_length: jax.Array,
    ) -> tuple[RWMState, Info]:
        key_flips, key_accept = random.split(rng_key)
        x = state.position
        branches = [lambda key, k=k: sample_flips(key, x.shape[0], path_length, k) for k in buckets]
        bucket = jnp.searchsorted(jnp.asarray(buckets), path_length)
        flips = (
            lax.switch(bucket, branches, key_flips) if len(buckets) > 1 else branches[0](key_flips)
        )
        # Alg. 3, line 7
        y = jnp.where(flips, 1 - x, x).astype(x.dtype)
        log_p_y = jnp.asarray(log_density_fn(y), state.log_density.dtype)
        # Alg. 3, lines 8-13: symmetric proposal, the M-H ratio is pi(y) / pi(x)
        log_accept = log_accept_prob(state.log_density, log_p_y)
        is_accepted = jnp.log(random.uniform(key_accept)) < log_accept
        new_state = lax.cond(is_accepted, lambda: RWMState(y, log_p_y), lambda: state)
        num_changed = jnp.where(is_accepted, path_length, 0)
        info = Info(jnp.exp(log_accept), is_accepted, num_changed)
        return new_state, info

    return kernel
