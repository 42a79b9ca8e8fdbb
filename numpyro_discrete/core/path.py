"""Locally balanced proposal with an auxiliary path of ``R`` distinct coordinates (LBP-R).

Pure JAX, no numpyro. The state is a flat integer vector ``x`` of ``N`` coordinates; the
target enters through a :data:`~numpyro_discrete.core.local_ratios.LocalFn` returning
``log pi(x)`` and the ``(N, M)`` table of local log-ratios ``d``.

Proposal (Sun et al. 2021; Sun, Dai, Schuurmans 2022, eq. 5 and Alg. 1). With weights
``w[j, m] = g(exp d[j, m](x))``, ``W_j = sum_m w[j, m]`` and ``T = sum_j W_j``:

1. for ``r = 1..R`` pick coordinate ``u_r`` with probability ``W_j / (T - sum_{i<r} W_{u_i})``
   among those not yet picked, then its candidate ``m_r`` with probability ``w[u_r, m] / W_{u_r}``;
2. ``y`` is ``x`` with every picked coordinate moved to its candidate value;
3. the reverse path visits the same coordinates in reverse order from ``y``, restoring ``x``,
   with all weights taken at ``y``; the pair (forward path, reverse path) is an involution, so
   ``log A = log pi(y) - log pi(x) + log q(reverse | y) - log q(forward | x)`` gives detailed
   balance for every fixed ``R``.

The path is sampled by Gumbel-top-k over ``log W_j`` with a static bound ``K >= R`` (the first
``R`` of the ``K`` ordered winners are distributed exactly as sequential sampling without
replacement), so no step sorts all ``N`` coordinates when ``R << N``. Paths are stored padded
to a static length ``L >= K`` with an ``active`` mask, so that one compiled step serves every
``R <= L``.
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
from jax import lax, random
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from numpyro_discrete.core.balancing import LogBalancing, log_weights
from numpyro_discrete.core.local_ratios import LocalFn, Neighbourhood

__all__ = [
    "PathInfo",
    "PathState",
    "Path",
    "apply_path",
    "build_kernel",
    "init",
    "path_log_prob",
    "reverse_path",
    "sample_path",
    "top_k_buckets",
]


class PathState(NamedTuple):
    """
    - **position** - flat integer state ``x``, shape ``(N,)``.
    - **log_density** - ``log pi(x)``, scalar.
    - **log_ratios** - local log-ratio table ``d(x)``, shape ``(N, M)``.
    """

    position: jax.Array
    log_density: jax.Array
    log_ratios: jax.Array


class PathInfo(NamedTuple):
    """
    - **acceptance_rate** - ``min(1, A)`` of this step's proposal.
    - **is_accepted** - whether the proposal was accepted.
    - **path_length** - ``R``, the number of coordinates on the proposed path.
    - **num_changed** - number of coordinates that changed value (0 if rejected).
    """

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    path_length: jax.Array
    num_changed: jax.Array


class Path(NamedTuple):
    """
    An ordered path padded to a static length ``L``.

    - **coords** - visited coordinates in visiting order, shape ``(L,)``.
    - **choices** - index ``m`` of the candidate taken at each coordinate, shape ``(L,)``.
    - **active** - ``r < R``: which entries are on the path, shape ``(L,)``.
    """

    coords: jax.Array
    choices: jax.Array
    active: jax.Array


def init(position: jax.Array, local_fn: LocalFn) -> PathState:
    """The state at `position`, with ``log pi`` and the local log-ratios cached."""
    log_p, log_ratios = local_fn(position)
    return PathState(position, log_p, log_ratios)


def top_k_buckets(max_path_length: int) -> tuple[int, ...]:
    """
    Static top-k sizes ``1, 2, 4, ..., max_path_length``: a step with path length ``R`` runs
    the smallest bucket ``>= R``, so it never sorts more than ``2 R`` winners.
    """
    buckets = [1]
    while buckets[-1] < max_path_length:
        buckets.append(min(2 * buckets[-1], max_path_length))
    return tuple(buckets)


def sample_path(
    rng_key: jax.Array,
    log_w: jax.Array,
    path_length: jax.Array,
    buckets: Sequence[int],
) -> Path:
    """
    Draw an ordered path of ``path_length`` distinct coordinates and their candidates.

    :param rng_key: random key.
    :param log_w: ``(N, M)`` log weights at the path's start state.
    :param path_length: ``R``, integer scalar, ``1 <= R <= buckets[-1]``.
    :param buckets: static increasing top-k sizes; the path is padded to ``buckets[-1]``.
    """
    key_coords, key_choices = random.split(rng_key)
    num_coords, num_candidates = log_w.shape
    length = buckets[-1]
    log_w_coord = logsumexp(log_w, axis=1)
    # Alg. 1, lines 3-5: sequential draws without replacement == Gumbel-top-R, ordered.
    perturbed = log_w_coord + random.gumbel(key_coords, (num_coords,), log_w.dtype)

    def top(k: int) -> Callable[[jax.Array], jax.Array]:
        def branch(keys: jax.Array) -> jax.Array:
            coords = lax.top_k(keys, k)[1]
            # the padding past k is never active; any in-range index will do
            return jnp.pad(coords, (0, length - k))

        return branch

    if len(buckets) == 1:
        coords = top(buckets[0])(perturbed)
    else:
        bucket = jnp.searchsorted(jnp.asarray(buckets), path_length)
        coords = lax.switch(bucket, [top(k) for k in buckets], perturbed)
    if num_candidates == 1:
        choices = jnp.zeros(length, dtype=jnp.int32)
    else:
        choices = random.categorical(key_choices, log_w[coords], axis=-1)
    active = jnp.arange(length) < path_length
    return Path(coords, choices, active)


def path_log_prob(log_w: jax.Array, path: Path, reverse: bool = False) -> jax.Array:
    """
    Log-probability of drawing `path` by :func:`sample_path` under the weights `log_w`.

    With ``reverse=True`` the active part of the path is visited from its last entry to its
    first (the reverse path of LBP-R), otherwise from first to last.

    :param log_w: ``(N, M)`` log weights at the path's start state.
    :param path: the path.
    :param reverse: visiting order.
    """
    log_w_coord = logsumexp(log_w, axis=1)
    log_w_path = jnp.where(path.active, log_w_coord[path.coords], -jnp.inf)
    on_path = jnp.zeros(log_w.shape[0], bool).at[path.coords].max(path.active)
    # Mass of the coordinates off the path: a sum of positive terms, never ``T - S``, so no
    # cancellation when the path holds most of the weight.
    log_off_path = logsumexp(jnp.where(on_path, -jnp.inf, log_w_coord))
    # Eq. 5: coordinate r is drawn among those not visited before it. Forward, those are
    # u_r..u_R (a reverse cumulative sum); reverse, u_1..u_r (a forward cumulative sum).
    log_on_path_left = lax.cumlogsumexp(log_w_path, reverse=not reverse)
    log_remaining = jnp.logaddexp(log_off_path, log_on_path_left)
    log_w_choice = log_w[path.coords, path.choices]
    terms = jnp.where(path.active, log_w_choice - log_remaining, 0.0)
    return jnp.sum(terms)


def apply_path(
    position: jax.Array, path: Path, neighbourhood: Neighbourhood
) -> jax.Array:
    """Move every active coordinate of `path` to its chosen candidate value."""
    new_values = neighbourhood.candidates(position)[path.coords, path.choices]
    # inactive entries (which may repeat an active coordinate) point out of range and drop
    coords = jnp.where(path.active, path.coords, position.shape[0])
    return position.at[coords].set(new_values.astype(position.dtype), mode="drop")


def reverse_path(
    position: jax.Array,
    new_position: jax.Array,
    path: Path,
    neighbourhood: Neighbourhood,
) -> Path:
    """The path from `new_position` back to `position` over the same coordinates."""
    candidates = neighbourhood.candidates(new_position)[path.coords]
    restores = candidates == position[path.coords][:, None]
    choices = jnp.argmax(restores, axis=1).astype(path.choices.dtype)
    return path._replace(choices=choices)


def build_kernel(
    log_balancing: LogBalancing,
    neighbourhood: Neighbourhood,
    buckets: Sequence[int],
) -> Callable[[jax.Array, PathState, LocalFn, jax.Array], tuple[PathState, PathInfo]]:
    """
    The LBP-R transition kernel.

    :param log_balancing: log balancing function, see
        :mod:`~numpyro_discrete.core.balancing`.
    :param neighbourhood: candidate values per coordinate.
    :param buckets: static top-k sizes, see :func:`top_k_buckets`; the path length of every
        step must be at most ``buckets[-1]``.
    :return: ``kernel(rng_key, state, local_fn, path_length) -> (state, info)``.
    """
    buckets = tuple(buckets)

    def kernel(
        rng_key: jax.Array,
        state: PathState,
        local_fn: LocalFn,
        path_length: jax.Array,
    ) -> tuple[PathState, PathInfo]:
        key_path, key_accept = random.split(rng_key)
        x = state.position
        log_w_x = log_weights(log_balancing, state.log_ratios)
        path = sample_path(key_path, log_w_x, path_length, buckets)
        y = apply_path(x, path, neighbourhood)
        log_q_forward = path_log_prob(log_w_x, path)

        log_p_y, log_ratios_y = local_fn(y)
        log_w_y = log_weights(log_balancing, log_ratios_y)
        log_q_reverse = path_log_prob(
            log_w_y, reverse_path(x, y, path, neighbourhood), reverse=True
        )
        # Alg. 1, M-H test. An undefined potential at y, or a path through zero-weight
        # coordinates (possible only when R exceeds the coordinates of positive weight),
        # rejects rather than letting NaN or inf reach the state.
        log_accept = log_p_y - state.log_density + log_q_reverse - log_q_forward
        is_valid = (
            jnp.isfinite(log_p_y) & jnp.isfinite(log_q_forward) & ~jnp.isnan(log_accept)
        )
        log_accept = jnp.where(is_valid, log_accept, -jnp.inf)
        accept_prob = jnp.exp(jnp.minimum(log_accept, 0.0))
        is_accepted = jnp.log(random.uniform(key_accept)) < log_accept

        new_state = lax.cond(
            is_accepted,
            lambda: PathState(y, log_p_y, log_ratios_y),
            lambda: state,
        )
        num_changed = jnp.where(is_accepted, jnp.sum(path.active), 0)
        info = PathInfo(accept_prob, is_accepted, path_length, num_changed)
        return new_state, info

    return kernel
