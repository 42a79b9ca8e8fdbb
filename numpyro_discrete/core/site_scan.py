"""Systematic-scan Gibbs: the chromatic sweep (:mod:`~numpyro_discrete.core.chromatic`)
when every colour class is one coordinate (a dense model, a complete graph of pairs, or a
structure that could not be read). A class of one coordinate gains nothing from
colour-batching: its conditional is ``log pi`` at each of its options, which is exact
whatever the detected structure, so no term is credited to a coordinate and no
Metropolis-Hastings test is needed where the options are the coordinate's whole support.
Each coordinate then costs its ``M`` evaluations of ``log pi`` (batched) and nothing else:
the new ``log pi`` is the evaluation of the value drawn (Geman and Geman 1984).

Where the structure is proven and every term depends on at most two coordinates (a pairwise
model: a stochastic block model's edges, a fully connected Boltzmann machine), the scan reads
each conditional from *pair tables* instead (:func:`pair_tables`): every term's value at
every pair of values of its coordinates, from a few batched evaluations of the terms made
once per sweep, so that a visit costs gathers of its own terms and no evaluation of the
model. The coordinates are split by the bits of their indices: in the state that gives the
coordinates whose bit ``b`` is 0 the value ``u`` and the others ``v``, every term whose
coordinates differ at bit ``b`` sees ``(u, v)`` or ``(v, u)``; ``S + B S (S - 1)`` states
(``S`` values, ``B`` bits) give every table, against ``N (S - 1)`` evaluations of the scan.

Its state is the chromatic sweep's (:func:`~numpyro_discrete.core.chromatic.init`).

Example: two coupled binary coordinates, visited in turn.

.. doctest::

    >>> import numpy as np
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_discrete.core import chromatic, site_scan
    >>> from numpyro_discrete.core.neighbourhood import binary_neighbourhood
    >>> log_terms = lambda x: jnp.array([1.5 * (x[0] == x[1]), 0.5 * x[0]])
    >>> sweep = jax.jit(lambda key, s: site_scan.build_kernel(
    ...     binary_neighbourhood, np.arange(2))(key, s, log_terms))
    >>> state = chromatic.init(jnp.zeros(2, jnp.int32), log_terms)  # the sweeps' state
    >>> draws = []
    >>> for key in jax.random.split(jax.random.key(0), 4000):
    ...     state, info = sweep(key, state)
    ...     draws.append(state.position)
    >>> # P(x_0 = 1) = (e^2 + e^0.5) / (e^2 + e^0.5 + e^1.5 + 1)
    >>> p = (np.exp(2) + np.exp(0.5)) / (np.exp(2) + np.exp(0.5) + np.exp(1.5) + 1)
    >>> bool(abs(np.mean(draws, 0)[0] - p) < 0.03)
    True
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import lax
import jax.numpy as jnp

from numpyro_discrete.core import noise
from numpyro_discrete.core.chromatic import LogTerms
from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.state import Info, SweepState
from numpyro_discrete.structure.colouring import TermStructure

__all__ = [
    "PairTables",
    "build_kernel",
    "evaluate_pair_tables",
    "pair_conditional",
    "pair_tables",
    "site_conditional",
]

# pair tables are built only where they hold at most this many entries (terms x S x S) and
# coordinates have at most this many values (a visit gathers S x S entries of each term)
MAX_TABLE_ENTRIES = 1 << 23
MAX_TABLE_SLOTS = 16


class PairTables(NamedTuple):
    """
    Where each term's table is read from, as static numpy arrays (:func:`pair_tables`).
    A coordinate's *slot* is its value minus its lower bound.

    - **lower**, **size** - ``(N,)`` the lowest value and the number of values of each
      coordinate; ``S`` is the largest size.
    - **states** - ``(P, N)`` the slot of every coordinate in each evaluated state.
    - **state_of** - ``(E, S, S)`` the state in which term ``e`` has its first coordinate
      at slot ``a`` and its second at slot ``c`` (for a term of one coordinate, at slot
      ``a``; a term of none is never read).
    - **terms** - ``(N, D)`` the terms of each coordinate, padded with ``E`` (a zero table).
    - **other** - ``(N, D)`` the other coordinate of each of those terms (the coordinate
      itself for a term of one coordinate, 0 for padding).
    - **is_first** - ``(N, D)`` whether the coordinate is its term's first (lower) one.
    """

    lower: np.ndarray
    size: np.ndarray
    states: np.ndarray
    state_of: np.ndarray
    terms: np.ndarray
    other: np.ndarray
    is_first: np.ndarray

    @property
    def num_slots(self) -> int:
        """``S``."""
        return int(self.state_of.shape[-1])

    @property
    def num_states(self) -> int:
        """``P``, the states evaluated (in one batch) per sweep."""
        return int(self.states.shape[0])


def pair_tables(
    structure: TermStructure, lower: np.ndarray, upper: np.ndarray, cheaper_only: bool = True
) -> PairTables | None:
    """
    The pair tables of `structure`, or ``None`` where they do not apply or cost more than
    the scan's evaluations: dependencies not proven (:attr:`TermStructure.exact`), a term
    of three coordinates or more (or dense), more than :data:`MAX_TABLE_ENTRIES` entries or
    :data:`MAX_TABLE_SLOTS` values, or (`cheaper_only`) at least ``N (S - 1)`` states to
    evaluate.

    :param lower: ``(N,)`` the lowest value of each coordinate.
    :param upper: ``(N,)`` the highest, every value between being an option.
    :param cheaper_only: ``False`` builds the tables whatever they cost (for tests).
    """
    num_coords, num_terms = structure.num_coords, structure.num_terms
    if not structure.exact or structure.dense_terms.size or num_coords < 2:
        return None
    lower = np.asarray(lower, np.int64)
    size = np.asarray(upper, np.int64) - lower + 1
    num_slots = int(size.max())
    if num_slots > MAX_TABLE_SLOTS or num_terms * num_slots**2 > MAX_TABLE_ENTRIES:
        return None
    counts = np.bincount(structure.pair_terms, minlength=num_terms)
    if counts.max(initial=0) > 2:
        return None
    # each term's coordinates, lower first (a term of one coordinate: that one twice)
    order = np.lexsort((structure.pair_coords, structure.pair_terms))
    terms, coords = structure.pair_terms[order], structure.pair_coords[order]
    first = np.zeros(num_terms, np.int64)
    second = np.zeros(num_terms, np.int64)
    is_start = np.r_[True, terms[1:] != terms[:-1]]
    first[terms[is_start]] = coords[is_start]
    second[terms] = coords  # the last pair of a term wins: its higher coordinate
    pairwise = counts == 2
    # the lowest bit at which a term's coordinates differ
    differ = first ^ second
    bit = np.where(pairwise, np.log2(np.maximum(differ & -differ, 1)).astype(np.int64), -1)
    bits = np.unique(bit[pairwise])
    slots = np.arange(num_slots)
    pairs = [(u, v) for u in slots for v in slots if u != v]
    num_states = num_slots + bits.size * len(pairs)
    if cheaper_only and num_states >= num_coords * (num_slots - 1):
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
    # each coordinate's terms, the other coordinate and its side
    width = int(np.bincount(structure.pair_coords, minlength=num_coords).max())
    by_coord = np.argsort(structure.pair_coords, kind="stable")
    pair_coords, pair_terms = structure.pair_coords[by_coord], structure.pair_terms[by_coord]
    starts = np.searchsorted(pair_coords, np.arange(num_coords))
    rank = np.arange(pair_coords.size) - starts[pair_coords]
    coord_terms = np.full((num_coords, width), num_terms, np.int32)
    coord_terms[pair_coords, rank] = pair_terms
    is_first = np.ones((num_coords, width), bool)
    is_first[pair_coords, rank] = first[pair_terms] == pair_coords
    other = np.zeros((num_coords, width), np.int32)
    other[pair_coords, rank] = np.where(
        first[pair_terms] == pair_coords, second[pair_terms], first[pair_terms]
    )
    return PairTables(
        lower.astype(np.int32),
        size.astype(np.int32),
        states,
        state_of.astype(np.int32),
        coord_terms,
        other,
        is_first,
    )


def evaluate_pair_tables(layout: PairTables, log_terms: LogTerms, dtype: Any) -> jax.Array:
    """``(E + 1, S, S)``: every term at every pair of slots of its coordinates (the last row,
    padding, zero), from one batched evaluation of the terms at the ``P`` states of
    `layout`, in integers of `dtype`."""
    states = jnp.asarray(layout.lower + layout.states, dtype)
    evaluated = jax.vmap(log_terms)(states)  # (P, E)
    num_terms = evaluated.shape[1]
    tables = evaluated[layout.state_of, np.arange(num_terms)[:, None, None]]
    return jnp.concatenate([tables, jnp.zeros((1,) + tables.shape[1:], tables.dtype)])


def pair_conditional(
    layout: PairTables,
    tables: jax.Array,
    neighbourhood: Neighbourhood,
    x: jax.Array,
    j: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """
    The conditional of coordinate `j` at `x` from the pair tables: ``(values, logits)`` as
    in :func:`site_conditional`, the logits ``log pi`` at each option up to a constant (the
    sum of the terms of `j` at each option, read from `tables` at the other coordinate's
    current slot).
    """
    terms, other = jnp.asarray(layout.terms)[j], jnp.asarray(layout.other)[j]
    lower = jnp.asarray(layout.lower)
    slot_other = jnp.clip(x[other] - lower[other], 0, layout.num_slots - 1)
    rows = tables[terms]  # (D, S, S)
    as_first = jnp.take_along_axis(rows, slot_other[:, None, None], axis=2)[:, :, 0]
    as_second = jnp.take_along_axis(rows, slot_other[:, None, None], axis=1)[:, 0, :]
    slot_logits = jnp.sum(
        jnp.where(jnp.asarray(layout.is_first)[j][:, None], as_first, as_second), axis=0
    )
    x_j = x[j]
    valid = neighbourhood.valid(x)[j]
    moves = jnp.where(valid, neighbourhood.candidates(x)[j], x_j).astype(x.dtype)
    values = jnp.concatenate([x_j[None], moves])
    logits = slot_logits[jnp.clip(values - lower[j], 0, layout.num_slots - 1)]
    logits = jnp.where(jnp.concatenate([jnp.ones(1, bool), valid]), logits, -jnp.inf)
    return values, jnp.where(jnp.isnan(logits), -jnp.inf, logits)


def site_conditional(
    log_terms: LogTerms,
    neighbourhood: Neighbourhood,
    x: jax.Array,
    log_p: jax.Array,
    j: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """
    The conditional of coordinate `j` at `x`, unnormalised: ``(values, log_p_values)`` of
    shape ``(1 + M,)``, its options (the current value first, then the candidates) and
    ``log pi`` at each (``-inf`` for an invalid candidate or an undefined value), from
    ``M`` batched evaluations of the terms. The conditional is their softmax, whatever
    ``log pi(x)`` is (a state of probability zero moves to a valid option).

    :param log_p: ``log pi(x)``.
    """
    x_j = x[j]
    valid = neighbourhood.valid(x)[j]
    moves = jnp.where(valid, neighbourhood.candidates(x)[j], x_j).astype(x.dtype)  # (M,)
    log_p_moves = jax.vmap(lambda v: jnp.sum(log_terms(x.at[j].set(v))))(moves)
    log_p_values = jnp.concatenate([log_p[None], jnp.where(valid, log_p_moves, -jnp.inf)])
    return (
        jnp.concatenate([x_j[None], moves]),
        jnp.where(jnp.isnan(log_p_values), -jnp.inf, log_p_values),
    )


def build_kernel(
    neighbourhood: Neighbourhood, order: np.ndarray, tables: PairTables | None = None
) -> Callable[[jax.Array, SweepState, LogTerms], tuple[SweepState, Info]]:
    """
    One sweep of systematic-scan Gibbs: ``(rng_key, state, log_terms) -> (state, info)``,
    the coordinates in `order`, each drawn from its exact conditional over its current
    value and its valid candidates. ``info.accept_prob`` is 1 (every draw is taken).

    Exact only where each coordinate's options are its whole support (binary and
    categorical coordinates, enumerated ordinal ones): an ordinal window moves with the
    value, and its draw needs the chromatic sweep's test.

    :param neighbourhood: the candidate values of each coordinate.
    :param order: the coordinates, in the order visited (static).
    :param tables: read the conditionals from these pair tables (:func:`pair_tables`)
        instead of evaluating ``log pi``: the same conditionals, and the same draws but
        for rounding.
    """
    order = np.asarray(order, np.int32)

    def draw(logits: jax.Array, uniform: jax.Array) -> jax.Array:
        # inversion over the unnormalised probabilities, the current value's (slot 0) first
        probs = jnp.exp(logits - jnp.max(logits))
        return jnp.sum(jnp.cumsum(probs)[:-1] <= uniform * jnp.sum(probs), dtype=jnp.int32)

    def visit(log_terms: LogTerms, carry: tuple, inputs: tuple) -> tuple:
        x, log_p = carry
        j, uniform = inputs
        values, log_p_values = site_conditional(log_terms, neighbourhood, x, log_p, j)
        slot = draw(log_p_values, uniform)
        return (x.at[j].set(values[slot]), log_p_values[slot]), slot > 0

    def visit_by_tables(evaluated: jax.Array, x: jax.Array, inputs: tuple) -> tuple:
        j, uniform = inputs
        values, logits = pair_conditional(tables, evaluated, neighbourhood, x, j)
        slot = draw(logits, uniform)
        return x.at[j].set(values[slot]), slot > 0

    def kernel(
        rng_key: jax.Array, state: SweepState, log_terms: LogTerms
    ) -> tuple[SweepState, Info]:
        x = state.position
        uniforms = noise.uniform(rng_key, order.size, jnp.result_type(float))
        if tables is None:
            # log pi anew: another block (the continuous sites) may have moved since the state
            (x, log_p), changed = lax.scan(
                lambda carry, inputs: visit(log_terms, carry, inputs),
                (x, jnp.sum(log_terms(x))),
                (jnp.asarray(order), uniforms),
            )
        else:
            evaluated = evaluate_pair_tables(tables, log_terms, x.dtype)
            x, changed = lax.scan(
                lambda x, inputs: visit_by_tables(evaluated, x, inputs),
                x,
                (jnp.asarray(order), uniforms),
            )
            log_p = jnp.sum(log_terms(x))
        info = Info(jnp.ones((), log_p.dtype), jnp.array(True), jnp.sum(changed, dtype=jnp.int32))
        return SweepState(x, log_p), info

    return kernel
