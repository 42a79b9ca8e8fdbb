"""The adaptation pieces of the core: the path length of ALBP
(:mod:`numpyro_discrete.core.path_length`: probabilistic rounding, the Robbins-Monro step, the
frozen value, the ALBP step) and the cyclical schedules of ACS with their tuning
(:mod:`numpyro_discrete.core.cyclical`, :mod:`numpyro_discrete.core.tuning_plan`)."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import cyclical, path, path_length, state, tuning_plan
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.core.local_ratios import gradient_local_fn
from numpyro_discrete.core.neighbourhood import binary_neighbourhood
from numpyro_discrete.core.tuning_plan import Phase

from helpers import random_binary_target

# --- path length ----------------------------------------------------------------------------


def test_probabilistic_rounding_has_mean_scale():
    keys = random.split(random.key(0), 40000)
    draws = np.asarray([path_length.round_path_length(k, jnp.float32(3.3)) for k in keys[:2000]])
    assert set(np.unique(draws)) == {3, 4}
    draws = np.asarray(jax.vmap(lambda k: path_length.round_path_length(k, jnp.float32(3.3)))(keys))
    assert abs(draws.mean() - 3.3) < 0.01
    assert np.all(jax.vmap(lambda k: path_length.round_path_length(k, jnp.float32(5.0)))(keys) == 5)


def test_robbins_monro_step_and_clipping():
    step = path_length.robbins_monro_step
    np.testing.assert_allclose(step(10.0, 1.0, 0.574, 100), 10.426, rtol=1e-6)
    np.testing.assert_allclose(step(10.0, 0.0, 0.574, 100), 9.426, rtol=1e-6)
    assert step(1.2, 0.0, 0.574, 100) == 1.0
    assert step(99.9, 1.0, 0.574, 100) == 100.0


def test_frozen_value_is_the_mean_of_the_second_half():
    num_warmup = 10
    adaptation = path_length.init(jnp.float32(1.0))
    assert isinstance(adaptation, path_length.PathLengthState)
    history = []
    for i in range(num_warmup):
        adaptation = path_length.update(adaptation, i, 0.9, num_warmup, 0.5, 100)
        history.append(float(adaptation.path_length))
    # R_t = 1.4, 1.8, ..., 4.6 during warmup, then the mean of steps 5..9 (R = 3.4, ..., 5)
    np.testing.assert_allclose(history[:-1], 1.0 + 0.4 * np.arange(1, 10), rtol=1e-6)
    np.testing.assert_allclose(history[-1], np.mean(1.0 + 0.4 * np.arange(6, 11)), rtol=1e-6)
    assert float(path_length.final(adaptation)) == pytest.approx(history[-1])


def test_frozen_scale_is_never_an_integer_above_one():
    """At the bound ``R_max = 4`` through the second half of warmup the frozen scale is 3.5
    (an even integer path length would keep the parity of binary states); 1 stays 1."""
    num_warmup = 10
    for start, accept, frozen in ((4.0, 1.0, 3.5), (1.0, 0.0, 1.0)):
        adaptation = path_length.init(jnp.asarray(start))
        for i in range(num_warmup):
            adaptation = path_length.update(
                adaptation, jnp.asarray(i), jnp.asarray(accept), num_warmup, 0.574, 4
            )
        assert float(adaptation.path_length) == frozen


def test_albp_step_rounds_then_runs_one_path_step():
    """``path_length.build_kernel`` is: split the key into (rounding, path) keys, round
    ``R_t``, then one :func:`path.build_kernel` step of the rounded length."""
    num_coords = 6
    local_fn = gradient_local_fn(random_binary_target(num_coords, seed=2), binary_neighbourhood)
    balancing = get_balancing("sqrt")
    albp_step = path_length.build_kernel(balancing, binary_neighbourhood, num_coords)
    path_step = path.build_kernel(balancing, binary_neighbourhood, num_coords)
    start = state.init(jnp.zeros(num_coords, jnp.int32), local_fn)

    @jax.jit
    def both(key, scale):
        new, info, length = albp_step(key, start, local_fn, scale)
        key_round, key_path = random.split(key)
        expected_length = path_length.round_path_length(key_round, scale)
        expected, expected_info = path_step(key_path, start, local_fn, expected_length)
        return (new, info, length), (expected, expected_info, expected_length)

    lengths = set()
    for seed in range(20):
        got, expected = both(random.key(seed), jnp.float32(2.5))
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
            np.testing.assert_array_equal(a, b)
        lengths.add(int(got[2]))
    assert lengths == {2, 3}


# --- cyclical schedules and their tuning ----------------------------------------------------


def test_tuning_round_bookkeeping():
    """Driving the pure tuning functions with given acceptance rates: a round of
    EstimateAlpha(MIN) tests LinSpace(bound, bound * (1 + zeta |rho* - rho|), 5), averages
    the repeats of each value, moves the bound to the value closest to the target (ties to
    the larger step size), and moves the chain to that value's last proposal."""
    plan = tuning_plan.TuningPlan(0, 0, 1, 1, 5, 2, 2, 1, 4)
    config = cyclical.TuningConfig(0.5, 0.5, 5.0, 0.05, 0.95, 0.5, 4)

    def chain_state(value):
        return state.State(jnp.array([value]), jnp.array(0.0), jnp.zeros((1, 1)))

    base = chain_state(-1)
    tuning = cyclical.init(base, config)
    # per tested value, the acceptance of its two proposals (means 1, 0.875, 0.625, 0.25,
    # 0.625: exact in binary, so that values 2 and 4 tie exactly)
    rates = [(1.0, 1.0), (0.75, 1.0), (0.5, 0.75), (0.25, 0.25), (0.75, 0.5)]
    alphas = []
    for step in range(10):
        candidate, repeat = divmod(step, 2)
        assert int(tuning_plan.locate(plan, step).phase) == Phase.STEP_SIZE_MIN
        parameters = cyclical.step_parameters(plan, config, tuning, step)
        alphas.append(float(parameters.step_size))
        assert float(parameters.balancing) == 0.5 and bool(parameters.metropolis)
        assert int(parameters.cycle_position) == -1  # tuning
        info = state.Info(jnp.array(rates[candidate][repeat]), jnp.array(True), jnp.array(1))
        proposed = chain_state(10 * candidate + repeat)
        tuning, chain = cyclical.update(
            plan, config, tuning, step, base, proposed, info, parameters
        )
        if step < 9:
            assert int(chain.position[0]) == -1  # proposals all start from the round's state
    # rho_cur = 0 at the start: LinSpace(0.05, 0.05 * 1.25, 5), each value twice
    np.testing.assert_allclose(alphas[::2], np.linspace(0.05, 0.0625, 5), rtol=1e-6)
    np.testing.assert_allclose(alphas[1::2], alphas[::2])
    # values 2 and 4 tie at |0.625 - 0.5|: the larger step size wins
    assert float(tuning.step_size_min) == pytest.approx(0.0625)
    assert int(chain.position[0]) == 41
    # the last round of step_size_min resets rho_cur for EstimateAlpha(MAX)
    assert float(tuning.accept_prob) == 0.0


@pytest.mark.parametrize(
    "rates, chosen",
    [
        # every value accepts at least rho* = 0.5 (the acceptance of exact ratios rises
        # with alpha): the largest step size
        ((0.55, 0.6, 0.7, 0.8, 0.9), 4),
        # the largest of the values that reach rho*, not the one closest to it (value 3,
        # then value 2)
        ((0.9, 0.8, 0.6, 0.45, 0.1), 2),
        ((0.9, 0.7, 0.45, 0.2, 0.1), 1),
        # none reaches it: the closest, ties to the smaller step size
        ((0.4, 0.45, 0.45, 0.2, 0.1), 1),
    ],
)
def test_alpha_max_round_keeps_the_largest_step_size_reaching_the_target(rates, chosen):
    """A round of EstimateAlpha(MAX) (eq. 9: the largest alpha whose acceptance is rho*)
    tests LinSpace(bound (1 - z), bound (1 + z), 5), z = zeta |rho* - rho_cur|, with
    balancing_max; the bound moves to the largest value accepting at least rho*, else to the
    one closest to rho*, and the chain to that value's proposal."""
    plan = tuning_plan.TuningPlan(0, 0, 0, 1, 5, 1, 2, 1, 4)
    config = cyclical.TuningConfig(0.5, 0.5, 5.0, 0.05, 0.95, 0.5, 4)
    base = state.State(jnp.array([-1]), jnp.array(0.0), jnp.zeros((1, 1)))
    tuning = cyclical.init(base, config)
    alphas = []
    for step, rate in enumerate(rates):
        assert int(tuning_plan.locate(plan, step).phase) == Phase.STEP_SIZE_MAX
        parameters = cyclical.step_parameters(plan, config, tuning, step)
        assert float(parameters.balancing) == pytest.approx(0.95)
        alphas.append(float(parameters.step_size))
        info = state.Info(jnp.array(rate), jnp.array(True), jnp.array(1))
        proposed = base._replace(position=jnp.array([step]))
        tuning, chain = cyclical.update(
            plan, config, tuning, step, base, proposed, info, parameters
        )
    # rho_cur = 0 at the start: z = 0.25 around step_size_ceil = 5
    np.testing.assert_allclose(alphas, np.linspace(3.75, 6.25, 5), rtol=1e-6)
    assert float(tuning.step_size_max) == pytest.approx(alphas[chosen])
    assert float(tuning.accept_prob) == pytest.approx(rates[chosen])
    assert int(chain.position[0]) == chosen


def test_a_short_budget_keeps_the_cosine_balancing_schedule():
    """Below the budget of EstimateBalSched (2 values of beta per inner position), the plan
    runs InitBurnin and both step-size searches only, and the beta schedule is InitBurnin's
    cosine one (Alg. 3, line 5) from balancing_max to balancing_min."""
    s = 20
    assert tuning_plan.plan_tuning(50, s) is None
    plan = tuning_plan.plan_tuning(50, s, estimate_balancing=False)
    assert (
        not plan.estimate_balancing and plan.step_size_min_rounds == plan.step_size_max_rounds >= 1
    )
    b0, b1, b2, b3, b4 = plan.boundaries
    assert b4 == b3 == plan.num_steps <= 50
    assert tuning_plan.min_tuning_budget(s, estimate_balancing=False) == 12
    config = cyclical.TuningConfig(0.5, 0.5, 5.0, 0.05, 0.95, 0.5, s)
    start = state.State(jnp.array([0]), jnp.array(0.0), jnp.zeros((1, 1)))
    betas = np.asarray(cyclical.init(start, config).balancing)
    expected = np.asarray(cyclical.cosine_schedule(0.95, 0.5, s))
    np.testing.assert_allclose(betas, expected, rtol=1e-6)
    assert betas[0] == pytest.approx(0.95) and betas[-1] == pytest.approx(0.5)


def test_after_tuning_steps_cycle_through_the_frozen_schedules():
    """Once ``i >= plan.num_steps``, step ``i`` uses position ``(i - num_steps) mod s`` of
    :func:`cyclical.final`'s schedules, and :func:`cyclical.update` passes the tuning state
    through and keeps the new chain state."""
    s = 4
    plan = tuning_plan.plan_tuning(200, s)
    config = cyclical.TuningConfig(0.5, 0.5, 5.0, 0.05, 0.95, 0.5, s)
    start = state.State(jnp.array([0]), jnp.array(0.0), jnp.zeros((1, 1)))
    tuning = cyclical.init(start, config, 2.0, 0.2)._replace(
        balancing=jnp.array([0.95, 0.8, 0.6, 0.5])
    )
    schedules = cyclical.final(tuning, s)
    np.testing.assert_allclose(schedules.step_size, cyclical.cosine_schedule(2.0, 0.2, s))
    new = start._replace(position=jnp.array([1]))
    info = state.Info(jnp.array(0.3), jnp.array(True), jnp.array(1))
    for k in range(2 * s):
        i = plan.num_steps + k
        parameters = cyclical.step_parameters(plan, config, tuning, i)
        assert int(parameters.cycle_position) == k % s
        assert float(parameters.step_size) == pytest.approx(float(schedules.step_size[k % s]))
        assert float(parameters.balancing) == pytest.approx(float(schedules.balancing[k % s]))
        assert bool(parameters.metropolis)
        after, chain = cyclical.update(plan, config, tuning, i, start, new, info, parameters)
        for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(tuning), strict=True):
            np.testing.assert_array_equal(a, b)
        assert int(chain.position[0]) == 1


def test_tuning_plan_fits_budget():
    for budget in (100, 250, 1000, 5000):
        plan = tuning_plan.plan_tuning(budget, 20)
        assert plan is not None and plan.num_steps <= budget
        assert plan.step_size_min_rounds == plan.step_size_max_rounds >= 1
    assert tuning_plan.plan_tuning(50, 20) is None
    assert tuning_plan.min_tuning_budget(20) == 90
    assert tuning_plan.plan_tuning(tuning_plan.min_tuning_budget(20), 20) is not None
    fixed = tuning_plan.plan_tuning(
        100, 20, estimate_step_size_min=False, estimate_step_size_max=False
    )
    assert fixed.step_size_min_rounds == fixed.step_size_max_rounds == 0
