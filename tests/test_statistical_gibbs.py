"""LBPGibbs: posterior moments against exact references (enumerated NUTS on a factorial HMM,
quadrature on a Beta-Bernoulli mixture, the categorical mixture of numpyro's docs), the
refresh of cached potentials and local ratios under new conditioning, numpyro integration
(chain methods, extra fields, summaries, ArviZ, resuming, pickling) and errors."""

import pickle

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp
from jax.scipy.special import logsumexp

import numpyro
from numpyro.diagnostics import effective_sample_size
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs
from numpyro.infer.gibbs import conditioned, discrete_latent_sites, with_conditioning

from numpyro_discrete import ALBP, LBP, LBPGibbs, LBPGibbsState

from benchmarks.targets import (
    fhmm_data,
    fhmm_enumerated_model,
    fhmm_joint_states,
    fhmm_markov_log_prior,
    fhmm_model,
)

# --- helpers ------------------------------------------------------------------------------


def _ess(draws):
    """ESS of each coordinate of ``(chains, draws, ...)`` draws (NaN where constant)."""
    draws = np.asarray(draws, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(effective_sample_size(draws))


def _mcse_of_mean(draws):
    """Monte Carlo standard error of the mean of each coordinate, from the ESS."""
    draws = np.asarray(draws, dtype=np.float64)
    flat = draws.reshape((-1,) + draws.shape[2:])
    return np.sqrt(flat.var(0) / _ess(draws))


def _assert_within_mcse(estimate, reference, se, num_se, what):
    z = np.abs(np.asarray(estimate) - np.asarray(reference)) / np.asarray(se)
    assert np.all(z < num_se), f"{what}: |z| = {z} (estimate {estimate}, reference {reference})"


# --- factorial HMM against NUTS with X enumerated -------------------------------------------


def _fhmm_smoothed_marginals(y, w, b, sigma, num_chains):
    """``P(x_{l,k} = 1 | y, w, b, sigma)`` by forward-backward over the ``2^K`` joint states."""
    states = fhmm_joint_states(num_chains)
    # the chains' Markov prior of one joint path, evaluated pairwise: log p(s_0), log T(s, s')
    log_init = jax.vmap(lambda s: fhmm_markov_log_prior(s[None]))(jnp.asarray(states))
    pairs = jnp.stack(
        [jnp.broadcast_to(states[:, None], (len(states),) * 2 + (num_chains,)),
         jnp.broadcast_to(states[None, :], (len(states),) * 2 + (num_chains,))],
        axis=2,
    )  # fmt: skip
    log_trans = jax.vmap(jax.vmap(fhmm_markov_log_prior))(pairs) - log_init[:, None]
    log_emit = dist.Normal(jnp.asarray(states, jnp.float32) @ w + b, sigma).log_prob(y[:, None])

    def forward(alpha, emit):
        alpha = logsumexp(alpha[:, None] + log_trans, axis=0) + emit
        return alpha, alpha

    def backward(beta, emit):
        beta = logsumexp(log_trans + (emit + beta)[None, :], axis=1)
        return beta, beta

    alpha0 = log_init + log_emit[0]
    _, alphas = jax.lax.scan(forward, alpha0, log_emit[1:])
    alphas = jnp.concatenate([alpha0[None], alphas])
    _, betas = jax.lax.scan(backward, jnp.zeros(len(states)), log_emit[1:], reverse=True)
    betas = jnp.concatenate([betas, jnp.zeros((1, len(states)))])
    log_post = alphas + betas
    post = jnp.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))
    return post @ jnp.asarray(states, post.dtype)  # (L, K)


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
        se = np.sqrt(_mcse_of_mean(draws[site]) ** 2 + _mcse_of_mean(ref_draws[site]) ** 2)
        _assert_within_mcse(
            np.mean(draws[site], (0, 1)), np.mean(ref_draws[site], (0, 1)), se, 4.0, site
        )

    # X marginals: the reference averages the exact smoothed marginals over NUTS draws
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in ref_draws.items()}
    smoothed = jax.vmap(_fhmm_smoothed_marginals, in_axes=(None, 0, 0, 0, None))(
        jnp.asarray(data.y), flat["w"], flat["b"], flat["sigma"], num_chains
    )
    ref_x = np.asarray(smoothed).mean(0)
    ref_se = _mcse_of_mean(np.asarray(smoothed).reshape((1, -1) + ref_x.shape))
    x = np.asarray(draws["x"])
    mean_x = x.mean((0, 1))
    # coordinates that never moved have no ESS; there the sample mean must match closely
    moved = np.isfinite(_ess(x)) & (ref_x > 0.02) & (ref_x < 0.98)
    se = np.sqrt(_mcse_of_mean(x) ** 2 + np.nan_to_num(ref_se) ** 2)
    # about 2 K L coordinates are tested at once: 5 standard errors (Bonferroni-like)
    _assert_within_mcse(mean_x[moved], ref_x[moved], se[moved], 5.0, "x marginals")
    np.testing.assert_allclose(mean_x[~moved], ref_x[~moved], atol=0.05)
    return mcmc


def test_fhmm_matches_enumerated_nuts_small():
    _check_fhmm(50, np.array([1.5, 3.0]), "C1", 500, 3000, 1000)


@pytest.mark.slow
def test_fhmm_matches_enumerated_nuts():
    _check_fhmm(100, np.array([1.5, 3.0]), "C1", 1000, 10000, 2000)


# --- Beta-Bernoulli mixture against quadrature --------------------------------------------

Y_MIX = jnp.array([0.1, 0.9, 1.3, -0.4, 0.6, 0.2, 1.1, 0.45])
SCALE_MIX = 0.5


def beta_bernoulli_model(y):
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    z = numpyro.sample("z", dist.Bernoulli(p).expand(y.shape))
    numpyro.sample("y", dist.Normal(z, SCALE_MIX), obs=y)


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


@pytest.mark.parametrize("num_discrete_steps", [1, 4])
def test_beta_bernoulli_matches_quadrature(num_discrete_steps):
    mean, var, z_prob = _beta_bernoulli_exact(Y_MIX)
    mcmc = MCMC(
        LBPGibbs(NUTS(beta_bernoulli_model), num_discrete_steps=num_discrete_steps),
        num_warmup=500,
        num_samples=4000,
        num_chains=2,
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(random.key(3), Y_MIX)
    draws = mcmc.get_samples(group_by_chain=True)
    p = np.asarray(draws["p"], np.float64)
    _assert_within_mcse(p.mean(), mean, _mcse_of_mean(p), 4.0, "E[p]")
    _assert_within_mcse(p.var(), var, _mcse_of_mean((p - mean) ** 2), 4.0, "Var[p]")
    z = np.asarray(draws["z"])
    _assert_within_mcse(z.mean((0, 1)), z_prob, _mcse_of_mean(z), 4.0, "P(z_i = 1)")


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
    _assert_within_mcse(x.mean(), mean, _mcse_of_mean(x), 4.0, "E[x]")
    _assert_within_mcse(x.var(), var, _mcse_of_mean((x - mean) ** 2), 4.0, "Var[x]")


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
    _assert_within_mcse(x.mean(), 3.0, _mcse_of_mean(x), 4.0, "E[x]")
    _assert_within_mcse(x.var(), 4.0, _mcse_of_mean((x - 3.0) ** 2), 4.0, "Var[x]")


# --- refresh under new conditioning -------------------------------------------------------


def _fhmm_args(num_steps=20, num_chains=3):
    data = fhmm_data(num_steps, num_chains, "C2", seed=0)
    return data, (jnp.asarray(data.y), num_chains)


@pytest.mark.parametrize("kernel_cls", [LBP, ALBP])
@pytest.mark.parametrize("weights", ["gradient", "exact"])
def test_refresh_matches_fresh_init(kernel_cls, weights):
    """After the continuous sites change, `refresh` gives the potential energy and local
    log-ratios that `init` on the new conditioning gives, and they differ from the old."""
    data, args = _fhmm_args()
    kernel = kernel_cls(fhmm_model, weights=weights).wrap_model(conditioned)
    x = {"x": jnp.asarray(data.x)}
    old = with_conditioning({}, {"w": jnp.ones(3), "b": 0.0, "sigma": 1.0})
    new = with_conditioning({}, {"w": jnp.array([-0.5, 2.0, 0.3]), "b": 0.7, "sigma": 0.6})
    state = kernel.init(random.key(0), 10, x, args, old)
    refreshed = kernel.refresh(state, args, new)
    fresh = kernel.init(random.key(0), 10, x, args, new)
    assert not np.allclose(state.potential_energy, fresh.potential_energy)
    assert not np.allclose(state.log_ratios, fresh.log_ratios)
    np.testing.assert_allclose(refreshed.potential_energy, fresh.potential_energy, rtol=1e-6)
    # exact ratios are differences of two float32 log densities of size ~10^2 (one ulp there
    # is ~1e-5), and `init` evaluates them in one compiled program, `refresh` op by op
    np.testing.assert_allclose(refreshed.log_ratios, fresh.log_ratios, rtol=1e-5, atol=1e-4)
    # everything else is kept
    assert refreshed.i == state.i and refreshed.num_flips == state.num_flips


def test_cached_block_states_match_the_current_conditioning():
    """After every LBPGibbs step, both blocks' cached potentials (and the discrete block's
    local ratios) are those of a fresh evaluation at the current values of the other block."""
    data, args = _fhmm_args()
    kernel = LBPGibbs(NUTS(fhmm_model))
    state = kernel.init(random.key(5), 20, None, args, {})
    step = jax.jit(lambda s: kernel.sample(s, args, {}))
    for _ in range(10):
        state = step(state)
    constrain = kernel.inner_kernel.get_constrain_fn(args, {})
    continuous = constrain({k: state.z[k] for k in ("w", "b", "sigma")})
    discrete_kernel = kernel.discrete_kernel
    fresh = discrete_kernel.refresh(state.discrete_state, args, with_conditioning({}, continuous))
    np.testing.assert_allclose(
        state.discrete_state.potential_energy, fresh.potential_energy, rtol=1e-5
    )
    np.testing.assert_allclose(state.discrete_state.log_ratios, fresh.log_ratios, atol=1e-4)
    kwargs_hmc = with_conditioning({}, {"x": state.z["x"]})
    fresh_hmc = kernel.inner_kernel.refresh(state.hmc_state, args, kwargs_hmc)
    np.testing.assert_allclose(state.hmc_state.potential_energy, fresh_hmc.potential_energy,
                               rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(state.hmc_state.z_grad["w"], fresh_hmc.z_grad["w"], rtol=1e-4)


def test_numpyro_gibbs_with_lbp_block_reads_conditioning_each_step():
    """numpyro's own composite with an LBP block samples the same joint as LBPGibbs: the
    Beta-Bernoulli mixture's E[p] within Monte Carlo error of the quadrature value."""
    mean, _, _ = _beta_bernoulli_exact(Y_MIX)
    model = beta_bernoulli_model
    kernel = Gibbs([(LBP(model, num_flips=3), discrete_latent_sites), (NUTS(model), None)])
    mcmc = MCMC(kernel, num_warmup=300, num_samples=4000, progress_bar=False)
    mcmc.run(random.key(6), Y_MIX)
    p = np.asarray(mcmc.get_samples(group_by_chain=True)["p"], np.float64)
    _assert_within_mcse(p.mean(), mean, _mcse_of_mean(p), 4.0, "E[p]")


# --- numpyro integration ------------------------------------------------------------------

EXTRA = ("accept_prob", "num_flips", "num_changed", "hmc_state.accept_prob",
         "hmc_state.num_steps", "discrete_state.mean_accept_prob")  # fmt: skip


def _mcmc(kernel, **kwargs):
    kwargs = {"num_warmup": 100, "num_samples": 200, "progress_bar": False, **kwargs}
    return MCMC(kernel, **kwargs)


@pytest.mark.parametrize("chain_method", ["sequential", "parallel"])
def test_chain_methods_and_extra_fields(chain_method):
    mcmc = _mcmc(LBPGibbs(NUTS(beta_bernoulli_model)), num_chains=2, chain_method=chain_method)
    mcmc.run(random.key(7), Y_MIX, extra_fields=EXTRA)
    samples = mcmc.get_samples(group_by_chain=True)
    assert samples["z"].shape == (2, 200, 8) and jnp.issubdtype(samples["z"].dtype, jnp.integer)
    assert samples["p"].shape == (2, 200)
    assert np.all((samples["p"] > 0) & (samples["p"] < 1))  # constrained
    assert not np.array_equal(samples["p"][0], samples["p"][1])
    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert set(extra) == {*EXTRA, "diverging"}
    for field in EXTRA:
        assert extra[field].shape == (2, 200)
    assert np.all(np.asarray(extra["num_changed"]) <= 8)
    assert np.all(np.asarray(extra["hmc_state.num_steps"]) >= 1)
    # the frozen ALBP scale after warmup
    assert np.all(extra["num_flips"].min(1) == extra["num_flips"].max(1))


def test_vectorized_chains_are_refused():
    mcmc = _mcmc(LBPGibbs(NUTS(beta_bernoulli_model)), num_chains=2, chain_method="vectorized")
    with pytest.raises(ValueError, match="single random key"):
        mcmc.run(random.key(8), Y_MIX)


def test_print_summary_arviz_and_diagnostics(capsys):
    az = pytest.importorskip("arviz")
    mcmc = _mcmc(LBPGibbs(NUTS(beta_bernoulli_model)))
    mcmc.run(random.key(9), Y_MIX, extra_fields=("accept_prob", "num_flips"))
    mcmc.print_summary()
    out = capsys.readouterr().out
    assert "z[7]" in out and " p " in out and "Number of divergences" in out
    data = az.from_numpyro(mcmc)
    assert {"p", "z"} <= set(data.posterior.data_vars)
    assert {"acceptance_rate", "num_flips", "diverging"} <= set(data.sample_stats.data_vars)
    kernel = mcmc.sampler
    text = kernel.get_diagnostics_str(mcmc.last_state)
    assert (
        text.startswith("acc. prob=") and "R=" in text and " | " in text and "steps of size" in text
    )


def test_resume_from_post_warmup_state_continues_the_chain():
    full = _mcmc(LBPGibbs(NUTS(beta_bernoulli_model)))
    full.run(random.key(10), Y_MIX)
    split = _mcmc(LBPGibbs(NUTS(beta_bernoulli_model)))
    split.warmup(random.key(10), Y_MIX)
    assert isinstance(split.post_warmup_state, LBPGibbsState)
    split.run(split.post_warmup_state.rng_key, Y_MIX)
    np.testing.assert_array_equal(full.get_samples()["z"], split.get_samples()["z"])
    np.testing.assert_allclose(full.get_samples()["p"], split.get_samples()["p"], rtol=1e-5)


def test_kernel_and_mcmc_pickle():
    kernel = LBPGibbs(NUTS(beta_bernoulli_model), discrete_kernel=LBP(beta_bernoulli_model))
    fresh = pickle.loads(pickle.dumps(kernel))
    assert isinstance(fresh.discrete_kernel, LBP)
    mcmc = _mcmc(fresh, num_samples=50)
    mcmc.run(random.key(11), Y_MIX)
    restored = pickle.loads(pickle.dumps(mcmc))
    restored.post_warmup_state = restored.last_state
    restored.run(restored.post_warmup_state.rng_key, Y_MIX)
    assert restored.get_samples()["z"].shape == (50, 8)


def test_discrete_kernel_option_and_enumerated_sites():
    """A given LBP moves the discrete sites; sites marked for enumeration are summed out."""

    def model(y):
        p = numpyro.sample("p", dist.Beta(2.0, 2.0))
        c = numpyro.sample("c", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
        with numpyro.plate("data", y.shape[0]):
            z = numpyro.sample("z", dist.Bernoulli(p))
            numpyro.sample("y", dist.Normal(z + 0.1 * c, SCALE_MIX), obs=y)

    mcmc = _mcmc(LBPGibbs(NUTS(model), discrete_kernel=LBP(model, num_flips=3)))
    mcmc.run(random.key(12), Y_MIX, extra_fields=("num_flips",))
    assert set(mcmc.get_samples()) == {"p", "z"}
    assert np.all(mcmc.get_extra_fields()["num_flips"] == 3)


# --- errors -------------------------------------------------------------------------------


def continuous_only(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def discrete_only():
    numpyro.sample("z", dist.Bernoulli(0.3).expand([4]))


def test_errors():
    with pytest.raises(ValueError, match=r"must be numpyro's HMC or NUTS.*use ALBP\(model\)"):
        LBPGibbs(ALBP(beta_bernoulli_model))
    with pytest.raises(ValueError, match=r"built from `potential_fn`.*NUTS\(model\)"):
        LBPGibbs(NUTS(potential_fn=lambda z: jnp.sum(z["a"] ** 2)))
    with pytest.raises(ValueError, match="same model callable"):
        LBPGibbs(NUTS(beta_bernoulli_model), discrete_kernel=ALBP(discrete_only))
    with pytest.raises(ValueError, match="discrete MCMCKernel"):
        LBPGibbs(NUTS(beta_bernoulli_model), discrete_kernel=NUTS(beta_bernoulli_model))
    with pytest.raises(ValueError, match=r"no discrete latent sites.*\['mu'\].*NUTS\(model\)"):
        _mcmc(LBPGibbs(NUTS(continuous_only))).run(random.key(0), 1.0)
    with pytest.raises(ValueError, match=r"no continuous latent sites.*\['z'\].*ALBP\(model\)"):
        _mcmc(LBPGibbs(NUTS(discrete_only))).run(random.key(0))


def test_num_discrete_steps_repeats_the_discrete_move():
    """With ``num_discrete_steps=n`` the discrete kernel moves ``n`` times per step and its
    adaptation spans ``n`` times the warmup steps; the composite still pickles."""
    kernel = LBPGibbs(NUTS(beta_bernoulli_model), num_discrete_steps=4)
    mcmc = MCMC(kernel, num_warmup=30, num_samples=20, progress_bar=False)
    mcmc.run(random.key(0), Y_MIX, extra_fields=("accept_prob", "num_flips"))
    assert int(mcmc.last_state.discrete_state.i) == 4 * (30 + 20)
    assert mcmc.get_extra_fields()["num_flips"].shape == (20,)
    restored = pickle.loads(pickle.dumps(kernel))
    assert restored.num_discrete_steps == 4
    with pytest.raises(ValueError, match=r"`num_discrete_steps` must be >= 1.*got 0"):
        LBPGibbs(NUTS(beta_bernoulli_model), num_discrete_steps=0)
    with pytest.raises(TypeError, match=r"`num_discrete_steps` must be a positive int"):
        LBPGibbs(NUTS(beta_bernoulli_model), num_discrete_steps=2.5)
