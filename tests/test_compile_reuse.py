"""Compiled programs are reused where numpyro's loop allows it: the first ``MCMC.run`` with
numpyro's progress bar compiles the kernel's step once (its initial state is typed as every
later one), and a later run of the same shapes, or on new data with ``jit_model_args=True``,
compiles nothing. Counted as traces of the kernel's ``sample``: numpyro's progress-bar loop
calls it only while tracing its jitted step, once per compilation."""

import numpy as np
import pytest

from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ACS, ALBP, LBP, ChromaticGibbs


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
