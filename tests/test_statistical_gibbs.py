"""Mixed discrete and continuous models: LBPGibbs and numpyro's Gibbs with a discrete kernel
block, posterior moments against exact references (enumerated NUTS on a factorial HMM,
quadrature on a Beta-Bernoulli mixture, the categorical mixture of numpyro's docs, a
Poisson latent, closed forms), within stated Monte Carlo errors."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs
from numpyro.infer.gibbs import discrete_latent_sites

from numpyro_discrete import ACS, LBP, LBPGibbs
from numpyro_discrete.gallery.fhmm import (
    fhmm_data,
    fhmm_enumerated_model,
    fhmm_model,
    fhmm_smoothed_marginals,
)

from helpers import (
    SCALE_MIX,
    Y_MIX,
    assert_within_mcse,
    beta_bernoulli_model,
    effective_sample_sizes,
    mcse_of_mean,
)

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow

# --- factorial HMM against NUTS with X enumerated -------------------------------------------


def _check_fhmm(num_steps, w_true, config, num_warmup, num_samples, ref_samples):
    """LBPGibbs(NUTS) on the FHMM with X sampled against NUTS with X enumerated.

    Symmetries: an FHMM posterior is invariant under permuting the chains and (up to the
    weak prior on ``x_0``) under flipping one chain with ``w_k -> -w_k, b -> b + w_k``. The
    prior ``w_k ~ N(w_true_k, 0.3^2)`` with well-separated positive ``w_true`` puts every
    such mirror mode several prior standard deviations away, so the posterior is unimodal
    and ``w``, ``b`` and the X marginals can be compared directly.

    Mixing: joint states that emit nearly the same mean but differ in two or more chains
    (with ``w = (1.5, 3, 4.5)``: ``(1, 1, 0)`` and ``(0, 0, 1)``) can only be exchanged over a
    whole segment of time steps by a coordinated multi-site move, which local proposals
    make rarely: at ``K = 3``, ``L = 100`` a run of 10^4 steps leaves such segments in one
    assignment while the exact posterior keeps a few percent on the other, so the
    ESS-based standard errors are far too small. Both tests therefore use ``K = 2``.
    """
    num_chains = len(w_true)
    data = fhmm_data(num_steps, num_chains, config, seed=3, w=w_true, b=0.0)
    args = (jnp.asarray(data.y), num_chains, jnp.asarray(w_true), 0.3)

    ref = MCMC(NUTS(fhmm_enumerated_model), num_warmup=300, num_samples=ref_samples,
               progress_bar=False)  # fmt: skip
    ref.run(random.key(1), *args)
    ref_draws = ref.get_samples(group_by_chain=True)

    mcmc = MCMC(
        LBPGibbs(NUTS(fhmm_model)),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=2,
        chain_method="parallel",
        progress_bar=False,
    )
    mcmc.run(random.key(2), *args)
    draws = mcmc.get_samples(group_by_chain=True)

    for site in ("w", "b"):
        se = np.sqrt(mcse_of_mean(draws[site]) ** 2 + mcse_of_mean(ref_draws[site]) ** 2)
        assert_within_mcse(
            np.mean(draws[site], (0, 1)), np.mean(ref_draws[site], (0, 1)), se, 4.0, site
        )

    # X marginals: the reference averages the exact smoothed marginals over NUTS draws
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in ref_draws.items()}
    smoothed = jax.vmap(fhmm_smoothed_marginals, in_axes=(None, 0, 0, 0, None))(
        jnp.asarray(data.y), flat["w"], flat["b"], flat["sigma"], num_chains
    )
    ref_x = np.asarray(smoothed).mean(0)
    ref_se = mcse_of_mean(np.asarray(smoothed).reshape((1, -1) + ref_x.shape))
    x = np.asarray(draws["x"])
    mean_x = x.mean((0, 1))
    # coordinates that never moved have no ESS; there the sample mean must match closely
    moved = np.isfinite(effective_sample_sizes(x)) & (ref_x > 0.02) & (ref_x < 0.98)
    se = np.sqrt(mcse_of_mean(x) ** 2 + np.nan_to_num(ref_se) ** 2)
    # about 2 K L coordinates are tested at once: 5 standard errors (Bonferroni-like)
    assert_within_mcse(mean_x[moved], ref_x[moved], se[moved], 5.0, "x marginals")
    np.testing.assert_allclose(mean_x[~moved], ref_x[~moved], atol=0.05)
    return mcmc


def test_fhmm_matches_enumerated_nuts_small():
    _check_fhmm(50, np.array([1.5, 3.0]), "C1", 500, 3000, 1000)


@pytest.mark.slow
def test_fhmm_matches_enumerated_nuts():
    _check_fhmm(100, np.array([1.5, 3.0]), "C1", 1000, 10000, 2000)


# --- Beta-Bernoulli mixture against quadrature --------------------------------------------


def _beta_bernoulli_exact(y):
    """Posterior mean and variance of ``p`` and ``P(z_i = 1 | y)`` by quadrature in ``p``,
    with the ``z_i`` summed out exactly (they are independent given ``p``)."""
    grid = np.linspace(1e-6, 1 - 1e-6, 20001)
    like1 = np.exp(-0.5 * ((np.asarray(y) - 1) / SCALE_MIX) ** 2)
    like0 = np.exp(-0.5 * (np.asarray(y) / SCALE_MIX) ** 2)
    mix = grid[:, None] * like1 + (1 - grid[:, None]) * like0  # (grid, n)
    density = grid * (1 - grid) * np.prod(mix, axis=1)
    density /= np.trapezoid(density, grid)
    mean = np.trapezoid(grid * density, grid)
    var = np.trapezoid((grid - mean) ** 2 * density, grid)
    z_prob = np.trapezoid(density[:, None] * grid[:, None] * like1 / mix, grid, axis=0)
    return mean, var, z_prob


@pytest.mark.parametrize(
    "num_discrete_steps, chain_method", [(1, "sequential"), (4, "sequential"), (1, "vectorized")]
)
def test_beta_bernoulli_matches_quadrature(num_discrete_steps, chain_method):
    mean, var, z_prob = _beta_bernoulli_exact(Y_MIX)
    mcmc = MCMC(
        LBPGibbs(NUTS(beta_bernoulli_model), num_discrete_steps=num_discrete_steps),
        num_warmup=500,
        num_samples=4000,
        num_chains=2 if chain_method == "sequential" else 8,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(3), Y_MIX)
    draws = mcmc.get_samples(group_by_chain=True)
    p = np.asarray(draws["p"], np.float64)
    assert_within_mcse(p.mean(), mean, mcse_of_mean(p), 4.0, "E[p]")
    assert_within_mcse(p.var(), var, mcse_of_mean((p - mean) ** 2), 4.0, "Var[p]")
    z = np.asarray(draws["z"])
    assert_within_mcse(z.mean((0, 1)), z_prob, mcse_of_mean(z), 4.0, "P(z_i = 1)")


# --- the categorical mixture of numpyro's DiscreteHMCGibbs docs ---------------------------


def categorical_mixture(probs, locs):
    c = numpyro.sample("c", dist.Categorical(probs))
    numpyro.sample("x", dist.Normal(locs[c], 0.5))


def test_categorical_mixture_moments():
    """x ~ sum_c probs_c N(locs_c, 0.5^2): mean 1.3, variance 4.36 (exact)."""
    probs = jnp.array([0.15, 0.3, 0.3, 0.25])
    locs = jnp.array([-2.0, 0.0, 2.0, 4.0])
    mean = float(probs @ locs)
    var = float(probs @ (locs**2 + 0.25) - mean**2)
    assert abs(mean - 1.3) < 1e-6 and abs(var - 4.36) < 1e-6
    mcmc = MCMC(LBPGibbs(NUTS(categorical_mixture)), num_warmup=1000, num_samples=20000,
                progress_bar=False)  # fmt: skip
    mcmc.run(random.key(4), probs, locs)
    x = np.asarray(mcmc.get_samples(group_by_chain=True)["x"], np.float64)
    assert_within_mcse(x.mean(), mean, mcse_of_mean(x), 4.0, "E[x]")
    assert_within_mcse(x.var(), var, mcse_of_mean((x - mean) ** 2), 4.0, "Var[x]")


def poisson_mixture(rate):
    n = numpyro.sample("n", dist.Poisson(rate))
    numpyro.sample("x", dist.Normal(n, 1.0))


def test_poisson_latent_moments():
    """A discrete site with an infinite support (numpyro's own `discrete_latent_sites`
    skips it): x ~ N(n, 1), n ~ Poisson(3), so E[x] = 3 and Var[x] = 3 + 1 = 4."""
    mcmc = MCMC(LBPGibbs(NUTS(poisson_mixture)), num_warmup=1000, num_samples=10000,
                progress_bar=False)  # fmt: skip
    mcmc.run(random.key(5), 3.0)
    samples = mcmc.get_samples(group_by_chain=True)
    assert samples["n"].dtype.kind == "i"
    x = np.asarray(samples["x"], np.float64)
    assert_within_mcse(x.mean(), 3.0, mcse_of_mean(x), 4.0, "E[x]")
    assert_within_mcse(x.var(), 4.0, mcse_of_mean((x - 3.0) ** 2), 4.0, "Var[x]")


def test_numpyro_gibbs_with_lbp_block_reads_conditioning_each_step():
    """numpyro's own composite with an LBP block samples the same joint as LBPGibbs: the
    Beta-Bernoulli mixture's E[p] within Monte Carlo error of the quadrature value."""
    mean, _, _ = _beta_bernoulli_exact(Y_MIX)
    model = beta_bernoulli_model
    kernel = Gibbs([(LBP(model, path_length=3), discrete_latent_sites), (NUTS(model), None)])
    mcmc = MCMC(kernel, num_warmup=300, num_samples=4000, progress_bar=False)
    mcmc.run(random.key(6), Y_MIX)
    p = np.asarray(mcmc.get_samples(group_by_chain=True)["p"], np.float64)
    assert_within_mcse(p.mean(), mean, mcse_of_mean(p), 4.0, "E[p]")


# --- ACS as the discrete block of LBPGibbs and of numpyro's Gibbs -----------------------------

Y_OBS = 2.5


def gibbs_model(y=Y_OBS):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    z = numpyro.sample("z", dist.Bernoulli(0.3).expand([3]))
    numpyro.sample("y", dist.Normal(mu + jnp.sum(z), 1.0), obs=y)


def _gibbs_moments():
    """Exact ``E[sum z | y]`` and ``E[mu | y]``: ``mu`` integrates out, ``y | z ~ N(sum z, 2)``
    and ``mu | z, y ~ N((y - sum z) / 2, 1 / 2)``."""
    total = np.arange(4)
    prior = np.array([1, 3, 3, 1]) * 0.3**total * 0.7 ** (3 - total)
    weights = prior * np.exp(-((Y_OBS - total) ** 2) / 4.0)
    weights /= weights.sum()
    return weights @ total, weights @ ((Y_OBS - total) / 2.0)


@pytest.mark.parametrize("composite", ["LBPGibbs", "Gibbs"])
def test_gibbs_blocks_match_exact_moments(composite):
    """ACS on the discrete block (tuned in LBPGibbs, with fixed ends of the step-size
    schedule in Gibbs) beside NUTS: posterior means against their exact values."""
    if composite == "LBPGibbs":
        kernel = LBPGibbs(NUTS(gibbs_model), discrete_kernel=ACS(gibbs_model, cycle_length=8))
    else:
        acs = ACS(gibbs_model, cycle_length=8, step_size_max=2.0, step_size_min=0.2)
        kernel = Gibbs([(acs, ["z"]), (NUTS(gibbs_model), None)])
    mcmc = MCMC(kernel, num_warmup=500, num_samples=2000, progress_bar=False)
    mcmc.run(random.key(1))
    samples = mcmc.get_samples()
    tuning = mcmc.last_state.block_states[0].tuning
    if composite == "Gibbs":
        assert float(tuning.step_size_max) == pytest.approx(2.0)
        assert float(tuning.step_size_min) == pytest.approx(0.2)
    assert "step size=" in kernel.get_diagnostics_str(mcmc.last_state)
    total, mu = _gibbs_moments()
    assert samples["z"].dtype.kind == "i"
    assert abs(float(samples["z"].sum(-1).mean()) - total) < 0.1
    assert abs(float(samples["mu"].mean()) - mu) < 0.1
