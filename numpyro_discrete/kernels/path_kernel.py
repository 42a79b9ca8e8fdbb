"""What the path kernels :class:`~numpyro_discrete.LBP` and :class:`~numpyro_discrete.ALBP`
share: their state and their step, the core LBP-R step
(:func:`numpyro_discrete.core.path_length.build_kernel`) with the path length each of them
chooses."""

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
from jax import random

from numpyro_discrete.core import path_length
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.state import State
from numpyro_discrete.kernels.base import DiscreteKernel
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["LBPState", "PathKernel"]


class LBPState(NamedTuple):
    """
    State of :class:`~numpyro_discrete.LBP` and :class:`~numpyro_discrete.ALBP`.

    - **i** - iteration. Not reset after warmup: adaptation runs while ``i < num_warmup``.
    - **z** - dict of the current values of the discrete sites, in the model's dtypes.
    - **potential_energy** - potential energy ``-log pi(z)`` under the current conditioning.
    - **log_ratios** - cached ``(N, M)`` table of local log-ratios at ``z`` (gradient or
      exact, see ``weights``); ``N`` flat coordinates, ``M`` candidate values each.
    - **accept_prob** - acceptance probability ``min(1, A)`` of this step's proposal.
    - **mean_accept_prob** - mean acceptance probability, restarted after warmup.
    - **path_length** - the real path length ``R_t``; each step uses its probabilistic
      rounding (mean ``R_t``). Constant for LBP, adapted during warmup and frozen after it
      for ALBP.
    - **mean_path_length** - average of ``R_t`` over the second half of warmup, the value
      ALBP freezes ``R_t`` at when warmup ends (equal to ``path_length`` for LBP).
    - **window_accept_prob** - average acceptance rate over the same steps (0 for LBP).
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
    mean_path_length: jax.Array
    window_accept_prob: jax.Array
    num_changed: jax.Array
    mean_num_changed: jax.Array
    coordinates_changed: jax.Array
    rng_key: jax.Array


class PathKernel(DiscreteKernel):
    """What LBP and ALBP share: the state, the step, the balancing function."""

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

    def _initial_path_length(self) -> float:
        raise NotImplementedError

    def _adapt(self, state: LBPState, accept_prob: jax.Array) -> path_length.PathLengthState:
        raise NotImplementedError

    def _setup(self, target: DiscreteTarget) -> None:
        self._max_path_length = self._path_length_bound(target)
        self._transition = path_length.build_kernel(
            get_balancing(self._balancing),
            target.neighbourhood,
            self._max_path_length,
        )

    def get_diagnostics_str(self, state: LBPState) -> str:
        return f"acc. prob={float(state.mean_accept_prob):.2f}, R={float(state.path_length):.1f}"

    def _init_state(self, rng_key: jax.Array, state: State) -> LBPState:
        adaptation = path_length.init(self._initial_path_length())
        return LBPState(**self._initial_fields(rng_key, state), **adaptation._asdict())

    def _step(self, state: LBPState, position: State, local_fn: LocalFn) -> LBPState:
        key_next, key_step = random.split(state.rng_key)
        new, info, _ = self._transition(key_step, position, local_fn, state.path_length)
        adapted = self._adapt(state, info.accept_prob)
        return LBPState(**self._step_fields(state, new, info, key_next), **adapted._asdict())
