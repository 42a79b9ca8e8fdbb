"""LBPGibbs under ``chain_method="vectorized"`` and a callable chain method (``jax.vmap``):
each chain draws what the chain of a sequential run with the same chain key draws (numpyro
splits the run's key into the same chain keys for every method), so the sequential tests of
the sampler's correctness carry over; plus a run against the exact posterior
(test_statistical_gibbs.py) and the continuation of a vectorized run.

The draws are the same program's, but not bit for bit after warmup: XLA evaluates the
transcendental functions of a batch (``exp``, ``log`` of the step-size adaptation, the
densities) with vectorised code whose last bits differ from the scalar code of one chain,
and the adaptation amplifies a difference of one unit in the last place into different step
sizes within tens of warmup steps. So the comparison runs without warmup (frozen initial
step size and ``R``), where the draws agree exactly over the compared steps."""

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ALBP, LBP, ChromaticGibbs, LBPGibbs

from helpers import Y_MIX, beta_bernoulli_model

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow

NUM_CHAINS = 3
NUM_DRAWS = 30
EXTRA_FIELDS = ("accept_prob", "hmc_state.num_steps", "hmc_state.adapt_state.step_size")
KERNELS = {
    "ALBP": lambda: LBPGibbs(
        NUTS(beta_bernoulli_model), discrete_kernel=ALBP(beta_bernoulli_model)
    ),
    "ChromaticGibbs": lambda: LBPGibbs(
        NUTS(beta_bernoulli_model), discrete_kernel=ChromaticGibbs(beta_bernoulli_model)
    ),
    "LBP-3-2-steps": lambda: LBPGibbs(
        NUTS(beta_bernoulli_model),
        discrete_kernel=LBP(beta_bernoulli_model, path_length=3),
        num_discrete_steps=2,
    ),
}


def _run(kernel, chain_method, init_params=None, num_warmup=0, num_samples=NUM_DRAWS):
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=NUM_CHAINS,
                chain_method=chain_method, progress_bar=False)  # fmt: skip
    mcmc.run(random.key(7), Y_MIX, init_params=init_params, extra_fields=EXTRA_FIELDS)
    return mcmc


def _assert_same_chains(mcmc, reference):
    samples = mcmc.get_samples(group_by_chain=True)
    expected = reference.get_samples(group_by_chain=True)
    np.testing.assert_array_equal(samples["z"], expected["z"])
    np.testing.assert_allclose(samples["p"], expected["p"], rtol=1e-5)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    expected_extra = reference.get_extra_fields(group_by_chain=True)
    assert set(extra) == set(expected_extra)
    for name in expected_extra:
        assert extra[name].shape[:2] == (NUM_CHAINS, NUM_DRAWS), name
        np.testing.assert_allclose(extra[name], expected_extra[name], rtol=1e-5, err_msg=name)


@pytest.mark.parametrize(
    "chain_method",
    # a callable chain method runs numpyro's one-chain program under `vmap`: the same sweep
    # as "vectorized", checked in the slow tier (about 80 s of the default suite's CPU)
    ["vectorized", pytest.param(jax.vmap, marks=pytest.mark.slow)],
    ids=["vectorized", "vmap"],
)
@pytest.mark.parametrize("kernel_name", list(KERNELS))
def test_chains_equal_sequential_chains(kernel_name, chain_method):
    reference = _run(KERNELS[kernel_name](), "sequential")
    mcmc = _run(KERNELS[kernel_name](), chain_method)
    _assert_same_chains(mcmc, reference)


def test_each_chain_adapts_its_own_blocks():
    """After warmup, the inner kernel's step size and ALBP's path length of each vectorized
    chain are its own, close to those of the sequential chain of the same key (not equal:
    see the module docstring)."""
    runs = [
        _run(KERNELS["ALBP"](), method, num_warmup=300) for method in ("sequential", "vectorized")
    ]
    (step_ref, r_ref), (step, r) = [
        (np.asarray(m.last_state.hmc_state.adapt_state.step_size),
         np.asarray(m.last_state.discrete_state.path_length)) for m in runs
    ]  # fmt: skip
    assert step.shape == r.shape == (NUM_CHAINS,)
    assert np.unique(step).size == NUM_CHAINS and np.unique(r).size == NUM_CHAINS
    np.testing.assert_allclose(step, step_ref, rtol=0.5)
    np.testing.assert_allclose(r, r_ref, rtol=0.5)


def test_init_params_per_chain():
    """Constrained discrete and unconstrained continuous initial values, one per chain."""
    init_params = {
        "z": jnp.array([[0, 1, 0, 1, 0, 1, 0, 1]] * NUM_CHAINS),
        "p": jnp.array([-1.0, 0.0, 1.0]),
    }
    reference = _run(KERNELS["ALBP"](), "sequential", init_params)
    mcmc = _run(KERNELS["ALBP"](), "vectorized", init_params)
    _assert_same_chains(mcmc, reference)
    # the first draw is one sweep from the given start: ALBP moves R = 2 coordinates
    first = mcmc.get_samples(group_by_chain=True)["z"][:, 0]
    assert np.all(np.sum(first != init_params["z"], axis=-1) <= 2)


def test_vectorized_run_continues_from_its_last_state():
    """A later run of more draws from ``post_warmup_state``: the same program, new draws,
    frozen adaptation (the step sizes of the first run's last state, per chain)."""
    mcmc = _run(KERNELS["ALBP"](), "vectorized", num_warmup=100)
    last = mcmc.last_state
    step_size = np.asarray(last.hmc_state.adapt_state.step_size)
    assert step_size.shape == (NUM_CHAINS,)
    mcmc.post_warmup_state = last
    mcmc.run(last.rng_key, Y_MIX, extra_fields=EXTRA_FIELDS)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    frozen = np.broadcast_to(step_size[:, None], (NUM_CHAINS, NUM_DRAWS))
    np.testing.assert_allclose(extra["hmc_state.adapt_state.step_size"], frozen)
    assert mcmc.get_samples(group_by_chain=True)["z"].shape == (NUM_CHAINS, NUM_DRAWS, 8)
