"""What the path kernels :class:`~numpyro_discrete.LBP` and :class:`~numpyro_discrete.ALBP`
share: their states (LBP's, and ALBP's with the adaptation of the path length beside it) and
their transition, the core LBP-R step (:func:`numpyro_discrete.core.path_length.build_kernel`)
at the path length each of them chooses."""

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax

from numpyro_discrete.core import path_length
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.kernels.base import DiscreteKernel
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["ALBPState", "LBPState", "PathKernel"]


class LBPState(NamedTuple):
    """
    State of :class:`~numpyro_discrete.LBP`.

    - **i** - iteration.
    - **z** - dict of the current values of the discrete sites, in the model's dtypes.
    - **potential_energy** - potential energy ``-log pi(z)`` under the current conditioning.
    - **log_ratios** - cached ``(N, M)`` table of local log-ratios at ``z`` (gradient or
      exact, see ``weights``); ``N`` flat coordinates, ``M`` candidate values each.
    - **accept_prob** - acceptance probability ``min(1, A)`` of this step's proposal.
    - **mean_accept_prob** - mean acceptance probability, restarted after warmup.
    - **path_length** - the path length ``R`` (fixed).
    - **num_changed** - number of coordinates this step changed (0 when rejected).
    - **mean_num_changed**, **coordinates_changed** - the mean number of coordinates a
      step changed and which ones changed (``(N,)``), since warmup ended (since the start
      during warmup), read by :mod:`~numpyro_discrete.kernels.stuck_coordinates`.
    - **rng_key** - random key for the next step.
    """

    i: jax.Array
    z: dict[str, jax.Array]
    potential_energy: jax.Array
    log_ratios: jax.Array
    accept_prob: jax.Array
    mean_accept_prob: jax.Array
    path_length: jax.Array
    num_changed: jax.Array
    mean_num_changed: jax.Array
    coordinates_changed: jax.Array
    rng_key: jax.Array


class ALBPState(NamedTuple):
    """
    State of :class:`~numpyro_discrete.ALBP`: :class:`LBPState` and the adaptation of the
    path length (:class:`~numpyro_discrete.core.path_length.PathLengthState`). ``i`` is not
    reset after warmup: adaptation runs while ``i < num_warmup``.

    - **path_length** - the real path length ``R_t``; each step uses its probabilistic
      rounding (mean ``R_t``). Adapted during warmup, frozen after it.
    - **mean_path_length** - average of ``R_t`` over the second half of warmup, the value
      ``R_t`` is frozen at when warmup ends.
    - **window_accept_prob** - average acceptance rate over the same steps.
    - the other fields as in :class:`LBPState`.
    """

    i: jax.Array
    z: dict[str, jax.Array]
    potential_energy: jax.Array
    log_ratios: jax.Array
    accept_prob: jax.Array
    mean_accept_prob: jax.Array
    path_length: jax.Array
    mean_path_length: jax.Array
    window_accept_prob: jax.Array
    num_changed: jax.Array
    mean_num_changed: jax.Array
    coordinates_changed: jax.Array
    rng_key: jax.Array


class PathKernel(DiscreteKernel):
    """What LBP and ALBP share: the balancing function and the transition."""

    def __init__(
        self,
        model: Callable | None,
        potential_fn: Callable | None,
        *,
        balancing: str,
        weights: str | Mapping[str, str],
        ordinal_window: int | None,
        supports: Mapping[str, SiteSupport] | None,
    ) -> None:
        get_balancing(balancing)
        super().__init__(
            model, potential_fn, weights=weights, ordinal_window=ordinal_window, supports=supports
        )
        self._balancing = balancing
        self._max_path_length = 1

    def _path_length_bound(self, target: DiscreteTarget) -> int:
        """``R_max``, the static bound of the path sampler, checked against `target`."""
        raise NotImplementedError

    def _setup(self, target: DiscreteTarget) -> None:
        self._max_path_length = self._path_length_bound(target)
        self._transition = path_length.build_kernel(
            get_balancing(self._balancing),
            target.neighbourhood,
            self._max_path_length,
        )

    def get_diagnostics_str(self, state: LBPState | ALBPState) -> str:
        return f"acc. prob={float(state.mean_accept_prob):.2f}, R={float(state.path_length):.1f}"
