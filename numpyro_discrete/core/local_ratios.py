"""Local log-ratio tables ``d[j, m] ~ log pi(x^{j <- c[j, m]}) - log pi(x)``.

A *local function* maps a flat integer state ``x`` to ``(log pi(x), d)``, with ``d`` of shape
``(N, M)`` over the candidate table of a
:class:`~numpyro_discrete.core.neighbourhood.Neighbourhood` and ``-inf`` at invalid entries.
Ratios come from one of two sources, chosen per coordinate:

- gradient (Grathwohl et al. 2021): one ``value_and_grad`` of the float-relaxed log density,
  ``d[j, m] = (c[j, m] - x_j) * grad_j``. Exact for log densities affine in each coordinate.
- exact (Zanella 2020): every single-coordinate change evaluated, batched with ``vmap``.
"""

from collections.abc import Callable

import numpy as np

import jax
from jax import lax
import jax.numpy as jnp

from numpyro_discrete.core.neighbourhood import Neighbourhood

__all__ = [
    "LocalFn",
    "exact_local_fn",
    "gradient_local_fn",
    "mixed_local_fn",
]

LocalFn = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
"""``x -> (log pi(x), d)`` with ``d`` of shape ``(N, M)``."""

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
