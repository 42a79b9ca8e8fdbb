"""Locally balanced weight functions, in log space.

A balancing function ``g`` satisfies ``g(t) = t g(1/t)`` (Zanella 2020); proposals weight a
neighbour with local ratio ``t = pi(y) / pi(x) = exp(d)`` by ``g(t)``. Everything here works on
``d = log t`` and returns ``log g``.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = ["BALANCING_FUNCTIONS", "barker", "get_balancing", "log_weights", "sqrt"]

LogBalancing = Callable[[jax.Array], jax.Array]


def sqrt(log_ratio: jax.Array) -> jax.Array:
    """``g(t) = sqrt(t)``."""
    return 0.5 * log_ratio


def barker(log_ratio: jax.Array) -> jax.Array:
    """``g(t) = t / (1 + t)`` (Barker's rule), ``log g = log_sigmoid(d)``."""
    return jax.nn.log_sigmoid(log_ratio)


BALANCING_FUNCTIONS: dict[str, LogBalancing] = {"sqrt": sqrt, "barker": barker}


def get_balancing(name: str) -> LogBalancing:
    """The log balancing function called `name`; raises with the valid names otherwise."""
    if name not in BALANCING_FUNCTIONS:
        raise ValueError(
            f"Unknown balancing function {name!r}; choose one of {sorted(BALANCING_FUNCTIONS)}."
        )
    return BALANCING_FUNCTIONS[name]


def log_weights(log_balancing: LogBalancing, log_ratios: jax.Array) -> jax.Array:
    """
    Log proposal weights ``log g(exp d)`` of a table of local log-ratios.

    A non-finite log-ratio (NaN from an undefined potential, or +-inf) gets weight zero, so
    that it can never reach an acceptance test. This is a deterministic function of the
    state, so forward and reverse proposal probabilities stay consistent.
    """
    log_w = log_balancing(log_ratios)
    return jnp.where(jnp.isfinite(log_ratios), log_w, -jnp.inf)
