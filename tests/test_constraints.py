"""Hard constraints: change points ordered by a ``factor`` of ``-inf``, drawn in
``LBPGibbs``'s default from a start inside the constraint, each drawn from its whole support,
against the exact posterior by enumeration of the ordered triples (the Poisson rates
integrated out in closed form)."""

import logging

import numpy as np
import pytest
from scipy.special import gammaln

from jax import random
import jax.numpy as jnp

import numpyro
from numpyro.diagnostics import split_gelman_rubin
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ChromaticGibbs, LBPGibbs

from helpers import mcse_of_mean

RATE_SHAPE, RATE_RATE = 2.0, 0.5


def ordered_change_points(counts):
    """Three change points ``1 <= tau_1 < tau_2 < tau_3 <= T - 1`` of Poisson counts with
    four Gamma rates; the order imposed by a factor of 0 or ``-inf``."""
    num_steps = counts.shape[0]
    rates = numpyro.sample("rates", dist.Gamma(RATE_SHAPE, RATE_RATE).expand([4]).to_event(1))
    with numpyro.plate("change_points", 3):
        tau = numpyro.sample("tau", dist.DiscreteUniform(1, num_steps - 1))
    ordered = (tau[0] < tau[1]) & (tau[1] < tau[2])
    numpyro.factor("order", jnp.where(ordered, 0.0, -jnp.inf))
    segment = jnp.sum(jnp.arange(num_steps)[:, None] >= tau[None, :], axis=1)
    numpyro.sample("counts", dist.Poisson(rates[segment]), obs=counts)


def simulated_counts(num_steps, seed=1):
    rng = np.random.default_rng(seed)
    changes = [num_steps // 4, num_steps // 2, 3 * num_steps // 4]
    segment = np.searchsorted(changes, np.arange(num_steps), side="right")
    return rng.poisson(np.array([3.0, 4.5, 3.0, 5.0])[segment]).astype(np.float32)


def exact_change_point_means(counts):
    """``E[tau_k | counts]`` by enumeration of every ordered triple, each segment's rate
    integrated out (Gamma-Poisson)."""
    num_steps = counts.shape[0]
    cumulative = np.concatenate([[0.0], np.cumsum(counts)])

    def segment_log_marginal(start, end):  # the counts of [start, end), up to a constant
        total, length = cumulative[end] - cumulative[start], end - start
        return gammaln(RATE_SHAPE + total) - (RATE_SHAPE + total) * np.log(RATE_RATE + length)

    t = np.arange(1, num_steps)
    t1, t2, t3 = (a.ravel() for a in np.meshgrid(t, t, t, indexing="ij"))
    keep = (t1 < t2) & (t2 < t3)
    t1, t2, t3 = t1[keep], t2[keep], t3[keep]
    log_w = (
        segment_log_marginal(0, t1)
        + segment_log_marginal(t1, t2)
        + segment_log_marginal(t2, t3)
        + segment_log_marginal(t3, num_steps)
    )
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    return np.array([np.sum(w * t1), np.sum(w * t2), np.sum(w * t3)])


def test_the_plan_draws_small_ordinal_supports_whole(caplog):
    """The log line counts the whole supports the sweep draws from, and says so."""
    counts = jnp.asarray(simulated_counts(120))
    kernel = LBPGibbs(NUTS(ordered_change_points))
    with caplog.at_level(logging.INFO, logger="numpyro_discrete"):
        kernel.init(random.key(0), 10, None, (counts,), {})
    assert isinstance(kernel.discrete_kernel, ChromaticGibbs)
    assert "118 candidate values (whole supports) = 354 evaluations per sweep" in caplog.text
    assert "ordinal sites ['tau']" in caplog.text


@pytest.mark.slow
def test_ordered_change_points_match_enumeration():
    """From prior draws that are mostly out of order, every chain starts inside the
    constraint and the draws match the enumerated means."""
    counts = simulated_counts(120)
    mcmc = MCMC(LBPGibbs(NUTS(ordered_change_points)), num_warmup=500, num_samples=2500,
                num_chains=2, chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(random.key(0), jnp.asarray(counts))
    tau = np.asarray(mcmc.get_samples(group_by_chain=True)["tau"], np.float64)
    assert np.all(np.diff(tau, axis=-1) > 0)  # never out of order
    assert np.all(split_gelman_rubin(tau) < 1.02)
    exact = exact_change_point_means(counts)
    error = np.abs(tau.mean((0, 1)) - exact) / mcse_of_mean(tau)
    assert np.all(error < 4.0), (tau.mean((0, 1)), exact, error)
