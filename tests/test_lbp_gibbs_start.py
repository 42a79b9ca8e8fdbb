"""``LBPGibbs.init`` of one chain runs as one compiled program (``LBPGibbs._init_chains``):
it reads the model's structure as an eager ``init`` does, a later run with the same
arguments reuses the program, and the state is the one an op-by-op ``init`` reaches."""

import logging
import pickle

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

import numpyro
from numpyro.contrib.control_flow import scan
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import LBPGibbs
from numpyro_discrete.model import chain_start
from numpyro_discrete.numpyro_internals import SAMPLE_FN_ATTRIBUTE


def hmm_with_scan(y):
    """An HMM written with numpyro's scan, with a continuous emission scale."""
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    trans = jnp.array([[0.9, 0.1], [0.1, 0.9]])

    def step(x_prev, y_t):
        x = numpyro.sample("x", dist.Categorical(trans[x_prev]))
        numpyro.sample("y", dist.Normal(2.0 * x, sigma), obs=y_t)
        return x, None

    scan(step, 0, y)


def two_group_model(y):
    c = numpyro.sample("c", dist.Bernoulli(0.5).expand([y.shape[0]]))
    mu = numpyro.sample("mu", dist.Normal(0.0, 3.0))
    numpyro.sample("y", dist.Normal(mu * c, 1.0), obs=y)


def dirichlet_mixture(y):
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(2)))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(weights))
        numpyro.sample("y", dist.Normal(2.0 * z, 1.0), obs=y)


def test_init_draws_no_continuous_site_from_its_prior(caplog):
    """The model is read where NUTS starts (``reading_trace``), not at a prior draw: a
    prior draw compiled the gamma sampler behind the Dirichlet prior on its own (about 2 s
    on a CPU core), and again in each evaluation context (3.6 s on the gallery's mixture)."""
    y = jnp.asarray([0.1, 2.2, -0.3, 1.8])
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        LBPGibbs(NUTS(dirichlet_mixture)).init(random.key(0), 10, None, (y,), {})
    compiled = [r.getMessage() for r in caplog.records if "XLA compilation" in r.getMessage()]
    assert any("jit(init)" in message for message in compiled), compiled
    assert not [m for m in compiled if "jit(_dirichlet)" in m or "jit(_gamma" in m], compiled


def test_a_traced_start_reads_the_structure_an_eager_one_reads():
    """Read at a traced start, the conditioning on the continuous sites is traced: the
    structure is read at the reading point's conditioning, so the scan is still a chain
    (before, its reads failed and the HMM came out dense, sampled by ALBP)."""
    y = jnp.asarray(np.tile([0.1, 2.1, 1.9, -0.2], 5))
    kernel = LBPGibbs(NUTS(hmm_with_scan))
    kernel.init(random.key(0), 10, None, (y,), {})
    assert kernel._compiled_init is not None
    assert kernel.discrete_kernel.chains is not None  # CollapsedDraw of the chain


def test_parallel_chains_read_the_structure_a_sequential_chain_reads():
    """``pmap`` traces ``init`` too: before the structure was read at the reading point's
    conditioning, parallel chains took this HMM for another structure (ChromaticGibbs was
    chosen, where sequential chains found the chain)."""
    y = jnp.asarray(np.tile([0.1, 2.1, 1.9, -0.2], 5))
    kernel = LBPGibbs(NUTS(hmm_with_scan))
    mcmc = MCMC(kernel, num_warmup=2, num_samples=2, num_chains=2, chain_method="parallel",
                progress_bar=False)  # fmt: skip
    mcmc.run(random.key(0), y)
    assert kernel.discrete_kernel.chains is not None  # CollapsedDraw of the chain


def test_a_later_run_with_the_same_arguments_reuses_the_compiled_start():
    y = jnp.linspace(-1.0, 2.0, 6)
    kernel = LBPGibbs(NUTS(two_group_model))
    traced = []
    start = kernel._start
    kernel._start = lambda *args: traced.append(1) or start(*args)
    # what MCMC.run calls at every run (and for every chain)
    kernel.init(random.key(0), 5, None, (y,), {})
    compiled = kernel._compiled_init
    kernel.init(random.key(1), 5, None, (y,), {})
    assert len(traced) == 1 and kernel._compiled_init is compiled
    # new data: a new program
    kernel.init(random.key(1), 5, None, (y + 1.0,), {})
    assert len(traced) == 2 and kernel._compiled_init is not compiled
    # pickled, the kernel drops what closes over the arguments, and numpyro's `Gibbs` its
    # step, so that a run of the restored kernel initialises it again
    del kernel._start
    restored = pickle.loads(pickle.dumps(kernel))
    assert restored._compiled_init is None and getattr(restored, SAMPLE_FN_ATTRIBUTE) is None


def test_traced_and_op_by_op_starts_give_the_same_state(monkeypatch):
    """The compiled start, and the same start with ``jax.disable_jit`` (every operation
    dispatched on its own, as an ``init`` run eagerly): the same discrete values, the
    continuous ones to float precision. The labels are summed out, so the start is the
    best of descents, shortened here (op by op, 100 steps took 24 s, 10 steps 40 s in the
    suite; the steps are one loop, the same code at any length)."""
    monkeypatch.setattr(chain_start, "DESCENT_STEPS", 2)
    y = jnp.linspace(-1.0, 2.0, 6)
    state = LBPGibbs(NUTS(two_group_model)).init(random.key(3), 10, None, (y,), {})
    with jax.disable_jit():
        expected = LBPGibbs(NUTS(two_group_model)).init(random.key(3), 10, None, (y,), {})
    np.testing.assert_array_equal(state.z["c"], expected.z["c"])
    np.testing.assert_allclose(state.z["mu"], expected.z["mu"], rtol=1e-5)
