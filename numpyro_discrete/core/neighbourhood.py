"""Which values each coordinate may move to: support kinds, per-coordinate supports, the
candidate table of a state and the squared distance of each candidate.

A *neighbourhood* maps a flat integer state ``x`` of ``N`` coordinates to a table of candidate
values ``c`` of shape ``(N, M)`` together with a validity mask (padding and values outside the
support are invalid). Every proposal of the core moves coordinates to candidates of this
table, so the proposals never see a support directly.
"""

from collections.abc import Callable
import enum
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

__all__ = [
    "UNBOUNDED",
    "CoordinateSupports",
    "Neighbourhood",
    "SupportKind",
    "binary_neighbourhood",
    "coordinate_neighbourhood",
    "ladder_offsets",
    "squared_distance_fn",
]

UNBOUNDED = np.iinfo(np.int32).max // 2
"""Upper bound standing for ``+inf`` in integer bound arrays (no overflow under a window)."""


class SupportKind(enum.IntEnum):
    """How a coordinate's values are related, which decides its candidates."""

    BINARY = 0
    """Values ``{0, 1}``: the candidate is the flipped value."""
    CATEGORICAL = 1
    """Nominal values ``0..K-1`` (unordered): every other value is a candidate."""
    ORDINAL = 2
    """Ordered integers in ``[lower, upper]``: candidates in a window around the value."""


class CoordinateSupports(NamedTuple):
    """
    Static per-coordinate supports, numpy arrays of shape ``(N,)``.

    - **kind** - :class:`SupportKind` of each coordinate.
    - **num_categories** - ``K`` of binary (2) and categorical coordinates; unused (0) for
      ordinal ones.
    - **lower**, **upper** - integer bounds (``upper`` is :data:`UNBOUNDED` for ``+inf``).
    """

    kind: np.ndarray
    num_categories: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def binary(cls, num_coords: int) -> "CoordinateSupports":
        """`num_coords` binary coordinates."""
        return cls(
            np.full(num_coords, SupportKind.BINARY, np.int32),
            np.full(num_coords, 2, np.int32),
            np.zeros(num_coords, np.int32),
            np.ones(num_coords, np.int32),
        )


class Neighbourhood(NamedTuple):
    """
    - **candidates** - ``x -> c``, the ``(N, M)`` integer table of candidate values.
    - **valid** - ``x -> mask``, the ``(N, M)`` boolean table of allowed candidates.
    """

    candidates: Callable[[jax.Array], jax.Array]
    valid: Callable[[jax.Array], jax.Array]


def _flip(x: jax.Array) -> jax.Array:
    return (1 - x)[:, None]


def _all_valid(x: jax.Array) -> jax.Array:
    return jnp.ones(x.shape + (1,), dtype=bool)


binary_neighbourhood = Neighbourhood(candidates=_flip, valid=_all_valid)
"""Binary coordinates: the only candidate is the flipped value (``M = 1``)."""


def ladder_offsets(scales: np.ndarray, upper_offset: np.ndarray | None = None) -> np.ndarray:
    """
    Per-coordinate move distances of ordinal coordinates, a ``(N, K)`` table of positive
    offsets (0 pads a shorter row): ``1`` and ``round(s_j * 2^k)`` for ``k = -3..1``, distinct
    and increasing, from each coordinate's scale ``s_j`` (the spread of its values: a
    standard deviation, or a quarter of a bounded support's span).

    The ladder spans the distances from one value to twice the scale, so a locally balanced
    proposal (whose weights rank the rungs by ``pi``) or a step size in support units picks
    the distance that fits the current state; the unit rung keeps every value reachable.

    :param scales: ``(N,)`` positive scales, one per coordinate.
    :param upper_offset: ``(N,)`` largest useful offset (a bounded support's span, ``inf``
        when unbounded); rungs beyond it are dropped.
    """
    scales = np.maximum(np.asarray(scales, np.float64), 1.0)
    rungs = np.floor(scales[:, None] * 2.0 ** np.arange(-3, 2) + 0.5).astype(np.int64)
    rungs = np.concatenate([np.ones((scales.size, 1), np.int64), rungs], axis=1)
    if upper_offset is not None:
        span = np.maximum(np.asarray(upper_offset, np.float64), 1.0)[:, None]
        rungs = np.where(rungs <= span, rungs, 0)
    # each row's distinct positive rungs, increasing, moved left (vectorized: N may be 10^5)
    missing = np.iinfo(np.int64).max
    rungs = np.sort(np.where(rungs > 0, rungs, missing), axis=1)
    keep = (rungs != missing) & np.concatenate(
        [np.ones((scales.size, 1), bool), rungs[:, 1:] != rungs[:, :-1]], axis=1
    )
    order = np.argsort(~keep, axis=1, kind="stable")
    table = np.take_along_axis(np.where(keep, rungs, 0), order, axis=1)
    width = max(int(keep.sum(1).max()), 1) if scales.size else 1
    return table[:, :width].astype(np.int32)


def coordinate_neighbourhood(
    supports: CoordinateSupports,
    window: int | np.ndarray = 1,
    whole_support_span: int = 0,
) -> Neighbourhood:
    """
    The neighbourhood of a mix of binary, categorical and ordinal coordinates.

    - binary and categorical coordinate ``j`` (``K_j`` values): every other value,
      ``c[j, m] = m + (m >= x_j)`` for ``m < K_j - 1``.
    - ordinal coordinate ``j``: ``x_j - o`` and ``x_j + o`` for each of its move distances
      ``o`` (``1..window``, or the row ``j`` of a table of offsets such as
      :func:`ladder_offsets`), restricted to ``[lower[j], upper[j]]``. The offsets are
      symmetric and distinct, so that from any candidate the current value is again a
      candidate, exactly once: the reverse move is always proposable.
    - an ordinal coordinate whose support spans at most `whole_support_span` steps
      (``upper - lower``) is treated as nominal: every other value of its support,
      ``lower_j + m + (m >= x_j - lower_j)``, so that a conditional over the candidates and
      the current value is the exact conditional of the coordinate.

    :param supports: the per-coordinate supports.
    :param window: half-width of the ordinal window, ``>= 1``, or a ``(N, K)`` table of
        positive, increasing move distances per coordinate (0 pads).
    :param whole_support_span: the largest span of a bounded ordinal support whose values
        are all candidates (0: none).
    """
    kind = np.asarray(supports.kind)
    if np.all(kind == SupportKind.BINARY):
        return binary_neighbourhood
    span = np.asarray(supports.upper, np.int64) - np.asarray(supports.lower, np.int64)
    whole = (kind == SupportKind.ORDINAL) & (span <= whole_support_span)
    if np.any(whole):
        # a small bounded ordinal support enumerated like a categorical one of span + 1 values
        kind = np.where(whole, SupportKind.CATEGORICAL, kind)
        num_categories = np.where(whole, span + 1, np.asarray(supports.num_categories))
        supports = CoordinateSupports(kind, num_categories, supports.lower, supports.upper)
    if np.ndim(window) == 0:
        distances = np.broadcast_to(
            np.arange(1, int(window) + 1, dtype=np.int32), (kind.size, int(window))
        )
    else:
        distances = np.asarray(window, np.int32)
    nominal = kind != SupportKind.ORDINAL
    num_categories = np.where(nominal, np.asarray(supports.num_categories, np.int32), 0)
    num_nominal = int(np.max(num_categories, initial=1)) - 1
    num_rungs = distances.shape[1] if not np.all(nominal) else 0
    num_candidates = max(num_nominal, 2 * num_rungs)
    m = np.arange(num_candidates, dtype=np.int32)
    nominal_valid = m < (num_categories - 1)[:, None]
    # [-o_K .. -o_1, o_1 .. o_K], padded; unused with nominal coordinates only
    offsets = np.concatenate([-distances[:, ::-1], distances], axis=1)
    offsets = np.pad(offsets, ((0, 0), (0, max(num_candidates - offsets.shape[1], 0))))
    offsets = offsets[:, :num_candidates].astype(np.int32)
    in_window = offsets != 0
    lower = np.asarray(supports.lower, np.int32)[:, None]
    upper = np.asarray(supports.upper, np.int32)[:, None]

    nominal_lower = np.where(nominal, lower[:, 0], 0)[:, None]

    def nominal_candidates(x: jax.Array) -> jax.Array:
        shifted = x[:, None] - nominal_lower
        return nominal_lower + m + (m >= shifted).astype(x.dtype)

    def ordinal_candidates(x: jax.Array) -> jax.Array:
        return x[:, None] + offsets

    def candidates(x: jax.Array) -> jax.Array:
        if np.all(nominal):
            return nominal_candidates(x)
        if not np.any(nominal):
            return ordinal_candidates(x)
        return jnp.where(nominal[:, None], nominal_candidates(x), ordinal_candidates(x))

    def valid(x: jax.Array) -> jax.Array:
        if np.all(nominal):
            return jnp.asarray(nominal_valid)
        c = ordinal_candidates(x)
        ordinal_valid = in_window & (c >= lower) & (c <= upper)
        if not np.any(nominal):
            return ordinal_valid
        return jnp.where(nominal[:, None], nominal_valid, ordinal_valid)

    return Neighbourhood(candidates, valid)


SquaredDistanceFn = Callable[[jax.Array, jax.Array], jax.Array]
"""``(x, candidates) -> (N, M)`` squared distances ``dist(c[j, m], x_j)^2``."""


def squared_distance_fn(
    supports: CoordinateSupports, scales: np.ndarray | None = None
) -> SquaredDistanceFn:
    """
    Squared distances of the candidate values from the current value, in the units of each
    support (``ALGORITHMS.md``, "Step sizes and windows"): 1 for a binary coordinate, 2 for
    a categorical one (the squared distance of two one-hot vectors), ``((v - x_j) / s_j)^2``
    for an ordinal one of scale ``s_j``, so that one step size moves every site by a
    comparable fraction of its spread. A categorical coordinate of two values moves as a
    binary one (distance 1), as the model layer reads a two-valued ``Categorical``.

    :param supports: the per-coordinate supports.
    :param scales: ``(N,)`` scales of the ordinal coordinates (1 where not given).
    """
    kind = np.asarray(supports.kind)
    ordinal = kind == SupportKind.ORDINAL
    nominal_sq = np.where(np.asarray(supports.num_categories) == 2, 1.0, 2.0)[:, None]
    inverse_sq_scale = 1.0 / np.square(np.maximum(1.0 if scales is None else scales, 1.0))
    inverse_sq_scale = np.broadcast_to(inverse_sq_scale, kind.shape)[:, None]

    def fn(x: jax.Array, candidates: jax.Array) -> jax.Array:
        dtype = jnp.result_type(float)
        if not np.any(ordinal):
            return jnp.broadcast_to(jnp.asarray(nominal_sq, dtype), candidates.shape)
        squares = jnp.square(candidates - x[:, None]).astype(dtype) * inverse_sq_scale
        if np.all(ordinal):
            return squares
        return jnp.where(ordinal[:, None], squares, jnp.asarray(nominal_sq, dtype))

    return fn
