"""What the coordinate-wise kernels :class:`~numpyro_discrete.ACS` and
:class:`~numpyro_discrete.DMALA` share: the core proposal of
:mod:`numpyro_discrete.core.coordinatewise` built for a target, and the checks of their
arguments."""

from collections.abc import Callable
import math
from typing import Any

import numpy as np

from numpyro_discrete.core import coordinatewise
from numpyro_discrete.core.neighbourhood import squared_distance_fn
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["build_transition", "check_step_size", "is_number"]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def check_step_size(name: str, argument: str, value: Any) -> None:
    if value is not None and not (is_number(value) and value > 0):
        raise ValueError(f"{name}: `{argument}` must be a finite number > 0, got {value!r}.")


def build_transition(target: DiscreteTarget) -> Callable:
    """The coordinate-wise transition of `target`: its candidates, at squared distances in
    the units of each site (:func:`~numpyro_discrete.core.coordinatewise.build_kernel`)."""
    return coordinatewise.build_kernel(
        target.neighbourhood, squared_distance_fn(target.supports, target.move_scales)
    )
