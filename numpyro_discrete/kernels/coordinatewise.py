"""What the coordinate-wise kernels :class:`~numpyro_discrete.ACS` and
:class:`~numpyro_discrete.DMALA` share: their state, their step (the core proposal of
:mod:`numpyro_discrete.core.coordinatewise` with the schedules of
:mod:`numpyro_discrete.core.cyclical`) and the checks of their arguments."""

from collections.abc import Callable, Mapping
import math
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import coordinatewise, cyclical, tuning_plan
from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import squared_distance_fn
from numpyro_discrete.core.state import State
from numpyro_discrete.kernels.base import DiscreteKernel
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["ACSState", "CoordinatewiseKernel", "check_step_size", "is_number"]


class ACSState(NamedTuple):
    """
    State of :class:`~numpyro_discrete.ACS` and :class:`~numpyro_discrete.DMALA`.

    - **i** - iteration. Not reset after warmup: tuning runs while ``i`` is below its budget.
    - **z** - dict of the current values of the discrete sites, in the model's dtypes.
    - **potential_energy** - potential energy ``-log pi(z)`` under the current conditioning.
    - **log_ratios** - cached ``(N, M)`` table of local log-ratios at ``z`` (gradient or
      exact, see ``weights``).
    - **accept_prob** - acceptance probability ``min(1, A)`` of this step's proposal.
    - **mean_accept_prob** - mean acceptance probability, restarted after warmup.
    - **step_size** - the step size ``alpha`` this step used.
    - **balancing** - the balancing exponent ``beta`` this step used (``g(t) = t^beta``).
    - **cycle_position** - this step's position ``k`` in the cycle, ``0 <= k < cycle_length``
      (``-1`` during the tuning steps).
    - **num_changed** - number of coordinates this step changed.
    - **mean_num_changed**, **coordinates_changed** - the mean number of coordinates a
      step changed and which ones changed (``(N,)``), since warmup ended (since the start
      during warmup), read by :mod:`~numpyro_discrete.kernels.stuck_coordinates`.
    - **tuning** - :class:`~numpyro_discrete.core.cyclical.TuningState`: the schedules
      (``tuning.step_size_max``, ``tuning.step_size_min``, ``tuning.balancing``, frozen
      once tuning ends) and the bookkeeping of the tuning rounds.
    - **rng_key** - random key for the next step.
    """

    i: jax.Array
    z: dict[str, jax.Array]
    potential_energy: jax.Array
    log_ratios: jax.Array
    accept_prob: jax.Array
    mean_accept_prob: jax.Array
    step_size: jax.Array
    balancing: jax.Array
    cycle_position: jax.Array
    num_changed: jax.Array
    mean_num_changed: jax.Array
    coordinates_changed: jax.Array
    tuning: cyclical.TuningState
    rng_key: jax.Array


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def check_step_size(name: str, argument: str, value: Any) -> None:
    if value is not None and not (is_number(value) and value > 0):
        raise ValueError(f"{name}: `{argument}` must be a finite number > 0, got {value!r}.")


class CoordinatewiseKernel(DiscreteKernel):
    """What ACS and DMALA share: the state, the step, the schedules' configuration."""

    def __init__(
        self,
        model: Callable | None,
        potential_fn: Callable | None,
        *,
        config: cyclical.TuningConfig,
        step_size_max: float | None,
        step_size_min: float | None,
        weights: str | Mapping[str, str],
        ordinal_window: int | None,
        supports: Mapping[str, SiteSupport] | None,
    ) -> None:
        super().__init__(
            model, potential_fn, weights=weights, ordinal_window=ordinal_window, supports=supports
        )
        self._config = config
        self._step_size_max = None if step_size_max is None else float(step_size_max)
        self._step_size_min = None if step_size_min is None else float(step_size_min)
        self._plan: tuning_plan.TuningPlan | None = None

    def _tuning_plan(self) -> tuning_plan.TuningPlan:
        raise NotImplementedError

    def _setup(self, target: DiscreteTarget) -> None:
        self._plan = self._tuning_plan()
        self._transition = coordinatewise.build_kernel(
            target.neighbourhood, squared_distance_fn(target.supports, target.move_scales)
        )

    def _init_state(self, rng_key: jax.Array, state: State) -> ACSState:
        tuning = cyclical.init(state, self._config, self._step_size_max, self._step_size_min)
        return ACSState(
            **self._initial_fields(rng_key, state),
            step_size=tuning.step_size_max,
            balancing=tuning.balancing[0],
            cycle_position=jnp.zeros((), jnp.int32),
            tuning=tuning,
        )

    def _step(self, state: ACSState, position: State, local_fn: LocalFn) -> ACSState:
        key_next, key_step = random.split(state.rng_key)
        plan, config = self._plan, self._config
        parameters = cyclical.step_parameters(plan, config, state.tuning, state.i)
        new, info = self._transition(
            key_step,
            position,
            local_fn,
            parameters.step_size,
            parameters.balancing,
            parameters.metropolis,
        )
        tuning, new = cyclical.update(
            plan, config, state.tuning, state.i, position, new, info, parameters
        )
        # the tuning rounds may move the chain to the best state of a round
        info = info._replace(num_changed=jnp.sum(new.position != position.position))
        return ACSState(
            **self._step_fields(state, new, info, key_next),
            step_size=parameters.step_size,
            balancing=parameters.balancing,
            cycle_position=parameters.cycle_position,
            tuning=tuning,
        )
