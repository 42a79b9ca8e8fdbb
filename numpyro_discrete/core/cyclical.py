"""Cyclical schedules of ACS (Pynadath et al. 2024) and their automatic tuning, as pure
adaptation pieces for the coordinate-wise proposal of
:mod:`~numpyro_discrete.core.coordinatewise`.

Schedules (eq. 7 and Alg. 5): over a cycle of ``s`` steps, ``alpha_k = max(step_size_max / 2 *
(cos(pi k / s) + 1), step_size_min)``, and a non-increasing ``beta_k`` from ``balancing_max`` to
``balancing_min``.

Tuning (Alg. 2-5) runs in the first ``plan.num_steps`` steps of warmup, its phases laid out by
:mod:`~numpyro_discrete.core.tuning_plan`. The pieces, for warmup step (or any later step)
``i``:

- :func:`init`: the tuning state at the chain's initial state;
- :func:`step_parameters`: the step size, balancing exponent and M-H flag of step ``i`` (the
  tuning's own values while it runs, the frozen cycle after);
- :func:`update`: the tuning state and the chain's state after step ``i``;
- :func:`final`: the frozen schedules, one cycle of step sizes and balancing exponents.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from numpyro_discrete.core.state import Info, State, select
from numpyro_discrete.core.tuning_plan import Phase, TuningPlan, locate

__all__ = [
    "Schedules",
    "StepParameters",
    "TuningConfig",
    "TuningState",
    "cosine_schedule",
    "final",
    "init",
    "step_parameters",
    "update",
]


def cosine_schedule(start: jax.Array, end: jax.Array, cycle_length: int) -> jax.Array:
    """Eq. 7: ``max(start / 2 * (cos(pi k / s) + 1), end)`` for ``k = 0..s-1``; it starts at
    `start` and is floored at `end`."""
    k = jnp.arange(cycle_length)
    return jnp.maximum(0.5 * start * (jnp.cos(jnp.pi * k / cycle_length) + 1.0), end)


class TuningConfig(NamedTuple):
    """Static numbers of the tuning (Alg. 2 inputs)."""

    target_accept_prob: float
    zeta: float
    step_size_ceil: float
    step_size_floor: float
    balancing_max: float
    balancing_min: float
    cycle_length: int


class TuningState(NamedTuple):
    """
    The schedule being tuned and the bookkeeping of the current round (Alg. 4-5).

    - **step_size_max**, **step_size_min** - ``step_size_max`` and ``step_size_min`` (the current
      ``alpha_bound`` of EstimateAlpha while it runs), scalars.
    - **balancing** - the ``beta`` schedule, shape ``(s,)``.
    - **accept_prob** - ``rho_cur``, the acceptance rate of the previous round's best value.
    - **accept_prob_sum** - sum of the acceptance rates of the value under test so far.
    - **best** - the state reached by the best value of the current round.
    - **best_score** - its score (``|rho - rho*|`` for EstimateAlpha, ``-rho`` for
      EstimateBalSched; lower is better), ``+inf`` at the start of a round.
    - **best_param** - its ``alpha`` or ``beta``.
    - **best_accept_prob** - its acceptance rate.
    """

    step_size_max: jax.Array
    step_size_min: jax.Array
    balancing: jax.Array
    accept_prob: jax.Array
    accept_prob_sum: jax.Array
    best: State
    best_score: jax.Array
    best_param: jax.Array
    best_accept_prob: jax.Array


def init(
    state: State,
    config: TuningConfig,
    step_size_max: float | None = None,
    step_size_min: float | None = None,
) -> TuningState:
    """
    Initial tuning state: ``alpha_bound = step_size_ceil`` for ``step_size_max`` and
    ``step_size_floor`` for ``step_size_min`` unless given, and InitBurnin's cosine ``beta``
    schedule from ``balancing_max`` down to ``balancing_min`` (Alg. 3, line 5;
    EstimateBalSched replaces its inside when the plan runs it).
    """
    dtype = jnp.result_type(float)
    s = config.cycle_length
    # its ends are the balancing parameters step_size_max and step_size_min are tuned with, also
    # where the cosine has not come down to balancing_min
    naive = cosine_schedule(config.balancing_max, config.balancing_min, s)
    balancing = naive.at[-1].set(config.balancing_min).at[0].set(config.balancing_max).astype(dtype)
    step_size_max = config.step_size_ceil if step_size_max is None else step_size_max
    step_size_min = config.step_size_floor if step_size_min is None else step_size_min
    zero = jnp.zeros((), dtype)
    return TuningState(
        step_size_max=jnp.asarray(step_size_max, dtype),
        step_size_min=jnp.asarray(step_size_min, dtype),
        balancing=balancing,
        accept_prob=zero,
        accept_prob_sum=zero,
        best=state,
        best_score=jnp.asarray(jnp.inf, dtype),
        best_param=zero,
        best_accept_prob=zero,
    )


def _linspace_point(low: jax.Array, high: jax.Array, index: jax.Array, num: int) -> jax.Array:
    """Entry `index` of ``LinSpace(low, high, num)``."""
    return low + (high - low) * index / max(num - 1, 1)


def _tuning_parameters(
    plan: TuningPlan, config: TuningConfig, tuning: TuningState, i: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """
    ``(alpha, beta, metropolis)`` of tuning step ``i < plan.num_steps``.

    - InitBurnin (Alg. 3): ``(step_size_ceil, balancing_max)`` without M-H, then the naive
      cosine schedules from ``(step_size_ceil, balancing_max)`` to
      ``(step_size_floor, balancing_min)`` with M-H.
    - EstimateAlpha(MIN) (Alg. 4, lines 7-8): the ``p``-th value of a round is entry ``p``
      of ``LinSpace(alpha_bound, alpha_bound * (1 + zeta |rho* - rho_cur|), t)``, with
      ``balancing_min``; EstimateAlpha(MAX) (lines 4-5) tests
      ``LinSpace(alpha_bound * (1 - zeta |rho* - rho_cur|), alpha_bound * (1 + zeta |rho* -
      rho_cur|), t)`` with ``balancing_max``. The paper's MAX rounds only shrink from
      ``step_size_ceil``, so a target whose acceptance there is still above ``rho*`` (a step
      size in the wrong units, or modes far apart) keeps too small a largest step; testing
      both sides of the bound lets it grow (:func:`update` keeps the largest value that
      reaches ``rho*``). MIN keeps the paper's upward search: on both
      sides, its choices among nearly equal acceptance rates wander, and ``step_size_min``
      ended where a fixed DMALA kernel accepts 0.66-0.76 instead of 0.5 (measured, 40
      binary coordinates).
    - EstimateBalSched (Alg. 5, lines 3-4): position ``k`` of the cycle tests
      ``LinSpace(balancing_min, beta_{k-1}, t)`` at ``alpha_k`` of the tuned step-size schedule.
    """
    b0 = plan.boundaries[0]
    s = config.cycle_length
    dtype = tuning.accept_prob.dtype
    where = locate(plan, i)
    # Alg. 3, lines 4-5: the naive schedules of the second burn-in stage
    k_burnin = jnp.mod(i - b0, s)
    naive_step_size = cosine_schedule(config.step_size_ceil, config.step_size_floor, s)[k_burnin]
    naive_beta = cosine_schedule(config.balancing_max, config.balancing_min, s)[k_burnin]
    # Alg. 4: a round of t step sizes next to alpha_bound
    t = plan.step_size_proposals
    shrink = config.zeta * jnp.abs(config.target_accept_prob - tuning.accept_prob)
    low = tuning.step_size_min
    step_size_min = _linspace_point(low, low * (1.0 + shrink), where.candidate, t)
    high = tuning.step_size_max
    step_size_max = _linspace_point(
        high * (1.0 - shrink), high * (1.0 + shrink), where.candidate, t
    )
    # Alg. 5: t values of beta at position k of the tuned step-size schedule
    k = where.balancing_position
    step_size_bal = cosine_schedule(tuning.step_size_max, tuning.step_size_min, s)[k]
    beta_bal = _linspace_point(
        config.balancing_min, tuning.balancing[k - 1], where.candidate, plan.balancing_proposals
    )
    phases = [where.phase == phase for phase in list(Phase)[: Phase.BALANCING]]
    alpha = jnp.select(
        phases,
        [jnp.full((), config.step_size_ceil), naive_step_size, step_size_min, step_size_max],
        step_size_bal,
    )
    beta = jnp.select(
        phases,
        [jnp.full((), b) for b in (config.balancing_max,)]
        + [naive_beta, jnp.full((), config.balancing_min), jnp.full((), config.balancing_max)],
        beta_bal,
    )
    return alpha.astype(dtype), beta.astype(dtype), where.phase > Phase.BURNIN


class Schedules(NamedTuple):
    """
    - **step_size** - ``alpha_k`` for ``k = 0..s-1``.
    - **balancing** - ``beta_k`` for ``k = 0..s-1``.
    """

    step_size: jax.Array
    balancing: jax.Array


def final(tuning: TuningState, cycle_length: int) -> Schedules:
    """The schedules of one cycle (eq. 7 and Alg. 5), frozen once tuning ends."""
    step_size = cosine_schedule(tuning.step_size_max, tuning.step_size_min, cycle_length)
    return Schedules(step_size, tuning.balancing)


class StepParameters(NamedTuple):
    """
    - **step_size** - ``alpha`` of the step.
    - **balancing** - ``beta`` of the step (``g(t) = t^beta``).
    - **metropolis** - whether the step is M-H corrected (not in InitBurnin's first stage).
    - **cycle_position** - ``k``, the step's position in the cycle; ``-1`` while tuning.
    """

    step_size: jax.Array
    balancing: jax.Array
    metropolis: jax.Array
    cycle_position: jax.Array


def step_parameters(
    plan: TuningPlan, config: TuningConfig, tuning: TuningState, i: jax.Array
) -> StepParameters:
    """The parameters of step ``i``: Alg. 1, lines 3-4 (position ``k`` of the cycle) once
    tuning is over, Alg. 2's own values while it runs."""
    s = config.cycle_length
    cycle_position = jnp.mod(i - plan.num_steps, s)
    schedules = final(tuning, s)
    step_size = schedules.step_size[cycle_position]
    balancing = schedules.balancing[cycle_position]
    metropolis = jnp.array(True)
    is_tuning = i < plan.num_steps
    if plan.num_steps:
        tune_step_size, tune_balancing, tune_metropolis = _tuning_parameters(
            plan, config, tuning, i
        )
        step_size = jnp.where(is_tuning, tune_step_size, step_size)
        balancing = jnp.where(is_tuning, tune_balancing, balancing)
        metropolis = jnp.where(is_tuning, tune_metropolis, metropolis)
    return StepParameters(
        step_size, balancing, metropolis, jnp.where(is_tuning, -1, cycle_position)
    )


def update(
    plan: TuningPlan,
    config: TuningConfig,
    tuning: TuningState,
    i: jax.Array,
    state: State,
    new_state: State,
    info: Info,
    parameters: StepParameters,
) -> tuple[TuningState, State]:
    """
    The tuning state and the chain's state after step ``i``, which moved `state` to
    `new_state` with `parameters`. Outside the tuning steps both pass through: the
    schedules are frozen and the chain keeps `new_state`.

    During InitBurnin the chain moves. During a round of EstimateAlpha or EstimateBalSched
    every proposal starts from the round's state; the acceptance rate of a tested value is
    the mean over its repeats, the best value so far is kept aside with the state its last
    proposal reached, and at the round's end that state becomes the chain's while the value
    moves the bound (Alg. 4, lines 16-18) or fills the schedule position (Alg. 5, 11-13).
    """
    if not plan.num_steps:
        return tuning, new_state
    step_size, balancing = parameters.step_size, parameters.balancing
    where = locate(plan, i)
    phase = where.phase
    in_round = phase >= Phase.STEP_SIZE_MIN
    dtype = tuning.accept_prob.dtype
    repeats = jnp.where(
        phase <= Phase.STEP_SIZE_MAX, plan.step_size_repeats, plan.balancing_repeats
    )
    accept_prob_sum = tuning.accept_prob_sum + info.accept_prob
    rho = accept_prob_sum / repeats
    score = jnp.where(phase == Phase.BALANCING, -rho, jnp.abs(rho - config.target_accept_prob))
    # Eq. 9: step_size_max is the largest step size whose acceptance is rho*. A MAX round's
    # values rise with their index; one accepting at least rho* outranks every value below
    # it, and among those the largest wins. "Closest to rho*" alone assumes that the
    # acceptance falls as alpha grows; with exact ratios it rose instead (0.85 at alpha 0.02,
    # 0.92 at 2, four modes of an ordinal target), and that rule walked step_size_max down round
    # after round: from step_size_ceil = 5 to 0.37 in 500 tuning steps on one chain, which then
    # changed mode 598 times in 40,000 steps, against 1181 for the other chain (at 2.4).
    reaches_target = (phase == Phase.STEP_SIZE_MAX) & (rho >= config.target_accept_prob)
    score = jnp.where(reaches_target, -1.0 - where.candidate / plan.step_size_proposals, score)
    # Alg. 4, line 16 / Alg. 5, line 11: keep the best value of the round. Ties go in the
    # direction of the search: towards smaller alpha for step_size_max and smaller beta (the
    # first entries), towards larger alpha for step_size_min (the last entry). Otherwise a step
    # size so small that nothing moves (acceptance 1 for every tested alpha) would never let
    # the search for step_size_min leave step_size_floor.
    better = where.candidate_end & jnp.where(
        phase == Phase.STEP_SIZE_MIN, score <= tuning.best_score, score < tuning.best_score
    )
    param = jnp.where(phase == Phase.BALANCING, balancing, step_size)
    best = select(better, new_state, tuning.best)
    best_score = jnp.where(better, score, tuning.best_score)
    best_param = jnp.where(better, param, tuning.best_param)
    best_accept_prob = jnp.where(better, rho, tuning.best_accept_prob)

    round_end = where.round_end
    step_size_min = jnp.where(
        round_end & (phase == Phase.STEP_SIZE_MIN), best_param, tuning.step_size_min
    )
    step_size_max = jnp.where(
        round_end & (phase == Phase.STEP_SIZE_MAX), best_param, tuning.step_size_max
    )
    balancing_schedule = jnp.where(
        round_end & (phase == Phase.BALANCING),
        tuning.balancing.at[where.balancing_position].set(best_param.astype(dtype)),
        tuning.balancing,
    )
    # rho_cur restarts at 0 for each EstimateAlpha call (Alg. 4, line 1)
    last_step_size_min_round = (phase == Phase.STEP_SIZE_MIN) & (i == plan.boundaries[2] - 1)
    rho_cur = jnp.where(
        round_end, jnp.where(last_step_size_min_round, 0.0, best_accept_prob), tuning.accept_prob
    )
    chain = select(in_round, select(round_end, best, state), new_state)
    new_tuning = TuningState(
        step_size_max=step_size_max,
        step_size_min=step_size_min,
        balancing=balancing_schedule,
        accept_prob=rho_cur.astype(dtype),
        accept_prob_sum=jnp.where(where.candidate_end | ~in_round, 0.0, accept_prob_sum).astype(
            dtype
        ),
        best=best,
        best_score=jnp.where(round_end | ~in_round, jnp.inf, best_score).astype(dtype),
        best_param=best_param.astype(dtype),
        best_accept_prob=best_accept_prob.astype(dtype),
    )
    is_tuning = i < plan.num_steps
    return select(is_tuning, new_tuning, tuning), select(is_tuning, chain, new_state)
