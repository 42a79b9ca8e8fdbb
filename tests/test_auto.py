"""The discrete kernel chosen from the structure (``AutoDiscrete``, LBPGibbs's default): the
rule on each kind of structure, what it reports, the ways to force a kernel, and draws that
match the exact posterior with the chosen kernel."""

import logging
import math

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import (
    ALBP,
    AutoDiscrete,
    BlockGibbs,
    ChromaticGibbs,
    CollapsedDraw,
    LBPGibbs,
)


def sticky_chain():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([30]))
    numpyro.factor("stick", 1.5 * jnp.sum(x[1:] == x[:-1]))


def lattice():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([8, 8]))
    s = 2.0 * x - 1.0
    numpyro.factor("right", 0.3 * s[:, 1:] * s[:, :-1])
    numpyro.factor("down", 0.3 * s[1:] * s[:-1])


def labels():  # independent labels: one class, no chain to draw jointly
    numpyro.sample("z", dist.Categorical(jnp.array([0.2, 0.3, 0.5])).expand([40]))


def small_dense():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([10]))
    numpyro.factor("f", -0.1 * jnp.sum(x) ** 2)


def large_dense():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([300]))
    numpyro.factor("f", -0.001 * jnp.sum(x) ** 2)


def pairwise_labels(num_labels):
    """`num_labels` labels that all interact, by terms of two labels each."""

    def model():
        z = numpyro.sample("z", dist.Categorical(jnp.ones(3) / 3).expand([num_labels]))
        affinity = jnp.array([[0.5, -0.2, 0.1], [-0.2, 0.4, 0.0], [0.1, 0.0, 0.3]])
        numpyro.factor("pairs", jnp.triu(affinity[z[:, None], z[None, :]], 1) / num_labels)

    return model


# 40 labels: 80 evaluations for the scan by log pi, 39 by pair tables; 150: 300 and 51
small_pairwise, large_pairwise = pairwise_labels(40), pairwise_labels(150)


@pytest.mark.parametrize(
    ("model", "chosen"),
    [
        (sticky_chain, BlockGibbs),
        (lattice, ChromaticGibbs),
        (labels, ChromaticGibbs),
        (small_dense, ChromaticGibbs),
        (large_dense, ALBP),
        (small_pairwise, ChromaticGibbs),
        (large_pairwise, ChromaticGibbs),
    ],
)
def test_the_rule_on_each_structure(model, chosen, caplog):
    kernel = AutoDiscrete(model)
    with caplog.at_level(logging.INFO, logger="numpyro_discrete"):
        MCMC(kernel, num_warmup=2, num_samples=2, progress_bar=False).run(random.key(0))
    assert type(kernel.chosen) is chosen
    assert kernel.reason
    assert f"discrete kernel {chosen.__name__}" in caplog.text
    assert kernel.get_diagnostics_str(kernel.chosen.init(random.key(1), 0, None, (), {}))
    if model in (small_pairwise, large_pairwise):
        # the reason names the tables the kernel reads
        assert kernel.chosen.by_pair_tables and "pair tables" in kernel.reason


@pytest.mark.slow
def test_lbpgibbs_reports_the_choice_and_a_given_kernel_stays():
    def mixed():
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0))
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([20]))
        numpyro.factor("stick", 1.5 * jnp.sum(x[1:] == x[:-1]) + theta * x[0])

    auto = LBPGibbs(NUTS(mixed))
    MCMC(auto, num_warmup=2, num_samples=2, progress_bar=False).run(random.key(0))
    # one chain: summed out of theta's target, then drawn jointly
    assert isinstance(auto.discrete_kernel, CollapsedDraw) and auto.discrete_kernel.chains
    given = LBPGibbs(NUTS(mixed), discrete_kernel=ALBP(mixed))
    MCMC(given, num_warmup=2, num_samples=2, progress_bar=False).run(random.key(0))
    assert isinstance(given.discrete_kernel, ALBP)
    # numpyro's `modified=True` (never propose the current value) keeps ALBP
    modified = LBPGibbs(NUTS(mixed), modified=True)
    assert isinstance(modified.discrete_kernel, ALBP)
    with pytest.raises(ValueError, match="'auto' or a discrete MCMCKernel"):
        LBPGibbs(NUTS(mixed), discrete_kernel="fast")


@pytest.mark.parametrize("model", [sticky_chain, small_dense])
def test_the_default_matches_enumeration(model):
    """Marginals of every coordinate within 0.04 of the exact ones, and the chain's bond
    agreement within 0.02 (2 chains x 4000 draws; the chosen kernels draw exact
    conditionals, so the chains mix fast)."""
    kernel = LBPGibbs(NUTS(model))
    mcmc = MCMC(kernel, num_warmup=200, num_samples=4000, num_chains=2, progress_bar=False)
    mcmc.run(random.key(3))
    x = np.asarray(mcmc.get_samples()["x"], np.float64)
    n = x.shape[1]
    if model is small_dense:
        # exchangeable: P(x_j = 1) = E[k] / n with P(k) ~ C(n, k) exp(-0.1 k^2)
        k = np.arange(n + 1)
        log_w = np.array([math.log(math.comb(n, int(i))) for i in k]) - 0.1 * k**2
        w = np.exp(log_w - log_w.max())
        expected = np.full(n, (w / w.sum()) @ k / n)
    else:
        expected = np.full(n, 0.5)  # symmetric under flipping every spin
        # the bonds of an open chain are independent: P(equal) = e^1.5 / (e^1.5 + 1)
        same = np.mean(x[:, 1:] == x[:, :-1])
        assert abs(same - np.exp(1.5) / (np.exp(1.5) + 1.0)) < 0.02
    np.testing.assert_allclose(x.mean(0), expected, atol=0.04)
