"""numpyro kernel :class:`DMALA`: the coordinate-wise proposal of
:class:`~numpyro_discrete.ACS` with one fixed step size and balancing exponent."""

from collections.abc import Callable, Mapping

from numpyro_discrete.core import cyclical, tuning_plan
from numpyro_discrete.kernels.coordinatewise import (
    ACSState,
    CoordinatewiseKernel,
    check_step_size,
    is_number,
)
from numpyro_discrete.model.layout import SiteSupport

__all__ = ["DMALA"]


class DMALA(CoordinatewiseKernel):
    """
    Discrete Metropolis-adjusted Langevin algorithm [1]: the proposal of
    :class:`~numpyro_discrete.ACS` with one fixed step size and balancing parameter, no
    schedule and no tuning. Every coordinate
    moves independently to a value ``v`` with probability
    ``softmax_v(balancing * d_j(v) - dist(v, x_j)^2 / (2 step_size))``, then a
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
        # one cycle of one step: the schedules are the fixed pair; the search's numbers are
        # unused (nothing is tuned)
        config = cyclical.TuningConfig(
            target_accept_prob=0.5,
            zeta=0.5,
            step_size_ceil=float(step_size),
            step_size_floor=float(step_size),
            balancing_max=float(balancing),
            balancing_min=float(balancing),
            cycle_length=1,
        )
        super().__init__(
            model,
            potential_fn,
            config=config,
            step_size_max=step_size,
            step_size_min=step_size,
            weights=weights,
            ordinal_window=ordinal_window,
            supports=supports,
        )

    def _tuning_plan(self) -> tuning_plan.TuningPlan:
        return tuning_plan.no_tuning()

    def get_diagnostics_str(self, state: ACSState) -> str:
        return f"acc. prob={float(state.mean_accept_prob):.2f}"
