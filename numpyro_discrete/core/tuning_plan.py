"""How ACS spends its tuning budget (Pynadath et al. 2024, Alg. 2-5): the phases of the
tuning, the number of steps of each, and where warmup step ``i`` lies among them.

Tuning is a step-indexed program: step ``i`` of warmup runs exactly one kernel step whose
parameters are a function of ``i`` (:func:`locate`) and of the tuning state
(:mod:`~numpyro_discrete.core.cyclical`). Every step therefore costs the same, under ``vmap``
too, and the tuning budget is a number of ordinary warmup steps.
"""

import enum
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

__all__ = [
    "Phase",
    "StepLocation",
    "TuningPlan",
    "locate",
    "min_tuning_budget",
    "plan_tuning",
]


class Phase(enum.IntEnum):
    """The phases of the tuning, in Alg. 2's order."""

    BURNIN = 0
    """InitBurnin without M-H correction (Alg. 3, lines 1-3)."""
    BURNIN_MH = 1
    """InitBurnin on the naive cosine schedules, M-H corrected (Alg. 3, lines 4-7)."""
    STEP_SIZE_MIN = 2
    """EstimateAlpha(MIN) (Alg. 4)."""
    STEP_SIZE_MAX = 3
    """EstimateAlpha(MAX) (Alg. 4)."""
    BALANCING = 4
    """EstimateBalSched (Alg. 5)."""


class TuningPlan(NamedTuple):
    """
    Static step counts of the tuning phases, in Alg. 2's order.

    - **burnin_steps** - InitBurnin without M-H correction (Alg. 3, lines 1-3).
    - **burnin_mh_steps** - InitBurnin on the naive cosine schedules (Alg. 3, lines 4-7).
    - **step_size_min_rounds**, **step_size_max_rounds** - rounds of EstimateAlpha (Alg. 4), each
      testing ``step_size_proposals`` step sizes; 0 when that end of the schedule is given.
    - **step_size_repeats** - proposals per tested step size; its acceptance rate is their mean.
    - **balancing_proposals** - ``beta`` values tested per schedule position (Alg. 5).
    - **balancing_repeats** - proposals per tested ``beta``.
    - **cycle_length** - ``s``.
    - **estimate_balancing** - whether EstimateBalSched runs; without it the ``beta``
      schedule stays the naive cosine one of InitBurnin (Alg. 3, line 5).
    """

    burnin_steps: int
    burnin_mh_steps: int
    step_size_min_rounds: int
    step_size_max_rounds: int
    step_size_proposals: int
    step_size_repeats: int
    balancing_proposals: int
    balancing_repeats: int
    cycle_length: int
    estimate_balancing: bool = True

    @property
    def step_size_round(self) -> int:
        """Steps per round of EstimateAlpha."""
        return self.step_size_proposals * self.step_size_repeats

    @property
    def balancing_round(self) -> int:
        """Steps per schedule position of EstimateBalSched."""
        return self.balancing_proposals * self.balancing_repeats

    @property
    def boundaries(self) -> tuple[int, int, int, int, int]:
        """Cumulative step counts at the end of each phase."""
        b0 = self.burnin_steps
        b1 = b0 + self.burnin_mh_steps
        b2 = b1 + self.step_size_min_rounds * self.step_size_round
        b3 = b2 + self.step_size_max_rounds * self.step_size_round
        positions = _num_balancing_positions(self.cycle_length) if self.estimate_balancing else 0
        b4 = b3 + positions * self.balancing_round
        return b0, b1, b2, b3, b4

    @property
    def num_steps(self) -> int:
        """Total number of tuning steps."""
        return self.boundaries[-1]


def _num_balancing_positions(cycle_length: int) -> int:
    # beta_0 = balancing_max and beta_{s-1} = balancing_min are fixed (the ends step_size_max
    # and step_size_min were tuned with them); the positions in between are estimated
    return max(cycle_length - 2, 0)


def plan_tuning(
    budget: int,
    cycle_length: int,
    estimate_step_size_min: bool = True,
    estimate_step_size_max: bool = True,
    estimate_balancing: bool = True,
) -> TuningPlan | None:
    """
    Split `budget` tuning steps between the phases of Alg. 2, or ``None`` when it is too
    small (see :func:`min_tuning_budget`).

    - InitBurnin: up to a tenth of the budget per stage, at most 50 steps each (the paper's).
    - EstimateBalSched (with `estimate_balancing`): up to four tenths; at each position ``t``
      values of ``beta`` (the paper's 10, at least 2), each tested on up to 4 proposals.
      Without it the ``beta`` schedule is InitBurnin's cosine one (Alg. 3, line 5).
    - EstimateAlpha: the rest, shared by the two calls; rounds of ``t = 5`` step sizes (the
      paper's), each tested on up to 8 proposals while that leaves 25 rounds per call.

    The paper measures each acceptance rate over a batch of chains; a numpyro chain is
    tuned on its own, so each tested value is measured on several proposals from the same
    state instead. With a single proposal the rounds' choices are mostly noise, and the
    searches drift past the target.
    """
    positions = _num_balancing_positions(cycle_length) if estimate_balancing else 0
    burnin = min(50, budget // 10)
    per_position = (4 * budget // 10) // positions if positions else 0
    balancing_proposals = min(10, per_position)
    if positions and balancing_proposals < 2:
        return None
    balancing_repeats = min(4, per_position // balancing_proposals) if positions else 1
    num_estimates = int(estimate_step_size_min) + int(estimate_step_size_max)
    rest = budget - 2 * burnin - positions * balancing_proposals * balancing_repeats
    per_estimate = rest // num_estimates if num_estimates else 0
    step_size_proposals = 5
    step_size_repeats = int(np.clip(per_estimate // (step_size_proposals * 25), 1, 8))
    rounds = per_estimate // (step_size_proposals * step_size_repeats)
    if num_estimates and rounds < 1:
        return None
    return TuningPlan(
        burnin_steps=burnin,
        burnin_mh_steps=burnin,
        step_size_min_rounds=rounds if estimate_step_size_min else 0,
        step_size_max_rounds=rounds if estimate_step_size_max else 0,
        step_size_proposals=step_size_proposals,
        step_size_repeats=step_size_repeats,
        balancing_proposals=max(balancing_proposals, 1),
        balancing_repeats=max(balancing_repeats, 1),
        cycle_length=cycle_length,
        estimate_balancing=bool(positions),
    )


def min_tuning_budget(
    cycle_length: int,
    estimate_step_size_min: bool = True,
    estimate_step_size_max: bool = True,
    estimate_balancing: bool = True,
) -> int:
    """The smallest budget for which :func:`plan_tuning` returns a plan."""
    budget = 0
    while (
        plan_tuning(
            budget, cycle_length, estimate_step_size_min, estimate_step_size_max, estimate_balancing
        )
        is None
    ):
        budget += 1
    return budget


class StepLocation(NamedTuple):
    """
    Where tuning step ``i`` lies.

    - **phase** - its :class:`Phase`.
    - **candidate** - inside a round of EstimateAlpha or EstimateBalSched, the index of the
      tested value.
    - **repeat** - which of that value's proposals this step is.
    - **balancing_position** - the cycle position EstimateBalSched fills.
    - **candidate_end** - whether this step is the tested value's last proposal.
    - **round_end** - whether this step ends its round.
    """

    phase: jax.Array
    candidate: jax.Array
    repeat: jax.Array
    balancing_position: jax.Array
    candidate_end: jax.Array
    round_end: jax.Array


def locate(plan: TuningPlan, i: jax.Array) -> StepLocation:
    """Where tuning step ``i < plan.num_steps`` lies."""
    b0, b1, b2, b3, _ = plan.boundaries
    phase = jnp.searchsorted(jnp.asarray((b0, b1, b2, b3)), i, side="right")
    in_step_size = phase <= Phase.STEP_SIZE_MAX
    start = jnp.where(
        phase == Phase.STEP_SIZE_MIN, b1, jnp.where(phase == Phase.STEP_SIZE_MAX, b2, b3)
    )
    round_size = jnp.where(in_step_size, plan.step_size_round, plan.balancing_round)
    repeats = jnp.where(in_step_size, plan.step_size_repeats, plan.balancing_repeats)
    num_candidates = jnp.where(in_step_size, plan.step_size_proposals, plan.balancing_proposals)
    j = jnp.maximum(i - start, 0)
    within = jnp.mod(j, round_size)
    candidate = within // repeats
    repeat = jnp.mod(within, repeats)
    positions = max(_num_balancing_positions(plan.cycle_length), 1)
    balancing_position = jnp.clip(1 + j // plan.balancing_round, 1, positions)
    candidate_end = (phase >= Phase.STEP_SIZE_MIN) & (repeat == repeats - 1)
    round_end = candidate_end & (candidate == num_candidates - 1)
    return StepLocation(phase, candidate, repeat, balancing_position, candidate_end, round_end)
