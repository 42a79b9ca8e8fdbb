"""Sampling tests against exactly enumerated targets (fixed seeds, stated tolerances)."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
from numpyro.diagnostics import effective_sample_size
import numpyro.distributions as dist
from numpyro.infer import MCMC
from numpyro.infer.util import log_density

from numpyro_discrete import ALBP, LBP

from exact import (
    all_binary_states,
    exact_distribution,
    iid_tv_quantile,
    random_binary_target,
    state_index,
)

NUM_COORDS = 10


@pytest.mark.parametrize(
    "kernel_fn",
    [
        lambda pot: LBP(potential_fn=pot, num_flips=1),
        lambda pot: LBP(potential_fn=pot, num_flips=3, balancing="barker"),
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
    num_chains, num_samples = 4, 10000
    log_pi = random_binary_target(NUM_COORDS, seed=3, num_hidden=4)
    states = all_binary_states(NUM_COORDS)
    pi = exact_distribution(log_pi, states)
    mcmc = MCMC(
        kernel_fn(lambda z: -log_pi(z["x"])),
        num_warmup=500,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    init = {"x": jnp.zeros((num_chains, NUM_COORDS), jnp.int32)}
    mcmc.run(random.key(1), init_params=init)
    draws = np.asarray(state_index(mcmc.get_samples()["x"]))
    empirical = np.bincount(draws, minlength=len(pi)) / len(draws)
    tolerance = iid_tv_quantile(pi, len(draws) // 5)
    marginals = pi @ states
    product = np.prod(np.where(states == 1, marginals, 1 - marginals), axis=1)
    assert tolerance < 0.5 * np.abs(pi - product).sum()
    assert 0.5 * np.abs(empirical - pi).sum() < tolerance


def _enumerated_moments(model, sites, shapes, *args):
    """Exact posterior means of the binary `sites` by summing the model's log joint over
    every joint value (numpyro's own `log_density`)."""
    sizes = [int(np.prod(shape)) for shape in shapes]
    states = all_binary_states(sum(sizes))

    def log_joint(flat):
        values, start = {}, 0
        for name, shape, size in zip(sites, shapes, sizes, strict=True):
            values[name] = flat[start : start + size].reshape(shape)
            start += size
        return log_density(model, args, {}, values)[0]

    log_p = np.asarray(jax.vmap(log_joint)(jnp.asarray(states)), np.float64)
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    return p @ states


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
    exact = _enumerated_moments(regression_model, ["z", "w"], [(3,), (4,)], y)
    mcmc = MCMC(
        kernel_cls(regression_model),
        num_warmup=500,
        num_samples=5000,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.key(2), y)
    samples = mcmc.get_samples(group_by_chain=True)
    flat = np.concatenate([np.asarray(samples["z"]), np.asarray(samples["w"])], axis=-1).astype(
        float
    )
    mean = flat.mean((0, 1))
    ess = effective_sample_size(flat)
    mcse = flat.std((0, 1)) / np.sqrt(ess)
    assert np.all(np.abs(mean - exact) < 4 * mcse + 1e-3), (mean, exact, mcse)


def test_albp_tunes_acceptance_and_freezes_scale():
    """
    1000-coordinate product Bernoulli, four chains: acceptance after warmup is 0.574 +- 0.03
    averaged over the chains (each chain within +- 0.05: the frozen R of one chain carries
    the noise of its own warmup, about +- 0.02 in acceptance), and the path-length scale
    does not move after warmup.
    """
    probs = random.uniform(random.key(0), (1000,), minval=0.15, maxval=0.85)

    def model():
        numpyro.sample("x", dist.Bernoulli(probs))

    mcmc = MCMC(
        ALBP(model),
        num_warmup=2000,
        num_samples=1000,
        num_chains=4,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.key(3), extra_fields=("accept_prob", "num_flips", "num_changed"))
    extra = mcmc.get_extra_fields(group_by_chain=True)
    accept = np.asarray(extra["accept_prob"]).mean(1)
    assert abs(accept.mean() - 0.574) < 0.03, accept
    assert np.all(np.abs(accept - 0.574) < 0.05), accept
    scale = np.asarray(extra["num_flips"])
    assert np.all(np.ptp(scale, axis=1) == 0)
    assert np.all(scale[:, 0] > 10)
    # and the samples are right: every marginal within 5 Monte Carlo standard errors
    x = np.asarray(mcmc.get_samples(group_by_chain=True)["x"], float)
    mcse = x.std((0, 1)) / np.sqrt(effective_sample_size(x))
    assert np.all(np.abs(x.mean((0, 1)) - np.asarray(probs)) < 5 * mcse)
