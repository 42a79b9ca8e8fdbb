"""Moves in the units of each site, with default arguments: wide ordinal sites mix (ESS and
convergence asserted), and ACS/DMALA hop between modes of bounded ordinal, categorical and
binary targets in proportion to their weights (computed by enumeration in the test)."""

import itertools

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import numpyro
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ACS, ALBP, DMALA, LBPGibbs
from numpyro_discrete.core.neighbourhood import ladder_offsets

from helpers import run_vectorized

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow


def test_ladder_offsets_are_distinct_rungs_from_one_to_twice_the_scale():
    table = ladder_offsets(np.array([1.0, 2.4, 100.0, 25.0]), np.array([100, 28, np.inf, 20]))
    assert table.tolist() == [
        [1, 2, 0, 0, 0, 0],
        [1, 2, 5, 0, 0, 0],
        [1, 13, 25, 50, 100, 200],
        [1, 3, 6, 13, 0, 0],  # 25 and 50 exceed the span 20
    ]


def _run(kernel, num_samples, init_params=None):
    return run_vectorized(kernel, num_samples=num_samples, num_chains=2, init_params=init_params)


def _poisson(rate):
    def model():
        numpyro.sample("k", dist.Poisson(rate))

    return model


def _binomial():
    numpyro.sample("k", dist.Binomial(28, 0.65))


# (model, exact mean, exact standard deviation)
WIDE_SITES = {
    "poisson-1e2": (_poisson(100.0), 100.0, 10.0),
    "poisson-1e4": (_poisson(1e4), 1e4, 100.0),
    "binomial-28": (_binomial, 28 * 0.65, np.sqrt(28 * 0.65 * 0.35)),
}


@pytest.mark.parametrize("kernel_class", [ALBP, ACS])
@pytest.mark.parametrize("case", list(WIDE_SITES))
def test_wide_ordinal_site_mixes_with_default_arguments(kernel_class, case):
    """With ``ordinal_window=1`` (the old default) ALBP reached an ESS of 14 in 5000 draws
    of Poisson(1e4); in the units of the site it is a third of the draws."""
    model, mean, sd = WIDE_SITES[case]
    num_samples = 2000
    k = np.asarray(_run(kernel_class(model), num_samples).get_samples(group_by_chain=True)["k"])
    k = k.astype(float)
    ess = effective_sample_size(k)
    assert ess >= 0.1 * k.size, ess
    assert split_gelman_rubin(k) < 1.05
    # 5 standard errors of the mean at that ESS
    assert abs(k.mean() - mean) < 5 * sd / np.sqrt(ess)
    assert abs(k.std() / sd - 1) < 0.15


def change_point_model(counts):
    """Counts whose rate switches at an unknown time ``tau``: ``tau`` enters only through a
    comparison, so its moves come from exact ratios."""
    early = numpyro.sample("early", dist.Exponential(0.2))
    late = numpyro.sample("late", dist.Exponential(0.2))
    tau = numpyro.sample("tau", dist.DiscreteUniform(0, len(counts)))
    rate = jnp.where(jnp.arange(len(counts)) < tau, early, late)
    numpyro.sample("counts", dist.Poisson(rate), obs=counts)


def test_change_point_started_far_from_its_mode_reaches_it():
    """LBPGibbs started 30 steps from the change point finds it and mixes around it."""
    counts = np.random.default_rng(0).poisson(np.where(np.arange(100) < 60, 2.0, 8.0))
    mcmc = MCMC(
        LBPGibbs(NUTS(change_point_model)),
        num_warmup=500,
        num_samples=1500,
        num_chains=2,
        progress_bar=False,
    )
    init = {"tau": jnp.array([30, 90])}
    mcmc.run(jax.random.key(0), counts, init_params=init)
    tau = np.asarray(mcmc.get_samples(group_by_chain=True)["tau"]).astype(float)
    assert np.all(np.abs(np.median(tau, axis=1) - 60) <= 3)
    assert split_gelman_rubin(tau) < 1.05


# --- mode hopping: ACS and DMALA with default arguments --------------------------------

CENTRES, WEIGHTS = np.array([10, 30, 50]), np.array([0.2, 0.3, 0.5])


def ordinal_modes():
    """A bounded ordinal site whose three modes lie 20 values apart."""
    x = numpyro.sample("x", dist.DiscreteUniform(0, 60))
    bumps = jnp.log(WEIGHTS) - 0.5 * ((x - CENTRES) / 3.0) ** 2
    numpyro.factor("modes", jax.nn.logsumexp(bumps))


def categorical_modes():
    """Four categorical coordinates that prefer to agree: four modes (all equal to one
    category), their weights set by a per-category field."""
    z = numpyro.sample("z", dist.Categorical(probs=jnp.ones(3) / 3).expand([4]))
    agree = jnp.sum(z[:, None] == z[None, :]) / 2.0
    numpyro.factor("agree", 1.0 * agree + jnp.sum(jnp.log(jnp.array([1.0, 1.3, 1.7]))[z]))


def binary_modes():
    """Six binary coordinates that prefer to agree (a ferromagnet with a weak field)."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([6]))
    s = 2.0 * x - 1.0
    numpyro.factor("agree", 0.25 * (jnp.sum(s) ** 2 - 6.0) / 2.0 + 0.15 * jnp.sum(s))


def _enumerated_mode_masses(model, site, values, mode_of):
    """Exact mass of each mode, by enumerating every state."""
    log_p = []
    for value in values:
        data = {site: jnp.asarray(value)}
        log_p.append(numpyro.infer.util.log_density(model, (), {}, data)[0])
    p = np.exp(np.asarray(log_p) - np.max(log_p))
    p /= p.sum()
    modes = np.array([mode_of(np.asarray(v)) for v in values])
    return np.array([p[modes == m].sum() for m in range(modes.max() + 1)])


MODE_CASES = {
    "ordinal": (
        ordinal_modes,
        "x",
        [np.array(v) for v in range(61)],
        lambda v: int(np.argmin(np.abs(v - CENTRES))),
        {"x": jnp.array(10)},
    ),
    "categorical": (
        categorical_modes,
        "z",
        [np.array(v) for v in itertools.product(range(3), repeat=4)],
        lambda v: int(np.bincount(v, minlength=3).argmax()),
        {"z": jnp.zeros(4, jnp.int32)},
    ),
    "binary": (
        binary_modes,
        "x",
        [np.array(v) for v in itertools.product(range(2), repeat=6)],
        lambda v: int(v.sum() > 3) + int(v.sum() >= 3),
        {"x": jnp.zeros(6, jnp.int32)},
    ),
}


#: chains started in one mode; DMALA switches modes about 90 times in 10000 steps of a
#: chain here, so two chains left the frequencies of a seed 0.12 from the masses
MODE_CHAINS = 32


@pytest.mark.parametrize("kernel_class", [ACS, DMALA])
@pytest.mark.parametrize("case", list(MODE_CASES))
def test_default_kernels_visit_every_mode_in_proportion(kernel_class, case):
    """Started in one mode, every chain visits every mode, and each mode's pooled frequency
    is within 5 standard errors of its enumerated mass (the standard error from the ESS of
    the mode's indicator); the chains are enough for 5 standard errors to be under 0.15."""
    model, site, values, mode_of, init = MODE_CASES[case]
    masses = _enumerated_mode_masses(model, site, values, mode_of)
    start = {name: jnp.stack([value] * MODE_CHAINS) for name, value in init.items()}
    num_samples = 10000
    mcmc = run_vectorized(
        kernel_class(model), num_samples=num_samples, num_chains=MODE_CHAINS, init_params=start
    )
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)[site])
    modes = np.vectorize(mode_of, signature="(n)->()")(draws.reshape(MODE_CHAINS, num_samples, -1))
    for chain in modes:
        assert set(np.unique(chain)) == set(range(len(masses)))
    frequencies = np.bincount(modes.ravel(), minlength=len(masses)) / modes.size
    ess = np.array([effective_sample_size((modes == m).astype(float)) for m in range(len(masses))])
    standard_errors = np.sqrt(masses * (1 - masses) / ess)
    assert np.all(5 * standard_errors < 0.15), (ess, standard_errors)
    assert np.all(np.abs(frequencies - masses) < 5 * standard_errors), (
        frequencies,
        masses,
        standard_errors,
    )
