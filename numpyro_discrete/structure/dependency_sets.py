"""Dependency sets and their algebra.

A *set array* holds, for every element of a value of shape ``S``, the coordinates that
element depends on: an integer array of shape ``S + (K,)`` padded with
:data:`~numpyro_discrete.structure.data_moves.PAD`; ``None`` stands for "no element depends
on any coordinate". ``num_coords`` (one past the last coordinate) stands for "every
coordinate": a set holding it, or more than ``max_set_size`` coordinates, is *dense*.
"""

from collections.abc import Sequence

import numpy as np

from numpyro_discrete.structure.data_moves import PAD, padded

__all__ = ["SetAlgebra", "same_sets"]


class SetAlgebra:
    """Unions of set arrays, kept compact (sorted, deduplicated, no wider than needed)."""

    def __init__(self, num_coords: int, max_set_size: int) -> None:
        self.everything = num_coords
        self.max_set_size = max_set_size

    def compact(self, sets: np.ndarray) -> np.ndarray | None:
        """Deduplicate the last axis; too large sets or sets holding "every" become dense."""
        shape, width = sets.shape[:-1], sets.shape[-1]
        rows = np.sort(sets.reshape(-1, width), axis=1)
        if width > 1:
            rows[:, 1:][rows[:, 1:] == rows[:, :-1]] = PAD
        count = (rows >= 0).sum(axis=1)
        if not count.any():
            return None
        dense = (rows == self.everything).any(axis=1) | (count > self.max_set_size)
        rows = -np.sort(-rows, axis=1)  # descending: the padding goes last
        rows = rows[:, : max(1, min(int(count.max()), self.max_set_size))]
        rows[dense] = PAD
        rows[dense, 0] = self.everything
        return rows.reshape(shape + rows.shape[-1:])

    def union(self, sets: Sequence[np.ndarray | None], shape: tuple[int, ...]) -> np.ndarray | None:
        """Elementwise union of `sets` broadcast to `shape`."""
        distinct = {id(s): s for s in sets if s is not None}.values()  # (x == x: one set)
        present = [np.broadcast_to(s, shape + s.shape[-1:]) for s in distinct]
        if not present:
            return None
        if len(present) == 1:
            return present[0]
        return self.compact(np.concatenate(present, axis=-1))

    def union_over_axes(self, sets: np.ndarray, shape: tuple, axes: Sequence[int]) -> np.ndarray:
        """The union over `axes` of `sets` (broadcast to `shape`), those axes removed."""
        sets = np.broadcast_to(sets, shape + sets.shape[-1:])
        kept = [axis for axis in range(len(shape)) if axis not in axes]
        moved = np.transpose(sets, kept + list(axes) + [len(shape)])
        return self.compact(moved.reshape(tuple(shape[a] for a in kept) + (-1,)))

    def everything_of(self, sets: Sequence[np.ndarray | None]) -> np.ndarray | None:
        """One set: the union of every element of `sets`."""
        flat = [s.reshape(1, -1) for s in sets if s is not None]
        if not flat:
            return None
        every = self.compact(np.concatenate(flat, axis=1))
        return None if every is None else every[0]

    def stack(self, sets: list, shape: tuple) -> np.ndarray | None:
        """`sets` of arrays of `shape` stacked along a new leading axis."""
        present = [s for s in sets if s is not None]
        if not present:
            return None
        width = max(s.shape[-1] for s in present)
        return self.compact(np.stack([padded(s, shape, width) for s in sets]))


def same_sets(a: np.ndarray | None, b: np.ndarray | None, shape: tuple) -> bool:
    """Whether two compacted set arrays hold the same set at every element of `shape`."""
    if a is None or b is None:
        return a is None and b is None
    width = max(a.shape[-1], b.shape[-1])
    return bool(np.array_equal(padded(a, shape, width), padded(b, shape, width)))
