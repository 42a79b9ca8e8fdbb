"""Chromatic Gibbs read from pair tables (:mod:`~numpyro_discrete.core.pair_tables`): where
detection proved every term of ``log pi`` to depend on two coordinates at most, a colour
class's conditionals are sums of its coordinates' table entries at their neighbours'
current values: gathers, no evaluation of the model. Each coordinate is drawn from its whole
support (at most :data:`~numpyro_discrete.core.pair_tables.MAX_TABLE_SLOTS` values); the
colouring is proven valid, so every draw is the class's exact conditional and is taken
(Gonzalez et al. 2011). With one coordinate per class this is the systematic scan of
Geman and Geman (1984).

The sweep reads each coordinate's oriented tables
(:func:`~numpyro_discrete.core.pair_tables.coordinate_tables`), for binary coordinates
their log-odds: one row of ``S`` entries (one entry) per term of the coordinate. They are
filled from the terms (``P`` batched evaluations) wherever the terms change between sweeps
(the continuous sites of a mixed model move), or once, as constants of the program, where
nothing the terms read is traced (a discrete-only model under ``MCMC``:
:func:`constant_tables`). The new ``log pi`` is carried forward by the draws'
changes, read from the same logits, and evaluated from the terms every
:data:`EXACT_LOG_DENSITY_EVERY` sweeps.

Example: a chain of four binary coordinates, two colour classes.

.. doctest::

    >>> import numpy as np
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_discrete.core import chromatic, pair_tables, table_sweep
    >>> from numpyro_discrete.structure.colouring import term_structure
    >>> from numpyro_discrete.structure.dependencies import detect_dependencies
    >>> log_terms = lambda x: jnp.concatenate([1.0 * (x[:-1] == x[1:]), 0.5 * x])
    >>> x = jnp.zeros(4, jnp.int32)
    >>> structure = term_structure(detect_dependencies(log_terms, x))
    >>> layout = pair_tables.pair_tables(structure, np.zeros(4), np.ones(4))
    >>> tables = table_sweep.SweepTables(table_sweep.sweep_tables(layout, log_terms), log_terms)
    >>> sweep = jax.jit(lambda key, s: table_sweep.build_kernel(layout, structure)(key, s, tables))
    >>> state = chromatic.init(x, log_terms)  # the sweeps' state
    >>> draws = []
    >>> for key in jax.random.split(jax.random.key(0), 4000):
    ...     state, info = sweep(key, state)
    ...     draws.append(state.position)
    >>> states = np.array([[(s >> k) & 1 for k in range(4)] for s in range(16)])
    >>> weights = np.exp([float(jnp.sum(log_terms(jnp.asarray(s)))) for s in states])
    >>> exact = weights @ states / weights.sum()
    >>> bool(np.allclose(np.mean(draws, 0), exact, atol=0.03))
    True
"""

from collections.abc import Callable
import functools
import operator
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import lax
import jax.extend.core as jex
import jax.numpy as jnp

from numpyro_discrete.core import noise
from numpyro_discrete.core.chromatic import MAX_UNROLLED_CLASSES, LogTerms, class_members
from numpyro_discrete.core.pair_tables import (
    PairTables,
    coordinate_others,
    coordinate_tables,
    current_slots,
    evaluate_pair_tables,
    slot_log_potentials,
)
from numpyro_discrete.core.rows import row_inverse_cdf, row_max, row_take
from numpyro_discrete.core.state import Info, SweepState, recompute_where
from numpyro_discrete.structure.colouring import TermStructure

__all__ = [
    "EXACT_LOG_DENSITY_EVERY",
    "SweepTables",
    "build_kernel",
    "class_logits",
    "constant_sweep_tables",
    "constant_tables",
    "oriented_tables",
    "sweep_kernel",
    "sweep_tables",
    "sweep_values",
]


EXACT_LOG_DENSITY_EVERY = 16
"""A sweep by tables carries ``log pi`` forward by its draws' changes, and evaluates it from
the terms at sweeps whose number is a multiple of this (see :func:`build_kernel`)."""


class SweepTables(NamedTuple):
    """
    What a sweep by tables reads.

    - **values** - :func:`sweep_tables`: ``(N, 1 + D, S, S)`` oriented tables, or
      ``(N, 1 + D, 2)`` log-odds where every coordinate has two values at most; for a
      sweep by offsets, its :class:`~numpyro_discrete.core.offset_sweep.OffsetTables`.
    - **log_terms** - the terms, evaluated for the new ``log pi`` where `exact` holds or
      the carried one is not finite.
    - **exact** - whether to evaluate the new ``log pi`` from the terms rather than carry
      it forward (a scalar bool; a caller passes it every
      :data:`EXACT_LOG_DENSITY_EVERY` sweeps).
    """

    values: Any
    log_terms: LogTerms
    exact: jax.Array | bool = True


def oriented_tables(
    layout: PairTables, log_terms: LogTerms, states: jax.Array | None = None
) -> jax.Array:
    """Each coordinate's oriented tables of `log_terms`
    (:func:`~numpyro_discrete.core.pair_tables.coordinate_tables`), from one batched
    evaluation of the terms. `states`: as in
    :func:`~numpyro_discrete.core.pair_tables.evaluate_pair_tables`."""
    return coordinate_tables(layout, evaluate_pair_tables(layout, log_terms, jnp.int32, states))


def sweep_values(oriented: Any) -> Any:
    """The :attr:`SweepTables.values` of :func:`oriented_tables` (a jax or a numpy array):
    the tables; with two slots, the log-odds of slot 1 against slot 0, which halves what a
    draw reads (``+inf`` or ``-inf`` where one of them has probability zero; a table where
    both have is never read at a state of positive probability)."""
    if oriented.shape[-1] == 2:
        with np.errstate(invalid="ignore"):  # numpy's warning where both are -inf
            return oriented[..., 1] - oriented[..., 0]
    return oriented


def sweep_tables(
    layout: PairTables, log_terms: LogTerms, states: jax.Array | None = None
) -> jax.Array:
    """The :attr:`SweepTables.values` of `log_terms`, evaluated in the program (where the
    terms read traced values: :func:`constant_sweep_tables` otherwise). `states`: as in
    :func:`~numpyro_discrete.core.pair_tables.evaluate_pair_tables`."""
    return sweep_values(oriented_tables(layout, log_terms, states))


def constant_sweep_tables(layout: PairTables, log_terms: LogTerms) -> jax.Array | None:
    """:func:`sweep_tables` computed now (:func:`constant_tables`), or ``None`` where the
    terms read a traced value."""
    oriented = constant_tables(layout, log_terms)
    return None if oriented is None else jnp.asarray(sweep_values(oriented))


def constant_tables(layout: PairTables, log_terms: LogTerms) -> np.ndarray | None:
    """
    :func:`oriented_tables` computed now, as a concrete numpy array, where nothing
    `log_terms` reads is traced (a discrete-only model whose arguments numpyro passes as
    constants): inside the trace of a step, what is made of them is then a constant of the
    program, filled once per trace instead of once per sweep. ``None`` where the terms read
    a traced value (a mixed model's continuous sites, ``jit_model_args``).
    """
    # the states and the layout's indices arguments: XLA would fold a program of
    # constants, slowly (a 1000 x 1000 lattice's fill spent seconds folding its indices)
    states = np.asarray(layout.lower + layout.states, np.int32)
    args = jax.tree.leaves((layout, states))
    # traced here, apart from its evaluation: under `ensure_compile_time_eval` the model's
    # operations on its constants would run (and compile) one by one
    closed = jax.make_jaxpr(lambda layout, states: oriented_tables(layout, log_terms, states))(
        layout, states
    )
    if any(isinstance(c, jax.core.Tracer) for c in closed.consts):
        return None  # the terms read a traced value

    # one compiled program whose arguments are everything it reads, run even inside the
    # trace of a step
    def run(consts: list, args: list) -> jax.Array:
        return jex.jaxpr_as_fun(jex.ClosedJaxpr(closed.jaxpr, consts))(*args)[0]

    with jax.ensure_compile_time_eval():
        return np.asarray(jax.jit(run)(list(closed.consts), args))


def class_logits(
    layout: PairTables, values: jax.Array, x: jax.Array, rows: np.ndarray | jax.Array
) -> jax.Array:
    """
    ``(R, S)``: the conditional of each coordinate of `rows` over its slots at `x`, as
    logits (``-inf`` beyond its number of values), from :func:`sweep_tables` `values`.
    Static (numpy) `rows` make every index but the neighbours' slots a constant of the
    program.
    """
    if values.ndim == 4:
        return slot_log_potentials(layout, values, x, rows)
    # log-odds: one entry per term, at the term's other coordinate's slot
    xp = np if isinstance(rows, np.ndarray) else jnp
    others = xp.asarray(coordinate_others(layout))[rows]
    num_tables = others.shape[1]
    slot_other = current_slots(layout, x, others)
    index = (rows[:, None] * num_tables + xp.arange(num_tables)) * 2 + slot_other
    entries = values.reshape(-1)[index]
    log_odds = functools.reduce(operator.add, [entries[:, d] for d in range(num_tables)])
    return jnp.stack([jnp.zeros_like(log_odds), log_odds], axis=1)


def build_kernel(
    layout: PairTables,
    structure: TermStructure,
    max_unrolled_classes: int = MAX_UNROLLED_CLASSES,
) -> Callable[[jax.Array, SweepState, SweepTables], tuple[SweepState, Info]]:
    """
    One chromatic sweep by pair tables: ``(rng_key, state, tables) -> (state, info)``, the
    classes of `structure` in order, each coordinate drawn from its exact conditional over
    its whole support. ``info.accept_prob`` is 1 (every draw is taken).

    :param layout: the pair tables of `structure`
        (:func:`~numpyro_discrete.core.pair_tables.pair_tables`), which must exist (the
        structure proven, every term of two coordinates at most).
    :param structure: the colouring whose classes are drawn in turn.
    :param max_unrolled_classes: up to this many classes, each is its own piece of the
        program with its members (and every index but the neighbours' values) constants;
        beyond it, one loop over the classes, their members padded to the largest.
    """
    order, starts, sizes, width = class_members(structure)
    num_coords = structure.num_coords

    def draw(
        values: jax.Array, x: jax.Array, rows: Any, uniforms: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """New values of the coordinates `rows` (none of which share a term), and each
        one's change of ``log pi``: its logit at its new slot minus its logit at its old
        one (a coordinate's logits are its own terms up to a constant of the row, and the
        rows share none, so the changes add up to that of ``log pi``)."""
        xp = np if isinstance(rows, np.ndarray) else jnp
        logits = class_logits(layout, values, x, rows)
        old = current_slots(layout, x, rows)
        if layout.num_slots == 2:
            log_odds = logits[:, 1] - logits[:, 0]
            slot = (uniforms < jax.nn.sigmoid(log_odds)).astype(jnp.int32)
            keep = jnp.isnan(log_odds)
            change = jnp.where(slot == 1, log_odds, -log_odds)
        else:
            top = row_max(logits)
            slot = row_inverse_cdf(jnp.exp(logits - top[:, None]), uniforms)
            keep = ~jnp.isfinite(top)
            change = row_take(logits, slot) - row_take(logits, old)
        # a coordinate none of whose values has positive probability (only where the
        # current state has none) stays
        moved = ~keep & (slot != old)
        new = xp.asarray(layout.lower)[rows] + jnp.where(keep, old, slot)
        return new.astype(x.dtype), jnp.where(moved, change, 0.0)

    def sweep_unrolled(values: jax.Array, x: jax.Array, uniforms: jax.Array) -> tuple:
        total = jnp.zeros((), values.dtype)
        for c in range(structure.num_colours):
            members = order[starts[c] : starts[c] + sizes[c]]
            new, change = draw(values, x, members, uniforms[members])
            x = x.at[members].set(new, indices_are_sorted=True, unique_indices=True)
            total = total + jnp.sum(change)
        return x, total

    def sweep_looped(values: jax.Array, x: jax.Array, uniforms: jax.Array) -> tuple:
        def visit(carry: tuple, c: jax.Array) -> tuple[tuple, None]:
            x, total = carry
            members = lax.dynamic_slice(jnp.asarray(order), (jnp.asarray(starts)[c],), (width,))
            real = jnp.arange(width) < jnp.asarray(sizes)[c]
            members = jnp.where(real, members, num_coords)
            rows = jnp.minimum(members, num_coords - 1)  # padding reads the last coordinate
            new, change = draw(values, x, rows, uniforms[rows])
            x = x.at[members].set(new, mode="drop", indices_are_sorted=True)
            return (x, total + jnp.sum(jnp.where(real, change, 0.0))), None

        total = jnp.zeros((), values.dtype)
        return lax.scan(visit, (x, total), jnp.arange(structure.num_colours))[0]

    sweep = sweep_unrolled if structure.num_colours <= max_unrolled_classes else sweep_looped
    return sweep_kernel(sweep, num_coords)


def sweep_kernel(
    sweep: Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array]], num_coords: int
) -> Callable[[jax.Array, SweepState, SweepTables], tuple[SweepState, Info]]:
    """The kernel of a sweep by tables, ``sweep(values, x, uniforms) -> (x, change of log
    pi)`` drawing every coordinate once with its uniform (of `num_coords`): the uniforms
    drawn, ``log pi`` carried forward or evaluated (:func:`build_kernel`)."""

    def kernel(
        rng_key: jax.Array, state: SweepState, tables: SweepTables
    ) -> tuple[SweepState, Info]:
        x = state.position
        # one uniform per coordinate: each is drawn once a sweep, in its own class
        uniforms = noise.uniform(rng_key, num_coords, jnp.result_type(float))
        new_x, change = sweep(tables.values, x, uniforms)
        # log pi carried forward by the draws' changes (evaluating the terms took a fifth
        # of an Ising 50 x 50 sweep), evaluated where the caller asks (rounding does not
        # accumulate, new data take effect) or the carried value is not finite (a start
        # of probability zero)
        carried = state.log_density + change.astype(state.log_density.dtype)
        log_p = recompute_where(
            jnp.asarray(tables.exact) | ~jnp.isfinite(carried),
            carried,
            lambda y: jnp.sum(tables.log_terms(y)).astype(carried.dtype),
            new_x,
        )
        num_changed = jnp.sum(new_x != x, dtype=jnp.int32)
        info = Info(jnp.ones((), log_p.dtype), jnp.array(True), num_changed)
        return SweepState(new_x, log_p), info

    return kernel
