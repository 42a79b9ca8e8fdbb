"""LBPGibbs as a drop-in replacement for numpyro's DiscreteHMCGibbs and MixedHMC: the same
user script runs with either kernel swapped for LBPGibbs, on a mixed model and on a model
whose latent sites are all discrete (which LBPGibbs samples with its discrete kernel
alone, against the exact posterior). The refused arguments and features: test_errors.py."""

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import HMC, MCMC, NUTS, DiscreteHMCGibbs, MixedHMC

from numpyro_discrete import LBPGibbs

from helpers import assert_mean_within_mcse, enumerate_model

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow

Y_OBS = 1.7


def discrete_only(y):
    z = numpyro.sample("z", dist.Bernoulli(0.4).expand([3]))
    c = numpyro.sample("c", dist.Categorical(jnp.array([0.2, 0.5, 0.3])))
    n = numpyro.sample("n", dist.Binomial(4, 0.5))
    numpyro.sample("y", dist.Normal(jnp.sum(z) + c - 0.5 * n, 0.8), obs=y)


DISCRETE_SITES = {"z": ((3,), range(2)), "c": ((), range(3)), "n": ((), range(5))}


def exact_means():
    """E[z], E[c], E[n] given y, by enumerating the 120 joint states."""
    states, p = enumerate_model(discrete_only, (Y_OBS,), DISCRETE_SITES)
    means = p @ states
    return {"z": means[:3], "c": means[3], "n": means[4]}


def test_discrete_only_model_matches_the_enumerated_posterior():
    """Every posterior mean within 4 ESS-based standard errors (seed 0)."""
    mcmc = MCMC(LBPGibbs(NUTS(discrete_only)), num_warmup=500, num_samples=5000, num_chains=2,
                chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(random.key(0), Y_OBS, extra_fields=("accept_prob",))
    samples = mcmc.get_samples(group_by_chain=True)
    for name, mean in exact_means().items():
        assert samples[name].dtype == jnp.int32
        assert_mean_within_mcse(samples[name], mean, 4.0, f"E[{name}]")
    extra = mcmc.get_extra_fields(group_by_chain=True)
    assert 0.2 < float(extra["accept_prob"].mean()) <= 1.0
    assert not np.any(extra["diverging"])  # collected by default; no HMC, no divergence


def categorical_mixture(probs, locs):
    c = numpyro.sample("c", dist.Categorical(probs))
    numpyro.sample("x", dist.Normal(locs[c], 0.5))


PROBS = jnp.array([0.15, 0.3, 0.3, 0.25])
LOCS = jnp.array([-2.0, 0.0, 2.0, 4.0])

# numpyro's kernel, its inner kernel, its arguments as numpyro's docs write them, the model
# and its arguments, the extra fields the script collects, and the exact means of two sites
SCRIPTS = {
    "DiscreteHMCGibbs-mixed": (
        DiscreteHMCGibbs, NUTS, {"modified": True}, categorical_mixture, (PROBS, LOCS),
        ("hmc_state.accept_prob",), {"x": 1.3, "c": float(PROBS @ jnp.arange(4))},
    ),
    "MixedHMC-mixed": (
        MixedHMC, lambda model: HMC(model, trajectory_length=1.2),
        {"random_walk": False, "modified": True}, categorical_mixture, (PROBS, LOCS),
        ("hmc_state.accept_prob",), {"x": 1.3, "c": float(PROBS @ jnp.arange(4))},
    ),
    "DiscreteHMCGibbs-discrete-only": (
        DiscreteHMCGibbs, NUTS, {}, discrete_only, (Y_OBS,), (), None,
    ),
}  # fmt: skip


def user_script(kernel_class, inner, kwargs, model, args, extra_fields):
    """What a user writes for DiscreteHMCGibbs or MixedHMC, the kernel class swapped."""
    kernel = kernel_class(inner(model), **kwargs)
    mcmc = MCMC(kernel, num_warmup=300, num_samples=2000, num_chains=2,
                chain_method="parallel", progress_bar=False)  # fmt: skip
    mcmc.run(random.key(1), *args, extra_fields=extra_fields)
    mcmc.print_summary()
    samples = mcmc.get_samples(group_by_chain=True)
    assert set(mcmc.get_extra_fields()) >= set(extra_fields)
    mcmc.post_warmup_state = mcmc.last_state
    mcmc.run(mcmc.post_warmup_state.rng_key, *args, extra_fields=extra_fields)
    assert mcmc.get_samples()["c"].shape[0] == 2 * 2000
    return samples


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_the_same_script_runs_with_lbp_gibbs_swapped_in(script, capsys):
    numpyro_class, inner, kwargs, model, args, extra_fields, means = SCRIPTS[script]
    if means is None:
        means = {name: exact_means()[name] for name in ("c", "n")}
    results = {
        kernel_class.__name__: user_script(kernel_class, inner, kwargs, model, args, extra_fields)
        for kernel_class in (numpyro_class, LBPGibbs)
    }
    assert "mean" in capsys.readouterr().out
    theirs, ours = results[numpyro_class.__name__], results["LBPGibbs"]
    assert {name: (v.shape, v.dtype) for name, v in ours.items()} == {
        name: (v.shape, v.dtype) for name, v in theirs.items()
    }
    for name, mean in means.items():
        for kernel_name, samples in results.items():
            assert_mean_within_mcse(samples[name], mean, 4.0, f"{kernel_name}: E[{name}]")
