"""``diagnose``: silent on draws that agree, a warning naming the site on chains that
disagree (a deliberately short run on a bimodal model), never moved, or carry little
information; its summaries on synthetic draws whose answer is known."""

import warnings

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ChromaticGibbs, LBPGibbs, diagnose
from numpyro_discrete.gallery.mixtures import gaussian_mixture


def _iid(shape, seed=0, p=0.4):
    return (np.random.default_rng(seed).random(shape) < p).astype(np.int32)


def test_agreeing_chains_are_silent():
    samples = {
        "x": _iid((4, 1000, 3)),
        "big": _iid((4, 1000, 50), seed=1),
        "w": np.zeros((4, 1000)),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diagnosis = diagnose(samples)
    assert diagnosis.ok
    assert [(row.site, row.summary) for row in diagnosis.sites] == [
        ("x", "values"),
        ("big", "mean"),
    ]
    assert all(row.r_hat < 1.01 and row.ess > 1000 for row in diagnosis.sites)
    assert "4 chains x 1000 draws" in str(diagnosis)


def test_a_site_fixed_by_the_data_is_not_flagged():
    """Every chain at one and the same value throughout: nothing to disagree on."""
    diagnosis = diagnose({"x": np.ones((2, 100, 4), np.int32)}, warn=False)
    assert diagnosis.ok and diagnosis.sites[0].r_hat == 1.0 and not diagnosis.sites[0].stuck_chains


def test_chains_at_different_constants_and_a_stuck_chain_are_named():
    x = _iid((3, 200, 2))
    x[1] = 1  # never moves, where the others do
    with pytest.warns(UserWarning, match=r"discrete sites \['x'\].*chains \[1\] never moved it"):
        diagnosis = diagnose({"x": x})
    assert diagnosis.sites[0].stuck_chains == (1,)
    constants = np.zeros((2, 100, 1), np.int32)
    constants[1] = 1
    with pytest.warns(UserWarning, match="split R-hat inf"):
        diagnose({"c": constants})


def test_few_effective_draws_are_named():
    sticky = np.repeat(_iid((4, 10, 1)), 20, axis=1)  # 200 draws, 10 distinct per chain
    with pytest.warns(UserWarning, match=r"'s': .*ESS"):
        diagnose({"s": sticky})


def two_wells(num_coords=12, coupling=3.0):
    """All zeros or all ones: two modes no single-site sampler crosses in a short run."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([num_coords]))
    numpyro.factor("agree", coupling * (x[1:] == x[:-1]))


def test_a_short_run_on_a_bimodal_model_warns():
    """Two chains started in the two modes (each mode has posterior mass 1/2): each stays in
    its own, so the values disagree between chains, and diagnose says so by name."""
    start = {"x": jnp.stack([jnp.zeros(12, jnp.int32), jnp.ones(12, jnp.int32)])}
    mcmc = MCMC(ChromaticGibbs(two_wells), num_warmup=50, num_samples=300, num_chains=2,
                chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(random.key(0), init_params=start)
    with pytest.warns(UserWarning, match=r"discrete sites \['x'\]"):
        diagnosis = diagnose(mcmc)
    assert diagnosis.sites[0].r_hat > 1.5, str(diagnosis)


def test_no_discrete_site_is_an_error():
    with pytest.raises(ValueError, match="no discrete sites"):
        diagnose({"w": np.zeros((2, 10))})


def test_chains_that_label_a_mixture_differently_are_not_flagged():
    """Chains started in the two labellings of a well separated two-component mixture (the
    gallery's, whose components are exchangeable) stay in them: the labels' mean disagrees,
    the log joint does not."""
    y = jnp.concatenate([jnp.full(15, -3.0), jnp.full(25, 3.0)])
    y = y + 0.3 * random.normal(random.key(1), y.shape)
    start = {  # continuous sites unconstrained, as numpyro's Gibbs takes them
        "weights": jnp.zeros((2, 1)),
        "locs": jnp.array([[-3.0, 3.0], [3.0, -3.0]]),
        "sigma": jnp.log(jnp.full(2, 0.3)),
        "z": jnp.stack([(y > 0).astype(jnp.int32), (y < 0).astype(jnp.int32)]),
    }
    mcmc = MCMC(LBPGibbs(NUTS(gaussian_mixture)), num_warmup=100, num_samples=300,
                num_chains=2, chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(random.key(0), y, 2, init_params=start)
    samples = mcmc.get_samples(group_by_chain=True)
    assert np.all(samples["locs"][0, :, 0] < 0) and np.all(samples["locs"][1, :, 0] > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diagnosis = diagnose(mcmc)
    assert diagnosis.sites[0].summary == "log joint" and diagnosis.ok, str(diagnosis)
    # the same draws without their run: the labels' mean, which disagrees
    with pytest.warns(UserWarning, match=r"discrete sites \['z'\]"):
        assert diagnose(samples).sites[0].summary == "mean"
