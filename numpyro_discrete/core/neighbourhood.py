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


def coordinate_neighbourhood(supports: CoordinateSupports, window: int = 1) -> Neighbourhood:
    """
    The neighbourhood of a mix of binary, categorical and ordinal coordinates.

    - binary and categorical coordinate ``j`` (``K_j`` values): every other value,
      ``c[j, m] = m + (m >= x_j)`` for ``m < K_j - 1``.
    - ordinal coordinate ``j``: the symmetric window ``x_j - window .. x_j + window``
      without ``x_j``, restricted to ``[lower[j], upper[j]]``. The window is symmetric so
      that from any candidate the current value is again a candidate: the reverse move is
      always proposable.

    :param supports: the per-coordinate supports.
    :param window: half-width of the ordinal window, ``>= 1``.
    """
    kind = np.asarray(supports.kind)
    if np.all(kind == SupportKind.BINARY):
        return binary_neighbourhood
    nominal = kind != SupportKind.ORDINAL
    num_categories = np.where(nominal, np.asarray(supports.num_categories, np.int32), 0)
    num_nominal = int(np.max(num_categories, initial=1)) - 1
    num_candidates = max(num_nominal, 2 * window if not np.all(nominal) else 0)
    m = np.arange(num_candidates, dtype=np.int32)
    nominal_valid = m < (num_categories - 1)[:, None]
    offsets = np.concatenate([np.arange(-window, 0), np.arange(1, window + 1)])
    # with nominal coordinates only, the window is unused and may be wider than the table
    offsets = np.pad(offsets, (0, max(num_candidates - offsets.size, 0)))[:num_candidates]
    offsets = offsets.astype(np.int32)
    in_window = np.broadcast_to(m < 2 * window, (kind.size, num_candidates))
    lower = np.asarray(supports.lower, np.int32)[:, None]
    upper = np.asarray(supports.upper, np.int32)[:, None]

    def nominal_candidates(x: jax.Array) -> jax.Array:
        return m + (m >= x[:, None]).astype(x.dtype)

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


def squared_distance_fn(supports: CoordinateSupports) -> SquaredDistanceFn:
    """
    Squared distances of the candidate values from the current value: 1 for a binary
    coordinate, 2 for a categorical one (the squared distance of two one-hot vectors),
    ``(v - x_j)^2`` for an ordinal one. A categorical coordinate of two values moves as a
    binary one (distance 1), as the model layer reads a two-valued ``Categorical``.
    """
    kind = np.asarray(supports.kind)
    ordinal = kind == SupportKind.ORDINAL
    nominal_sq = np.where(np.asarray(supports.num_categories) == 2, 1.0, 2.0)[:, None]

    def fn(x: jax.Array, candidates: jax.Array) -> jax.Array:
        dtype = jnp.result_type(float)
        if not np.any(ordinal):
            return jnp.broadcast_to(jnp.asarray(nominal_sq, dtype), candidates.shape)
        squares = jnp.square(candidates - x[:, None]).astype(dtype)
        if np.all(ordinal):
            return squares
        return jnp.where(ordinal[:, None], squares, jnp.asarray(nominal_sq, dtype))

    return fn
