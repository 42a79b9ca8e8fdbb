"""A chain starts where the density is positive (:mod:`numpyro_discrete.model.feasible_start`):
a prior draw of zero probability is moved, under every chain method and inside
``LBPGibbs``; values the user gave are not."""

import numpy as np
import pytest
from scipy.stats import binom, poisson

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ALBP, ChromaticGibbs, LBPGibbs
from numpyro_discrete.core.neighbourhood import UNBOUNDED, CoordinateSupports
from numpyro_discrete.model.feasible_start import feasible_start
from numpyro_discrete.structure.colouring import TermStructure

KEY = random.key(0)

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow

COUNTS = jnp.array([[3.0, 5.0, 4.0], [9.0, 7.0, 8.0]])  # two sites, three visits


def n_mixture(counts):
    """Abundances ``N_i ~ Poisson(2)``: a prior draw is almost never at least the counts
    (P(N >= 9) = 2e-4)."""
    with numpyro.plate("sites", counts.shape[0]):
        n = numpyro.sample("N", dist.Poisson(2.0))
        with numpyro.plate("visits", counts.shape[1], dim=-2):
            numpyro.sample("counts", dist.Binomial(n, 0.6), obs=counts.T)


def exact_mean_abundance(counts):
    values = np.arange(200)
    means = []
    for row in np.asarray(counts):
        log_p = poisson.logpmf(values, 2.0) + binom.logpmf(row[:, None], values, 0.6).sum(0)
        p = np.exp(log_p - log_p.max())
        means.append(p @ values / p.sum())
    return np.array(means)


@pytest.mark.parametrize("chain_method", ["sequential", "vectorized", "parallel"])
@pytest.mark.parametrize("kernel", [ALBP, ChromaticGibbs])
def test_a_prior_draw_of_zero_probability_is_moved(kernel, chain_method):
    mcmc = MCMC(
        kernel(n_mixture),
        num_warmup=300,
        num_samples=1500,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(0), COUNTS)
    draws = np.asarray(mcmc.get_samples()["N"])
    assert np.all(draws >= np.asarray(COUNTS).max(1))
    # the exact posterior mean (Poisson prior times binomial counts, summed to 200)
    np.testing.assert_allclose(draws.mean(0), exact_mean_abundance(COUNTS), atol=0.35)


def test_values_the_user_gave_are_kept():
    with pytest.raises(ValueError, match="potential energy is .* at the initial values"):
        MCMC(ALBP(n_mixture), num_warmup=5, num_samples=5, progress_bar=False).run(
            random.key(0), COUNTS, init_params={"N": jnp.array([1, 1])}
        )


def capture_model(histories):
    """Capture histories by data augmentation: a row caught at least once must be a
    member (``z = 1``); numpyro keeps ``Bernoulli(0).log_prob(1)`` finite (-87.3), with a
    NaN gradient in ``p``, so NUTS cannot start from a prior draw of ``z``."""
    psi = numpyro.sample("psi", dist.Beta(1.0, 1.0))
    p = numpyro.sample("p", dist.Beta(1.0, 1.0))
    with numpyro.plate("rows", histories.shape[0]):
        z = numpyro.sample("z", dist.Bernoulli(psi))
        with numpyro.plate("occasions", histories.shape[1], dim=-2):
            numpyro.sample("y", dist.Bernoulli(z * p), obs=histories.T)


@pytest.mark.parametrize("chain_method", ["sequential", "vectorized"])
def test_lbp_gibbs_starts_where_nuts_can(chain_method):
    rng = np.random.default_rng(0)
    histories = np.zeros((40, 4))
    histories[:25] = rng.random((25, 4)) < 0.4
    histories[:25, 0] = 1.0  # 25 animals caught, 15 rows of augmentation
    mcmc = MCMC(
        LBPGibbs(NUTS(capture_model)),
        num_warmup=50,
        num_samples=50,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(3), jnp.asarray(histories))
    z = np.asarray(mcmc.get_samples()["z"])
    assert np.all(z[:, :25] == 1)


def _structure(pairs: list[tuple[int, int]], num_coords: int) -> TermStructure:
    terms, coords = (np.array(a, np.int32) for a in zip(*pairs, strict=True))
    return TermStructure(
        colour=np.zeros(num_coords, np.int32),
        num_colours=1,
        pair_terms=terms,
        pair_coords=coords,
        dense_terms=np.zeros(0, np.int32),
        num_terms=int(terms.max()) + 1,
        coord_terms=None,
        exact=True,
    )


def test_moves_by_support():
    """An unbounded count doubles its distance from its lower bound until its term is
    possible, a binary value flips, and a coordinate that is not movable stays (its term is
    left to the check of the initial density)."""
    supports = CoordinateSupports(
        kind=np.array([2, 0, 2]),
        num_categories=np.array([0, 2, 0]),
        lower=np.array([0, 0, 0]),
        upper=np.array([UNBOUNDED, 1, UNBOUNDED]),
    )
    structure = _structure([(0, 0), (1, 1), (2, 2)], 3)

    def log_terms(x):
        return jnp.stack(
            [
                jnp.where(x[0] >= 9, 0.0, -jnp.inf),
                jnp.where(x[1] == 1, 0.0, -jnp.inf),
                jnp.where(x[2] >= 5, 0.0, -jnp.inf),
            ]
        )

    x = jnp.array([1, 0, 0], jnp.int32)
    movable = np.array([True, True, False])
    out = np.asarray(feasible_start(log_terms, structure, supports, x, movable, KEY))
    np.testing.assert_array_equal(out, [15, 1, 0])  # coordinate 2 cannot move
    out = np.asarray(feasible_start(log_terms, structure, supports, x, np.ones(3, bool), KEY))
    np.testing.assert_array_equal(out, [15, 1, 7])  # 1 -> 3 -> 7 -> 15; 0 -> 1; 0 -> 1 -> 3 -> 7
    # and traced, as under `vmap`
    traced = jax.vmap(lambda x: feasible_start(log_terms, structure, supports, x, movable, KEY))
    np.testing.assert_array_equal(np.asarray(traced(x[None]))[0], [15, 1, 0])


def test_an_impossible_state_is_returned_as_drawn():
    """Rounds run out (two binary values that must differ from themselves): the draw."""
    supports = CoordinateSupports(
        kind=np.array([0]), num_categories=np.array([2]), lower=np.array([0]), upper=np.array([1])
    )
    structure = _structure([(0, 0)], 1)
    x = jnp.array([1], jnp.int32)
    out = feasible_start(
        lambda x: jnp.full(1, -jnp.inf), structure, supports, x, np.ones(1, bool), KEY
    )
    np.testing.assert_array_equal(np.asarray(out), [1])


def test_an_order_between_coordinates_is_met_by_drawing_them_again():
    """Three change points that must increase, drawn in decreasing order: moved by one value
    together they keep their order, so the rounds of uniform draws meet the constraint."""
    span = 119
    supports = CoordinateSupports(
        kind=np.full(3, 2), num_categories=np.zeros(3, int),
        lower=np.ones(3, int), upper=np.full(3, span),
    )  # fmt: skip
    structure = _structure([(0, 0), (0, 1), (0, 2)], 3)

    def log_terms(x):
        return jnp.where((x[0] < x[1]) & (x[1] < x[2]), 0.0, -jnp.inf)[None]

    x = jnp.array([90, 50, 10], jnp.int32)
    for seed in range(5):
        out = np.asarray(feasible_start(log_terms, structure, supports, x, np.ones(3, bool),
                                        random.key(seed)))  # fmt: skip
        assert out[0] < out[1] < out[2] and out.min() >= 1 and out.max() <= span, out
