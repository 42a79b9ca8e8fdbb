"""Local log-ratio tables ``d[j, m] ~ log pi(x^{j <- c[j, m]}) - log pi(x)``.

A *local function* maps a flat integer state ``x`` to ``(log pi(x), d)``, with ``d`` of shape
``(N, M)`` over the candidate table of a
:class:`~numpyro_discrete.core.neighbourhood.Neighbourhood` and ``-inf`` at invalid entries.
Ratios come from one of two sources, chosen per coordinate:

- gradient (Grathwohl et al. 2021): one ``value_and_grad`` of the float-relaxed log density,
  ``d[j, m] = (c[j, m] - x_j) * grad_j``. Exact for log densities affine in each coordinate.
- exact (Zanella 2020): every single-coordinate change evaluated, batched with ``vmap``
  (``N x M`` evaluations of ``log pi``), or, when the terms of ``log pi`` and the classes of a
  colouring are known, colour-batched (``C x M`` evaluations of the term array,
  ``ALGORITHMS.md``, "Structure"), or, when every term depends on two coordinates at most,
  read from pair tables (:mod:`~numpyro_discrete.core.pair_tables`: ``P`` evaluations of
  the term array, however many colours).
"""

from collections.abc import Callable

import numpy as np

import jax
from jax import lax
import jax.numpy as jnp

from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.pair_tables import (
    PairTables,
    coordinate_tables,
    evaluate_pair_tables,
    slot_log_potentials,
)
from numpyro_discrete.core.rows import row_sum
from numpyro_discrete.structure.colouring import TermStructure
from numpyro_discrete.structure.stencils import Stencil, structure_stencil

__all__ = [
    "ExactRatios",
    "LocalFn",
    "brute_force_ratios",
    "candidate_columns",
    "class_deltas",
    "coloured_ratios",
    "credit",
    "exact_local_fn",
    "gradient_local_fn",
    "mixed_local_fn",
    "pair_table_ratios",
    "stencil_sums",
]

LocalFn = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
"""``x -> (log pi(x), d)`` with ``d`` of shape ``(N, M)``."""

ExactRatios = Callable[
    [jax.Array, jax.Array | None, jax.Array, jax.Array], tuple[jax.Array, jax.Array]
]
"""``(x, log_p, candidates, valid) -> (log pi(x), d_rows)``: exact ratios of a fixed set of
coordinates (the rows of ``d_rows``, in that set's order), from the full ``(N, M)``
candidate table and its validity mask; ``log_p`` is ``log pi(x)`` when already known."""

# Largest number of (neighbour, coordinate) entries the exact ratios hold in memory at once;
# beyond it, neighbours are evaluated in sequential batches of vmapped evaluations.
_EXACT_BATCH_ELEMENTS = 1 << 24


def gradient_local_fn(
    relaxed_log_density: Callable[[jax.Array], jax.Array],
    neighbourhood: Neighbourhood,
) -> LocalFn:
    """
    Local log-ratios from the gradient of the float-relaxed log density (first-order Taylor
    expansion around ``x``); two model evaluations' worth of work (one ``value_and_grad``).

    :param relaxed_log_density: ``log pi`` of a flat float vector.
    :param neighbourhood: candidate values per coordinate.
    """
    return mixed_local_fn(relaxed_log_density, None, neighbourhood, np.zeros(0, np.int32))


def exact_local_fn(
    log_density: Callable[[jax.Array], jax.Array],
    neighbourhood: Neighbourhood,
) -> LocalFn:
    """
    Exact local log-ratios: ``log pi`` at every single-coordinate change of ``x``, as one
    ``vmap`` over the ``N * M`` neighbours (Zanella 2020).

    :param log_density: ``log pi`` of a flat integer vector.
    :param neighbourhood: candidate values per coordinate.
    """
    return mixed_local_fn(None, log_density, neighbourhood, None)


def mixed_local_fn(
    relaxed_log_density: Callable[[jax.Array], jax.Array] | None,
    log_density: Callable[[jax.Array], jax.Array] | None,
    neighbourhood: Neighbourhood,
    exact_coords: np.ndarray | None,
    exact_ratios: ExactRatios | None = None,
) -> LocalFn:
    """
    Exact local log-ratios on the coordinates `exact_coords`, gradient ratios on the others:
    one ``value_and_grad`` (if any coordinate uses the gradient) plus the exact ratios, by
    default one batched evaluation of ``log pi`` per exact neighbour
    (:func:`brute_force_ratios`).

    :param relaxed_log_density: ``log pi`` of a flat float vector, differentiable in the
        gradient coordinates (the exact ones may be cast back to integers inside); unused
        when every coordinate is exact.
    :param log_density: ``log pi`` of a flat integer vector; unused when no coordinate is
        exact.
    :param neighbourhood: candidate values per coordinate.
    :param exact_coords: static indices of the exact coordinates; ``None`` for all of them.
    :param exact_ratios: how the exact rows are computed, e.g. :func:`coloured_ratios` of
        the same `exact_coords`; by default :func:`brute_force_ratios` of `log_density`.
    """
    if exact_ratios is None and (exact_coords is None or len(exact_coords)):
        exact_ratios = brute_force_ratios(log_density, exact_coords)

    def local_fn(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        num_coords = x.shape[0]
        exact = np.arange(num_coords) if exact_coords is None else np.asarray(exact_coords)
        candidates = neighbourhood.candidates(x)
        valid = neighbourhood.valid(x)
        d = None
        if exact.size < num_coords:
            x_float = x.astype(jnp.result_type(float))
            log_p, grad = jax.value_and_grad(relaxed_log_density)(x_float)
            d = (candidates - x[:, None]).astype(grad.dtype) * grad[:, None]
        if exact.size:
            log_p_exact, d_exact = exact_ratios(x, None if d is None else log_p, candidates, valid)
            if d is None:
                log_p = jnp.asarray(log_p_exact, jnp.result_type(float))
                d = d_exact
            else:
                # a gather with static indices, no scatter: row j takes its exact ratios if
                # j is exact (slot_of[j] < len(exact)), its gradient ratios otherwise
                slot_of = np.full(num_coords, exact.size, np.int32)
                slot_of[exact] = np.arange(exact.size)
                padded = jnp.concatenate([d_exact, jnp.zeros((1,) + d_exact.shape[1:])])
                is_exact = (slot_of < exact.size)[:, None]
                d = jnp.where(is_exact, padded[slot_of].astype(d.dtype), d)
        # an undefined gradient (NaN) gives zero weight, as undefined exact ratios do: the
        # weights were already zero (`log_weights`), and now no NaN is cached in the state
        return log_p, jnp.where(valid & ~jnp.isnan(d), d, -jnp.inf)

    return local_fn


def brute_force_ratios(
    log_density: Callable[[jax.Array], jax.Array], coords: np.ndarray | None
) -> ExactRatios:
    """Exact ratios of the coordinates `coords` (``None``: all) by definition: ``log pi`` at
    every single-coordinate change, one batched evaluation per neighbour (Zanella 2020)."""

    def ratios(x: jax.Array, log_p: jax.Array | None, candidates: jax.Array, valid: jax.Array):
        if log_p is None:
            log_p = jnp.asarray(log_density(x), jnp.result_type(float))
        rows = np.arange(x.shape[0]) if coords is None else np.asarray(coords)
        return log_p, _brute_force_rows(log_density, x, log_p, candidates[rows], rows)

    return ratios


def class_deltas(
    log_terms: Callable[[jax.Array], jax.Array],
    x: jax.Array,
    terms_x: jax.Array,
    in_class: jax.Array,
    moves: jax.Array,
) -> jax.Array:
    """
    ``(M, E)`` changes of the terms when every coordinate of a class moves at once to its
    slot ``m`` of `moves` (``M`` batched evaluations of the terms).

    :param log_terms: flat integer vector to the 1-D term array.
    :param x: the state; `terms_x` its terms.
    :param in_class: ``(N,)`` mask of the class.
    :param moves: ``(N, M)`` values to move to (``x_j`` where a slot is invalid).
    """
    moved = jnp.where(in_class[None, :], moves.T.astype(x.dtype), x[None, :])
    if moved.shape[0] == 1:  # binary sites: no batch (measured 2x faster than a vmap of 1)
        return (log_terms(moved[0]) - terms_x)[None]
    return jax.vmap(log_terms)(moved) - terms_x


def credit(
    structure: TermStructure, deltas: jax.Array, coord_class: jax.Array, rows: jax.Array
) -> jax.Array:
    """
    ``d[j, m]`` for the coordinates `rows`: the changes ``deltas[k, m, e]`` of the terms
    ``e`` that ``j`` depends on, ``k = coord_class[j]`` the evaluated class holding ``j``
    (``ALGORITHMS.md``, "Structure"). Exact when no term depends on two coordinates of one
    class. Rows equal to ``N`` (padding) and coordinates with ``coord_class = -1`` get 0.

    :param deltas: ``(K, M, E)`` term changes of ``K`` evaluated classes.
    :param coord_class: ``(N,)`` index in ``0..K-1`` of each coordinate's class, or -1.
    :param rows: ``(R,)`` coordinates, ``N`` for padding.
    """
    num_coords = structure.num_coords
    # padding rows (N) and padding terms (E) read as "no class" and "no change"
    row_class = jnp.take(coord_class, rows, mode="fill", fill_value=-1)
    moved = (row_class >= 0)[:, None]
    row_class = jnp.maximum(row_class, 0)
    if structure.coord_terms is not None:
        # each coordinate's terms: a gather, no scatter
        terms = jnp.asarray(structure.coord_terms)[rows]  # (R, D)
        per_class = jnp.moveaxis(deltas, 1, 2)  # (K, E, M)
        flat = per_class.reshape(-1, per_class.shape[-1])
        index = row_class[:, None] * deltas.shape[2] + terms
        index = jnp.where(terms < deltas.shape[2], index, flat.shape[0])
        d = row_sum(jnp.moveaxis(jnp.take(flat, index, axis=0, mode="fill", fill_value=0.0), 1, -1))
    else:
        pair_coords = jnp.asarray(structure.pair_coords)
        pair_class = coord_class[pair_coords]
        values = deltas[jnp.maximum(pair_class, 0), :, jnp.asarray(structure.pair_terms)]
        values = jnp.where((pair_class >= 0)[:, None], values, 0.0)
        by_coord = jax.ops.segment_sum(values, pair_coords, num_segments=num_coords)
        d = jnp.take(by_coord, rows, axis=0, mode="fill", fill_value=0.0)
    if structure.dense_terms.size:
        # a dense term depends on every coordinate: classes are single coordinates then
        dense = jnp.sum(deltas[:, :, jnp.asarray(structure.dense_terms)], axis=2)  # (K, M)
        d = d + dense[row_class]
    return jnp.where(moved, d, 0.0)


def stencil_sums(stencil: Stencil, values: jax.Array) -> jax.Array:
    """
    ``(..., N)`` sums, for every coordinate, of the `values` ``(..., E)`` of its terms: each
    piece of `stencil` read as a strided window of the terms and added at its coordinates,
    by slices, reshapes and pads only (no gather; :mod:`~numpyro_discrete.structure.stencils`).
    """
    lead = values.shape[:-1]
    no_pad = [(0, 0)] * len(lead)
    length = max(
        [stencil.num_coords] + [p.coord_start + p.num_rows * p.coord_stride for p in stencil.pieces]
    )
    total = None
    for p in stencil.pieces:
        end = p.term_start + p.num_rows * p.term_stride
        window = values[..., p.term_start : min(end, stencil.num_terms)]
        window = jnp.pad(window, no_pad + [(0, max(end - stencil.num_terms, 0))])
        rows = window.reshape(lead + (p.num_rows, p.term_stride))[..., : p.row_length]
        rows = jnp.pad(rows, no_pad + [(0, 0), (0, p.coord_stride - p.row_length)])
        placed = rows.reshape(lead + (p.num_rows * p.coord_stride,))
        tail = length - p.coord_start - p.num_rows * p.coord_stride
        placed = jnp.pad(placed, no_pad + [(p.coord_start, tail)])
        total = placed if total is None else total + placed
    return total[..., : stencil.num_coords]


def candidate_columns(sums: jax.Array) -> jax.Array:
    """``(M, N)`` per-candidate sums as the ``(N, M)`` ratio table, column by column rather
    than by a transpose (the row functions of :mod:`~numpyro_discrete.core.rows` read
    columns)."""
    return jnp.stack([sums[m] for m in range(sums.shape[0])], axis=1)


def coloured_ratios(
    log_terms: Callable[[jax.Array], jax.Array],
    structure: TermStructure,
    coords: np.ndarray | None,
    by_stencil: bool = True,
) -> ExactRatios:
    """Exact ratios of the coordinates `coords` (``None``: all), colour-batched: the
    :func:`class_deltas` of every class holding one of them, batched, then :func:`credit`,
    so ``C x M`` evaluations of the terms instead of ``N x M`` of ``log pi``. With
    `by_stencil`, where the pairs form a stencil
    (:func:`~numpyro_discrete.structure.stencils.find_stencil`), every class's sums come
    from :func:`stencil_sums` and each coordinate takes its own class's (selects, no
    gathers)."""
    num_coords = structure.num_coords
    rows = np.arange(num_coords) if coords is None else np.asarray(coords)
    is_row = np.zeros(num_coords, bool)
    is_row[rows] = True
    classes = np.unique(structure.colour[rows])
    class_masks = np.stack([is_row & (structure.colour == c) for c in classes])
    coord_class = np.where(is_row, np.searchsorted(classes, structure.colour), -1)
    stencil = structure_stencil(structure) if by_stencil else None

    def ratios(x: jax.Array, log_p: jax.Array | None, candidates: jax.Array, valid: jax.Array):
        terms_x = log_terms(x)
        moves = jnp.where(valid, candidates, x[:, None])
        deltas = jax.vmap(lambda mask: class_deltas(log_terms, x, terms_x, mask, moves))(
            jnp.asarray(class_masks)
        )
        if stencil is None:
            d = credit(structure, deltas, jnp.asarray(coord_class, jnp.int32), jnp.asarray(rows))
        else:
            # (K, M, N): row j of class k is right where j is in class k
            sums = stencil_sums(stencil, deltas)
            own = sum(
                jnp.where(coord_class == k, sums[k], 0.0) for k in range(len(classes))
            )  # (M, N)
            d = candidate_columns(own)
            if coords is not None:
                d = d[rows]
        return jnp.sum(terms_x), jnp.where(jnp.isnan(d), -jnp.inf, d)

    return ratios


def pair_table_ratios(
    log_terms: Callable[[jax.Array], jax.Array], layout: PairTables, coords: np.ndarray | None
) -> ExactRatios:
    """Exact ratios of the coordinates `coords` (``None``: all) from pair tables: the terms
    evaluated at the ``P`` states of `layout` in one batch, oriented by coordinate, then each row's
    log-potentials over its values (:func:`~numpyro_discrete.core.pair_tables.slot_log_potentials`),
    read at its candidates and at its current value."""
    num_coords = layout.lower.shape[0]
    rows = np.arange(num_coords) if coords is None else np.asarray(coords)
    lower = jnp.asarray(layout.lower[rows])[:, None]
    last = layout.num_slots - 1

    def ratios(x: jax.Array, log_p: jax.Array | None, candidates: jax.Array, valid: jax.Array):
        tables = coordinate_tables(layout, evaluate_pair_tables(layout, log_terms, x.dtype))
        potentials = slot_log_potentials(layout, tables, x, rows)  # (R, S)
        current = jnp.take_along_axis(potentials, jnp.clip(x[rows, None] - lower, 0, last), 1)
        moved = jnp.take_along_axis(potentials, jnp.clip(candidates[rows] - lower, 0, last), 1)
        d = moved - current
        if log_p is None:
            log_p = jnp.sum(log_terms(x))
        return log_p, jnp.where(jnp.isnan(d), -jnp.inf, d)

    return ratios


def _brute_force_rows(
    log_density: Callable[[jax.Array], jax.Array],
    x: jax.Array,
    log_p: jax.Array,
    candidates: jax.Array,
    coords: np.ndarray,
) -> jax.Array:
    """``log pi(x^{j <- c}) - log pi(x)`` for the rows `coords` of the candidate table."""
    num_rows, num_candidates = candidates.shape
    rows = jnp.asarray(np.repeat(coords, num_candidates).astype(np.int32))
    values = candidates.reshape(-1).astype(x.dtype)

    def neighbour_log_density(row_value: tuple[jax.Array, jax.Array]) -> jax.Array:
        row, value = row_value
        return log_density(x.at[row].set(value))

    # bound the memory of the batched evaluation: about N floats per neighbour
    batch_size = max(1, _EXACT_BATCH_ELEMENTS // max(x.shape[0], 1))
    if rows.shape[0] <= batch_size:
        log_p_neighbours = jax.vmap(neighbour_log_density)((rows, values))
    else:
        log_p_neighbours = lax.map(neighbour_log_density, (rows, values), batch_size=batch_size)
    d = log_p_neighbours.reshape(num_rows, num_candidates) - log_p
    # undefined neighbours (NaN) get zero weight, never a NaN weight
    return jnp.where(jnp.isnan(d), -jnp.inf, d)
