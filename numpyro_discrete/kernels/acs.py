"""numpyro kernel :class:`ACS`: the coordinate-wise proposal with cyclical schedules of its
step size and balancing exponent, tuned during warmup (:class:`~numpyro_discrete.DMALA`,
:mod:`~numpyro_discrete.kernels.dmala`, is the same proposal with one fixed pair)."""

from collections.abc import Callable, Mapping
import dataclasses
from typing import NamedTuple

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import cyclical, tuning_plan
from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import SupportKind
from numpyro_discrete.core.state import State
from numpyro_discrete.kernels.arguments import check_step_size, is_integer, is_number
from numpyro_discrete.kernels.base import DiscreteKernel
from numpyro_discrete.kernels.coordinatewise import build_transition
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["ACS", "ACSState", "EXACT_ORDINAL_MAX_EVALUATIONS"]

EXACT_ORDINAL_MAX_EVALUATIONS = 64
"""With ``weights="auto"``, :class:`ACS` computes the ratios of its ordinal sites exactly when
that costs at most this many evaluations of the log density per step (one per coordinate and
candidate, or per colour class and candidate where the structure is sparse); ``auto``
otherwise gives them gradient ratios. Measured time per step against gradient ratios: at
most 1.2 times at 24 to 384 evaluations of a cheap log density (Gaussian bumps), 1.2 to 1.4
times at 12 to 48 evaluations of a Poisson likelihood of 20,000 points, 0.9 to 3.4 times
with 400,000 points."""


class ACSState(NamedTuple):
    """
    State of :class:`ACS`.

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


def _exact_ordinal_sites(target: DiscreteTarget, weights: str | Mapping[str, str]) -> list[str]:
    """
    The ordinal sites left on ``"auto"`` that ``auto`` gave gradient ratios, whose ratios ACS
    computes exactly instead: all of them when that costs at most
    :data:`EXACT_ORDINAL_MAX_EVALUATIONS` evaluations per step, else none.

    ACS's large steps move an ordinal coordinate by up to twice its scale, and a gradient
    ratio extrapolates the slope at ``x`` (zero at a mode) that far, whatever lies there.
    Measured on ``DiscreteUniform(0, 99)`` coordinates with four Gaussian bumps of width 4,
    started in one mode, 2000 steps of fixed ``(alpha, beta)``: with gradient ratios, at
    most 6.6 mode changes per 1000 steps with the modes 40 apart and 16 with them 23 apart
    in four coordinates, over ``alpha`` in 0.05-2 and ``beta`` in 0.1-0.95 (0 and 8.1 at
    ``beta = 0.95``); with exact ratios, 27 and 108 at ``alpha = 1``, ``beta = 0.95``. Under
    ACS's default tuning with gradient ratios, two chains stayed at a state far from every
    mode for all 40,000 draws (acceptance 0.00), where the extrapolated gain of a far jump
    outweighed every small move.
    """
    layout = target.layout
    sites = [
        site
        for site, support in zip(layout.names, layout.supports, strict=True)
        if support.kind == SupportKind.ORDINAL
        and target.weights_mode[site] == "gradient"
        and (weights.get(site, "auto") if isinstance(weights, Mapping) else weights) == "auto"
    ]
    if not sites:
        return []
    coords = np.concatenate([layout.site_coords(site) for site in sites])
    position = jax.ShapeDtypeStruct((layout.num_coords,), jnp.int32)
    num_candidates = jax.eval_shape(target.neighbourhood.candidates, position).shape[1]
    structure = target.structure
    sparse = not structure.dense_terms.size
    batches = np.unique(structure.colour[coords]).size if sparse else coords.size
    return sites if batches * num_candidates <= EXACT_ORDINAL_MAX_EVALUATIONS else []


class ACS(DiscreteKernel):
    """
    Automatic cyclical sampler [1] for the discrete latent sites of a model: binary, categorical
    and integer-valued (ordinal) sites, in any mix of shapes. Each step proposes a new value for
    every coordinate at once, independently, with probability ``softmax_v(beta * d_j(v) -
    dist(v, x_j)^2 / (2 alpha))`` over its current value and its candidates (``d_j(v)`` the
    local log-ratio of moving coordinate ``j`` to ``v``, estimated from one gradient or computed
    exactly), and applies a Metropolis-Hastings correction. The step size ``alpha`` follows a
    cosine cycle of `cycle_length` steps from ``step_size_max`` down to ``step_size_min``
    (large steps explore distant modes, small ones refine the current one) and the balancing
    parameter ``beta`` goes from `balancing_max` down to `balancing_min` along it.
    ``step_size_max``, ``step_size_min`` and the ``beta`` schedule are tuned automatically
    during warmup (Alg. 2 of [1]: a burn-in, a search for the largest step size whose
    acceptance is at least `target_accept_prob` and for the smallest whose acceptance is that,
    and the ``beta`` of highest acceptance at each position of the cycle), then frozen; the
    rest of warmup and the sampling phase cycle through the schedules. The tuning takes the
    first ``tune_fraction * num_warmup`` steps, or the 90 steps it needs with
    ``cycle_length=20`` when that is more, up to half of warmup. Every step is a
    Metropolis-Hastings move that leaves the target invariant, so the cycle is a
    composition of invariant kernels. Each step costs two evaluations of the log density with
    its gradient (plus, for sites with exact weights, one batched evaluation per neighbour).

    New values: a binary coordinate may flip (distance 1); a categorical one may take any
    other category (one-hot distance, squared 2); an ordinal one may move by one of the
    distances of its ladder (1 up to twice the site's scale ``s``, its standard deviation
    under the model at ``init``), inside its support, at the squared distance
    ``((v - x) / s)^2``: step sizes are in the units of each site's support, so one ``alpha``
    moves a binary site and a Poisson count with mean ``10^4`` alike. With
    ``weights="auto"``, ACS computes the ratios of ordinal sites exactly while that costs at
    most :data:`EXACT_ORDINAL_MAX_EVALUATIONS` evaluations per step: a gradient ratio
    extrapolates the slope at the current value across the large steps, and on targets with
    separated modes it hid them (see ``docs/acs.md``).

    .. note:: With one chain, each acceptance rate the tuning compares is that of a single
        proposal, so the tuned values are noisy on small models; the paper averages over a
        batch of chains. Give ``step_size_max``/``step_size_min`` to fix either end of the cycle.

    **References:**

    1. *Gradient-based Discrete Sampling with Automatic Cyclical Scheduling*, Patrick
       Pynadath, Riddhiman Bhattacharya, Arun Hariharan, Ruqi Zhang (2024)
    2. *A Langevin-like Sampler for Discrete Distributions*, Ruqi Zhang, Xingchao Liu, Qiang
       Liu (2022)

    :param model: as in :class:`~numpyro_discrete.LBP`.
    :param potential_fn: as in :class:`~numpyro_discrete.LBP`.
    :param float target_accept_prob: ``rho*``, the acceptance rate the ends of the step-size
        schedule are tuned to, in (0, 1).
    :param int cycle_length: ``s``, the number of steps per cycle (the paper uses 20, or 8
        for simpler targets).
    :param float balancing_max: balancing parameter at the start of the cycle (largest step).
    :param float balancing_min: balancing parameter at the end of the cycle (smallest step);
        ``0 < balancing_min <= balancing_max <= 1`` (the paper's range is ``[0.5, 1)``).
    :param float step_size_ceil: where the search for ``step_size_max`` starts (in the units of the
        supports; it grows from there while the acceptance is at least the target, and
        shrinks while it is below).
    :param float step_size_floor: where the search for ``step_size_min`` starts (it only grows).
    :param float zeta: learning rate of the step-size search, in (0, 1).
    :param float tune_fraction: fraction of the warmup steps spent tuning, in (0, 1];
        raised to what the full tuning needs (90 steps with ``cycle_length=20``) up to half
        of warmup. Below that budget the ``beta`` schedule is not estimated (it stays the
        cosine from `balancing_max` to `balancing_min`); below 12 steps ACS cannot tune.
    :param float step_size_max: fix the largest step size instead of tuning it.
    :param float step_size_min: fix the smallest step size instead of tuning it.
    :param weights: as in :class:`~numpyro_discrete.LBP`.
    :param int ordinal_window: ``None`` (default) for moves in the units of each ordinal site
        (see above), or the half-width of a window of new values around the current value,
        at the squared integer distance (the proposal is truncated to it).
    :param dict supports: as in :class:`~numpyro_discrete.LBP`.

    **Example**

    .. doctest::

        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import ACS
        ...
        >>> def model():
        ...     numpyro.sample("x", dist.Bernoulli(0.3).expand([100]))
        ...
        >>> mcmc = MCMC(ACS(model), num_warmup=1000, num_samples=2000, progress_bar=False)
        >>> mcmc.run(jax.random.key(0), extra_fields=("step_size", "cycle_position"))
        >>> extra = mcmc.get_extra_fields()
        >>> assert extra["cycle_position"].max() == 19
        >>> assert extra["step_size"].max() > extra["step_size"].min()
        >>> assert abs(mcmc.get_samples()["x"].mean() - 0.3) < 0.02
    """

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        target_accept_prob: float = 0.5,
        cycle_length: int = 20,
        balancing_max: float = 0.95,
        balancing_min: float = 0.5,
        step_size_ceil: float = 5.0,
        step_size_floor: float = 0.05,
        zeta: float = 0.5,
        tune_fraction: float = 0.1,
        step_size_max: float | None = None,
        step_size_min: float | None = None,
        weights: str | Mapping[str, str] = "auto",
        ordinal_window: int | None = None,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        name = type(self).__name__
        if not (is_number(target_accept_prob) and 0.0 < target_accept_prob < 1.0):
            raise ValueError(
                f"{name}: `target_accept_prob` must lie in (0, 1), got {target_accept_prob!r}."
            )
        if not (is_integer(cycle_length) and cycle_length >= 1):
            raise ValueError(
                f"{name}: `cycle_length` must be an integer >= 1 (steps per cycle), got "
                f"{cycle_length!r}."
            )
        if not (
            is_number(balancing_min)
            and is_number(balancing_max)
            and 0.0 < balancing_min <= balancing_max <= 1.0
        ):
            raise ValueError(
                f"{name}: the balancing parameters need 0 < balancing_min <= balancing_max <= 1 "
                f"(the paper uses balancing_min=0.5, balancing_max=0.95), got "
                f"balancing_min={balancing_min!r}, "
                f"balancing_max={balancing_max!r}."
            )
        for argument, value in (
            ("step_size_ceil", step_size_ceil),
            ("step_size_floor", step_size_floor),
        ):
            check_step_size(name, argument, value)
        if step_size_floor >= step_size_ceil:
            raise ValueError(
                f"{name}: `step_size_floor={step_size_floor!r}` must be below "
                f"`step_size_ceil={step_size_ceil!r}`"
                " (the step-size searches start from these two ends)."
            )
        if not (is_number(zeta) and 0.0 < zeta < 1.0):
            raise ValueError(
                f"{name}: `zeta` (the step-size search's learning rate) must lie in (0, 1), "
                f"got {zeta!r}."
            )
        if not (is_number(tune_fraction) and 0.0 < tune_fraction <= 1.0):
            raise ValueError(
                f"{name}: `tune_fraction` must lie in (0, 1] (the fraction of warmup spent "
                f"tuning), got {tune_fraction!r}."
            )
        check_step_size(name, "step_size_max", step_size_max)
        check_step_size(name, "step_size_min", step_size_min)
        if (
            step_size_max is not None
            and step_size_min is not None
            and step_size_min > step_size_max
        ):
            raise ValueError(
                f"{name}: `step_size_min={step_size_min!r}` exceeds "
                f"`step_size_max={step_size_max!r}`."
            )
        config = cyclical.TuningConfig(
            target_accept_prob=float(target_accept_prob),
            zeta=float(zeta),
            step_size_ceil=float(step_size_ceil),
            step_size_floor=float(step_size_floor),
            balancing_max=float(balancing_max),
            balancing_min=float(balancing_min),
            cycle_length=int(cycle_length),
        )
        super().__init__(
            model, potential_fn, weights=weights, ordinal_window=ordinal_window, supports=supports
        )
        self._config = config
        self._step_size_max = None if step_size_max is None else float(step_size_max)
        self._step_size_min = None if step_size_min is None else float(step_size_min)
        self._tune_fraction = float(tune_fraction)
        self._plan: tuning_plan.TuningPlan | None = None

    def _build_target(
        self,
        rng_key: jax.Array,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: dict,
    ) -> DiscreteTarget:
        target = super()._build_target(rng_key, init_params, model_args, model_kwargs)
        sites = _exact_ordinal_sites(target, self._weights)
        if not sites:
            return target
        modes = {**target.weights_mode, **dict.fromkeys(sites, "exact")}
        return dataclasses.replace(target, weights_mode=modes)

    def _tuning_plan(self) -> tuning_plan.TuningPlan:
        name = type(self).__name__
        s = self._config.cycle_length
        estimate = (self._step_size_min is None, self._step_size_max is None)
        # a budget below what the full plan needs is raised to it, up to half of warmup (the
        # other half runs the tuned cycle), so that the warmups numpyro users write (500)
        # tune at the defaults; below that, InitBurnin's cosine beta schedule is kept
        full = tuning_plan.min_tuning_budget(s, *estimate)
        fraction = int(self._tune_fraction * self._num_warmup)
        budget = max(fraction, min(full, self._num_warmup // 2))
        plan = tuning_plan.plan_tuning(budget, s, *estimate) or tuning_plan.plan_tuning(
            budget, s, *estimate, estimate_balancing=False
        )
        if plan is None:
            needed = tuning_plan.min_tuning_budget(s, *estimate, estimate_balancing=False)
            raise ValueError(
                f"{name} tunes its step sizes during warmup, here in {budget} steps "
                f"(`tune_fraction * num_warmup` = {self._tune_fraction} * {self._num_warmup}, "
                f"raised to at most half of warmup), but needs at least {needed}. Use "
                f"`num_warmup >= {2 * needed}`, or give both `step_size_max` and `step_size_min`."
            )
        return plan

    def get_diagnostics_str(self, state: ACSState) -> str:
        return (
            f"acc. prob={float(state.mean_accept_prob):.2f}, step size={float(state.step_size):.3g}"
        )

    def _setup(self, target: DiscreteTarget) -> None:
        self._plan = self._tuning_plan()
        self._transition = build_transition(target)

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
