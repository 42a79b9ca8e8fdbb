"""Local log-ratio tables ``d[j, m] ~ log pi(x^{j <- c[j, m]}) - log pi(x)``.

A *neighbourhood* maps a flat integer state ``x`` of ``N`` coordinates to a table of candidate
values ``c`` of shape ``(N, M)`` together with a validity mask (padding and values outside the
support are invalid). A *local function* maps ``x`` to ``(log pi(x), d)`` with ``d`` of shape
``(N, M)`` and ``-inf`` at invalid entries. Two ways to build it:

- gradient (Grathwohl et al. 2021): one ``value_and_grad`` of the float-relaxed log density,
  ``d[j, m] = (c[j, m] - x_j) * grad_j``. Exact for log densities affine in each coordinate.
- exact (Zanella 2020): every single-coordinate change evaluated, batched with ``vmap``.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "LocalFn",
    "Neighbourhood",
    "binary_neighbourhood",
    "exact_local_fn",
    "gradient_local_fn",
]

LocalFn = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
"""``x -> (log pi(x), d)`` with ``d`` of shape ``(N, M)``."""


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

    def local_fn(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        x_float = x.astype(jnp.result_type(float))
        log_p, grad = jax.value_and_grad(relaxed_log_density)(x_float)
        candidates = neighbourhood.candidates(x)
        d = (candidates - x[:, None]).astype(grad.dtype) * grad[:, None]
        return log_p, jnp.where(neighbourhood.valid(x), d, -jnp.inf)

    return local_fn


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

    def local_fn(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        candidates = neighbourhood.candidates(x)
        num_coords, num_candidates = candidates.shape
        coords = jnp.repeat(jnp.arange(num_coords), num_candidates)
        neighbours = jax.vmap(lambda j, v: x.at[j].set(v))(
            coords, candidates.reshape(-1).astype(x.dtype)
        )
        log_p = log_density(x)
        log_p_neighbours = jax.vmap(log_density)(neighbours).reshape(candidates.shape)
        d = log_p_neighbours - log_p
        return log_p, jnp.where(neighbourhood.valid(x), d, -jnp.inf)

    return local_fn
