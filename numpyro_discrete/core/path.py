"""Locally balanced proposal with an auxiliary path of ``R`` distinct coordinates (LBP-R).

Pure JAX, no numpyro. The chain state is a :class:`~numpyro_discrete.core.state.State`; the
target enters through a :data:`~numpyro_discrete.core.local_ratios.LocalFn` returning
``log pi(x)`` and the ``(N, M)`` table of local log-ratios ``d``. The path length ``R`` is an
integer here; :mod:`~numpyro_discrete.core.path_length` rounds a real one and adapts it (ALBP).

Proposal (Sun et al. 2021; Sun, Dai, Schuurmans 2022, eq. 5 and Alg. 1). With weights
``w[j, m] = g(exp d[j, m](x))``, ``W_j = sum_m w[j, m]`` and ``T = sum_j W_j``:

1. for ``r = 1..R`` pick coordinate ``u_r`` with probability ``W_j / (T - sum_{i<r} W_{u_i})``
   among those not yet picked, then its candidate ``m_r`` with probability ``w[u_r, m] / W_{u_r}``;
2. ``y`` is ``x`` with every picked coordinate moved to its candidate value;
3. the reverse path visits the same coordinates in reverse order from ``y``, restoring ``x``,
   with all weights taken at ``y``; the pair (forward path, reverse path) is an involution, so
   ``log A = log pi(y) - log pi(x) + log q(reverse | y) - log q(forward | x)`` gives detailed
   balance for every fixed ``R``.

The path is drawn by drawing coordinates with replacement and keeping first occurrences,
which is the same sequential draw without replacement (see :func:`sample_path`). One
compiled step serves every ``R`` up to a static maximum: path sizes come in buckets
``1, 2, 4, ...`` and each step runs the smallest bucket ``>= R`` through
:func:`jax.lax.switch`, so its path work is ``O(N + R log N)``, never a sort of all ``N``
coordinates.

Example: an exact draw from a product of Bernoullis is kept by LBP-2 steps.

.. doctest::

    >>> import jax
    >>> import jax.numpy as jnp
    >>> from numpyro_discrete.core import balancing, local_ratios, neighbourhood, path, state
    >>> logits = jnp.linspace(-2.0, 2.0, 8)
    >>> local_fn = local_ratios.gradient_local_fn(
    ...     lambda x: jnp.sum(x * logits), neighbourhood.binary_neighbourhood)
    >>> kernel = path.build_kernel(
    ...     balancing.sqrt, neighbourhood.binary_neighbourhood, path.path_size_buckets(2))
    >>> def step(x, key):
    ...     new, info = kernel(key, state.init(x, local_fn), local_fn, 2)
    ...     return new.position
    >>> keys = jax.random.split(jax.random.key(0), 20000)
    >>> x0 = jax.random.bernoulli(keys[0], jax.nn.sigmoid(logits), (20000, 8)).astype(jnp.int32)
    >>> x1 = jax.vmap(step)(x0, keys)
    >>> bool(jnp.all(jnp.abs(x1.mean(0) - jax.nn.sigmoid(logits)) < 0.02))
    True
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from numpyro_discrete.core.balancing import LogBalancing, log_weights
from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.noise import gumbel, uniform
from numpyro_discrete.core.state import Info, State, mh_accept

__all__ = [
    "Path",
    "apply_path",
    "bucket_switch",
    "build_kernel",
    "cumulative_sum",
    "default_num_draws",
    "off_path_log_mass",
    "path_from_coords",
    "path_log_prob",
    "path_size_buckets",
    "reverse_path",
    "sample_path",
]


class Path(NamedTuple):
    """
    An ordered path of static length ``k``, of which the first ``R`` entries are active.

    - **coords** - visited coordinates in visiting order, shape ``(k,)``.
    - **choices** - index ``m`` of the candidate taken at each coordinate, shape ``(k,)``.
    - **active** - ``r < R``: which entries are on the path, shape ``(k,)``.
    - **on_path** - which of the ``N`` coordinates the active entries visit, shape ``(N,)``
      (kept beside ``coords`` so that no step needs a scatter over the path).
    """

    coords: jax.Array
    choices: jax.Array
    active: jax.Array
    on_path: jax.Array


def path_from_coords(
    coords: jax.Array, choices: jax.Array, path_length: int, num_coords: int
) -> Path:
    """An explicit path (e.g. to enumerate all paths in tests) in :class:`Path` form."""
    active = jnp.arange(coords.shape[0]) < path_length
    on_path = jnp.zeros(num_coords, bool).at[coords].max(active)
    return Path(coords, choices, active, on_path)


def path_size_buckets(max_path_length: int) -> tuple[int, ...]:
    """
    Static path sizes ``1, 2, 4, ..., max_path_length``: a step with path length ``R`` runs
    the smallest bucket ``>= R``, so its path arrays hold fewer than ``2 R`` entries.
    """
    buckets = [1]
    while buckets[-1] < max_path_length:
        buckets.append(min(2 * buckets[-1], max_path_length))
    return tuple(buckets)


def sample_path(
    rng_key: jax.Array,
    log_w: jax.Array,
    path_length: jax.Array,
    length: int,
    num_draws: int | None = None,
) -> Path:
    """
    Draw an ordered path of ``path_length`` distinct coordinates and their candidates.

    Drawing coordinates with replacement, in proportion to ``W_j``, and keeping each one's
    first occurrence gives exactly the sequential draw without replacement (Alg. 1, lines
    3-5): given the coordinates drawn so far, the next new one is drawn in proportion to
    its weight among the others. That costs ``num_draws`` binary searches in the cumulative
    weights, ``O(N + num_draws log N)``, where Gumbel-top-k needs a partial sort, the
    costliest part of a step on CPU. If the draws hold fewer than ``path_length`` distinct
    coordinates (the weight sits on few of them), Gumbel-top-k among the coordinates not
    drawn completes the path, which continues the same sequential draw. Coordinates whose
    weight underflows to zero against the largest (a ratio below about ``1e-38`` in float32)
    are left to that completion.

    :param rng_key: random key.
    :param log_w: ``(N, M)`` log weights at the path's start state.
    :param path_length: ``R``, integer scalar, ``1 <= R <= length``.
    :param length: static path size ``k``; the path has this length.
    :param num_draws: static number of draws with replacement tried before the completion
        (default :func:`default_num_draws` of `length`).
    """
    log_w_coord = _coordinate_log_weights(log_w)
    cumulative = _cumulative_weights(log_w_coord)
    return _sample_path(rng_key, log_w, log_w_coord, cumulative, path_length, length, num_draws)


def default_num_draws(length: int) -> int:
    """Draws with replacement tried for a path of static size `length`: ``1.5 length``.
    When the weight is spread over many more than `length` coordinates, few draws repeat
    and the Gumbel-top-k completion is rarely needed."""
    return length + length // 2


def _cumulative_weights(log_w_coord: jax.Array) -> jax.Array:
    """Cumulative coordinate weights, scaled so that the largest weight is 1."""
    # a scan rather than `cumulative_sum`: N is rarely a multiple of its block, and on CPU
    # padding to one cost more than the scan's log N passes at N = 2500 (28 against 12 us)
    shift = jnp.max(log_w_coord)
    shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
    return lax.associative_scan(jnp.add, jnp.exp(log_w_coord - shift))


def _sample_path(
    rng_key: jax.Array,
    log_w: jax.Array,
    log_w_coord: jax.Array,
    cumulative: jax.Array,
    path_length: jax.Array,
    length: int,
    num_draws: int | None,
) -> Path:
    """:func:`sample_path` given the coordinate weights and their cumulative sums (work of
    size ``N`` that the kernel does once, outside its branches of size ``length``)."""
    key_draws, key_rest, key_choices = random.split(rng_key, 3)
    if num_draws is None:
        num_draws = default_num_draws(length)
    coords, num_distinct = _draw_distinct(key_draws, log_w_coord, cumulative, length, num_draws)
    coords = _complete(key_rest, log_w_coord, coords, num_distinct, path_length)
    num_coords, num_candidates = log_w.shape
    if num_candidates == 1:
        choices = jnp.zeros(length, dtype=jnp.int32)
    else:
        choices = random.categorical(key_choices, log_w[coords], axis=-1)
    return path_from_coords(coords, choices, path_length, num_coords)


def _draw_distinct(
    rng_key: jax.Array,
    log_w_coord: jax.Array,
    cumulative: jax.Array,
    length: int,
    num_draws: int,
) -> tuple[jax.Array, jax.Array]:
    """The distinct coordinates among `num_draws` draws with replacement, in order of first
    occurrence (the first `length` of them, zero-padded), and how many there were."""
    num_coords = log_w_coord.shape[0]
    targets = uniform(rng_key, num_draws, cumulative.dtype) * cumulative[-1]
    draws = jnp.searchsorted(cumulative, targets, side="right")
    draws = jnp.minimum(draws, num_coords - 1).astype(jnp.int32)
    order = jnp.arange(num_draws, dtype=jnp.int32)
    first_draw = jnp.full(num_coords, num_draws, jnp.int32).at[draws].min(order)
    # a coordinate of zero weight is never drawn, whatever the rounding of `cumulative`
    is_first = (first_draw[draws] == order) & (log_w_coord[draws] > -jnp.inf)
    # a coordinate's place on the path: the number of distinct ones drawn before it
    place = jnp.where(is_first, jnp.cumsum(is_first, dtype=jnp.int32) - 1, length)
    coords = jnp.zeros(length, jnp.int32).at[place].set(draws, mode="drop")
    return coords, jnp.sum(is_first, dtype=jnp.int32)


def _complete(
    rng_key: jax.Array,
    log_w_coord: jax.Array,
    coords: jax.Array,
    num_distinct: jax.Array,
    path_length: jax.Array,
) -> jax.Array:
    """`coords`, of which the first `num_distinct` are drawn, completed to `path_length`
    coordinates by Gumbel-top-k among the others when `num_distinct` falls short."""
    num_coords, length = log_w_coord.shape[0], coords.shape[0]

    def complete(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        coords, _ = carry
        is_drawn = jnp.arange(length) < num_distinct
        taken = jnp.zeros(num_coords, bool).at[coords].max(is_drawn)
        keys = jnp.where(taken, -jnp.inf, log_w_coord)
        keys = keys + gumbel(rng_key, num_coords, log_w_coord.dtype)
        rest = lax.top_k(keys, length)[1][jnp.maximum(jnp.arange(length) - num_distinct, 0)]
        return jnp.where(is_drawn, coords, rest), jnp.zeros((), bool)

    # a loop run once or never rather than a conditional: under `vmap` a conditional runs
    # both branches for every chain, a loop only when some chain needs the completion
    return lax.while_loop(lambda carry: carry[1], complete, (coords, num_distinct < path_length))[0]


def path_log_prob(
    log_w: jax.Array,
    path: Path,
    reverse: bool = False,
    log_off_path: jax.Array | None = None,
) -> jax.Array:
    """
    Log-probability of drawing `path` by :func:`sample_path` under the weights `log_w`.

    With ``reverse=True`` the active part of the path is visited from its last entry to its
    first (the reverse path of LBP-R), otherwise from first to last.

    :param log_w: ``(N, M)`` log weights at the path's start state.
    :param path: the path.
    :param reverse: visiting order.
    :param log_off_path: ``log`` of the total coordinate weight off the path, if already
        computed (see :func:`off_path_log_mass`).
    """
    log_w_coord = _coordinate_log_weights(log_w)
    log_w_path = jnp.where(path.active, log_w_coord[path.coords], -jnp.inf)
    if log_off_path is None:
        log_off_path = off_path_log_mass(log_w_coord, path.on_path)
    # Eq. 5: coordinate r is drawn among those not visited before it. Forward, those are
    # u_r..u_R (a reverse cumulative sum); reverse, u_1..u_r (a forward cumulative sum).
    # Linear-space sums after a shift by the largest term: XLA's cumulative log-sum-exp is
    # two orders of magnitude slower on CPU.
    shift = jnp.maximum(log_off_path, jnp.max(log_w_path))
    shift = jnp.where(jnp.isfinite(shift), lax.stop_gradient(shift), 0.0)
    on_path_left = cumulative_sum(jnp.exp(log_w_path - shift), reverse=not reverse)
    log_remaining = jnp.log(jnp.exp(log_off_path - shift) + on_path_left) + shift
    log_w_choice = log_w[path.coords, path.choices]
    terms = jnp.where(path.active, log_w_choice - log_remaining, 0.0)
    return jnp.sum(terms)


def off_path_log_mass(log_w_coord: jax.Array, on_path: jax.Array) -> jax.Array:
    """
    ``log`` of the summed coordinate weights ``W_j`` off the path, over the last axis.

    A sum of positive terms, never ``T - S``, so no cancellation when the path holds most of
    the weight. Several weight vectors (e.g. at both ends of a path) stacked on leading axes
    share one reduction.
    """
    return logsumexp(jnp.where(on_path, -jnp.inf, log_w_coord), axis=-1)


# Block of the matrix-product cumulative sum: XLA CPU lowers ``lax.cumsum`` to a tree of
# reduce-window operations (one dispatch each), while two small products do the same work.
_CUMSUM_BLOCK = 32


def cumulative_sum(values: jax.Array, reverse: bool = False) -> jax.Array:
    """Inclusive cumulative sum of a vector (from the end with ``reverse=True``), computed
    blockwise with two triangular matrix products at full precision."""
    if reverse:
        return cumulative_sum(values[::-1])[::-1]
    n = values.shape[0]
    block = min(n, _CUMSUM_BLOCK)
    num_blocks = -(-n // block)
    blocks = jnp.pad(values, (0, num_blocks * block - n)).reshape(num_blocks, block)
    upper = jnp.asarray(np.triu(np.ones((block, block))), values.dtype)
    within = jnp.matmul(blocks, upper, precision=lax.Precision.HIGHEST)
    strictly_lower = jnp.asarray(np.tril(np.ones((num_blocks, num_blocks)), -1), values.dtype)
    offsets = jnp.matmul(strictly_lower, within[:, -1], precision=lax.Precision.HIGHEST)
    return (within + offsets[:, None]).reshape(-1)[:n]


def apply_path(position: jax.Array, path: Path, neighbourhood: Neighbourhood) -> jax.Array:
    """Move every active coordinate of `path` to its chosen candidate value."""
    candidates = neighbourhood.candidates(position)
    if candidates.shape[1] == 1:
        return jnp.where(path.on_path, candidates[:, 0], position).astype(position.dtype)
    new_values = candidates[path.coords, path.choices]
    # inactive entries point out of range and are dropped
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


def _coordinate_log_weights(log_w: jax.Array) -> jax.Array:
    """``log W_j = log sum_m w[j, m]``."""
    if log_w.shape[1] == 1:
        return log_w[:, 0]
    return logsumexp(log_w, axis=1)


def _pad(path: Path, length: int) -> Path:
    extra = length - path.coords.shape[0]
    return Path(
        jnp.pad(path.coords, (0, extra)),
        jnp.pad(path.choices, (0, extra)),
        jnp.pad(path.active, (0, extra)),
        path.on_path,
    )


def _truncate(path: Path, length: int) -> Path:
    return Path(path.coords[:length], path.choices[:length], path.active[:length], path.on_path)


def build_kernel(
    log_balancing: LogBalancing,
    neighbourhood: Neighbourhood,
    buckets: Sequence[int],
) -> Callable[[jax.Array, State, LocalFn, jax.Array], tuple[State, Info]]:
    """
    The LBP-R transition kernel.

    :param log_balancing: log balancing function, see
        :mod:`~numpyro_discrete.core.balancing`.
    :param neighbourhood: candidate values per coordinate.
    :param buckets: static path sizes, see :func:`path_size_buckets`; the path length of every
        step must be at most ``buckets[-1]``.
    :return: ``kernel(rng_key, state, local_fn, path_length) -> (state, info)``.
    """
    buckets = tuple(buckets)

    def kernel(
        rng_key: jax.Array,
        state: State,
        local_fn: LocalFn,
        path_length: jax.Array,
    ) -> tuple[State, Info]:
        key_draws, key_accept = random.split(rng_key)
        x = state.position
        log_w_x = log_weights(log_balancing, state.log_ratios)
        log_w_coord_x = _coordinate_log_weights(log_w_x)
        cumulative = _cumulative_weights(log_w_coord_x)

        # The path work is O(k) in the path size k: each bucket gets its own branch, and
        # the path travels between the branch points padded to the largest bucket. Work
        # of size N stays outside the branches, compiled once rather than once per bucket.
        def forward(k: int) -> Callable[[jax.Array], Path]:
            def branch(key: jax.Array) -> Path:
                path = _sample_path(key, log_w_x, log_w_coord_x, cumulative, path_length, k, None)
                return _pad(path, buckets[-1])

            return branch

        bucket = jnp.searchsorted(jnp.asarray(buckets), path_length)
        padded = bucket_switch(bucket, [forward(k) for k in buckets], key_draws)
        y = apply_path(x, padded, neighbourhood)

        log_p_y, log_ratios_y = local_fn(y)
        log_w_y = log_weights(log_balancing, log_ratios_y)
        # the off-path mass at both ends of the path, in one reduction
        log_off_path = off_path_log_mass(
            jnp.stack([log_w_coord_x, _coordinate_log_weights(log_w_y)]),
            padded.on_path,
        )

        def log_q_ratio(k: int) -> Callable[[Path], jax.Array]:
            def branch(padded: Path) -> jax.Array:
                forward_path = _truncate(padded, k)
                back = reverse_path(x, y, forward_path, neighbourhood)
                log_q_reverse = path_log_prob(log_w_y, back, True, log_off_path[1])
                log_q_forward = path_log_prob(log_w_x, forward_path, False, log_off_path[0])
                return jnp.stack([log_q_reverse, log_q_forward])

            return branch

        log_q_reverse, log_q_forward = bucket_switch(
            bucket, [log_q_ratio(k) for k in buckets], padded
        )
        # Alg. 1, M-H test. An undefined potential at y, or a path through zero-weight
        # coordinates (possible only when R exceeds the coordinates of positive weight),
        # rejects rather than letting NaN or inf reach the state.
        log_accept = log_p_y - state.log_density + log_q_reverse - log_q_forward
        is_valid = jnp.isfinite(log_p_y) & jnp.isfinite(log_q_forward)
        new_state, accept_prob, is_accepted = mh_accept(
            key_accept, log_accept, State(y, log_p_y, log_ratios_y), state, is_valid
        )
        num_changed = jnp.where(is_accepted, path_length, 0)
        return new_state, Info(accept_prob, is_accepted, num_changed)

    return kernel


def bucket_switch(index: jax.Array, branches: list[Callable], operand: Any) -> Any:
    """The branch of the path-size bucket `index` (:func:`lax.switch`), or the only branch when
    there is one (no dispatch to compile)."""
    if len(branches) == 1:
        return branches[0](operand)
    return lax.switch(index, branches, operand)
