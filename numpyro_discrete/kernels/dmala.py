"""numpyro kernel :class:`DMALA`: the coordinate-wise proposal of
:class:`~numpyro_discrete.ACS` with one fixed step size and balancing exponent, and no
schedule or tuning state."""

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.state import State
from numpyro_discrete.kernels.arguments import check_step_size, is_number
from numpyro_discrete.kernels.base import DiscreteKernel
from numpyro_discrete.kernels.coordinatewise import build_transition
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["DMALA", "DMALAState"]


class DMALAState(NamedTuple):
    """
    State of :class:`DMALA`.

    - **i** - iteration.
    - **z** - dict of the current values of the discrete sites, in the model's dtypes.
    - **potential_energy** - potential energy ``-log pi(z)`` under the current conditioning.
    - **log_ratios** - cached ``(N, M)`` table of local log-ratios at ``z`` (gradient or
      exact, see ``weights``).
    - **accept_prob** - acceptance probability ``min(1, A)`` of this step's proposal.
    - **mean_accept_prob** - mean acceptance probability, restarted after warmup.
    - **step_size** - the step size ``alpha`` (fixed).
    - **balancing** - the balancing exponent ``beta`` (``g(t) = t^beta``, fixed).
    - **num_changed** - number of coordinates this step changed.
    - **mean_num_changed**, **coordinates_changed** - as in
      :class:`~numpyro_discrete.ACSState`.
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
    num_changed: jax.Array
    mean_num_changed: jax.Array
    coordinates_changed: jax.Array
    rng_key: jax.Array


class DMALA(DiscreteKernel):
    """
    Discrete Metropolis-adjusted Langevin algorithm [1]: the proposal of
    :class:`~numpyro_discrete.ACS` with one fixed step size and balancing parameter, no
    schedule and no tuning. Every coordinate moves independently to a value ``v`` with
    probability ``softmax_v(balancing * d_j(v) - dist(v, x_j)^2 / (2 step_size))``, then a
    Metropolis-Hastings correction.

    **References:**

    1. *A Langevin-like Sampler for Discrete Distributions*, Ruqi Zhang, Xingchao Liu, Qiang
       Liu (2022)

    :param model: as in :class:`~numpyro_discrete.LBP`.
    :param potential_fn: as in :class:`~numpyro_discrete.LBP`.
    :param float step_size: ``alpha > 0``; it sets how many coordinates move per step (a
        binary coordinate with a neutral ratio flips with probability
        ``sigmoid(-1 / (2 alpha))``). There is no universal default: tune it to the
        acceptance rate you want, or use :class:`~numpyro_discrete.ACS`.
    :param float balancing: ``beta`` in (0, 1]; 0.5 (``g(t) = sqrt(t)``) is DMALA's.
    :param weights: as in :class:`~numpyro_discrete.LBP`.
    :param int ordinal_window: as in :class:`~numpyro_discrete.ACS`.
    :param dict supports: as in :class:`~numpyro_discrete.LBP`.

    **Example**

    .. doctest::

        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import DMALA
        ...
        >>> def model():
        ...     numpyro.sample("x", dist.Bernoulli(0.3).expand([100]))
        ...
        >>> mcmc = MCMC(DMALA(model, step_size=0.5), num_warmup=200, num_samples=2000,
        ...             progress_bar=False)
        >>> mcmc.run(jax.random.key(0))
        >>> assert abs(mcmc.get_samples()["x"].mean() - 0.3) < 0.02
    """

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        step_size: float = 0.2,
        balancing: float = 0.5,
        weights: str | Mapping[str, str] = "auto",
        ordinal_window: int | None = None,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        check_step_size("DMALA", "step_size", step_size)
        if not (is_number(balancing) and 0.0 < balancing <= 1.0):
            raise ValueError(f"DMALA: `balancing` must lie in (0, 1], got {balancing!r}.")
        super().__init__(
            model, potential_fn, weights=weights, ordinal_window=ordinal_window, supports=supports
        )
        self._step_size = float(step_size)
        self._balancing = float(balancing)

    def _setup(self, target: DiscreteTarget) -> None:
        self._transition = build_transition(target)

    def _init_state(self, rng_key: jax.Array, state: State) -> DMALAState:
        dtype = jnp.result_type(float)
        return DMALAState(
            **self._initial_fields(rng_key, state),
            step_size=jnp.asarray(self._step_size, dtype),
            balancing=jnp.asarray(self._balancing, dtype),
        )

    def _step(self, state: DMALAState, position: State, local_fn: LocalFn) -> DMALAState:
        key_next, key_step = random.split(state.rng_key)
        new, info = self._transition(key_step, position, local_fn, state.step_size, state.balancing)
        return DMALAState(
            **self._step_fields(state, new, info, key_next),
            step_size=state.step_size,
            balancing=state.balancing,
        )

    def get_diagnostics_str(self, state: DMALAState) -> str:
        return f"acc. prob={float(state.mean_accept_prob):.2f}"
