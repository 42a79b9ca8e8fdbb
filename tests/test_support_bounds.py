"""Support bounds computed with ``jnp`` from constants (a Binomial ``total_count`` cast with
``.astype(jnp.int32)``, a DiscreteUniform ``high`` from ``jnp.max``) under every chain
method: under ``chain_method="parallel"`` numpyro calls ``init`` inside ``pmap``, where such
bounds are tracers, and the kernels must still read them at ``init``. Bounds that depend on a
latent site are refused under every chain method (the support would be frozen at the first
draw). Two host devices come from tests/conftest.py."""

import re

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ALBP, LBP, LBPGibbs

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow

COUNTS = jnp.array([3.0, 5.0, 7.0])  # float data: the model casts it to an integer count
LEVELS = jnp.array([1, 4, 2])  # closed over: the DiscreteUniform's high is max(LEVELS) = 4
PROB = 0.4


def jnp_bounds(counts):
    numpyro.sample("k", dist.Binomial(counts.astype(jnp.int32), PROB))
    return numpyro.sample("m", dist.DiscreteUniform(0, jnp.max(LEVELS)))


def jnp_bounds_mixed(counts):
    m = jnp_bounds(counts)
    numpyro.sample("x", dist.Normal(m, 1.0))


KERNELS = {
    "ALBP": lambda: ALBP(jnp_bounds),
    "LBP": lambda: LBP(jnp_bounds, path_length=2),
    "LBPGibbs-discrete-only": lambda: LBPGibbs(NUTS(jnp_bounds)),
    "LBPGibbs": lambda: LBPGibbs(NUTS(jnp_bounds_mixed), discrete_kernel=ALBP(jnp_bounds_mixed)),
}
ALL_METHODS = ["sequential", "parallel", "vectorized"]
CASES = [
    *(
        (kernel, method)
        for kernel in ("ALBP", "LBPGibbs-discrete-only", "LBPGibbs")
        for method in ALL_METHODS
    ),
    ("LBP", "parallel"),
]


@pytest.mark.parametrize("kernel_name, chain_method", CASES)
def test_jnp_bounds_under_every_chain_method(kernel_name, chain_method):
    mcmc = MCMC(
        KERNELS[kernel_name](),
        num_warmup=200,
        num_samples=500,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(0), COUNTS)
    samples = mcmc.get_samples(group_by_chain=True)
    k, m = np.asarray(samples["k"]), np.asarray(samples["m"])
    assert k.shape == (2, 500, 3) and m.shape == (2, 500)
    # in the support, and not a support frozen narrower than it (E[m] = 2, E[k] = 0.4 n)
    assert np.all((k >= 0) & (k <= np.asarray(COUNTS, int))) and np.all((m >= 0) & (m <= 4))
    assert m.max() == 4 and np.all(k.max((0, 1)) >= [3, 4, 5])
    np.testing.assert_allclose(k.mean((0, 1)), PROB * np.asarray(COUNTS), atol=0.35)
    np.testing.assert_allclose(m.mean(), 2.0, atol=0.35)


def latent_total(counts):
    n = numpyro.sample("n", dist.Binomial(counts.astype(jnp.int32), 0.5))
    numpyro.sample("k", dist.Binomial(n, PROB))


def continuous_total(counts):
    rate = numpyro.sample("rate", dist.Exponential(0.2))
    numpyro.sample("k", dist.Binomial(jnp.ceil(rate).astype(jnp.int32), PROB))


@pytest.mark.parametrize("chain_method", ALL_METHODS)
@pytest.mark.parametrize(
    "kernel, source, name",
    [
        (lambda: ALBP(latent_total), "n", "ALBP"),
        (lambda: LBPGibbs(NUTS(continuous_total)), "rate", "AutoDiscrete"),
    ],
    ids=["ALBP", "LBPGibbs"],
)
def test_bound_from_a_latent_site_is_refused(kernel, source, name, chain_method):
    mcmc = MCMC(kernel(), num_warmup=2, num_samples=2, num_chains=2, chain_method=chain_method,
                progress_bar=False)  # fmt: skip
    message = (
        f"{name}: site 'k' (BinomialProbs) has support bounds computed from the value of "
        f"latent site(s) ['{source}']; the kernel fixes each site's support at `init`"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        mcmc.run(random.key(0), COUNTS)
