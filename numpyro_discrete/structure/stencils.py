"""Stencils: the (term, coordinate) dependency pairs of a lattice-shaped model as a few affine
*pieces*, so that the per-coordinate sums of term changes (``ALGORITHMS.md``, "Structure")
are shifted slices of the term array, as a hand-written checkerboard sampler computes a
site's field, instead of gathers (which cost several times an elementwise pass on CPU).

A piece pairs ``num_rows`` rows of ``row_length`` consecutive terms with as many
consecutive coordinates: row ``r``, column ``c`` pairs term
``term_start + r * term_stride + c`` with coordinate ``coord_start + r * coord_stride + c``.
On a ``(p, p)`` lattice, an elementwise factor is one piece per coordinate it reads: the
field ``a * s`` one, ``s[:, :-1] * s[:, 1:]`` two of ``p`` rows of ``p - 1``, and
``s[:-1] * s[1:]`` two of one row each.

Example: the three factors of an open 3 x 3 Ising lattice, 5 pieces in all.

.. doctest::

    >>> import numpy as np
    >>> from numpyro_discrete.structure.stencils import find_stencil
    >>> site = np.arange(9).reshape(3, 3)
    >>> field = [[j] for j in site.ravel()]
    >>> right = list(zip(site[:, :-1].ravel(), site[:, 1:].ravel()))
    >>> down = list(zip(site[:-1].ravel(), site[1:].ravel()))
    >>> term_coords = field + right + down  # the coordinates of each term, in term order
    >>> terms = np.repeat(np.arange(len(term_coords)), [len(c) for c in term_coords])
    >>> coords = np.concatenate([np.asarray(c) for c in term_coords])
    >>> stencil = find_stencil(terms, coords, len(term_coords), 9)
    >>> len(stencil.pieces)
    5
"""

from typing import NamedTuple

import numpy as np

from numpyro_discrete.structure.colouring import TermStructure

__all__ = ["Stencil", "StencilPiece", "find_stencil", "structure_stencil"]

# A stencil is worth it only when it has few pieces: each is a pass over the coordinates.
MAX_PIECES = 32


class StencilPiece(NamedTuple):
    """Rows of consecutive terms paired with rows of consecutive coordinates (see the module
    docstring); ``term_stride >= row_length`` and ``coord_stride >= row_length``, so no two
    pairs of a piece share a term or a coordinate."""

    term_start: int
    coord_start: int
    num_rows: int
    row_length: int
    term_stride: int
    coord_stride: int


class Stencil(NamedTuple):
    """Every dependency pair of a structure, once, in the pieces."""

    pieces: tuple[StencilPiece, ...]
    num_terms: int
    num_coords: int


def find_stencil(
    pair_terms: np.ndarray,
    pair_coords: np.ndarray,
    num_terms: int,
    num_coords: int,
    max_pieces: int = MAX_PIECES,
) -> Stencil | None:
    """
    The pairs as at most `max_pieces` pieces, or ``None``. The pairs of each term are ranked
    by coordinate (its *slot*); within a slot, terms in a row with one offset to their
    coordinate form a *run*, and runs of one length at a fixed step form a piece.

    :param pair_terms: ``(P,)`` term of each pair.
    :param pair_coords: ``(P,)`` its coordinate; the pairs are unique.
    """
    if pair_terms.size == 0:
        return None
    order = np.lexsort((pair_coords, pair_terms))
    terms = pair_terms[order].astype(np.int64)
    coords = pair_coords[order].astype(np.int64)
    first = np.concatenate([[True], terms[1:] != terms[:-1]])
    slot = np.arange(terms.size) - np.maximum.accumulate(np.where(first, np.arange(terms.size), 0))
    pieces: list[StencilPiece] = []
    for k in range(int(slot.max()) + 1):
        term_k, coord_k = terms[slot == k], coords[slot == k]
        offset = coord_k - term_k
        breaks = np.flatnonzero(
            np.concatenate([[True], (term_k[1:] != term_k[:-1] + 1) | (offset[1:] != offset[:-1])])
        )
        lengths = np.diff(np.append(breaks, term_k.size))
        # runs of one length, in term order, merged where they step evenly: the runs of a
        # factor's rows interleave with others where a roll wraps around
        for length in np.unique(lengths):
            same = breaks[lengths == length]
            if not _merge_runs(term_k[same], coord_k[same], int(length), pieces, max_pieces):
                return None
    return Stencil(tuple(pieces), int(num_terms), int(num_coords))


def structure_stencil(structure: TermStructure) -> Stencil | None:
    """The stencil of `structure`'s pairs, or ``None``; none with dense terms (they depend on
    every coordinate, which no piece holds)."""
    if structure.dense_terms.size:
        return None
    return find_stencil(
        structure.pair_terms, structure.pair_coords, structure.num_terms, structure.num_coords
    )


def _merge_runs(
    term_starts: np.ndarray,
    coord_starts: np.ndarray,
    length: int,
    pieces: list[StencilPiece],
    max_pieces: int,
) -> bool:
    """Append runs of one `length` (in term order) to `pieces`, greedily merging
    consecutive runs at a constant step; ``False`` once there are more than `max_pieces`."""
    num_runs = term_starts.size
    term_steps = np.diff(term_starts)
    coord_steps = np.diff(coord_starts)
    i = 0
    while i < num_runs:
        rows = 1
        term_stride = coord_stride = length
        # the first step of a piece is free, as long as its rows do not overlap
        if i + 1 < num_runs and term_steps[i] >= length and coord_steps[i] >= length:
            term_stride, coord_stride = int(term_steps[i]), int(coord_steps[i])
            rows = 2
            while (
                i + rows < num_runs
                and term_steps[i + rows - 1] == term_stride
                and coord_steps[i + rows - 1] == coord_stride
            ):
                rows += 1
        pieces.append(
            StencilPiece(
                int(term_starts[i]), int(coord_starts[i]), rows, length, term_stride, coord_stride
            )
        )
        if len(pieces) > max_pieces:
            return False
        i += rows
    return True
