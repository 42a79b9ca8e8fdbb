"""Sampling tests on categorical, ordinal and mixed numpyro models against exact
enumeration computed in the test (fixed seeds, stated tolerances)."""

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
from numpyro.diagnostics import effective_sample_size
import numpyro.distributions as dist

from numpyro_discrete import ALBP, LBP

from helpers import (
    assert_mean_within_mcse,
    assert_tv,
    assert_within_mcse,
    enumerate_model,
    flat_draws,
    run_vectorized,
)

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow

# --- a Potts model: three colours on a 2 x 3 grid, colours used as indices ---------------

POTTS_EDGES = np.array([[0, 1], [1, 2], [3, 4], [4, 5], [0, 3], [1, 4], [2, 5]])


def potts_model(field, interaction):
    c = numpyro.sample("c", dist.Categorical(logits=field))
    numpyro.factor("edges", jnp.sum(interaction[c[POTTS_EDGES[:, 0]], c[POTTS_EDGES[:, 1]]]))


@pytest.mark.parametrize(
    "make_kernel",
    [lambda: ALBP(potts_model), lambda: LBP(potts_model, path_length=1, balancing="barker")],
    ids=["ALBP", "LBP-1-barker"],
)
def test_potts_against_enumeration(make_kernel):
    rng = np.random.default_rng(0)
    field = jnp.asarray(rng.normal(0.0, 0.5, (6, 3)))
    interaction = jnp.asarray(np.eye(3) * 1.2 + rng.normal(0.0, 0.3, (3, 3)))
    states, pi = enumerate_model(potts_model, (field, interaction), {"c": ((6,), range(3))})
    kernel = make_kernel()
    mcmc = run_vectorized(kernel, field, interaction)
    assert kernel.weights_mode == {"c": "exact"}  # colours are unordered indices
    assert_tv(flat_draws(mcmc.get_samples(), ["c"]), states, pi)


# --- Poisson latents, an infinite ordinal support ----------------------------------------


def poisson_model(y):
    n = numpyro.sample("n", dist.Poisson(jnp.array([3.0, 6.0])))
    numpyro.sample("y", dist.Normal(n[0] + 0.5 * n[1], 1.5), obs=y)


@pytest.mark.parametrize(
    "make_kernel",
    [lambda: LBP(poisson_model), lambda: ALBP(poisson_model, ordinal_window=3)],
    ids=["LBP-1", "ALBP-window-3"],
)
def test_poisson_latent_against_enumeration(make_kernel):
    """Enumeration truncated at 40 per coordinate: the prior tail above 40 has probability
    below 1e-15 and the likelihood only shrinks it. (With window 1, an even path length
    keeps the parity of n[0] + n[1]: ALBP, which tunes R to 2 = N here, would then switch
    parity only on its rare R = 1 steps; LBP warns about that case.)"""
    y = jnp.array(9.0)
    states, pi = enumerate_model(poisson_model, (y,), {"n": ((2,), range(41))})
    kernel = make_kernel()
    mcmc = run_vectorized(kernel, y, num_samples=10000)
    assert kernel.weights_mode == {"n": "gradient"}
    samples = np.asarray(mcmc.get_samples(group_by_chain=True)["n"], float)
    # posterior means and second moments within 4 ESS-based standard errors
    assert_mean_within_mcse(samples, pi @ states, num_se=4.0, what="E[n]")
    assert_mean_within_mcse(samples**2, pi @ states.astype(float) ** 2, 4.0, "E[n^2]")
    # and the joint, on the states holding 99.9% of the mass
    draws = flat_draws(mcmc.get_samples(), ["n"])
    assert np.mean(np.all(draws <= 40, axis=1)) == 1.0
    assert_tv(draws, states, pi)


# --- a mixture with known components: assignments are independent given the data ---------

MIX_WEIGHTS = jnp.array([0.2, 0.5, 0.3])
MIX_LOCS = jnp.array([-2.0, 0.0, 1.5])
MIX_SCALE = 0.8


def mixture_model(y):
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(MIX_WEIGHTS))
        numpyro.sample("y", dist.Normal(MIX_LOCS[z], MIX_SCALE), obs=y)


def test_mixture_assignments_against_enumeration():
    y = random.normal(random.key(4), (30,)) * 1.5
    # per observation, p(z_i = k | y_i) by enumerating its three values
    log_p = jnp.log(MIX_WEIGHTS) + dist.Normal(MIX_LOCS, MIX_SCALE).log_prob(y[:, None])
    exact = np.array(jnp.exp(log_p - jnp.max(log_p, 1, keepdims=True)))
    exact /= exact.sum(1, keepdims=True)
    mcmc = run_vectorized(ALBP(mixture_model), y)
    z = np.asarray(mcmc.get_samples(group_by_chain=True)["z"])
    for k in range(3):
        indicator = (z == k).astype(float)
        mean = indicator.mean((0, 1))
        ess = effective_sample_size(indicator + 1e-12 * random.normal(random.key(k), z.shape))
        mcse = np.sqrt(exact[:, k] * (1 - exact[:, k]) / ess)
        assert_within_mcse(mean, exact[:, k], mcse, 4.0, f"P(z = {k})", slack=2e-3)


# --- several site kinds, shapes and dtypes in one model ----------------------------------


def mixed_sites_model():
    b = numpyro.sample("b", dist.Bernoulli(0.3).expand([2]))
    c = numpyro.sample("c", dist.Categorical(jnp.array([0.2, 0.3, 0.5])))
    k = numpyro.sample("k", dist.Binomial(4, 0.4))
    u = numpyro.sample("u", dist.DiscreteUniform(-1, 2))
    score = jnp.array([0.0, 1.0, -0.5])[c] * (k - 2) + 0.7 * b[0] * u - 0.4 * b[1] * k
    numpyro.factor("coupling", score)


def test_mixed_sites_keep_dtypes_and_match_enumeration():
    sites = {
        "b": ((2,), range(2)),
        "c": ((), range(3)),
        "k": ((), range(5)),
        "u": ((), range(-1, 3)),
    }
    states, pi = enumerate_model(mixed_sites_model, (), sites)
    kernel = ALBP(mixed_sites_model)
    mcmc = run_vectorized(kernel, num_samples=6000)
    assert kernel.weights_mode == {"b": "gradient", "c": "exact", "k": "gradient", "u": "gradient"}
    samples = mcmc.get_samples()
    prior = numpyro.handlers.trace(numpyro.handlers.seed(mixed_sites_model, 0)).get_trace()
    for name in sites:
        assert samples[name].dtype == prior[name]["value"].dtype
        assert samples[name].shape[1:] == prior[name]["value"].shape
    assert_tv(flat_draws(samples, list(sites)), states, pi)


# --- sites marked for enumeration are summed out, not sampled ---------------------------


def enumerated_model(y):
    c = numpyro.sample(
        "c", dist.Categorical(jnp.array([0.3, 0.7])), infer={"enumerate": "parallel"}
    )
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([3]).to_event(1))
    mean = jnp.array([-1.0, 1.0])[c] + x.sum(-1)
    numpyro.sample("y", dist.Normal(mean, 1.0), obs=y)


def test_enumerated_site_is_marginalised():
    y = jnp.array(2.0)
    states, pi = enumerate_model(
        enumerated_model, (y,), {"c": ((), range(2)), "x": ((3,), range(2))}
    )
    # the x-marginal of the exact joint: sum over the enumerated c
    x_states = states[:, 1:]
    exact_x = pi @ x_states
    kernel = ALBP(enumerated_model)
    # ALBP adapts R to about 2.9 of the 3 coordinates: nearly every step flips all three, a
    # nearly periodic chain whose autocorrelation-based MCSE is unreliable, so the standard
    # error comes from the spread of the means of 64 independent chains
    mcmc = run_vectorized(kernel, y, num_samples=1000, num_chains=64)
    samples = mcmc.get_samples(group_by_chain=True)
    assert set(samples) == {"x"}
    chain_means = np.asarray(samples["x"], float).mean(1)
    se = chain_means.std(0, ddof=1) / np.sqrt(chain_means.shape[0])
    assert_within_mcse(chain_means.mean(0), exact_x, se, num_se=4.0, what="mean")
    # and the posterior of x differs from the one with c fixed at its likelier value
    fixed = pi[states[:, 0] == 1] @ x_states[states[:, 0] == 1] / pi[states[:, 0] == 1].sum()
    assert np.max(np.abs(fixed - exact_x)) > 10 * np.max(se)


# --- every other integer family numpyro has: bounded and unbounded ordinal supports -----

# family -> (prior of a 2-vector site, enumeration range); unbounded supports are truncated
# where the prior tail is below 1e-9
FAMILIES = {
    "Geometric": (dist.Geometric(probs=jnp.array([0.3, 0.2])), range(0, 101)),
    "NegativeBinomial2": (dist.NegativeBinomial2(jnp.array([3.0, 4.0]), 2.0), range(0, 81)),
    "ZeroInflatedPoisson": (dist.ZeroInflatedPoisson(0.3, jnp.array([4.0, 2.0])), range(0, 41)),
    "BetaBinomial": (dist.BetaBinomial(2.0, 3.0, jnp.array([6, 9])), range(0, 10)),
    "Binomial": (dist.Binomial(jnp.array([5, 8]), 0.4), range(0, 9)),
    "DiscreteUniform": (
        dist.DiscreteUniform(jnp.array([-2, 0]), jnp.array([3, 6])),
        range(-2, 7),
    ),
}


def _family_model(y, families=tuple(FAMILIES)):
    """Independent 2-vector sites, one per family, each with its own observation."""
    for i, family in enumerate(families):
        n = numpyro.sample(family, FAMILIES[family][0])
        numpyro.sample(f"y_{family}", dist.Normal(n[0] - 0.5 * n[1], 2.0), obs=y[i])


@pytest.mark.parametrize(
    "families",
    [
        ("Geometric", "NegativeBinomial2", "ZeroInflatedPoisson"),
        pytest.param(("BetaBinomial", "Binomial", "DiscreteUniform"), marks=pytest.mark.slow),
    ],
    ids=["unbounded", "bounded"],
)
def test_integer_families_against_enumeration(families):
    """One ALBP chain over a site of each family; the posterior factorises over the
    families, so each is enumerated alone. Every site is sampled inside its support and
    matches its enumerated posterior in the first two moments (4 ESS-based standard errors)
    and in total variation. (Bounded families also appear in the fast mixed-sites test;
    here they are slow only because their samplers compile slowly.)"""
    y = jnp.linspace(-1.0, 2.0, len(families))
    kernel = ALBP(_family_model, ordinal_window=2)
    mcmc = run_vectorized(kernel, y, families, num_samples=4000)
    assert set(kernel.weights_mode) == set(families)
    for i, family in enumerate(families):
        prior, values = FAMILIES[family]
        states, pi = enumerate_model(
            _family_model, (y[i : i + 1], (family,)), {family: ((2,), values)}
        )
        samples = np.asarray(mcmc.get_samples(group_by_chain=True)[family], float)
        assert bool(jnp.all(prior.support(jnp.asarray(samples)))), family
        assert_mean_within_mcse(samples, pi @ states, 4.0, f"{family}: E[n]")
        assert_mean_within_mcse(
            samples**2, pi @ states.astype(float) ** 2, 4.0, f"{family}: E[n^2]"
        )
        draws = flat_draws(mcmc.get_samples(), [family])
        assert np.all((draws >= values.start) & (draws < values.stop)), family
        assert_tv(draws, states, pi)
