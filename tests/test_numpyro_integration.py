"""The kernels inside numpyro: chain methods, extra fields, x64, deterministic sites, ArviZ,
blocks of numpyro's Gibbs (the refresh of cached potentials and local ratios under new
conditioning), and LBPGibbs (its state's fields, summaries, resuming, pickling, repeated
discrete moves). Resuming and pickling of the discrete kernels: test_kernels.py."""

import functools
import pickle

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs
from numpyro.infer.gibbs import conditioned, discrete_latent_sites, with_conditioning

from numpyro_discrete import ALBP, LBP, LBPGibbs, LBPGibbsState
from numpyro_discrete.gallery.fhmm import fhmm_data, fhmm_model

from helpers import (
    PRODUCT_PROBS,
    SCALE_MIX,
    Y_MIX,
    beta_bernoulli_model,
    product_model,
    quick_mcmc,
)

_mcmc = functools.partial(quick_mcmc, num_warmup=200, num_samples=1000)


@pytest.mark.parametrize("chain_method", ["sequential", "parallel", "vectorized"])
def test_chain_methods(chain_method):
    mcmc = _mcmc(ALBP(product_model), num_chains=2, chain_method=chain_method)
    mcmc.run(random.key(0), extra_fields=("accept_prob", "path_length", "num_changed"))
    samples = mcmc.get_samples(group_by_chain=True)
    assert samples["x"].shape == (2, 1000, 6)
    assert samples["x"].dtype == jnp.int32
    # the two chains are different chains
    assert not np.array_equal(samples["x"][0], samples["x"][1])
    np.testing.assert_allclose(samples["x"].mean((0, 1)), PRODUCT_PROBS, atol=0.06)
    np.testing.assert_array_equal(samples["total"], samples["x"].sum(-1))
    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert extra["path_length"].shape == (2, 1000)
    assert np.all(np.asarray(extra["num_changed"]) <= 6)


@pytest.mark.slow
def test_deterministic_sites_and_print_summary(capsys):
    mcmc = _mcmc(LBP(product_model, path_length=3))
    mcmc.run(random.key(1))
    samples = mcmc.get_samples()
    np.testing.assert_array_equal(samples["total"], samples["x"].sum(-1))
    mcmc.print_summary()
    assert "x[5]" in capsys.readouterr().out


def test_arviz_sees_sites_and_extra_fields():
    az = pytest.importorskip("arviz")
    mcmc = _mcmc(ALBP(product_model), num_samples=200)
    mcmc.run(random.key(2), extra_fields=("accept_prob", "path_length", "num_changed"))
    data = az.from_numpyro(mcmc)
    assert {"x", "total"} <= set(data.posterior.data_vars)
    # ArviZ renames accept_prob to its own name, acceptance_rate
    stats = set(data.sample_stats.data_vars)
    assert {"acceptance_rate", "path_length", "num_changed"} <= stats


@pytest.mark.slow
def test_x64():
    with jax.enable_x64(True):
        mcmc = _mcmc(ALBP(product_model), num_samples=500)
        mcmc.run(random.key(6), extra_fields=("accept_prob",))
        assert mcmc.get_extra_fields()["accept_prob"].dtype == jnp.float64
        assert mcmc.last_state.potential_energy.dtype == jnp.float64
        x = mcmc.get_samples()["x"]
        assert jnp.issubdtype(x.dtype, jnp.integer)
        np.testing.assert_allclose(x.mean(0), PRODUCT_PROBS, atol=0.1)


def test_potential_fn_mode_with_chain_axis():
    """`init_params` with a leading chain axis, as numpyro expects for several chains."""
    logits = jnp.linspace(-2.0, 2.0, 8)

    def potential_fn(z):
        return -jnp.sum(z["a"] * logits - jnp.logaddexp(0.0, logits))

    mcmc = _mcmc(
        LBP(potential_fn=potential_fn, path_length=3),
        num_chains=2,
        chain_method="sequential",
        num_samples=3000,
    )
    mcmc.run(random.key(7), init_params={"a": jnp.zeros((2, 8), jnp.int32)})
    np.testing.assert_allclose(mcmc.get_samples()["a"].mean(0), jax.nn.sigmoid(logits), atol=0.05)


def mixed_model(y):
    z = numpyro.sample("z", dist.Bernoulli(0.5).expand([3]))
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu + 2.0 * z.sum(), 1.0), obs=y)


@pytest.mark.slow
def test_as_block_of_numpyro_gibbs():
    kernel = Gibbs([(ALBP(mixed_model), discrete_latent_sites), (NUTS(mixed_model), None)])
    mcmc = _mcmc(kernel, num_samples=500)
    mcmc.run(random.key(8), jnp.array(2.0))
    samples = mcmc.get_samples()
    assert samples["z"].shape == (500, 3) and samples["mu"].shape == (500,)
    assert jnp.issubdtype(samples["z"].dtype, jnp.integer)


@pytest.mark.parametrize("weights", ["gradient", "exact"])
def test_refresh_matches_fresh_evaluation(weights):
    """After the conditioning changes, `refresh` gives the potential and local ratios a
    fresh `init` at the same values would."""
    kernel = LBP(mixed_model, path_length=3, weights=weights).wrap_model(conditioned)
    y = jnp.array(1.0)
    z = {"z": jnp.array([1, 0, 1], jnp.int32)}
    state = kernel.init(random.key(0), 0, z, (y,), with_conditioning({}, {"mu": 0.0}))
    kwargs = with_conditioning({}, {"mu": 1.7})
    refreshed = kernel.refresh(state, (y,), kwargs)
    fresh = kernel.init(random.key(0), 0, z, (y,), kwargs)
    assert not np.allclose(state.potential_energy, fresh.potential_energy)
    np.testing.assert_allclose(refreshed.potential_energy, fresh.potential_energy, rtol=1e-6)
    np.testing.assert_allclose(refreshed.log_ratios, fresh.log_ratios, rtol=1e-6)


def _fhmm_args(num_steps=20, num_chains=3):
    data = fhmm_data(num_steps, num_chains, "C2", seed=0)
    return data, (jnp.asarray(data.y), num_chains)


@pytest.mark.slow
@pytest.mark.parametrize("kernel_cls", [LBP, ALBP])
@pytest.mark.parametrize("weights", ["gradient", "exact"])
def test_refresh_matches_fresh_init_fhmm(kernel_cls, weights):
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
    assert refreshed.i == state.i and refreshed.path_length == state.path_length


@pytest.mark.slow
def test_cached_block_states_match_the_current_conditioning():
    """After every LBPGibbs step, both blocks' cached potentials (and the discrete block's
    local ratios) are those of a fresh evaluation at the current values of the other block."""
    data, args = _fhmm_args()
    kernel = LBPGibbs(NUTS(fhmm_model), discrete_kernel=ALBP(fhmm_model))
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


# --- LBPGibbs ---------------------------------------------------------------------------------


_gibbs_mcmc = functools.partial(quick_mcmc, num_warmup=100, num_samples=200)


EXTRA = ("accept_prob", "path_length", "num_changed", "hmc_state.accept_prob",
         "hmc_state.num_steps", "discrete_state.mean_accept_prob")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("chain_method", ["sequential", "parallel"])
def test_chain_methods_and_extra_fields(chain_method):
    mcmc = _gibbs_mcmc(
        LBPGibbs(NUTS(beta_bernoulli_model), discrete_kernel=ALBP(beta_bernoulli_model)),
        num_chains=2,
        chain_method=chain_method,
    )
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
    # the frozen ALBP path length after warmup
    assert np.all(extra["path_length"].min(1) == extra["path_length"].max(1))


@pytest.mark.slow
def test_print_summary_arviz_and_diagnostics(capsys):
    az = pytest.importorskip("arviz")
    mcmc = _gibbs_mcmc(
        LBPGibbs(NUTS(beta_bernoulli_model), discrete_kernel=ALBP(beta_bernoulli_model))
    )
    mcmc.run(random.key(9), Y_MIX, extra_fields=("accept_prob", "path_length"))
    mcmc.print_summary()
    out = capsys.readouterr().out
    assert "z[7]" in out and " p " in out and "Number of divergences" in out
    data = az.from_numpyro(mcmc)
    assert {"p", "z"} <= set(data.posterior.data_vars)
    assert {"acceptance_rate", "path_length", "diverging"} <= set(data.sample_stats.data_vars)
    kernel = mcmc.sampler
    text = kernel.get_diagnostics_str(mcmc.last_state)
    assert (
        text.startswith("acc. prob=") and "R=" in text and " | " in text and "steps of size" in text
    )


@pytest.mark.slow
def test_resume_from_post_warmup_state_continues_the_chain():
    full = _gibbs_mcmc(LBPGibbs(NUTS(beta_bernoulli_model)))
    full.run(random.key(10), Y_MIX)
    split = _gibbs_mcmc(LBPGibbs(NUTS(beta_bernoulli_model)))
    split.warmup(random.key(10), Y_MIX)
    assert isinstance(split.post_warmup_state, LBPGibbsState)
    split.run(split.post_warmup_state.rng_key, Y_MIX)
    np.testing.assert_array_equal(full.get_samples()["z"], split.get_samples()["z"])
    np.testing.assert_allclose(full.get_samples()["p"], split.get_samples()["p"], rtol=1e-5)


@pytest.mark.slow
def test_kernel_and_mcmc_pickle():
    kernel = LBPGibbs(NUTS(beta_bernoulli_model), discrete_kernel=LBP(beta_bernoulli_model))
    fresh = pickle.loads(pickle.dumps(kernel))
    assert isinstance(fresh.discrete_kernel, LBP)
    mcmc = _gibbs_mcmc(fresh, num_samples=50)
    mcmc.run(random.key(11), Y_MIX)
    restored = pickle.loads(pickle.dumps(mcmc))
    restored.post_warmup_state = restored.last_state
    restored.run(restored.post_warmup_state.rng_key, Y_MIX)
    assert restored.get_samples()["z"].shape == (50, 8)


@pytest.mark.slow
def test_discrete_kernel_option_and_enumerated_sites():
    """A given LBP moves the discrete sites; sites marked for enumeration are summed out."""

    def model(y):
        p = numpyro.sample("p", dist.Beta(2.0, 2.0))
        c = numpyro.sample("c", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
        with numpyro.plate("data", y.shape[0]):
            z = numpyro.sample("z", dist.Bernoulli(p))
            numpyro.sample("y", dist.Normal(z + 0.1 * c, SCALE_MIX), obs=y)

    mcmc = _gibbs_mcmc(LBPGibbs(NUTS(model), discrete_kernel=LBP(model, path_length=3)))
    mcmc.run(random.key(12), Y_MIX, extra_fields=("path_length",))
    assert set(mcmc.get_samples()) == {"p", "z"}
    assert np.all(mcmc.get_extra_fields()["path_length"] == 3)


@pytest.mark.slow
def test_num_discrete_steps_repeats_the_discrete_move():
    """With ``num_discrete_steps=n`` the discrete kernel moves ``n`` times per step and its
    adaptation spans ``n`` times the warmup steps; the composite still pickles."""
    kernel = LBPGibbs(
        NUTS(beta_bernoulli_model),
        discrete_kernel=ALBP(beta_bernoulli_model),
        num_discrete_steps=4,
    )
    mcmc = MCMC(kernel, num_warmup=30, num_samples=20, progress_bar=False)
    mcmc.run(random.key(0), Y_MIX, extra_fields=("accept_prob", "path_length"))
    assert int(mcmc.last_state.discrete_state.i) == 4 * (30 + 20)
    assert mcmc.get_extra_fields()["path_length"].shape == (20,)
    restored = pickle.loads(pickle.dumps(kernel))
    assert restored.num_discrete_steps == 4
