"""Pair tables: where every term of ``log pi`` depends on two coordinates at most (proven by
detection), each term's value at every pair of values of its coordinates, from a few
batched evaluations of the terms (``ALGORITHMS.md``, "Structure"). A coordinate's
conditional, or its local log-ratios, are then sums of its own terms' entries at its
neighbours' current values: gathers, no evaluation of the model.

Two coordinates that share a term have different indices, so they differ at some bit ``b``
of their indices. In the state where the coordinates whose bit ``b`` is 0 hold ``u`` and
the others ``v``, every term whose coordinates first differ at bit ``b`` sees ``(u, v)`` or
``(v, u)``; with the ``S`` states where every coordinate holds ``u``, ``S + B S (S - 1)``
states (``S`` values, ``B`` bits) fill every table. A stochastic block model of 60 nodes
in 3 blocks needs 39 states, against the systematic scan's ``N (S - 1) = 120`` evaluations
one after the other.

Each coordinate's tables are then gathered once, oriented, its terms of one coordinate
summed into one (:func:`coordinate_tables`), so that its conditional reads ``1 + D`` rows
of ``S`` entries (``D`` its terms of two coordinates).

Example: a coordinate's log-potentials over its values, from the tables.

.. doctest::

    >>> import numpy as np
    >>> import jax.numpy as jnp
    >>> from numpyro_discrete.core import pair_tables
    >>> from numpyro_discrete.structure.colouring import term_structure
    >>> from numpyro_discrete.structure.dependencies import detect_dependencies
    >>> coupling = jnp.array([0.5, -1.0, 2.0])
    >>> log_terms = lambda x: coupling * (x[:-1] == x[1:])  # a chain of 4 binary values
    >>> x = jnp.array([0, 1, 1, 0])
    >>> structure = term_structure(detect_dependencies(log_terms, x))
    >>> layout = pair_tables.pair_tables(structure, np.zeros(4), np.ones(4))
    >>> layout.num_states
    4
    >>> tables = pair_tables.evaluate_pair_tables(layout, log_terms, x.dtype)
    >>> coordinates = pair_tables.coordinate_tables(layout, tables)  # oriented per coordinate
    >>> # coordinate 2 at 0 or 1, its neighbours at 1 and 0: -1.0 * [0, 1] + 2.0 * [1, 0]
    >>> pair_tables.slot_log_potentials(layout, coordinates, x, np.array([2])).tolist()
    [[2.0, -1.0]]
"""

from collections.abc import Callable
import functools
import operator
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import lax
import jax.numpy as jnp

from numpyro_discrete.structure.colouring import TermStructure, terms_by_coordinate

__all__ = [
    "FILL_BATCH_ELEMENTS",
    "MAX_TABLE_ENTRIES",
    "MAX_TABLE_SLOTS",
    "PairTables",
    "evaluate_pair_tables",
    "pair_tables",
    "coordinate_others",
    "current_slots",
    "coordinate_tables",
    "slot_log_potentials",
]

# pair tables are built only where they hold at most this many entries (terms x S x S) and
# coordinates have at most this many values. Filled once for a run, the tables are
# constants of the compiled sweep: on 1000 x 1000 lattices (4 times this bound) they halved
# the sweep but made its compilation 4 to 7 times longer (7 and 12 s against 1.8)
MAX_TABLE_ENTRIES = 1 << 23
#: the most term values one batch of the fill evaluates (states x terms)
FILL_BATCH_ELEMENTS = 1 << 24
MAX_TABLE_SLOTS = 16


class PairTables(NamedTuple):
    """
    Where each term's table is read from, as static numpy arrays (:func:`pair_tables`).
    A coordinate's *slot* is its value minus its lower bound.

    - **lower** - ``(N,)`` the lowest value of each coordinate; ``S`` is the largest number
      of values of one.
    - **states** - ``(P, N)`` the slot of every coordinate in each evaluated state.
    - **state_of** - ``(E, S, S)`` the state in which term ``e`` has its first coordinate
      at slot ``a`` and its second at slot ``c`` (for a term of one coordinate, at slot
      ``a``; a term of none is never read).
    - **num_values** - ``(N,)`` the number of values of each coordinate (at most ``S``).
    - **unary_terms** - ``(N, U)`` the terms of one coordinate of each coordinate, padded
      with ``E`` (a zero table).
    - **pair_terms** - ``(N, D)`` the terms of two coordinates of each coordinate, padded
      with ``E``.
    - **pair_other** - ``(N, D)`` the other coordinate of each of those terms (the
      coordinate itself for padding).
    - **pair_is_first** - ``(N, D)`` whether the coordinate is its term's first (lower) one.
    """

    lower: np.ndarray
    states: np.ndarray
    state_of: np.ndarray
    num_values: np.ndarray
    unary_terms: np.ndarray
    pair_terms: np.ndarray
    pair_other: np.ndarray
    pair_is_first: np.ndarray

    @property
    def num_slots(self) -> int:
        """``S``."""
        return int(self.state_of.shape[-1])

    @property
    def num_states(self) -> int:
        """``P``, the states evaluated (in one batch) each time the tables are filled."""
        return int(self.states.shape[0])

    @property
    def cheaper_than_scan(self) -> bool:
        """Whether filling the tables takes fewer evaluations than a systematic scan reading
        ``log pi`` at every other value of every coordinate, ``N (S - 1)``."""
        return self.num_states < self.lower.size * (self.num_slots - 1)


def pair_tables(
    structure: TermStructure,
    lower: np.ndarray,
    upper: np.ndarray,
    max_states: int | None = None,
    max_entries: int = MAX_TABLE_ENTRIES,
) -> PairTables | None:
    """
    The pair tables of `structure`, or ``None`` where they do not apply: dependencies not
    proven (:attr:`~numpyro_discrete.structure.colouring.TermStructure.exact`), a term of
    three coordinates or more (or dense), more than :data:`MAX_TABLE_ENTRIES` entries or
    :data:`MAX_TABLE_SLOTS` values. Whether they are cheaper than evaluating the model
    (:attr:`PairTables.num_states` evaluations a sweep or step) is the caller's to judge;
    a caller that knows its bound passes it, and nothing is built beyond it.

    :param lower: ``(N,)`` the lowest value of each coordinate.
    :param upper: ``(N,)`` the highest, every value between being one.
    :param max_states: ``None``, or the most states worth evaluating: tables that would
        need more are not built (``None`` is returned as soon as that is known; at least
        ``S^2`` states are needed wherever two coordinates share a term).
    :param max_entries: the most entries (terms x ``S`` x ``S``) of tables built: a caller
        that does not compile them into its program (:mod:`~numpyro_discrete.core.offset_sweep`)
        passes more than :data:`MAX_TABLE_ENTRIES`.
    """
    num_coords, num_terms = structure.num_coords, structure.num_terms
    if not structure.exact or structure.dense_terms.size or num_coords < 2:
        return None
    lower = np.asarray(lower, np.int64)
    size = np.asarray(upper, np.int64) - lower + 1
    num_slots = int(size.max())
    if not 2 <= num_slots <= MAX_TABLE_SLOTS or num_terms * num_slots**2 > max_entries:
        return None
    if max_states is not None and num_slots > max_states:
        return None
    counts = np.bincount(structure.pair_terms, minlength=num_terms)
    if counts.max(initial=0) > 2:
        return None
    # each term's coordinates, lower first (a term of one coordinate: that one twice)
    order = np.lexsort((structure.pair_coords, structure.pair_terms))
    terms, coords = structure.pair_terms[order], structure.pair_coords[order]
    first = np.zeros(num_terms, np.int64)
    second = np.zeros(num_terms, np.int64)
    is_start = np.diff(terms, prepend=-1) != 0
    first[terms[is_start]] = coords[is_start]
    second[terms] = coords  # the last pair of a term wins: its higher coordinate
    pairwise = counts == 2
    # the lowest bit at which a term's coordinates differ
    differ = first ^ second
    bit = np.where(pairwise, np.log2(np.maximum(differ & -differ, 1)).astype(np.int64), -1)
    bits = np.unique(bit[pairwise])
    slots = np.arange(num_slots)
    pairs = [(u, v) for u in slots for v in slots if u != v]
    if max_states is not None and num_slots + bits.size * len(pairs) > max_states:
        return None
    # states 0..S-1: every coordinate at slot u; then, for each bit and pair (u, v), the
    # coordinates whose bit is 0 at u and the others at v
    states = [np.broadcast_to(slots[:, None], (num_slots, num_coords))]
    index = np.arange(num_coords)
    for b in bits:
        low = ((index >> b) & 1) == 0
        states.append(np.array([np.where(low, u, v) for u, v in pairs]).reshape(-1, num_coords))
    states = np.minimum(np.concatenate(states), size - 1).astype(np.int32)
    # where a term reads its table: (u, c) of (first, second) is pair (u, c) of its bit when
    # its first coordinate's bit is 0, pair (c, u) otherwise
    pair_number = np.full((num_slots, num_slots), -1)
    pair_number[tuple(np.array(pairs).T)] = np.arange(len(pairs))
    bit_number = np.searchsorted(bits, np.maximum(bit, 0))
    first_low = ((first >> np.maximum(bit, 0)) & 1) == 0
    u, c = np.meshgrid(slots, slots, indexing="ij")
    pair_uc = np.where(first_low[:, None, None], pair_number[u, c], pair_number[c, u])
    state_of = np.where(
        pairwise[:, None, None] & (u != c),
        num_slots + bit_number[:, None, None] * len(pairs) + pair_uc,
        u,  # the coordinates at the same slot, or a term of one coordinate
    )
    # each coordinate's terms of one coordinate, and of two with the other one and its side
    unary = ~pairwise[structure.pair_terms]
    unary_terms = _terms_by_coord(
        structure.pair_coords[unary], structure.pair_terms[unary], num_coords, num_terms
    )
    pair_coords, pair_terms = structure.pair_coords[~unary], structure.pair_terms[~unary]
    coord_pair_terms = _terms_by_coord(pair_coords, pair_terms, num_coords, num_terms)
    padded = coord_pair_terms == num_terms
    term = np.minimum(coord_pair_terms, num_terms - 1)
    is_first = first[term] == np.arange(num_coords)[:, None]
    other = np.where(
        padded, np.arange(num_coords)[:, None], np.where(is_first, second[term], first[term])
    )
    return PairTables(
        lower.astype(np.int32),
        states,
        state_of.astype(np.int32),
        size.astype(np.int32),
        unary_terms,
        coord_pair_terms,
        other.astype(np.int32),
        is_first | padded,
    )


def _terms_by_coord(
    coords: np.ndarray, terms: np.ndarray, num_coords: int, num_terms: int
) -> np.ndarray:
    """``(N, D)`` the `terms` of each coordinate, padded with `num_terms`; ``D >= 1``."""
    table = terms_by_coordinate(terms, coords, num_coords, num_terms)[:num_coords]
    return np.pad(table, ((0, 0), (0, int(table.shape[1] == 0))), constant_values=num_terms)


def evaluate_pair_tables(
    layout: PairTables,
    log_terms: Callable[[jax.Array], jax.Array],
    dtype: Any,
    states: jax.Array | None = None,
) -> jax.Array:
    """``(E + 1, S, S)``: every term at every pair of slots of its coordinates (the last row,
    padding, zero), from one batched evaluation of the terms at the ``P`` states of
    `layout`, in integers of `dtype`.

    :param states: those states' values, ``layout.lower + layout.states``, where the caller
        passes them as an argument of its program (as constants, XLA would fold the whole
        evaluation while compiling).
    """
    if states is None:
        states = jnp.asarray(layout.lower + layout.states, dtype)
    num_states, num_terms = states.shape[0], layout.state_of.shape[0]
    # at most FILL_BATCH_ELEMENTS values at once: up to 16 values and 20 bits, P reaches
    # thousands of states
    batch_size = max(1, FILL_BATCH_ELEMENTS // max(num_terms, 1))
    if num_states <= batch_size:
        evaluated = jax.vmap(log_terms)(states)  # (P, E)
    else:
        evaluated = lax.map(log_terms, states, batch_size=batch_size)
    tables = evaluated[layout.state_of, np.arange(num_terms)[:, None, None]]
    return jnp.concatenate([tables, jnp.zeros((1,) + tables.shape[1:], tables.dtype)])


def coordinate_tables(layout: PairTables, tables: jax.Array) -> jax.Array:
    """
    ``(N, 1 + D, S, S)``: each coordinate's tables, oriented, entry ``[j, d, o, s]`` the
    value of its term ``d`` with the coordinate at slot ``s`` and the term's other
    coordinate at slot ``o``. Term 0 is the sum of the coordinate's terms of one coordinate
    (the same for every ``o``), ``-inf`` at slots beyond its number of values; terms
    ``1..D`` are its terms of two (:attr:`PairTables.pair_terms`), read at
    :func:`coordinate_others`.

    :param tables: ``(E + 1, S, S)`` from :func:`evaluate_pair_tables`.
    """
    num_slots = layout.num_slots
    # a term of one coordinate holds its value at slot a in row a of its table
    unary = functools.reduce(
        operator.add,
        [tables[layout.unary_terms[:, k], :, 0] for k in range(layout.unary_terms.shape[1])],
    )  # (N, S)
    unary = jnp.where(np.arange(num_slots) < layout.num_values[:, None], unary, -jnp.inf)
    pairs = tables[layout.pair_terms]  # (N, D, S, S), [.., first slot, second slot]
    pairs = jnp.where(layout.pair_is_first[..., None, None], jnp.swapaxes(pairs, -1, -2), pairs)
    unary = jnp.broadcast_to(unary[:, None, None, :], (unary.shape[0], 1, num_slots, num_slots))
    return jnp.concatenate([unary, pairs], axis=1)


def coordinate_others(layout: PairTables) -> np.ndarray:
    """``(N, 1 + D)``: the coordinate whose slot selects the row ``o`` of each of
    :func:`coordinate_tables`' tables (the coordinate itself for term 0 and padding)."""
    num_coords = layout.lower.size
    return np.concatenate([np.arange(num_coords, dtype=np.int32)[:, None], layout.pair_other], 1)


def current_slots(layout: PairTables, x: jax.Array, coords: np.ndarray | jax.Array) -> jax.Array:
    """The slots of the coordinates `coords` (any shape) at `x`, which lies in the
    supports (as every state of the kernels does: ``init`` refuses ``init_params`` outside
    them). Static (numpy) `coords` keep their lower bounds constants of the program, none
    where every bound is 0; no clipping (it cost a sweep by tables a fifth of its time on
    a 50 x 50 lattice)."""
    values = x[coords]
    if not layout.lower.any():
        return values
    lower = (
        np.asarray(layout.lower) if isinstance(coords, np.ndarray) else jnp.asarray(layout.lower)
    )
    return values - lower[coords]


def slot_log_potentials(
    layout: PairTables, coordinates: jax.Array, x: jax.Array, rows: np.ndarray | jax.Array
) -> jax.Array:
    """
    ``(R, S)``: for each coordinate of `rows`, ``log pi`` at each of its slots (the other
    coordinates at `x`) up to a constant of the row: the sum of its
    :func:`coordinate_tables` `coordinates`' rows at its neighbours' current slots
    (``-inf`` at slots beyond its number of values). Static `rows` (numpy) make every
    index but the neighbours' slots a constant of the program.
    """
    xp = np if isinstance(rows, np.ndarray) else jnp
    num_slots = layout.num_slots
    others = xp.asarray(coordinate_others(layout))[rows]  # (R, 1 + D)
    width = others.shape[-1]
    slot_other = current_slots(layout, x, others)
    # one gather of R x (1 + D) rows of S contiguous entries
    index = (rows[:, None] * width + xp.arange(width)) * num_slots + slot_other
    entries = coordinates.reshape(-1, num_slots)[index]  # (R, 1 + D, S)
    # the terms added as slices: a reduction over a short axis is slow on CPU (core.rows)
    return functools.reduce(operator.add, [entries[:, d] for d in range(width)])
