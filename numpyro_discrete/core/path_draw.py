"""Drawing the path of LBP-R: ``R`` distinct coordinates in proportion to their weights
``W_j = sum_m w[j, m]``, each with a candidate in proportion to ``w[j, m]`` (Sun et al. 2021,
Alg. 1, lines 3-5), in a buffer of static size, a chunk of draws at a time.
:mod:`~numpyro_discrete.core.path` scores the path and makes the LBP-R step."""

from typing import NamedTuple

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core.noise import gumbel, uniform
from numpyro_discrete.core.rows import row_logsumexp

__all__ = [
    "Drawn",
    "Path",
    "buffer_size",
    "coordinate_log_weights",
    "cumulative_sum",
    "default_chunk_size",
    "draw_into_buffers",
    "path_from_coords",
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
    buffer = buffer_size(length, chunk)
    log_w_coord = coordinate_log_weights(log_w)
    drawn = draw_into_buffers(rng_key, log_w, log_w_coord, path_length, buffer, chunk, None)
    return path_from_coords(
        drawn.coords[:length], drawn.choices[:length], path_length, log_w.shape[0]
    )


def buffer_size(max_path_length: int, chunk: int) -> int:
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


class Drawn(NamedTuple):
    """A drawn path in buffers: its first ``R`` entries are the path."""

    coords: jax.Array
    choices: jax.Array
    on_path: jax.Array
    moved: jax.Array | None


def draw_into_buffers(
    rng_key: jax.Array,
    log_w: jax.Array,
    log_w_coord: jax.Array,
    path_length: jax.Array,
    buffer: int,
    chunk: int,
    moves: tuple[jax.Array, jax.Array] | None,
) -> Drawn:
    """The path draw of :func:`sample_path` into buffers of size `buffer`. With `moves`
    ``(position, candidates)`` of a state with more than one candidate per coordinate, the
    moved position is built along the way (one scatter of a chunk per pass)."""
    num_coords, num_candidates = log_w.shape
    key_draws, key_complete, key_choices = random.split(rng_key, 3)
    # weights scaled so that the largest is 1
    shift = jnp.max(log_w_coord)
    shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
    scaled = jnp.exp(log_w_coord - shift)
    cumulative = cumulative_sum(scaled)
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
    return Drawn(carry.coords, carry.choices, carry.on_path, carry.moved)


# Block of the matrix-product cumulative sum, and the longest vector summed that way. On
# XLA CPU, ``lax.cumsum`` lowers to a tree of reduce-window operations and
# ``lax.associative_scan`` to log2 n levels of slices and pads, which compile slowly: 0.33 s
# for n = 2500, a sixth of the ALBP step's compilation, against 0.06 s for the two
# products, which run as fast up to n = 20,000 (14 against 16 us at n = 2500, 45 against
# 82 us at n = 20,000; 2-core CPU). Beyond that the products' n x block work is slower
# than the scan (478 against 256 us at n = 99,856), so the scan takes over.
_CUMSUM_BLOCK = 64
_CUMSUM_MATMUL_MAX = 1 << 15


def cumulative_sum(values: jax.Array, reverse: bool = False) -> jax.Array:
    """Inclusive cumulative sum of a vector (from the end with ``reverse=True``): blockwise,
    two triangular matrix products at full precision, or (beyond 2^15 entries) an
    associative scan."""
    n = values.shape[0]
    if n > _CUMSUM_MATMUL_MAX:
        return lax.associative_scan(jnp.add, values, reverse=reverse)
    if reverse:
        return cumulative_sum(values[::-1])[::-1]
    block = min(n, _CUMSUM_BLOCK)
    num_blocks = -(-n // block)
    blocks = jnp.pad(values, (0, num_blocks * block - n)).reshape(num_blocks, block)
    upper = jnp.asarray(np.triu(np.ones((block, block))), values.dtype)
    within = jnp.matmul(blocks, upper, precision=lax.Precision.HIGHEST)
    strictly_lower = jnp.asarray(np.tril(np.ones((num_blocks, num_blocks)), -1), values.dtype)
    offsets = jnp.matmul(strictly_lower, within[:, -1], precision=lax.Precision.HIGHEST)
    return (within + offsets[:, None]).reshape(-1)[:n]


def coordinate_log_weights(log_w: jax.Array) -> jax.Array:
    """``log W_j = log sum_m w[j, m]``."""
    if log_w.shape[1] == 1:
        return log_w[:, 0]
    return row_logsumexp(log_w)
