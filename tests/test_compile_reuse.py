"""Compiled programs are reused where numpyro's loop allows it: the first ``MCMC.run`` with
numpyro's progress bar compiles the kernel's step once (its initial state is typed as every
later one), and a later run of the same shapes, or on new data with ``jit_model_args=True``,
compiles nothing. Counted from JAX's compile log."""

import logging

import numpy as np
import pytest

import jax
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


def _step_compiles(caplog, run):
    """How many times `run()` compiles numpyro's loop body (the progress-bar loop's step)."""
    caplog.clear()
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        run()
    return sum(
        "Finished XLA compilation of jit(_body_fn)" in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize(
    "make_kernel",
    [ALBP, lambda m: LBP(m, path_length=3), lambda m: ACS(m, tune_fraction=0.5), ChromaticGibbs],
    ids=["ALBP", "LBP", "ACS", "ChromaticGibbs"],
)
def test_progress_bar_runs_compile_the_step_once(caplog, make_kernel):
    field = random.normal(random.key(1), (16,))
    mcmc = MCMC(make_kernel(chain_model), num_warmup=200, num_samples=100, jit_model_args=True)

    def run(data):
        mcmc.run(random.key(0), data, 0.3)
        return np.asarray(mcmc.get_samples()["x"]).mean(0)

    assert _step_compiles(caplog, lambda: run(field)) == 1
    # the same shapes again, then new data of the same shapes: nothing to compile, and the
    # draws follow the new field
    assert _step_compiles(caplog, lambda: run(field)) == 0
    new_field = jnp.asarray(np.where(np.arange(16) < 8, 3.0, -3.0), jnp.float32)
    means = []
    assert _step_compiles(caplog, lambda: means.append(run(new_field))) == 0
    assert np.corrcoef(means[0], new_field)[0, 1] > 0.8
