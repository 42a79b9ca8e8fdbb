"""Local log-ratio tables ``d[j, m] ~ log pi(x^{j <- c[j, m]}) - log pi(x)``.

A *neighbourhood* maps a flat integer state ``x`` of ``N`` coordinates to a table of candidate
values ``c`` of shape ``(N, M)`` together with a validity mask (padding and values outside the
support are invalid). A *local function* maps ``x`` to ``(log pi(x), d)`` with ``d`` of shape
``(N, M)`` and ``-inf`` at invalid entries. Ratios come from one of two sources, chosen per
coordinate:

- gradient (Grathwohl et al. 2021): one ``value_and_grad`` of the float-relaxed log density,
  ``d[j, m] = (c[j, m] - x_j) * grad_j``. Exact for log densities affine in each coordinate.
- exact (Zanella 2020): every single-coordinate change evaluated, batched with ``vmap``.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import jax
from jax import lax
import jax.numpy as jnp

__all__ = [
    "LocalFn",
    "Neighbourhood",
    "binary_neighbourhood",
    "coordinate_neighbourhood",
    "exact_local_fn",
    "gradient_local_fn",
    "mixed_local_fn",
]

LocalFn = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
"""``x -> (log pi(x), d)`` with ``d`` of shape ``(N, M)``."""

UNBOUNDED = np.iinfo(np.int32).max // 2
"""Upper bound standing for ``+inf`` in integer bound arrays (no overflow under a window)."""

# Largest number of (neighbour, coordinate) entries the exact ratios hold in memory at once;
# beyond it, neighbours are evaluated in sequential batches of vmapped evaluations.
_EXACT_BATCH_ELEMENTS = 1 << 24


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


def coordinate_neighbourhood(
    num_categories: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    window: int = 1,
) -> Neighbourhood:
    """
    The neighbourhood of a mix of nominal and ordinal coordinates (static per-coordinate
    metadata, numpy arrays of shape ``(N,)``).

    - nominal coordinate ``j`` (``num_categories[j] = K_j > 0``, values ``0..K_j - 1``): every
      other value, ``c[j, m] = m + (m >= x_j)`` for ``m < K_j - 1``. Binary is ``K_j = 2``.
    - ordinal coordinate ``j`` (``num_categories[j] = 0``): the symmetric window
      ``x_j - window .. x_j + window`` without ``x_j``, restricted to
      ``[lower[j], upper[j]]``. The window is symmetric so that from any candidate the
      current value is again a candidate: the reverse move is always proposable.

    :param num_categories: ``K_j`` for nominal coordinates, ``0`` for ordinal ones.
    :param lower: lower bounds of ordinal coordinates (ignored for nominal ones).
    :param upper: upper bounds of ordinal coordinates; :data:`UNBOUNDED` for ``+inf``.
    :param window: half-width of the ordinal window, ``>= 1``.
    """
    num_categories = np.asarray(num_categories, np.int32)
    if np.all(num_categories == 2):
        return binary_neighbourhood
    nominal = num_categories > 0
    num_nominal = int(np.max(num_categories, initial=1)) - 1
    num_candidates = max(num_nominal, 2 * window if not np.all(nominal) else 0)
    m = np.arange(num_candidates, dtype=np.int32)
    nominal_valid = m < (num_categories - 1)[:, None]
    offsets = np.concatenate([np.arange(-window, 0), np.arange(1, window + 1)])
    # with nominal coordinates only, the window is unused and may be wider than the table
    offsets = np.pad(offsets, (0, max(num_candidates - offsets.size, 0)))[:num_candidates]
    offsets = offsets.astype(np.int32)
    in_window = np.broadcast_to(m < 2 * window, (num_categories.size, num_candidates))
    lower = np.asarray(lower, np.int32)[:, None]
    upper = np.asarray(upper, np.int32)[:, None]

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
) -> LocalFn:
    """
    Exact local log-ratios on the coordinates `exact_coords`, gradient ratios on the others:
    one ``value_and_grad`` (if any coordinate uses the gradient) plus one batched evaluation
    of ``log pi`` per exact neighbour.

    :param relaxed_log_density: ``log pi`` of a flat float vector, differentiable in the
        gradient coordinates (the exact ones may be cast back to integers inside); unused
        when every coordinate is exact.
    :param log_density: ``log pi`` of a flat integer vector; unused when no coordinate is
        exact.
    :param neighbourhood: candidate values per coordinate.
    :param exact_coords: static indices of the exact coordinates; ``None`` for all of them.
    """

    def local_fn(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        num_coords = x.shape[0]
        exact = np.arange(num_coords) if exact_coords is None else np.asarray(exact_coords)
        candidates = neighbourhood.candidates(x)
        if exact.size < num_coords:
            x_float = x.astype(jnp.result_type(float))
            log_p, grad = jax.value_and_grad(relaxed_log_density)(x_float)
            d = (candidates - x[:, None]).astype(grad.dtype) * grad[:, None]
        else:
            log_p = jnp.asarray(log_density(x), jnp.result_type(float))
            d = None
        if exact.size:
            d_exact = _exact_log_ratios(log_density, x, log_p, candidates[exact], exact)
            if d is None:
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
        return log_p, jnp.where(neighbourhood.valid(x) & ~jnp.isnan(d), d, -jnp.inf)

    return local_fn


def _exact_log_ratios(
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
