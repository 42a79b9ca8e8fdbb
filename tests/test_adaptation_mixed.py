"""ALBP's path length adapted inside LBPGibbs: after warmup the acceptance rate is within 0.1
of its target wherever ``R > 1`` is reachable, and a warning (naming the sites and the fix)
where even ``R = 1`` accepts far below it."""

import warnings

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ALBP, LBPGibbs

from helpers import beta_bernoulli_model

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow


def mixture_model(y):
    """Two-component mixture with an unknown separation: the assignments' conditional
    sharpens as ``mu`` travels from its initial value, far from stationarity early on."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 3.0))
    z = numpyro.sample("z", dist.Bernoulli(0.5).expand(y.shape))
    numpyro.sample("y", dist.Normal(mu * z, 1.0), obs=y)


def _mixture_data():
    rng = np.random.default_rng(0)
    z = rng.random(300) < 0.5
    return jnp.asarray(np.where(z, 2.5, 0.0) + rng.normal(size=300))


def _bernoulli_data():
    rng = np.random.default_rng(1)
    return jnp.asarray(np.where(rng.random(200) < 0.3, 1.0, 0.0) + 0.5 * rng.normal(size=200))


CASES = {
    "mixture": (mixture_model, _mixture_data),
    "beta-bernoulli": (beta_bernoulli_model, _bernoulli_data),
}


@pytest.mark.parametrize("case", list(CASES))
def test_post_warmup_acceptance_is_near_the_target(case):
    model, data = CASES[case]
    mcmc = MCMC(
        LBPGibbs(NUTS(model), discrete_kernel=ALBP(model)),
        num_warmup=1000,
        num_samples=1000,
        progress_bar=False,
    )
    mcmc.run(random.key(0), data(), extra_fields=("accept_prob", "path_length"))
    extra = mcmc.get_extra_fields()
    assert float(extra["path_length"][0]) > 1.5  # R > 1 is reachable here
    assert abs(float(extra["accept_prob"].mean()) - 0.574) < 0.1


def concentrated_sum(num_coords=20):
    """``sum(x)`` pinned at ``N / 2``: every single flip costs a factor ``e^-4``, and the
    gradient, zero at the mode, cannot tell the flips apart."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([num_coords]))
    numpyro.factor("pin", -4.0 * (jnp.sum(x) - num_coords / 2) ** 2)


@pytest.fixture
def progress_bar(monkeypatch):
    """numpyro turns its progress bar off under pytest-xdist and CI; the warning is issued
    where the progress bar reads the state."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("CI", raising=False)


@pytest.mark.parametrize(
    ("show_progress", "chain_method"),
    [(True, "sequential"), (False, "sequential"), (False, "vectorized")],
)
def test_warns_when_even_one_coordinate_accepts_far_below_the_target(
    progress_bar, show_progress, chain_method
):
    """With numpyro's progress bar or without it (scripts, CI, vectorized chains)."""
    init = {"x": jnp.stack([jnp.arange(20) % 2] * 2)}
    mcmc = MCMC(
        ALBP(concentrated_sum, weights="gradient"),
        num_warmup=300,
        num_samples=100,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=show_progress,
    )
    with pytest.warns(
        RuntimeWarning, match=r"ALBP: warmup ended at path length R = 1\.\d\d"
    ) as record:
        mcmc.run(random.key(0), init_params=init)
    message = str(record[0].message)
    assert "weights={'x': 'exact'}" in message and "far below the target 0.574" in message


def independent_coordinates():
    numpyro.sample("x", dist.Bernoulli(0.3).expand([200]))


def test_no_warning_when_the_target_is_reached(progress_bar):
    mcmc = MCMC(ALBP(independent_coordinates), num_warmup=300, num_samples=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        mcmc.run(random.key(0))
