"""The checks of the arguments every discrete kernel takes (`model` or `potential_fn`,
`weights`, `ordinal_window`, `supports`) and of the step sizes of ACS and DMALA, each error
naming the kernel, the argument and the fix; and :func:`one_eager_chain`, whether ``init``
runs for one chain outside any trace."""

from collections.abc import Callable, Mapping
import math
from typing import Any

import numpy as np

import jax

from numpyro.util import is_prng_key

from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.potential import WEIGHT_MODES

__all__ = [
    "check_kernel_arguments",
    "check_step_size",
    "is_integer",
    "is_number",
    "one_eager_chain",
]


def check_kernel_arguments(
    name: str,
    model: Callable | None,
    potential_fn: Callable | None,
    weights: str | Mapping[str, str],
    ordinal_window: int | None,
    supports: Mapping[str, SiteSupport] | None,
) -> None:
    """Raise the error a user of kernel `name` can act on, if an argument is wrong."""
    if (model is None) == (potential_fn is None):
        raise ValueError(f"{name} needs exactly one of `model` or `potential_fn`.")
    expected = {
        "model": "a numpyro model function",
        "potential_fn": "a function of a dict of site values returning the potential energy",
    }
    for arg, value in (("model", model), ("potential_fn", potential_fn)):
        if value is not None and not callable(value):
            raise TypeError(
                f"{name}: `{arg}` must be {expected[arg]}, got {type(value).__name__} {value!r}."
            )
    if supports is not None and model is not None:
        raise ValueError(
            f"{name}: `supports` is for `potential_fn` only; with a model, supports "
            "are read from the distributions of its sites."
        )
    if supports is not None and not all(
        isinstance(support, SiteSupport) for support in dict(supports).values()
    ):
        raise ValueError(
            f"{name}: `supports` must map site names to `SiteSupport` objects, e.g. "
            "`{'s': SiteSupport.categorical(3), 'n': SiteSupport.ordinal(0, None)}`."
        )
    if ordinal_window is not None and not (is_integer(ordinal_window) and ordinal_window >= 1):
        raise ValueError(
            f"{name}: `ordinal_window` must be None (moves in the units of each site) or "
            f"an integer >= 1 (the largest change of an ordinal coordinate in one move), "
            f"got {ordinal_window!r}."
        )
    modes = weights.values() if isinstance(weights, Mapping) else [weights]
    if not all(isinstance(mode, str) and mode in WEIGHT_MODES for mode in modes):
        raise ValueError(
            f"{name}: unknown `weights={weights!r}`; choose one of {list(WEIGHT_MODES)}, "
            "or a dict mapping site names to them."
        )


def is_number(value: Any) -> bool:
    """Whether `value` is a finite real number (a Python or numpy scalar, not a bool)."""
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def is_integer(value: Any) -> bool:
    """Whether `value` is an integer (a Python or numpy scalar, not a bool)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_step_size(name: str, argument: str, value: Any) -> None:
    if value is not None and not (is_number(value) and value > 0):
        raise ValueError(f"{name}: `{argument}` must be a finite number > 0, got {value!r}.")


def one_eager_chain(rng_key: Any) -> bool:
    """Whether `rng_key` is one chain's key, outside any trace: numpyro's ``init`` of a
    sequential chain, whose set-up a later chain with the same arguments can keep (not a
    batch of keys, nor a key traced by ``pmap``)."""
    return is_prng_key(rng_key) and not isinstance(rng_key, jax.core.Tracer)
