"""Sampling tests of LBP, ALBP, ACS and DMALA against exactly enumerated targets (fixed
seeds, stated tolerances): total variation on binary and mixed targets, posterior means of
numpyro models within Monte Carlo standard errors, and the adapted parameters (ALBP's path
length, ACS's step sizes) reaching their target acceptance rates. Categorical, ordinal and
integer-family models: test_statistical_supports.py; mixed discrete and continuous models:
test_statistical_gibbs.py."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ACS, ALBP, DMALA, LBP
from numpyro_discrete.core import cyclical

from helpers import (
    assert_mean_within_mcse,
    assert_tv,
    assert_tv_on_random_binary_target,
    enumerate_model,
    flat_draws,
    random_binary_target,
    run_vectorized,
)

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow

NUM_COORDS = 10


@pytest.mark.parametrize(
    "kernel_fn",
    [
        lambda pot: LBP(potential_fn=pot, path_length=1),
        lambda pot: LBP(potential_fn=pot, path_length=3, balancing="barker"),
        lambda pot: ALBP(potential_fn=pot),
        lambda pot: ALBP(potential_fn=pot, balancing="barker", weights="exact"),
    ],
    ids=["LBP-1", "LBP-3-barker", "ALBP", "ALBP-barker-exact"],
)
def test_total_variation_to_enumerated_target(kernel_fn):
    """
    A 10-coordinate coupled binary target with non-linear terms (1024 states).
    Tolerance: the chains' samples are autocorrelated, so they are worth fewer independent
    draws; we allow the TV that independent exact draws reach at the 99% quantile with one
    fifth of the sample size (an effective sample size of 20% of the draws, well below what
    these chains achieve), computed here from the exact distribution. As a check that the
    tolerance is tight enough to see a wrong answer, it must be smaller than the TV between
    the target and the product of its marginals.
    """
    assert_tv_on_random_binary_target(
        kernel_fn,
        num_coords=NUM_COORDS,
        num_hidden=4,
        target_seed=3,
        seed=1,
        num_chains=4,
        num_warmup=500,
        num_samples=10000,
    )


def regression_model(y):
    z = numpyro.sample("z", dist.Bernoulli(0.4).expand([3]))
    with numpyro.plate("groups", 4):
        w = numpyro.sample("w", dist.Bernoulli(logits=jnp.array([-1.0, 0.0, 0.5, 1.0])))
    numpyro.factor("coupling", 0.8 * z[0] * jnp.sum(w) - 0.5 * z[1] * z[2])
    mean = jnp.sum(z) + jnp.dot(w, jnp.array([1.0, -1.0, 2.0, 0.5]))
    numpyro.sample("y", dist.Normal(mean, 1.0), obs=y)


@pytest.mark.parametrize("kernel_cls", [LBP, ALBP])
def test_numpyro_model_moments(kernel_cls):
    """Posterior means of a numpyro model with two sites, a plate, a factor and an observed
    site, against enumeration, within 4 Monte Carlo standard errors (ESS-based)."""
    y = jnp.array(2.5)
    sites = {"z": ((3,), range(2)), "w": ((4,), range(2))}
    states, pi = enumerate_model(regression_model, (y,), sites)
    mcmc = run_vectorized(
        kernel_cls(regression_model), y, num_warmup=500, num_samples=5000, num_chains=2, seed=2
    )
    samples = mcmc.get_samples(group_by_chain=True)
    flat = np.concatenate([np.asarray(samples["z"]), np.asarray(samples["w"])], axis=-1)
    assert_mean_within_mcse(flat, pi @ states, num_se=4.0, slack=1e-3)


def test_albp_tunes_acceptance_and_freezes_scale():
    """
    1000-coordinate product Bernoulli, four chains: acceptance after warmup is 0.574 +- 0.03
    averaged over the chains (each chain within +- 0.05: the frozen R of one chain carries
    the noise of its own warmup, about +- 0.02 in acceptance), and the path length
    does not move after warmup.
    """
    probs = random.uniform(random.key(0), (1000,), minval=0.15, maxval=0.85)

    def model():
        numpyro.sample("x", dist.Bernoulli(probs))

    mcmc = run_vectorized(
        ALBP(model),
        num_warmup=2000,
        num_samples=1000,
        num_chains=4,
        seed=3,
        extra_fields=("accept_prob", "path_length", "num_changed"),
    )
    extra = mcmc.get_extra_fields(group_by_chain=True)
    accept = np.asarray(extra["accept_prob"]).mean(1)
    assert abs(accept.mean() - 0.574) < 0.03, accept
    assert np.all(np.abs(accept - 0.574) < 0.05), accept
    length = np.asarray(extra["path_length"])
    assert np.all(np.ptp(length, axis=1) == 0)
    assert np.all(length[:, 0] > 10)
    # and the samples are right: every marginal within 5 Monte Carlo standard errors
    x = mcmc.get_samples(group_by_chain=True)["x"]
    assert_mean_within_mcse(x, np.asarray(probs), num_se=5.0)


# --- ACS and DMALA: a model with categorical (used as indices), ordinal and binary sites ---

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
    kernel = make_kernel()
    cyclical = isinstance(kernel, ACS)
    fields = ("cycle_position",) if cyclical else ()
    mcmc = run_vectorized(
        kernel, num_warmup=500, num_samples=3000, num_chains=2, extra_fields=fields
    )
    samples = mcmc.get_samples()
    assert samples["c"].dtype.kind == "i" and samples["n"].dtype.kind == "i"
    states, pi = enumerate_model(mixed_model, (), MIXED_SITES)
    draws = flat_draws(samples, list(MIXED_SITES))
    assert_tv(draws, states, pi, against_product=False)
    np.testing.assert_allclose(draws.mean(0), pi @ states, atol=0.06)
    if cyclical:
        positions = np.asarray(mcmc.get_extra_fields()["cycle_position"])
        np.testing.assert_array_equal(np.bincount(positions, minlength=8), np.full(8, 750))


def test_tuned_step_sizes_reach_target_acceptance():
    """step_size_max (with balancing_max) and step_size_min (with balancing_min) found by the
    tuning give
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
    step_size_max, step_size_min = float(tuning.step_size_max), float(tuning.step_size_min)
    # the searches start at step_size_floor = 0.05 and step_size_ceil = 5 and may cross them
    assert 0.0 < step_size_min < step_size_max
    betas = np.asarray(tuning.balancing)
    assert betas[0] == pytest.approx(0.95) and betas[-1] == pytest.approx(0.5)
    assert np.all(np.diff(betas) <= 1e-6)
    # sampling cycles through the frozen schedules
    extra = mcmc.get_extra_fields()
    position = np.asarray(extra["cycle_position"])
    expected_alpha = np.asarray(cyclical.cosine_schedule(step_size_max, step_size_min, s))[position]
    np.testing.assert_allclose(extra["step_size"], expected_alpha, rtol=1e-5)
    np.testing.assert_allclose(extra["balancing"], betas[position], rtol=1e-6)
    np.testing.assert_array_equal(np.diff(position) % s, 1)
    for alpha, beta in ((step_size_max, 0.95), (step_size_min, 0.5)):
        fixed = DMALA(potential_fn=potential, step_size=alpha, balancing=beta)
        check = MCMC(fixed, num_warmup=100, num_samples=1500, progress_bar=False)
        check.run(random.key(2), init_params=init, extra_fields=("accept_prob",))
        assert abs(float(check.get_extra_fields()["accept_prob"].mean()) - 0.5) < 0.15


# --- ACS: longer statistical runs --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["auto", "exact"])
def test_mixed_model_long_run(weights):
    """Ten times the draws of the fast test, with a tighter tolerance (ESS 30% of the
    draws), with the default cycle of 20 and gradient or exact ratios."""
    kernel = ACS(mixed_model, weights=weights)
    mcmc = run_vectorized(kernel, num_warmup=2000, num_samples=20000, num_chains=2, seed=3)
    states, pi = enumerate_model(mixed_model, (), MIXED_SITES)
    draws = flat_draws(mcmc.get_samples(), list(MIXED_SITES))
    assert_tv(draws, states, pi, ess_fraction=0.3, against_product=False)


@pytest.mark.slow
def test_poisson_site_long_run():
    """An unbounded ordinal site (Poisson) with a window: moments against enumeration over a
    truncated support (the truncated mass is below 1e-12)."""

    def model():
        k = numpyro.sample("k", dist.Poisson(3.0))
        b = numpyro.sample("b", dist.Bernoulli(0.5))
        numpyro.factor("f", 0.3 * k * b)

    kernel = ACS(model, cycle_length=8, ordinal_window=3)
    mcmc = run_vectorized(kernel, num_warmup=2000, num_samples=20000, num_chains=2, seed=4)
    states, pi = enumerate_model(model, (), {"k": ((), range(40)), "b": ((), range(2))})
    draws = flat_draws(mcmc.get_samples(), ["k", "b"])
    np.testing.assert_allclose(draws.mean(0), pi @ states, atol=0.08)
    assert jax.numpy.issubdtype(mcmc.get_samples()["k"].dtype, jnp.integer)
