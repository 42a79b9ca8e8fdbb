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
compiled step serves every ``R`` up to a static maximum: the path lives in a buffer of that
size, and both the draw and the path probabilities walk through it in chunks of a static
size, in loops whose trip count is ``ceil(R / chunk)``. A step's path work is
``O(N + R log N)``, never a sort of all ``N`` coordinates, and the compiled program holds
one copy of the path code whatever the maximum (a branch per power-of-two path size, the
previous design, compiled in 6.5 s instead of 1.3 s at ``N = 2500``).

Example: an exact draw from a product of Bernoullis is kept by LBP-2 steps.

.. doctest::

    >>> import jax
    >>> import jax.numpy as jnp
    >>> from numpyro_discrete.core import balancing, local_ratios, neighbourhood, path, state
    >>> logits = jnp.linspace(-2.0, 2.0, 8)
    >>> local_fn = local_ratios.gradient_local_fn(
    ...     lambda x: jnp.sum(x * logits), neighbourhood.binary_neighbourhood)
    >>> kernel = path.build_kernel(
    ...     balancing.sqrt, neighbourhood.binary_neighbourhood, max_path_length=2)
    >>> def step(x, key):
    ...     new, info = kernel(key, state.init(x, local_fn), local_fn, 2)
    ...     return new.position
    >>> keys = jax.random.split(jax.random.key(0), 20000)
    >>> x0 = jax.random.bernoulli(keys[0], jax.nn.sigmoid(logits), (20000, 8)).astype(jnp.int32)
    >>> x1 = jax.vmap(step)(x0, keys)
    >>> bool(jnp.all(jnp.abs(x1.mean(0) - jax.nn.sigmoid(logits)) < 0.02))
    True
"""

from collections.abc import Callable
from typing import NamedTuple

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
    "build_kernel",
    "cumulative_sum",
    "default_chunk_size",
    "off_path_log_mass",
    "path_from_coords",
    "path_log_prob",
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


def default_chunk_size(max_path_length: int) -> int:
    """The static chunk of the path loops: 128 entries, or the smallest power of two that
    holds `max_path_length` when it is shorter. A path of ``R`` entries takes ``ceil(R /
    128)`` passes; longer chunks cost more for short paths (every pass draws and scores a
    whole chunk), shorter ones more passes for long paths (measured on Ising 50 x 50 at
    R = 180: 0.093, 0.038, 0.039 and 0.066 ms per step for chunks of 32, 64, 128 and 256)."""
    return min(_CHUNK, 1 << max(max_path_length - 1, 0).bit_length())


_CHUNK = 128


def sample_path(
    rng_key: jax.Array,
    log_w: jax.Array,
    path_length: jax.Array,
    length: int,
    chunk_size: int | None = None,
) -> Path:
    """
    Draw an ordered path of ``path_length`` distinct coordinates and their candidates.

    Drawing coordinates with replacement, in proportion to ``W_j``, and keeping each one's
    first occurrence gives exactly the sequential draw without replacement (Alg. 1, lines
    3-5): given the coordinates drawn so far, the next new one is drawn in proportion to
    its weight among the others. Draws come in chunks of `chunk_size`, each a binary search
    in the cumulative weights, ``O(N + R log N)`` in all, where Gumbel-top-k needs a partial
    sort, the costliest part of a step on CPU. Once the coordinates drawn hold half the
    weight (or a chunk finds no new one), the draw goes on by Gumbel-top-k among the
    coordinates not drawn, a chunk at a time, which continues the same sequential draw and
    always terminates: each new coordinate is drawn from the right conditional whichever
    way, and the switch depends on the past draws only. Coordinates whose weight underflows
    to zero against the largest (a ratio below about ``1e-38`` in float32) are left to that
    completion.

    :param rng_key: random key.
    :param log_w: ``(N, M)`` log weights at the path's start state.
    :param path_length: ``R``, integer scalar, ``1 <= R <= length <= N``.
    :param length: static path size ``k``; the path has this length.
    :param chunk_size: static number of draws per pass (default :func:`default_chunk_size`
        of `length`).
    """
    chunk = default_chunk_size(length) if chunk_size is None else chunk_size
    buffer = _buffer_size(length, chunk)
    log_w_coord = _coordinate_log_weights(log_w)
    drawn = _draw(rng_key, log_w, log_w_coord, path_length, buffer, chunk, None)
    return path_from_coords(
        drawn.coords[:length], drawn.choices[:length], path_length, log_w.shape[0]
    )


def _buffer_size(max_path_length: int, chunk: int) -> int:
    """Path buffers hold whole chunks, so that no chunk's slice is clamped at the end."""
    return -(-max_path_length // chunk) * chunk


class _Carry(NamedTuple):
    """The path drawn so far: ``count`` entries of the buffers, and the weight they hold."""

    count: jax.Array
    coords: jax.Array
    choices: jax.Array
    on_path: jax.Array
    moved: jax.Array | None
    taken: jax.Array


class _Drawn(NamedTuple):
    """A drawn path in buffers: its first ``R`` entries are the path."""

    coords: jax.Array
    choices: jax.Array
    on_path: jax.Array
    moved: jax.Array | None


def _draw(
    rng_key: jax.Array,
    log_w: jax.Array,
    log_w_coord: jax.Array,
    path_length: jax.Array,
    buffer: int,
    chunk: int,
    moves: tuple[jax.Array, jax.Array] | None,
) -> _Drawn:
    """The path draw of :func:`sample_path` into buffers of size `buffer`. With `moves`
    ``(position, candidates)`` of a state with more than one candidate per coordinate, the
    moved position is built along the way (one scatter of a chunk per pass)."""
    num_coords, num_candidates = log_w.shape
    key_draws, key_complete, key_choices = random.split(rng_key, 3)
    # weights scaled so that the largest is 1
    shift = jnp.max(log_w_coord)
    shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
    scaled = jnp.exp(log_w_coord - shift)
    # a scan rather than `cumulative_sum`: N is rarely a multiple of its block, and on CPU
    # padding to one cost more than the scan's log N passes at N = 2500 (28 against 12 us)
    cumulative = lax.associative_scan(jnp.add, scaled)
    total = cumulative[-1]

    def append(carry: _Carry, draws: jax.Array, is_new: jax.Array, pass_index: jax.Array):
        """Put the new coordinates among `draws` on the path, up to ``R`` of them."""
        place = carry.count + jnp.cumsum(is_new, dtype=jnp.int32) - 1
        keep = is_new & (place < path_length)
        index = jnp.where(keep, place, buffer)
        choices, moved = carry.choices, carry.moved
        if num_candidates > 1:
            key = random.fold_in(key_choices, pass_index)
            chosen = random.categorical(key, log_w[draws], axis=-1).astype(jnp.int32)
            choices = choices.at[index].set(chosen, mode="drop")
            if moved is not None:
                values = moves[1][draws, chosen].astype(moved.dtype)
                moved = moved.at[jnp.where(keep, draws, num_coords)].set(values, mode="drop")
        return _Carry(
            count=carry.count + jnp.sum(keep, dtype=jnp.int32),
            coords=carry.coords.at[index].set(draws, mode="drop"),
            choices=choices,
            on_path=carry.on_path.at[draws].max(keep),
            moved=moved,
            taken=carry.taken + jnp.sum(jnp.where(keep, scaled[draws], 0.0)),
        )

    def with_replacement(loop: tuple) -> tuple:
        pass_index, carry, first_draw, _ = loop
        key = random.fold_in(key_draws, pass_index)
        draws = jnp.searchsorted(cumulative, uniform(key, chunk, scaled.dtype) * total, "right")
        draws = jnp.minimum(draws, num_coords - 1).astype(jnp.int32)
        # a draw's first occurrence in this pass: the smallest stamp scattered at its
        # coordinate (coordinates drawn in earlier passes are on the path already)
        stamp = pass_index * chunk + jnp.arange(chunk, dtype=jnp.int32)
        first_draw = first_draw.at[draws].min(stamp)
        is_first = first_draw[draws] == stamp
        # a coordinate of zero weight is never drawn, whatever the rounding of `cumulative`
        is_new = is_first & ~carry.on_path[draws] & (log_w_coord[draws] > -jnp.inf)
        carry = append(carry, draws, is_new, pass_index)
        return pass_index + 1, carry, first_draw, jnp.any(is_new)

    def gumbel_top_k(loop: tuple) -> tuple:
        pass_index, carry = loop
        key = random.fold_in(key_complete, pass_index)
        keys = jnp.where(carry.on_path, -jnp.inf, log_w_coord)
        keys = keys + gumbel(key, num_coords, log_w_coord.dtype)
        draws = lax.top_k(keys, min(chunk, num_coords))[1].astype(jnp.int32)
        return pass_index + 1, append(carry, draws, ~carry.on_path[draws], pass_index)

    def draws_pay(loop: tuple) -> jax.Array:
        # draws with replacement while they mostly land off the path
        _, carry, _, found = loop
        return (carry.count < path_length) & found & (carry.taken < 0.5 * total)

    carry = _Carry(
        count=jnp.zeros((), jnp.int32),
        coords=jnp.zeros(buffer, jnp.int32),
        choices=jnp.zeros(buffer, jnp.int32),
        on_path=jnp.zeros(num_coords, bool),
        moved=None if moves is None or num_candidates == 1 else moves[0],
        taken=jnp.zeros((), scaled.dtype),
    )
    first_draw = jnp.full(num_coords, jnp.iinfo(jnp.int32).max, jnp.int32)
    loop = (jnp.zeros((), jnp.int32), carry, first_draw, jnp.ones((), bool))
    pass_index, carry, _, _ = lax.while_loop(draws_pay, with_replacement, loop)
    # a loop rather than a conditional: under `vmap` a conditional runs both branches for
    # every chain, a loop only while some chain needs it
    _, carry = lax.while_loop(
        lambda loop: loop[1].count < path_length, gumbel_top_k, (pass_index, carry)
    )
    return _Drawn(carry.coords, carry.choices, carry.on_path, carry.moved)


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
    log_remaining = _log_cumulative(log_off_path, log_w_path, reverse=not reverse)
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


def _log_cumulative(log_start: jax.Array, log_values: jax.Array, reverse: bool) -> jax.Array:
    """``log(exp(log_start) + cumsum(exp(log_values)))`` (from the end with `reverse`), shifted
    by the largest term so that nothing overflows or underflows against it: sums in linear
    space, because XLA's cumulative log-sum-exp is two orders of magnitude slower on CPU."""
    shift = jnp.maximum(log_start, jnp.max(log_values))
    shift = jnp.where(jnp.isfinite(shift), lax.stop_gradient(shift), 0.0)
    sums = cumulative_sum(jnp.exp(log_values - shift), reverse=reverse)
    return jnp.log(jnp.exp(log_start - shift) + sums) + shift


def _log_q_ratio(
    drawn: _Drawn,
    path_length: jax.Array,
    log_w_x: jax.Array,
    log_w_y: jax.Array,
    log_w_coord: jax.Array,
    log_off_path: jax.Array,
    restores: Callable[[jax.Array], jax.Array],
    chunk: int,
) -> tuple[jax.Array, jax.Array]:
    """``(log q(reverse | y), log q(forward | x))`` of a drawn path, :func:`path_log_prob` of
    both computed a chunk at a time: the reverse path's normalisers are sums over the path's
    start (carried forwards from its first chunk), the forward path's over its end (carried
    backwards from its last chunk), so each is a sum of positive terms, as in
    :func:`path_log_prob`. `log_w_coord` stacks ``log W_j`` at ``y`` and at ``x``;
    `restores` gives the reverse path's candidate index at each of some coordinates."""
    num_chunks = (path_length + chunk - 1) // chunk
    entry = jnp.arange(chunk)

    def chunk_terms(index: jax.Array, end: int, log_start: jax.Array, reverse: bool):
        start = index * chunk
        coords = lax.dynamic_slice(drawn.coords, (start,), (chunk,))
        active = start + entry < path_length
        log_w_path = jnp.where(active, log_w_coord[end, coords], -jnp.inf)
        log_remaining = _log_cumulative(log_start, log_w_path, reverse)
        if reverse:
            choices = lax.dynamic_slice(drawn.choices, (start,), (chunk,))
            log_w_choice = log_w_x[coords, choices]
        else:
            log_w_choice = log_w_y[coords, restores(coords)]
        terms = jnp.where(active, log_w_choice - log_remaining, 0.0)
        # the normaliser carried to the next chunk: every entry of this one included
        return jnp.sum(terms), log_remaining[0 if reverse else -1]

    def body(j: jax.Array, carry: tuple) -> tuple:
        log_q_reverse, log_q_forward, after_start, before_end = carry
        # Eq. 5: coordinate r is drawn among those not visited before it. Reverse (at y),
        # those are u_1..u_r, a sum over the path's start; forward (at x), u_r..u_R.
        reverse_terms, after_start = chunk_terms(j, 0, after_start, False)
        forward_terms, before_end = chunk_terms(num_chunks - 1 - j, 1, before_end, True)
        return (
            log_q_reverse + reverse_terms,
            log_q_forward + forward_terms,
            after_start,
            before_end,
        )

    zero = jnp.zeros((), log_w_x.dtype)
    carry = (zero, zero, log_off_path[0], log_off_path[1])
    log_q_reverse, log_q_forward, _, _ = lax.fori_loop(0, num_chunks, body, carry)
    return log_q_reverse, log_q_forward


def build_kernel(
    log_balancing: LogBalancing,
    neighbourhood: Neighbourhood,
    max_path_length: int,
    chunk_size: int | None = None,
) -> Callable[[jax.Array, State, LocalFn, jax.Array], tuple[State, Info]]:
    """
    The LBP-R transition kernel.

    :param log_balancing: log balancing function, see
        :mod:`~numpyro_discrete.core.balancing`.
    :param neighbourhood: candidate values per coordinate.
    :param max_path_length: static bound of the path length ``R`` of every step (at most
        ``N``).
    :param chunk_size: static chunk of the path loops (default :func:`default_chunk_size`).
    :return: ``kernel(rng_key, state, local_fn, path_length) -> (state, info)``.
    """
    chunk = default_chunk_size(max_path_length) if chunk_size is None else chunk_size
    buffer = _buffer_size(max_path_length, chunk)

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
        candidates_x = neighbourhood.candidates(x)
        drawn = _draw(
            key_draws, log_w_x, log_w_coord_x, path_length, buffer, chunk, (x, candidates_x)
        )
        if drawn.moved is None:
            y = jnp.where(drawn.on_path, candidates_x[:, 0], x).astype(x.dtype)
        else:
            y = drawn.moved

        log_p_y, log_ratios_y = local_fn(y)
        log_w_y = log_weights(log_balancing, log_ratios_y)
        log_w_coord = jnp.stack([_coordinate_log_weights(log_w_y), log_w_coord_x])
        # the off-path mass at both ends of the path, in one reduction
        log_off_path = off_path_log_mass(log_w_coord, drawn.on_path)

        if log_w_x.shape[1] == 1:
            restores = jnp.zeros_like
        else:
            candidates_y = neighbourhood.candidates(y)

            def restores(coords: jax.Array) -> jax.Array:
                return jnp.argmax(candidates_y[coords] == x[coords][:, None], axis=1)

        log_q_reverse, log_q_forward = _log_q_ratio(
            drawn, path_length, log_w_x, log_w_y, log_w_coord, log_off_path, restores, chunk
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
