"""ACS and DMALA inside numpyro: sampling against exactly enumerated posteriors over a whole
number of cycles, mixed discrete/continuous models in LBPGibbs and numpyro's Gibbs, the
tuned schedules, and argument errors."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs

from numpyro_discrete import ACS, DMALA, LBPGibbs
from numpyro_discrete.core import cyclical

from exact import enumerate_model, iid_tv_quantile, random_binary_target

# --- a discrete model with categorical (used as indices), ordinal and binary sites --------

FIELD = jnp.array([[0.3, -0.2, 0.1], [0.0, 0.5, -0.4], [-0.3, 0.2, 0.4]])
INTERACTION = jnp.array([[0.8, -0.3, 0.0], [-0.3, 0.6, -0.5], [0.0, -0.5, 0.9]])


def mixed_model():
    c = numpyro.sample("c", dist.Categorical(logits=FIELD))
    # ordinal 0..4 (DiscreteUniform: its prior sampler compiles much faster than Binomial's)
    n = numpyro.sample("n", dist.DiscreteUniform(0, 4))
    b = numpyro.sample("b", dist.Bernoulli(0.3).expand([2]))
    numpyro.factor(
        "coupling",
        INTERACTION[c[0], c[1]]
        + INTERACTION[c[1], c[2]]
        - 0.3 * (n - 1.5) ** 2
        + 0.5 * n * b[0]
        - 0.7 * b[0] * b[1]
        + 0.4 * n * (c[0] == 2),
    )


MIXED_SITES = {"c": ((3,), range(3)), "n": ((), range(5)), "b": ((2,), range(2))}


def _flat_draws(samples, names):
    num_draws = samples[names[0]].shape[0]
    return np.concatenate(
        [np.asarray(samples[name]).reshape(num_draws, -1) for name in names], axis=1
    )


def _assert_tv(draws, states, pi, ess_fraction=0.2):
    """Total variation to the enumerated target below the 99% quantile of the TV of
    independent exact draws with `ess_fraction` of the sample size."""
    lookup = {tuple(s): i for i, s in enumerate(states)}
    counts = np.zeros(len(states))
    for row in draws:
        counts[lookup[tuple(row)]] += 1
    tv = 0.5 * np.abs(counts / len(draws) - pi).sum()
    tolerance = iid_tv_quantile(pi, int(len(draws) * ess_fraction))
    assert tv < tolerance, (tv, tolerance)


def _run(kernel, num_warmup, num_samples, seed=0, num_chains=2, **kwargs):
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.key(seed), **kwargs)
    return mcmc


@pytest.mark.parametrize(
    "make_kernel",
    [
        pytest.param(lambda: ACS(mixed_model, cycle_length=8), id="ACS"),
        pytest.param(lambda: DMALA(mixed_model, step_size=1.0), id="DMALA", marks=pytest.mark.slow),
    ],
)
def test_mixed_model_matches_enumeration(make_kernel):
    """Draws of a whole number of cycles (3000 = 375 cycles of 8) against the enumerated
    posterior, and the posterior means of every site computed by enumeration."""
    mcmc = _run(make_kernel(), 500, 3000, extra_fields=("cycle_position",))
    samples = mcmc.get_samples()
    assert samples["c"].dtype.kind == "i" and samples["n"].dtype.kind == "i"
    states, pi = enumerate_model(mixed_model, (), MIXED_SITES)
    draws = _flat_draws(samples, list(MIXED_SITES))
    _assert_tv(draws, states, pi)
    np.testing.assert_allclose(draws.mean(0), pi @ states, atol=0.06)
    positions = np.asarray(mcmc.get_extra_fields()["cycle_position"])
    if isinstance(mcmc.sampler, DMALA):
        assert np.all(positions == 0)
    else:
        np.testing.assert_array_equal(np.bincount(positions, minlength=8), np.full(8, 750))


# --- mixed discrete / continuous: LBPGibbs and numpyro's Gibbs ------------------------------

Y_OBS = 2.5


def gibbs_model(y=Y_OBS):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    z = numpyro.sample("z", dist.Bernoulli(0.3).expand([3]))
    numpyro.sample("y", dist.Normal(mu + jnp.sum(z), 1.0), obs=y)


def _gibbs_moments():
    """Exact ``E[sum z | y]`` and ``E[mu | y]``: ``mu`` integrates out, ``y | z ~ N(sum z, 2)``
    and ``mu | z, y ~ N((y - sum z) / 2, 1 / 2)``."""
    total = np.arange(4)
    prior = np.array([1, 3, 3, 1]) * 0.3**total * 0.7 ** (3 - total)
    weights = prior * np.exp(-((Y_OBS - total) ** 2) / 4.0)
    weights /= weights.sum()
    return weights @ total, weights @ ((Y_OBS - total) / 2.0)


@pytest.mark.parametrize("composite", ["LBPGibbs", "Gibbs"])
def test_gibbs_blocks_match_exact_moments(composite):
    """ACS on the discrete block (tuned in LBPGibbs, with fixed ends of the step-size
    schedule in Gibbs) beside NUTS: posterior means against their exact values."""
    if composite == "LBPGibbs":
        kernel = LBPGibbs(NUTS(gibbs_model), discrete_kernel=ACS(gibbs_model, cycle_length=8))
    else:
        acs = ACS(gibbs_model, cycle_length=8, alpha_max=2.0, alpha_min=0.2)
        kernel = Gibbs([(acs, ["z"]), (NUTS(gibbs_model), None)])
    mcmc = MCMC(kernel, num_warmup=500, num_samples=2000, progress_bar=False)
    mcmc.run(random.key(1))
    samples = mcmc.get_samples()
    tuning = mcmc.last_state.block_states[0].tuning
    if composite == "Gibbs":
        assert float(tuning.step_size_max) == pytest.approx(2.0)
        assert float(tuning.step_size_min) == pytest.approx(0.2)
    assert "step size=" in kernel.get_diagnostics_str(mcmc.last_state)
    total, mu = _gibbs_moments()
    assert samples["z"].dtype.kind == "i"
    assert abs(float(samples["z"].sum(-1).mean()) - total) < 0.1
    assert abs(float(samples["mu"].mean()) - mu) < 0.1


# --- tuning -------------------------------------------------------------------------------


def test_tuned_step_sizes_reach_target_acceptance():
    """alpha_max (with beta_max) and alpha_min (with beta_min) found by the tuning give
    acceptance rates near the target when run as fixed DMALA kernels; the schedules have
    the paper's shape and are frozen after tuning."""
    num_coords, s = 40, 10
    log_pi = random_binary_target(num_coords, seed=0, num_hidden=5)

    def potential(z):
        return -log_pi(z["x"])

    init = {"x": jnp.zeros(num_coords, jnp.int32)}
    kernel = ACS(potential_fn=potential, cycle_length=s, tune_fraction=0.5)
    mcmc = MCMC(kernel, num_warmup=3000, num_samples=200, progress_bar=False)
    fields = ("step_size", "balancing", "cycle_position")
    mcmc.run(random.key(1), init_params=init, extra_fields=fields)
    tuning = mcmc.last_state.tuning
    alpha_max, alpha_min = float(tuning.step_size_max), float(tuning.step_size_min)
    assert 0.05 < alpha_min < alpha_max < 5.0
    betas = np.asarray(tuning.balancing)
    assert betas[0] == pytest.approx(0.95) and betas[-1] == pytest.approx(0.5)
    assert np.all(np.diff(betas) <= 1e-6)
    # sampling cycles through the frozen schedules
    extra = mcmc.get_extra_fields()
    position = np.asarray(extra["cycle_position"])
    expected_alpha = np.asarray(cyclical.cosine_schedule(alpha_max, alpha_min, s))[position]
    np.testing.assert_allclose(extra["step_size"], expected_alpha, rtol=1e-5)
    np.testing.assert_allclose(extra["balancing"], betas[position], rtol=1e-6)
    np.testing.assert_array_equal(np.diff(position) % s, 1)
    for alpha, beta in ((alpha_max, 0.95), (alpha_min, 0.5)):
        fixed = DMALA(potential_fn=potential, step_size=alpha, balancing=beta)
        check = MCMC(fixed, num_warmup=100, num_samples=1500, progress_bar=False)
        check.run(random.key(2), init_params=init, extra_fields=("accept_prob",))
        assert abs(float(check.get_extra_fields()["accept_prob"].mean()) - 0.5) < 0.15


def test_tuning_round_bookkeeping():
    """Driving the pure tuning functions with given acceptance rates: a round of
    EstimateAlpha(MIN) tests LinSpace(bound, bound * (1 + zeta |rho* - rho|), 5), averages
    the repeats of each value, moves the bound to the value closest to the target (ties to
    the larger step size), and moves the chain to that value's last proposal."""
    plan = cyclical.TuningPlan(0, 0, 1, 1, 5, 2, 2, 1, 4)
    config = cyclical.TuningConfig(0.5, 0.5, 5.0, 0.05, 0.95, 0.5, 4)

    def state(value):
        return cyclical.CyclicalState(jnp.array([value]), jnp.array(0.0), jnp.zeros((1, 1)))

    base = state(-1)
    tuning = cyclical.init_tuning(base, config)
    # per tested value, the acceptance of its two proposals (means 1, 0.875, 0.625, 0.25,
    # 0.625: exact in binary, so that values 2 and 4 tie exactly)
    rates = [(1.0, 1.0), (0.75, 1.0), (0.5, 0.75), (0.25, 0.25), (0.75, 0.5)]
    alphas = []
    for step in range(10):
        candidate, repeat = divmod(step, 2)
        alpha, beta, metropolis = cyclical.tuning_parameters(plan, config, tuning, step)
        alphas.append(float(alpha))
        assert float(beta) == 0.5 and bool(metropolis)
        info = cyclical.CyclicalInfo(jnp.array(rates[candidate][repeat]), True, 1)
        tuning, chain = cyclical.update_tuning(
            plan, config, tuning, step, base, state(10 * candidate + repeat), info, alpha, beta
        )
        if step < 9:
            assert int(chain.position[0]) == -1  # proposals all start from the round's state
    # rho_cur = 0 at the start: LinSpace(0.05, 0.05 * 1.25, 5), each value twice
    np.testing.assert_allclose(alphas[::2], np.linspace(0.05, 0.0625, 5), rtol=1e-6)
    np.testing.assert_allclose(alphas[1::2], alphas[::2])
    # values 2 and 4 tie at |0.625 - 0.5|: the larger step size wins
    assert float(tuning.step_size_min) == pytest.approx(0.0625)
    assert int(chain.position[0]) == 41
    # the last round of alpha_min resets rho_cur for EstimateAlpha(MAX)
    assert float(tuning.rho) == 0.0


def test_tuning_plan_fits_budget():
    for budget in (100, 250, 1000, 5000):
        plan = cyclical.plan_tuning(budget, 20)
        assert plan is not None and plan.num_steps <= budget
        assert plan.alpha_min_rounds == plan.alpha_max_rounds >= 1
    assert cyclical.plan_tuning(50, 20) is None
    fixed = cyclical.plan_tuning(100, 20, estimate_alpha_min=False, estimate_alpha_max=False)
    assert fixed.alpha_min_rounds == fixed.alpha_max_rounds == 0


# --- errors -------------------------------------------------------------------------------


def _bernoulli_model():
    numpyro.sample("x", dist.Bernoulli(0.5).expand([3]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"target_accept_prob": 1.0}, "target_accept_prob"),
        ({"cycle_length": 0}, "cycle_length"),
        ({"beta_min": 0.9, "beta_max": 0.6}, "beta_min <= beta_max"),
        ({"beta_max": 1.5}, "beta_max"),
        ({"alpha_ceil": 0.01}, "alpha_floor"),
        ({"alpha_floor": -1.0}, "alpha_floor"),
        ({"zeta": 1.0}, "zeta"),
        ({"tune_fraction": 0.0}, "tune_fraction"),
        ({"alpha_max": 0.1, "alpha_min": 1.0}, "exceeds"),
        ({"alpha_max": float("nan")}, "alpha_max"),
        ({"ordinal_window": 0}, "ordinal_window"),
        ({"weights": "fast"}, "weights"),
    ],
)
def test_acs_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ACS(_bernoulli_model, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"step_size": 0.0}, "step_size"), ({"balancing": 0.0}, "balancing")],
)
def test_dmala_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DMALA(_bernoulli_model, **kwargs)


def test_short_warmup_error_names_the_fix():
    mcmc = MCMC(ACS(_bernoulli_model), num_warmup=100, num_samples=10, progress_bar=False)
    with pytest.raises(ValueError, match=r"num_warmup >= \d+"):
        mcmc.run(random.key(0))


def test_no_discrete_sites_error():
    def model():
        numpyro.sample("mu", dist.Normal())

    with pytest.raises(ValueError, match="no discrete latent sites"):
        MCMC(ACS(model), num_warmup=1000, num_samples=10, progress_bar=False).run(random.key(0))


# --- longer statistical runs ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["auto", "exact"])
def test_mixed_model_long_run(weights):
    """Ten times the draws of the fast test, with a tighter tolerance (ESS 30% of the
    draws), with the default cycle of 20 and gradient or exact ratios."""
    mcmc = _run(ACS(mixed_model, weights=weights), 2000, 20000, seed=3, num_chains=2)
    states, pi = enumerate_model(mixed_model, (), MIXED_SITES)
    draws = _flat_draws(mcmc.get_samples(), list(MIXED_SITES))
    _assert_tv(draws, states, pi, ess_fraction=0.3)


@pytest.mark.slow
def test_poisson_site_long_run():
    """An unbounded ordinal site (Poisson) with a window: moments against enumeration over a
    truncated support (the truncated mass is below 1e-12)."""

    def model():
        k = numpyro.sample("k", dist.Poisson(3.0))
        b = numpyro.sample("b", dist.Bernoulli(0.5))
        numpyro.factor("f", 0.3 * k * b)

    mcmc = _run(ACS(model, cycle_length=8, ordinal_window=3), 2000, 20000, seed=4)
    states, pi = enumerate_model(model, (), {"k": ((), range(40)), "b": ((), range(2))})
    draws = _flat_draws(mcmc.get_samples(), ["k", "b"])
    np.testing.assert_allclose(draws.mean(0), pi @ states, atol=0.08)
    assert jax.numpy.issubdtype(mcmc.get_samples()["k"].dtype, jnp.integer)
