"""Coordinate-wise proposal with step size and balancing parameter, its cyclical schedules and
their automatic tuning: the automatic cyclical sampler (ACS, Pynadath et al. 2024) and, with
one fixed pair of parameters, DMALA (Zhang et al. 2022).

Pure JAX, no numpyro. The state is a flat integer vector ``x`` of ``N`` coordinates; the
target enters through a :data:`~numpyro_discrete.core.local_ratios.LocalFn` returning
``log pi(x)`` and the ``(N, M)`` table ``d`` of local log-ratios over the candidate values of
a :class:`~numpyro_discrete.core.local_ratios.Neighbourhood`.

Proposal (eq. 5 of the ACS paper). Every coordinate ``j`` moves independently to
``v in {x_j} + candidates_j(x)`` with probability

    ``Q_j(v | x) = softmax_v( beta * d_j(v) - dist(v, x_j)^2 / (2 alpha) )``,

with ``d_j(x_j) = 0`` (staying put has logit 0). The distance is the integer difference for
ordinal coordinates, 1 for a binary flip and the one-hot distance ``sqrt(2)`` between two
categories. With gradient ratios ``d_j(v) = grad_j (v - x_j)`` this is the paper's proposal;
with exact ratios it is its first line (eq. 4) restricted to single-coordinate changes.
``log A = log pi(y) - log pi(x) + log Q(x | y) - log Q(y | x)`` (eq. 6), the reverse
proposal using the ratios at ``y``. Ordinal candidates lie in a window symmetric around
``x_j``, so ``x_j`` is always a candidate from ``y_j``: every move can be reversed.

Schedules (eq. 7 and Alg. 5): over a cycle of ``s`` steps, ``alpha_k = max(alpha_max / 2 *
(cos(pi k / s) + 1), alpha_min)``, and a non-increasing ``beta_k`` from ``beta_max`` to
``beta_min``.

Tuning (Alg. 2-5) is a step-indexed program: step ``i`` of warmup runs exactly one kernel
step whose parameters are a function of ``i`` and of a :class:`TuningState`
(:func:`tuning_parameters`), and the outcome updates that state (:func:`update_tuning`).
Every step therefore costs the same, under ``vmap`` too, and the tuning budget is a number of
ordinary warmup steps.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core.local_ratios import LocalFn, Neighbourhood

__all__ = [
    "CyclicalInfo",
    "CyclicalState",
    "TuningConfig",
    "TuningPlan",
    "TuningState",
    "apply_choices",
    "build_kernel",
    "cosine_schedule",
    "init",
    "init_tuning",
    "min_tuning_budget",
    "no_tuning",
    "plan_tuning",
    "proposal_log_prob",
    "proposal_log_probs",
    "reverse_choices",
    "squared_distance_fn",
    "tuning_parameters",
    "update_tuning",
]

SquaredDistanceFn = Callable[[jax.Array, jax.Array], jax.Array]
"""``(x, candidates) -> (N, M)`` squared distances ``dist(c[j, m], x_j)^2``."""


class CyclicalState(NamedTuple):
    """
    - **position** - flat integer state ``x``, shape ``(N,)``.
    - **log_density** - ``log pi(x)``, scalar.
    - **log_ratios** - local log-ratio table ``d(x)``, shape ``(N, M)``.
    """

    position: jax.Array
    log_density: jax.Array
    log_ratios: jax.Array


class CyclicalInfo(NamedTuple):
    """
    - **acceptance_rate** - ``min(1, A)`` of this step's proposal.
    - **is_accepted** - whether the proposal was taken.
    - **num_changed** - number of coordinates that changed value (0 if rejected).
    """

    acceptance_rate: jax.Array
    is_accepted: jax.Array
    num_changed: jax.Array


def init(position: jax.Array, local_fn: LocalFn) -> CyclicalState:
    """The state at `position`, with ``log pi`` and the local log-ratios cached."""
    log_p, log_ratios = local_fn(position)
    return CyclicalState(position, log_p, log_ratios)


def squared_distance_fn(num_categories: np.ndarray) -> SquaredDistanceFn:
    """
    Squared distances of the candidate values from the current value (static per-coordinate
    metadata ``num_categories``, as for
    :func:`~numpyro_discrete.core.local_ratios.coordinate_neighbourhood`): 1 for a binary
    coordinate (``K = 2``, values ``{0, 1}``), 2 for a categorical one (``K > 2``, the squared
    distance of two one-hot vectors), ``(v - x_j)^2`` for an ordinal one (``K = 0``).
    """
    num_categories = np.asarray(num_categories, np.int32)
    nominal = num_categories > 0
    nominal_sq = np.where(num_categories == 2, 1.0, 2.0)[:, None]

    def fn(x: jax.Array, candidates: jax.Array) -> jax.Array:
        dtype = jnp.result_type(float)
        if np.all(nominal):
            return jnp.broadcast_to(jnp.asarray(nominal_sq, dtype), candidates.shape)
        ordinal = jnp.square(candidates - x[:, None]).astype(dtype)
        if not np.any(nominal):
            return ordinal
        return jnp.where(nominal[:, None], jnp.asarray(nominal_sq, dtype), ordinal)

    return fn


def proposal_log_probs(
    log_ratios: jax.Array,
    squared_distance: jax.Array,
    step_size: jax.Array,
    balancing: jax.Array,
) -> jax.Array:
    """
    Eq. 5: the ``(N, M + 1)`` table of ``log Q_j``; column 0 is staying at ``x_j``, column
    ``m + 1`` moving to candidate ``m``. Invalid candidates (``d = -inf``) and undefined
    ratios (NaN, ``+inf``) get probability zero.

    :param log_ratios: ``(N, M)`` local log-ratios ``d``.
    :param squared_distance: ``(N, M)`` squared distances of the candidates from ``x``.
    :param step_size: ``alpha > 0``.
    :param balancing: ``beta`` (``g(t) = t^beta``).
    """
    logits = balancing * log_ratios - squared_distance / (2.0 * step_size)
    logits = jnp.where(jnp.isfinite(log_ratios), logits, -jnp.inf)
    stay = jnp.zeros(logits.shape[:1] + (1,), logits.dtype)
    return jax.nn.log_softmax(jnp.concatenate([stay, logits], axis=1), axis=1)


def proposal_log_prob(log_probs: jax.Array, choices: jax.Array) -> jax.Array:
    """``log Q(y | x) = sum_j log Q_j(y_j | x)`` of the column `choices` taken in each row."""
    return jnp.sum(jnp.take_along_axis(log_probs, choices[:, None], axis=1))


def apply_choices(position: jax.Array, choices: jax.Array, candidates: jax.Array) -> jax.Array:
    """The new state: coordinate ``j`` stays if ``choices[j] == 0``, else takes candidate
    ``choices[j] - 1`` of the ``(N, M)`` table `candidates` at `position`."""
    index = jnp.maximum(choices - 1, 0)[:, None]
    moved = jnp.take_along_axis(candidates, index, axis=1)[:, 0]
    return jnp.where(choices == 0, position, moved).astype(position.dtype)


def reverse_choices(
    position: jax.Array, new_position: jax.Array, new_candidates: jax.Array
) -> jax.Array:
    """The choices that move `new_position` back to `position` (0 where nothing changed),
    given the candidate table at `new_position`."""
    restores = new_candidates == position[:, None]
    index = 1 + jnp.argmax(restores, axis=1)
    return jnp.where(new_position == position, 0, index).astype(jnp.int32)


def build_kernel(
    neighbourhood: Neighbourhood, squared_distance: SquaredDistanceFn
) -> Callable[..., tuple[CyclicalState, CyclicalInfo]]:
    """
    The coordinate-wise transition kernel (Alg. 1, lines 5-10, for one step).

    :param neighbourhood: candidate values per coordinate.
    :param squared_distance: see :func:`squared_distance_fn`.
    :return: ``kernel(rng_key, state, local_fn, step_size, balancing, metropolis=True) ->
        (state, info)``; with ``metropolis=False`` every proposal of finite density is taken
        (InitBurnin's first stage, Alg. 3 line 2), otherwise it is M-H corrected.
    """

    def log_probs_at(x: jax.Array, log_ratios: jax.Array, alpha: jax.Array, beta: jax.Array):
        candidates = neighbourhood.candidates(x)
        log_q = proposal_log_probs(log_ratios, squared_distance(x, candidates), alpha, beta)
        return candidates, log_q

    def kernel(
        rng_key: jax.Array,
        state: CyclicalState,
        local_fn: LocalFn,
        step_size: jax.Array,
        balancing: jax.Array,
        metropolis: jax.Array | bool = True,
    ) -> tuple[CyclicalState, CyclicalInfo]:
        key_proposal, key_accept = random.split(rng_key)
        x = state.position
        # Alg. 1, lines 5-7: every coordinate drawn independently from Q_j(. | x)
        candidates_x, log_q_x = log_probs_at(x, state.log_ratios, step_size, balancing)
        choices = random.categorical(key_proposal, log_q_x, axis=1).astype(jnp.int32)
        y = apply_choices(x, choices, candidates_x)
        log_p_y, log_ratios_y = local_fn(y)
        candidates_y, log_q_y = log_probs_at(y, log_ratios_y, step_size, balancing)
        back = reverse_choices(x, y, candidates_y)
        # Alg. 1, line 8 (eq. 6); an undefined potential at y rejects
        log_accept = (
            log_p_y
            - state.log_density
            + proposal_log_prob(log_q_y, back)
            - proposal_log_prob(log_q_x, choices)
        )
        is_finite = jnp.isfinite(log_p_y)
        log_accept = jnp.where(is_finite & ~jnp.isnan(log_accept), log_accept, -jnp.inf)
        accept_prob = jnp.exp(jnp.minimum(log_accept, 0.0))
        is_accepted = jnp.log(random.uniform(key_accept)) < log_accept
        is_accepted = jnp.where(metropolis, is_accepted, is_finite)
        new_state = lax.cond(
            is_accepted,
            lambda: CyclicalState(y, log_p_y, log_ratios_y),
            lambda: state,
        )
        num_changed = jnp.where(is_accepted, jnp.sum(y != x), 0)
        return new_state, CyclicalInfo(accept_prob, is_accepted, num_changed)

    return kernel


def cosine_schedule(start: jax.Array, end: jax.Array, cycle_length: int) -> jax.Array:
    """Eq. 7: ``max(start / 2 * (cos(pi k / s) + 1), end)`` for ``k = 0..s-1``; it starts at
    `start` and is floored at `end`."""
    k = jnp.arange(cycle_length)
    return jnp.maximum(0.5 * start * (jnp.cos(jnp.pi * k / cycle_length) + 1.0), end)


# --- automatic tuning (Alg. 2-5) -------------------------------------------------------------


class TuningConfig(NamedTuple):
    """Static numbers of the tuning (Alg. 2 inputs)."""

    target_accept_prob: float
    zeta: float
    alpha_ceil: float
    alpha_floor: float
    beta_max: float
    beta_min: float
    cycle_length: int


class TuningPlan(NamedTuple):
    """
    Static step counts of the tuning phases, in Alg. 2's order.

    - **burnin_steps** - InitBurnin without M-H correction (Alg. 3, lines 1-3).
    - **burnin_mh_steps** - InitBurnin on the naive cosine schedules (Alg. 3, lines 4-7).
    - **alpha_min_rounds**, **alpha_max_rounds** - rounds of EstimateAlpha (Alg. 4), each
      testing ``alpha_proposals`` step sizes; 0 when that end of the schedule is given.
    - **alpha_repeats** - proposals per tested step size; its acceptance rate is their mean.
    - **balancing_proposals** - ``beta`` values tested per schedule position (Alg. 5).
    - **balancing_repeats** - proposals per tested ``beta``.
    - **cycle_length** - ``s``.
    """

    burnin_steps: int
    burnin_mh_steps: int
    alpha_min_rounds: int
    alpha_max_rounds: int
    alpha_proposals: int
    alpha_repeats: int
    balancing_proposals: int
    balancing_repeats: int
    cycle_length: int

    @property
    def alpha_round(self) -> int:
        """Steps per round of EstimateAlpha."""
        return self.alpha_proposals * self.alpha_repeats

    @property
    def balancing_round(self) -> int:
        """Steps per schedule position of EstimateBalSched."""
        return self.balancing_proposals * self.balancing_repeats

    @property
    def boundaries(self) -> tuple[int, int, int, int, int]:
        """Cumulative step counts at the end of each phase."""
        b0 = self.burnin_steps
        b1 = b0 + self.burnin_mh_steps
        b2 = b1 + self.alpha_min_rounds * self.alpha_round
        b3 = b2 + self.alpha_max_rounds * self.alpha_round
        b4 = b3 + _num_balancing_positions(self.cycle_length) * self.balancing_round
        return b0, b1, b2, b3, b4

    @property
    def num_steps(self) -> int:
        """Total number of tuning steps."""
        return self.boundaries[-1]


def _num_balancing_positions(cycle_length: int) -> int:
    # beta_0 = beta_max and beta_{s-1} = beta_min are fixed (the ends alpha_max and alpha_min
    # were tuned with them); the positions in between are estimated
    return max(cycle_length - 2, 0)


def plan_tuning(
    budget: int,
    cycle_length: int,
    estimate_alpha_min: bool = True,
    estimate_alpha_max: bool = True,
) -> TuningPlan | None:
    """
    Split `budget` tuning steps between the phases of Alg. 2, or ``None`` when it is too
    small (see :func:`min_tuning_budget`).

    - InitBurnin: up to a tenth of the budget per stage, at most 50 steps each (the paper's).
    - EstimateBalSched: up to four tenths; at each position ``t`` values of ``beta`` (the
      paper's 10, at least 2), each tested on up to 4 proposals.
    - EstimateAlpha: the rest, shared by the two calls; rounds of ``t = 5`` step sizes (the
      paper's), each tested on up to 8 proposals while that leaves 25 rounds per call.

    The paper measures each acceptance rate over a batch of chains; a numpyro chain is
    tuned on its own, so each tested value is measured on several proposals from the same
    state instead. With a single proposal the rounds' choices are mostly noise, and the
    searches (which only ever move one way) drift past the target.
    """
    positions = _num_balancing_positions(cycle_length)
    burnin = min(50, budget // 10)
    per_position = (4 * budget // 10) // positions if positions else 0
    balancing_proposals = min(10, per_position)
    if positions and balancing_proposals < 2:
        return None
    balancing_repeats = min(4, per_position // balancing_proposals) if positions else 1
    num_estimates = int(estimate_alpha_min) + int(estimate_alpha_max)
    rest = budget - 2 * burnin - positions * balancing_proposals * balancing_repeats
    per_estimate = rest // num_estimates if num_estimates else 0
    alpha_proposals = 5
    alpha_repeats = int(np.clip(per_estimate // (alpha_proposals * 25), 1, 8))
    rounds = per_estimate // (alpha_proposals * alpha_repeats)
    if num_estimates and rounds < 1:
        return None
    return TuningPlan(
        burnin_steps=burnin,
        burnin_mh_steps=burnin,
        alpha_min_rounds=rounds if estimate_alpha_min else 0,
        alpha_max_rounds=rounds if estimate_alpha_max else 0,
        alpha_proposals=alpha_proposals,
        alpha_repeats=alpha_repeats,
        balancing_proposals=max(balancing_proposals, 1),
        balancing_repeats=max(balancing_repeats, 1),
        cycle_length=cycle_length,
    )


def min_tuning_budget(
    cycle_length: int, estimate_alpha_min: bool = True, estimate_alpha_max: bool = True
) -> int:
    """The smallest budget for which :func:`plan_tuning` returns a plan."""
    budget = 0
    while plan_tuning(budget, cycle_length, estimate_alpha_min, estimate_alpha_max) is None:
        budget += 1
    return budget


def no_tuning(cycle_length: int = 1) -> TuningPlan:
    """The plan of a kernel whose schedules are given in full (DMALA): no tuning steps."""
    return TuningPlan(0, 0, 0, 0, 1, 1, 1, 1, cycle_length)


class TuningState(NamedTuple):
    """
    The schedule being tuned and the bookkeeping of the current round (Alg. 4-5).

    - **step_size_max**, **step_size_min** - ``alpha_max`` and ``alpha_min`` (the current
      ``alpha_bound`` of EstimateAlpha while it runs), scalars.
    - **balancing** - the ``beta`` schedule, shape ``(s,)``.
    - **rho** - ``rho_cur``, the acceptance rate of the previous round's best value.
    - **rho_sum** - sum of the acceptance rates of the value under test so far.
    - **best** - the state reached by the best value of the current round.
    - **best_score** - its score (``|rho - rho*|`` for EstimateAlpha, ``-rho`` for
      EstimateBalSched; lower is better), ``+inf`` at the start of a round.
    - **best_param** - its ``alpha`` or ``beta``.
    - **best_rho** - its acceptance rate.
    """

    step_size_max: jax.Array
    step_size_min: jax.Array
    balancing: jax.Array
    rho: jax.Array
    rho_sum: jax.Array
    best: CyclicalState
    best_score: jax.Array
    best_param: jax.Array
    best_rho: jax.Array


def init_tuning(
    state: CyclicalState,
    config: TuningConfig,
    step_size_max: float | None = None,
    step_size_min: float | None = None,
) -> TuningState:
    """
    Initial tuning state: ``alpha_bound = alpha_ceil`` for ``alpha_max`` and ``alpha_floor``
    for ``alpha_min`` unless given, and the ``beta`` schedule from ``beta_max`` down to
    ``beta_min`` (its ends stay, its inside is estimated).
    """
    dtype = jnp.result_type(float)
    s = config.cycle_length
    balancing = jnp.full((s,), config.beta_min, dtype).at[0].set(config.beta_max)
    alpha_max = config.alpha_ceil if step_size_max is None else step_size_max
    alpha_min = config.alpha_floor if step_size_min is None else step_size_min
    zero = jnp.zeros((), dtype)
    return TuningState(
        step_size_max=jnp.asarray(alpha_max, dtype),
        step_size_min=jnp.asarray(alpha_min, dtype),
        balancing=balancing,
        rho=zero,
        rho_sum=zero,
        best=state,
        best_score=jnp.asarray(jnp.inf, dtype),
        best_param=zero,
        best_rho=zero,
    )


def _linspace_point(low: jax.Array, high: jax.Array, index: jax.Array, num: int) -> jax.Array:
    """Entry `index` of ``LinSpace(low, high, num)``."""
    return low + (high - low) * index / max(num - 1, 1)


class _Position(NamedTuple):
    """Where tuning step ``i`` lies: its phase (0-4) and, inside the rounds of phases 2-4,
    the tested value, the repeat, and the schedule position of EstimateBalSched."""

    phase: jax.Array
    candidate: jax.Array
    repeat: jax.Array
    balancing_position: jax.Array
    candidate_end: jax.Array
    round_end: jax.Array


def _position(plan: TuningPlan, i: jax.Array) -> _Position:
    b0, b1, b2, b3, _ = plan.boundaries
    phase = jnp.searchsorted(jnp.asarray((b0, b1, b2, b3)), i, side="right")
    in_alpha = phase <= 3
    start = jnp.where(phase == 2, b1, jnp.where(phase == 3, b2, b3))
    round_size = jnp.where(in_alpha, plan.alpha_round, plan.balancing_round)
    repeats = jnp.where(in_alpha, plan.alpha_repeats, plan.balancing_repeats)
    num_candidates = jnp.where(in_alpha, plan.alpha_proposals, plan.balancing_proposals)
    j = jnp.maximum(i - start, 0)
    within = jnp.mod(j, round_size)
    candidate = within // repeats
    repeat = jnp.mod(within, repeats)
    positions = max(_num_balancing_positions(plan.cycle_length), 1)
    balancing_position = jnp.clip(1 + j // plan.balancing_round, 1, positions)
    candidate_end = (phase >= 2) & (repeat == repeats - 1)
    round_end = candidate_end & (candidate == num_candidates - 1)
    return _Position(phase, candidate, repeat, balancing_position, candidate_end, round_end)


def tuning_parameters(
    plan: TuningPlan, config: TuningConfig, tuning: TuningState, i: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """
    ``(alpha, beta, metropolis)`` of tuning step ``i < plan.num_steps``.

    - InitBurnin (Alg. 3): ``(alpha_ceil, beta_max)`` without M-H, then the naive cosine
      schedules from ``(alpha_ceil, beta_max)`` to ``(alpha_floor, beta_min)`` with M-H.
    - EstimateAlpha(MIN) (Alg. 4, lines 7-8): the ``p``-th value of a round is entry ``p``
      of ``LinSpace(alpha_bound, alpha_bound * (1 + zeta |rho* - rho_cur|), t)``, with
      ``beta_min``; EstimateAlpha(MAX) (lines 4-5) tests
      ``LinSpace(alpha_bound * (1 - zeta |rho* - rho_cur|), alpha_bound, t)`` with
      ``beta_max``.
    - EstimateBalSched (Alg. 5, lines 3-4): position ``k`` of the cycle tests
      ``LinSpace(beta_min, beta_{k-1}, t)`` at ``alpha_k`` of the tuned step-size schedule.
    """
    b0 = plan.boundaries[0]
    s = config.cycle_length
    dtype = tuning.rho.dtype
    where = _position(plan, i)
    # Alg. 3, lines 4-5: the naive schedules of the second burn-in stage
    k_burnin = jnp.mod(i - b0, s)
    naive_alpha = cosine_schedule(config.alpha_ceil, config.alpha_floor, s)[k_burnin]
    naive_beta = cosine_schedule(config.beta_max, config.beta_min, s)[k_burnin]
    # Alg. 4: a round of t step sizes next to alpha_bound
    t = plan.alpha_proposals
    shrink = config.zeta * jnp.abs(config.target_accept_prob - tuning.rho)
    low = tuning.step_size_min
    alpha_min = _linspace_point(low, low * (1.0 + shrink), where.candidate, t)
    high = tuning.step_size_max
    alpha_max = _linspace_point(high * (1.0 - shrink), high, where.candidate, t)
    # Alg. 5: t values of beta at position k of the tuned step-size schedule
    k = where.balancing_position
    alpha_bal = cosine_schedule(tuning.step_size_max, tuning.step_size_min, s)[k]
    beta_bal = _linspace_point(
        config.beta_min, tuning.balancing[k - 1], where.candidate, plan.balancing_proposals
    )
    phases = [where.phase == p for p in range(4)]
    alpha = jnp.select(
        phases, [jnp.full((), config.alpha_ceil), naive_alpha, alpha_min, alpha_max], alpha_bal
    )
    beta = jnp.select(
        phases,
        [jnp.full((), b) for b in (config.beta_max,)]
        + [naive_beta, jnp.full((), config.beta_min), jnp.full((), config.beta_max)],
        beta_bal,
    )
    return alpha.astype(dtype), beta.astype(dtype), where.phase > 0


def update_tuning(
    plan: TuningPlan,
    config: TuningConfig,
    tuning: TuningState,
    i: jax.Array,
    state: CyclicalState,
    new_state: CyclicalState,
    info: CyclicalInfo,
    step_size: jax.Array,
    balancing: jax.Array,
) -> tuple[TuningState, CyclicalState]:
    """
    Bookkeeping after tuning step ``i``, which moved `state` to `new_state` with parameters
    ``(step_size, balancing)``: returns the tuning state and the chain's state.

    During InitBurnin the chain moves. During a round of EstimateAlpha or EstimateBalSched
    every proposal starts from the round's state; the acceptance rate of a tested value is
    the mean over its repeats, the best value so far is kept aside with the state its last
    proposal reached, and at the round's end that state becomes the chain's while the value
    moves the bound (Alg. 4, lines 16-18) or fills the schedule position (Alg. 5, 11-13).
    """
    where = _position(plan, i)
    phase = where.phase
    in_round = phase >= 2
    dtype = tuning.rho.dtype
    repeats = jnp.where(phase <= 3, plan.alpha_repeats, plan.balancing_repeats)
    rho_sum = tuning.rho_sum + info.acceptance_rate
    rho = rho_sum / repeats
    score = jnp.where(phase == 4, -rho, jnp.abs(rho - config.target_accept_prob))
    # Alg. 4, line 16 / Alg. 5, line 11: keep the best value of the round. Ties go in the
    # direction of the search: towards smaller alpha for alpha_max and smaller beta (the
    # first entries), towards larger alpha for alpha_min (the last entry). Otherwise a step
    # size so small that nothing moves (acceptance 1 for every tested alpha) would never let
    # the search for alpha_min leave alpha_floor.
    better = where.candidate_end & jnp.where(
        phase == 2, score <= tuning.best_score, score < tuning.best_score
    )
    param = jnp.where(phase == 4, balancing, step_size)
    best = _select(better, new_state, tuning.best)
    best_score = jnp.where(better, score, tuning.best_score)
    best_param = jnp.where(better, param, tuning.best_param)
    best_rho = jnp.where(better, rho, tuning.best_rho)

    round_end = where.round_end
    step_size_min = jnp.where(round_end & (phase == 2), best_param, tuning.step_size_min)
    step_size_max = jnp.where(round_end & (phase == 3), best_param, tuning.step_size_max)
    balancing_schedule = jnp.where(
        round_end & (phase == 4),
        tuning.balancing.at[where.balancing_position].set(best_param.astype(dtype)),
        tuning.balancing,
    )
    # rho_cur restarts at 0 for each EstimateAlpha call (Alg. 4, line 1)
    last_alpha_min_round = (phase == 2) & (i == plan.boundaries[2] - 1)
    rho_cur = jnp.where(round_end, jnp.where(last_alpha_min_round, 0.0, best_rho), tuning.rho)
    chain = _select(in_round, _select(round_end, best, state), new_state)
    new_tuning = TuningState(
        step_size_max=step_size_max,
        step_size_min=step_size_min,
        balancing=balancing_schedule,
        rho=rho_cur.astype(dtype),
        rho_sum=jnp.where(where.candidate_end | ~in_round, 0.0, rho_sum).astype(dtype),
        best=best,
        best_score=jnp.where(round_end | ~in_round, jnp.inf, best_score).astype(dtype),
        best_param=best_param.astype(dtype),
        best_rho=best_rho.astype(dtype),
    )
    return new_tuning, chain


def _select(pred: jax.Array, on_true: CyclicalState, on_false: CyclicalState) -> CyclicalState:
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)
