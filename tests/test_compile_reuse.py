"""Compiled programs are reused where numpyro's loop allows it: the first ``MCMC.run`` with
numpyro's progress bar compiles the kernel's step once (its initial state is typed as every
later one), and a later run of the same shapes, or on new data with ``jit_model_args=True``,
compiles nothing. Counted as traces of the kernel's ``sample``: numpyro's progress-bar loop
calls it only while tracing its jitted step, once per compilation."""

import logging

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ACS, ALBP, LBP, AutoDiscrete, ChromaticGibbs, LBPGibbs
from numpyro_discrete.model.target import DiscreteTarget


def chain_model(field, coupling):
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand(field.shape))
    s = 2 * x - 1
    numpyro.factor("field", field * s)
    numpyro.factor("coupling", coupling * s[1:] * s[:-1])


def _count_traces(kernel):
    """`kernel` with its ``sample`` counting its calls in ``kernel.traces``."""
    sample = kernel.sample
    kernel.traces = 0

    def counted(*args, **kwargs):
        kernel.traces += 1
        return sample(*args, **kwargs)

    kernel.sample = counted
    return kernel


@pytest.mark.parametrize(
    "make_kernel",
    [
        pytest.param(ALBP, id="ALBP"),
        # the other kernels reach numpyro's loop through the same `DiscreteKernel.sample`:
        # the slow tier
        pytest.param(lambda m: LBP(m, path_length=3), id="LBP", marks=pytest.mark.slow),
        pytest.param(lambda m: ACS(m, tune_fraction=0.5), id="ACS", marks=pytest.mark.slow),
        pytest.param(ChromaticGibbs, id="ChromaticGibbs", marks=pytest.mark.slow),
    ],
)
def test_progress_bar_runs_compile_the_step_once(make_kernel):
    field = random.normal(random.key(1), (16,))
    kernel = _count_traces(make_kernel(chain_model))
    mcmc = MCMC(kernel, num_warmup=200, num_samples=100, jit_model_args=True)

    def traces_of_run(data):
        before = kernel.traces
        mcmc.run(random.key(0), data, 0.3)
        return kernel.traces - before

    assert traces_of_run(field) == 1
    # the same shapes again, then new data of the same shapes and dtype: nothing to trace
    # or compile, and the draws follow the new field
    assert traces_of_run(field) == 0
    new_field = jnp.asarray(np.where(np.arange(16) < 8, 3.0, -3.0), jnp.float32)
    assert traces_of_run(new_field) == 0
    means = np.asarray(mcmc.get_samples()["x"]).mean(0)
    assert np.corrcoef(means, new_field)[0, 1] > 0.8


def _compiled_program_names(records) -> list[str]:
    messages = (r.getMessage() for r in records)
    return [m.split(" ")[4] for m in messages if m.startswith("Finished XLA compilation of")]


@pytest.mark.filterwarnings("ignore:ALBP. warmup ended")
@pytest.mark.parametrize("make_kernel", [ALBP, AutoDiscrete], ids=["ALBP", "AutoDiscrete"])
def test_later_chains_reuse_the_first_chains_target_and_start(make_kernel, monkeypatch, caplog):
    """Sequential chains (and a later run) with the same argument objects read the model
    once, and a later chain compiles no program of ours (numpyro compiles its sampling loop
    again, and stacks the chains): the target is read at one point whatever the chain, and
    the check of a chain's drawn start is compiled once for it. New argument objects are
    read again. The second chain draws what a fresh kernel, which reads the model for
    itself, draws from its key."""
    field = random.normal(random.key(1), (16,))
    reads = []
    from_model = DiscreteTarget.from_model.__func__
    monkeypatch.setattr(
        DiscreteTarget,
        "from_model",
        classmethod(lambda cls, *a, **k: reads.append(1) or from_model(cls, *a, **k)),
    )
    kernel = make_kernel(chain_model)
    first_init = kernel.init

    def marked_init(*args, **kwargs):
        logging.getLogger("jax").warning("Finished XLA compilation of chain_start in 0 sec")
        return first_init(*args, **kwargs)

    monkeypatch.setattr(kernel, "init", marked_init)
    mcmc = MCMC(kernel, num_warmup=20, num_samples=20, num_chains=2, chain_method="sequential",
                progress_bar=False)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        mcmc.run(random.key(0), field, 0.3)
        names = _compiled_program_names(caplog.records)
        assert len(reads) == 1
        fresh = MCMC(make_kernel(chain_model), num_warmup=20, num_samples=20, progress_bar=False)
        fresh.run(random.split(random.key(0), 2)[1], field, 0.3)
    second_chain = " ".join(names).split("chain_start")[2]
    assert set(second_chain.split()) <= {"jit(_fori_collect_loop)", "jit(stack)"}, second_chain
    np.testing.assert_array_equal(
        fresh.get_samples()["x"], mcmc.get_samples(group_by_chain=True)["x"][1]
    )
    mcmc.run(random.key(1), field + 1.0, 0.3)
    assert len(reads) == 3


def weighted_mixture(y):
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(3)))
    locs = numpyro.sample("locs", dist.Normal(0.0, 5.0).expand([3]).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(weights))
        numpyro.sample("y", dist.Normal(locs[z], 1.0), obs=y)


def test_lbp_gibbs_constrains_the_first_state_in_one_program(caplog):
    """numpyro applies the kernel's postprocessing (the continuous sites' transforms) to a
    chain's first state outside its loop: one compiled program, not one per operation of
    the stick-breaking transform, and the same function for the same argument objects."""
    y = jnp.concatenate([jnp.full(5, -3.0), jnp.full(5, 3.0)])
    kernel = LBPGibbs(NUTS(weighted_mixture))
    mcmc = MCMC(kernel, num_warmup=5, num_samples=5, progress_bar=False)
    with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles():
        mcmc.run(random.key(0), y)
    names = _compiled_program_names(caplog.records)
    assert "jit(fn)" in names
    assert not {"jit(cumprod)", "jit(logistic)"} & set(names), names
    assert kernel.postprocess_fn((y,), {}) is kernel.postprocess_fn((y,), {})
    weights = mcmc.get_samples()["weights"]
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
