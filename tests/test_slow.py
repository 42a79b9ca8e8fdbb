"""Long statistical runs (``pytest -m slow``): larger exact enumerations, more seeds."""

import pytest

from jax import random

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ALBP, LBP

from helpers import assert_tv_on_random_binary_target

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "kernel_fn",
    [
        lambda pot: LBP(potential_fn=pot, path_length=3, balancing="barker"),
        lambda pot: ALBP(potential_fn=pot),
        lambda pot: ALBP(potential_fn=pot, weights="exact"),
    ],
    ids=["LBP-3-barker", "ALBP", "ALBP-exact"],
)
def test_total_variation_14_coordinates(kernel_fn):
    """16384 states; same tolerance rule as the fast test (99% quantile of the TV of
    independent exact draws numbering one fifth of the chain's draws)."""
    assert_tv_on_random_binary_target(
        kernel_fn,
        num_coords=14,
        num_hidden=6,
        target_seed=5,
        seed=0,
        num_chains=8,
        against_product=False,
        num_warmup=2000,
        num_samples=40000,
    )


@pytest.mark.parametrize("seed", range(6))
def test_albp_acceptance_each_seed(seed):
    """A single 1000-coordinate chain lands within 0.574 +- 0.05 after warmup, every seed."""
    probs = random.uniform(random.key(0), (1000,), minval=0.15, maxval=0.85)

    def model():
        numpyro.sample("x", dist.Bernoulli(probs))

    mcmc = MCMC(ALBP(model), num_warmup=3000, num_samples=2000, progress_bar=False)
    mcmc.run(random.key(seed), extra_fields=("accept_prob",))
    assert abs(float(mcmc.get_extra_fields()["accept_prob"].mean()) - 0.574) < 0.05
