"""What the coordinate-wise kernels :class:`~numpyro_discrete.ACS` and
:class:`~numpyro_discrete.DMALA` share: the core proposal of
:mod:`numpyro_discrete.core.coordinatewise` built for a target."""

from collections.abc import Callable

from numpyro_discrete.core import coordinatewise
from numpyro_discrete.core.neighbourhood import squared_distance_fn
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["build_transition"]


def build_transition(target: DiscreteTarget) -> Callable:
    """The coordinate-wise transition of `target`: its candidates, at squared distances in
    the units of each site (:func:`~numpyro_discrete.core.coordinatewise.build_kernel`)."""
    return coordinatewise.build_kernel(
        target.neighbourhood, squared_distance_fn(target.supports, target.move_scales)
    )
