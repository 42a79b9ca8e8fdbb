"""What the sweep kernels :class:`~numpyro_discrete.ChromaticGibbs` and
:class:`~numpyro_discrete.BlockGibbs` share: their state and their step, a sweep of exact
conditional draws over classes of coordinates, evaluated from the terms of ``log pi``."""

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
from jax import random

from numpyro_discrete.core import chromatic
from numpyro_discrete.core.state import SweepState
from numpyro_discrete.kernels.base import DiscreteKernel

__all__ = ["ExactSweepKernel", "ExactSweepState"]


class ExactSweepState(NamedTuple):
    """
    State of a sweep kernel.

    - **i** - iteration (sweeps).
    - **z** - dict of the current values of the discrete sites, in the model's dtypes.
    - **potential_energy** - potential energy ``-log pi(z)`` under the current conditioning.
    - **accept_prob** - mean over the classes (colour classes, block classes) of this
      sweep's acceptance probabilities ``min(1, A)``: exactly 1 when the classes share no
      term of the model.
    - **mean_accept_prob** - mean acceptance probability, restarted after warmup.
    - **num_changed** - number of coordinates this sweep changed.
    - **mean_num_changed**, **coordinates_changed** - the mean number of coordinates a
      step changed and which ones changed (``(N,)``), since warmup ended (since the start
      during warmup), read by :mod:`~numpyro_discrete.kernels.stuck_coordinates`.
    - **rng_key** - random key for the next sweep.
    """

    i: jax.Array
    z: dict[str, jax.Array]
    potential_energy: jax.Array
    accept_prob: jax.Array
    mean_accept_prob: jax.Array
    num_changed: jax.Array
    mean_num_changed: jax.Array
    coordinates_changed: jax.Array
    rng_key: jax.Array


class ExactSweepKernel(DiscreteKernel):
    """Base of the sweep kernels; their state is :attr:`state_type`, an
    :class:`ExactSweepState`. A subclass sets its sweep, ``self._transition(rng_key,
    position, log_terms, step) -> (position, info)``, at ``_setup`` (``step``: the sweeps
    done, the state's ``i``)."""

    state_type: type[ExactSweepState] = ExactSweepState
    core_state_type = SweepState
    _sweeps = True

    _mh_test: bool = True

    @property
    def mh_test(self) -> bool:
        """Whether each class's move is tested by Metropolis-Hastings (after ``init``):
        ``False`` where the draws are proven to be exact conditionals, so every one is
        taken."""
        return self._mh_test

    def get_diagnostics_str(self, state: ExactSweepState) -> str:
        return f"acc. prob={float(state.mean_accept_prob):.2f}"

    def _density(self, model_args: tuple, model_kwargs: Mapping | None) -> Callable:
        return self._target.log_terms(model_args, model_kwargs)

    def _core_init(self, position: jax.Array, density: Callable) -> SweepState:
        return chromatic.init(position, density)

    def _init_state(self, rng_key: jax.Array, state: SweepState) -> ExactSweepState:
        return self.state_type(**self._initial_fields(rng_key, state))

    def _step(
        self, state: ExactSweepState, position: SweepState, log_terms: Callable
    ) -> ExactSweepState:
        key_next, key_step = random.split(state.rng_key)
        new, info = self._transition(key_step, position, log_terms, state.i)
        return self.state_type(**self._step_fields(state, new, info, key_next))
