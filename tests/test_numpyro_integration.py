"""The kernels inside numpyro: chain methods, extra fields, x64, deterministic sites, ArviZ,
and blocks of numpyro's Gibbs (resuming and pickling: test_reproducibility.py)."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs
from numpyro.infer.gibbs import discrete_latent_sites, with_conditioning

from numpyro_discrete import ALBP, LBP

PROBS = jnp.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.2])


def product_model():
    x = numpyro.sample("x", dist.Bernoulli(PROBS))
    numpyro.deterministic("total", jnp.sum(x))


def _mcmc(kernel, **kwargs):
    kwargs = {"num_warmup": 200, "num_samples": 1000, "progress_bar": False, **kwargs}
    return MCMC(kernel, **kwargs)


@pytest.mark.parametrize("chain_method", ["sequential", "parallel", "vectorized"])
def test_chain_methods(chain_method):
    mcmc = _mcmc(ALBP(product_model), num_chains=2, chain_method=chain_method)
    mcmc.run(random.key(0), extra_fields=("accept_prob", "num_flips", "num_changed"))
    samples = mcmc.get_samples(group_by_chain=True)
    assert samples["x"].shape == (2, 1000, 6)
    assert samples["x"].dtype == jnp.int32
    # the two chains are different chains
    assert not np.array_equal(samples["x"][0], samples["x"][1])
    np.testing.assert_allclose(samples["x"].mean((0, 1)), PROBS, atol=0.06)
    np.testing.assert_array_equal(samples["total"], samples["x"].sum(-1))
    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert extra["num_flips"].shape == (2, 1000)
    assert np.all(np.asarray(extra["num_changed"]) <= 6)


def test_deterministic_sites_and_print_summary(capsys):
    mcmc = _mcmc(LBP(product_model, num_flips=3))
    mcmc.run(random.key(1))
    samples = mcmc.get_samples()
    np.testing.assert_array_equal(samples["total"], samples["x"].sum(-1))
    mcmc.print_summary()
    assert "x[5]" in capsys.readouterr().out


def test_arviz_sees_sites_and_extra_fields():
    az = pytest.importorskip("arviz")
    mcmc = _mcmc(ALBP(product_model), num_samples=200)
    mcmc.run(random.key(2), extra_fields=("accept_prob", "num_flips", "num_changed"))
    data = az.from_numpyro(mcmc)
    assert {"x", "total"} <= set(data.posterior.data_vars)
    # ArviZ renames accept_prob to its own name, acceptance_rate
    stats = set(data.sample_stats.data_vars)
    assert {"acceptance_rate", "num_flips", "num_changed"} <= stats


def test_diagnostics_string():
    kernel = ALBP(product_model)
    state = kernel.init(random.key(0), 10, None, (), None)
    assert kernel.get_diagnostics_str(state) == "acc. prob=0.00, R=1.0"


def test_x64():
    with jax.enable_x64(True):
        mcmc = _mcmc(ALBP(product_model), num_samples=500)
        mcmc.run(random.key(6), extra_fields=("accept_prob",))
        assert mcmc.get_extra_fields()["accept_prob"].dtype == jnp.float64
        assert mcmc.last_state.potential_energy.dtype == jnp.float64
        x = mcmc.get_samples()["x"]
        assert jnp.issubdtype(x.dtype, jnp.integer)
        np.testing.assert_allclose(x.mean(0), PROBS, atol=0.1)


def test_potential_fn_mode_with_chain_axis():
    """`init_params` with a leading chain axis, as numpyro expects for several chains."""
    logits = jnp.linspace(-2.0, 2.0, 8)

    def potential_fn(z):
        return -jnp.sum(z["a"] * logits - jnp.logaddexp(0.0, logits))

    mcmc = _mcmc(
        LBP(potential_fn=potential_fn, num_flips=3),
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
    from numpyro.infer.gibbs import conditioned

    kernel = LBP(mixed_model, num_flips=3, weights=weights).wrap_model(conditioned)
    y = jnp.array(1.0)
    z = {"z": jnp.array([1, 0, 1], jnp.int32)}
    state = kernel.init(random.key(0), 0, z, (y,), with_conditioning({}, {"mu": 0.0}))
    kwargs = with_conditioning({}, {"mu": 1.7})
    refreshed = kernel.refresh(state, (y,), kwargs)
    fresh = kernel.init(random.key(0), 0, z, (y,), kwargs)
    assert not np.allclose(state.potential_energy, fresh.potential_energy)
    np.testing.assert_allclose(refreshed.potential_energy, fresh.potential_energy, rtol=1e-6)
    np.testing.assert_allclose(refreshed.log_ratios, fresh.log_ratios, rtol=1e-6)
