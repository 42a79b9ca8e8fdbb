"""Chain blocks (``ALGORITHMS.md``, "Chain blocks"): coordinates of one site along one axis
that, given everything outside the block, interact only with their neighbours along that
axis, so that the block can be drawn jointly from its exact conditional by forward
filtering, backward sampling.

A block ``B = (b_1..b_L)`` is a chain when every term depends on at most two coordinates of
``B``, and only on consecutive ones. For each site, :func:`find_chain_blocks` tries every
axis (the lines of the site's array along it) and keeps the longest axis whose lines are
all chains and hold a pair term (independent sequences ``(S, T)`` are chains along ``S``
too, of coordinates that never interact); the coordinates of sites without one are blocks
of length 1. Blocks that share
a term are given different classes (a colouring of the block graph), so that the blocks of
a class can be drawn at once: a factorial HMM with ``K`` chains needs ``K`` classes, the rows
of a lattice 2, an HMM's single chain 1.
"""

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from numpyro_discrete.structure.colouring import (
    TermStructure,
    colour_coordinates,
    shared_term_graph,
)

__all__ = ["chain_axes", "ChainBlocks", "NotAChainError", "chain_axis_problem", "find_chain_blocks"]


class NotAChainError(ValueError):
    """A stated block is not a chain of the model's terms."""


class ChainBlocks(NamedTuple):
    """
    The chain blocks of the coordinates, static numpy arrays.

    - **coords** - ``(B, L)`` the coordinates of each block in chain order, padded with
      ``N`` (blocks shorter than the longest one).
    - **block_class** - ``(B,)`` the class of each block; no term depends on two blocks of
      one class.
    - **num_classes** - the number of classes.
    - **axes** - per site, the axis its blocks run along (``None``: blocks of length 1).
    - **num_coords** - ``N``.
    """

    coords: np.ndarray
    block_class: np.ndarray
    num_classes: int
    axes: Mapping[str, int | None]
    num_coords: int

    @property
    def lengths(self) -> np.ndarray:
        """``(B,)`` the length of each block."""
        return (self.coords < self.num_coords).sum(axis=1)

    def describe(self, site_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, str]:
        """Per site, what its blocks are, in words."""
        words = {}
        for site, axis in self.axes.items():
            shape = site_shapes[site]
            if axis is None:
                words[site] = f"{int(np.prod(shape, dtype=int))} blocks of 1 coordinate"
            else:
                count = int(np.prod(shape, dtype=int)) // shape[axis]
                words[site] = f"{count} chain(s) of {shape[axis]} along axis {axis}"
        return words


def _site_lines(offset: int, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """``(lines, length)`` the flat coordinates of the site's lines along `axis`."""
    grid = offset + np.arange(int(np.prod(shape, dtype=int)), dtype=np.int64).reshape(shape)
    return np.moveaxis(grid, axis, -1).reshape(-1, shape[axis])


def _couples(structure: TermStructure, lines: np.ndarray, num_coords: int) -> bool:
    """Whether a term depends on two coordinates of one of the `lines`."""
    line_of = np.full(num_coords, -1, np.int64)
    line_of[lines.ravel()] = np.repeat(np.arange(lines.shape[0]), lines.shape[1])
    inside = line_of[structure.pair_coords] >= 0
    key = structure.pair_terms[inside].astype(np.int64) * lines.shape[0]
    key = key + line_of[structure.pair_coords[inside]]
    return np.unique(key).size < key.size


def chain_axis_problem(structure: TermStructure, lines: np.ndarray, num_coords: int) -> str | None:
    """Why the `lines` (``(lines, length)`` coordinates) are not chains of the terms of
    `structure`, or ``None`` when every line is one."""
    if lines.shape[1] > 1 and structure.dense_terms.size:
        return "a term of the log density depends on every coordinate"
    line_of = np.full(num_coords, -1, np.int64)
    position = np.full(num_coords, -1, np.int64)
    line_of[lines.ravel()] = np.repeat(np.arange(lines.shape[0]), lines.shape[1])
    position[lines.ravel()] = np.tile(np.arange(lines.shape[1]), lines.shape[0])
    inside = line_of[structure.pair_coords] >= 0
    terms = structure.pair_terms[inside].astype(np.int64)
    key = terms * lines.shape[0] + line_of[structure.pair_coords[inside]]
    pos = position[structure.pair_coords[inside]]
    if key.size == 0:
        return None
    order = np.lexsort((pos, key))
    key, pos = key[order], pos[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, key.size])
    span = np.maximum.reduceat(pos, starts) - np.minimum.reduceat(pos, starts)
    bad = (counts > 2) | ((counts == 2) & (span != 1))
    if not bad.any():
        return None
    first = int(np.flatnonzero(bad)[0])
    term = int(key[starts[first]] // lines.shape[0])
    touched = pos[starts[first] : starts[first] + counts[first]].tolist()
    return (
        f"term {term} of the log density depends on positions {touched} of one line "
        "(a chain allows two consecutive positions)"
    )


def chain_axes(
    structure: TermStructure,
    site_names: tuple[str, ...],
    site_shapes: tuple[tuple[int, ...], ...],
    min_length: int = 3,
) -> dict[str, tuple[int, ...]]:
    """Per site, every axis of at least `min_length` whose lines are chains (a lattice has
    two, a time series one)."""
    found: dict[str, tuple[int, ...]] = {}
    offset = 0
    for name, shape in zip(site_names, site_shapes, strict=True):
        found[name] = tuple(
            axis
            for axis in range(len(shape))
            if shape[axis] >= min_length
            and chain_axis_problem(
                structure, _site_lines(offset, shape, axis), structure.num_coords
            )
            is None
        )
        offset += int(np.prod(shape, dtype=int))
    return found


def find_chain_blocks(
    structure: TermStructure,
    site_names: tuple[str, ...],
    site_shapes: tuple[tuple[int, ...], ...],
    stated_axes: Mapping[str, int] | None = None,
) -> ChainBlocks:
    """
    The chain blocks of `structure` (see the module's docstring): per site the longest
    axis whose lines are chains and hold a pair term (ties: the last axis; without pair
    terms, the longest), or the axis `stated_axes` gives
    (:class:`NotAChainError` if its lines are not chains).
    """
    num_coords = structure.num_coords
    stated_axes = dict(stated_axes or {})
    unknown = set(stated_axes) - set(site_names)
    if unknown:
        raise NotAChainError(
            f"blocks were stated for {sorted(unknown)}, which are not discrete latent sites "
            f"(sites: {list(site_names)})."
        )
    blocks: list[np.ndarray] = []
    axes: dict[str, int | None] = {}
    offset = 0
    for name, shape in zip(site_names, site_shapes, strict=True):
        size = int(np.prod(shape, dtype=int))
        chosen = None
        if name in stated_axes:
            axis = stated_axes[name]
            if not isinstance(axis, (int, np.integer)) or not -len(shape) <= axis < len(shape):
                raise NotAChainError(
                    f"the block axis {axis!r} stated for site {name!r} is not an axis of its "
                    f"shape {shape}."
                )
            axis = int(axis) % len(shape)
            problem = chain_axis_problem(structure, _site_lines(offset, shape, axis), num_coords)
            if problem is not None:
                raise NotAChainError(
                    f"the lines of site {name!r} along axis {axis} are not chains: {problem}. "
                    "State another axis, or leave the site out of `blocks`."
                )
            chosen = axis
        else:
            # lines that hold pair terms first (independent sequences (S, T) are chains
            # along S too, of uncoupled coordinates), then the longest
            candidates = [
                (_couples(structure, lines, num_coords), shape[axis], axis)
                for axis in range(len(shape))
                if shape[axis] >= 2
                and chain_axis_problem(
                    structure, lines := _site_lines(offset, shape, axis), num_coords
                )
                is None
            ]
            if candidates:
                chosen = max(candidates)[2]
        axes[name] = chosen
        if chosen is None:
            blocks.extend(offset + np.arange(size)[:, None])
        else:
            blocks.extend(_site_lines(offset, shape, chosen))
        offset += size
    length = max((len(b) for b in blocks), default=1)
    coords = np.full((len(blocks), length), num_coords, np.int32)
    for row, block in enumerate(blocks):
        coords[row, : len(block)] = block
    block_class = _colour_blocks(structure, coords, num_coords)
    return ChainBlocks(
        coords=coords,
        block_class=block_class,
        num_classes=int(block_class.max()) + 1 if block_class.size else 0,
        axes=axes,
        num_coords=num_coords,
    )


def _colour_blocks(structure: TermStructure, coords: np.ndarray, num_coords: int) -> np.ndarray:
    """Classes of the blocks such that no term depends on two blocks of one class."""
    num_blocks = coords.shape[0]
    if structure.dense_terms.size:
        return np.arange(num_blocks, dtype=np.int32)
    block_of = np.full(num_coords + 1, -1, np.int64)
    rows = np.repeat(np.arange(num_blocks), coords.shape[1])
    block_of[coords.ravel()] = rows
    pair_blocks = block_of[structure.pair_coords]
    graph = shared_term_graph(structure.pair_terms, pair_blocks, structure.num_terms, num_blocks)
    return colour_coordinates(graph)
