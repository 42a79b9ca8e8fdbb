"""The public core: pure JAX proposals and adaptation, no numpyro imports. Kernels of
:mod:`numpyro_discrete.kernels` wire them into numpyro; benchmarks and users may call them
directly on a flat integer state and a local-ratio function.

- :mod:`~numpyro_discrete.core.neighbourhood`: support kinds, candidate values, distances.
- :mod:`~numpyro_discrete.core.local_ratios`: local log-ratio tables, gradient or exact.
- :mod:`~numpyro_discrete.core.balancing`: locally balanced weight functions.
- :mod:`~numpyro_discrete.core.state`: the chain state, the step info, the M-H accept step.
- :mod:`~numpyro_discrete.core.path`: the LBP-R path proposal and step;
  :mod:`~numpyro_discrete.core.path_draw`: drawing its path.
- :mod:`~numpyro_discrete.core.path_length`: rounding and adaptation of the path length (ALBP).
- :mod:`~numpyro_discrete.core.coordinatewise`: the coordinate-wise proposal (DMALA, ACS).
- :mod:`~numpyro_discrete.core.cyclical` and :mod:`~numpyro_discrete.core.tuning_plan`: ACS's
  cyclical schedules and their tuning.
- :mod:`~numpyro_discrete.core.noise`: the fast uniform and Gumbel draws of the path sampler.
"""

from numpyro_discrete.core import (
    balancing,
    coordinatewise,
    cyclical,
    local_ratios,
    neighbourhood,
    noise,
    path,
    path_draw,
    path_length,
    state,
    tuning_plan,
)

__all__ = [
    "balancing",
    "coordinatewise",
    "cyclical",
    "local_ratios",
    "neighbourhood",
    "noise",
    "path",
    "path_draw",
    "path_length",
    "state",
    "tuning_plan",
]
