"""The lattice samplers that ``bench_sweeps`` races ChromaticGibbs against are correct: the
hand-written checkerboard samplers and THRML's (when installed) draw the exact expectations of
3 x 3 Ising and Potts lattices (every site's value and every edge's agreement), enumerated from
the benchmark's own numpyro models."""

import itertools

import numpy as np
import pytest

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro.diagnostics import effective_sample_size
from numpyro.infer.util import log_density

from benchmarks import bench_sweeps

SIDE = 3
SWEEPS = 20000
INDEX = np.arange(SIDE * SIDE).reshape(SIDE, SIDE)
EDGES = np.concatenate(
    [
        np.stack([INDEX[:, :-1].ravel(), INDEX[:, 1:].ravel()], 1),
        np.stack([INDEX[:-1, :].ravel(), INDEX[1:, :].ravel()], 1),
    ]
)


def statistics(states):
    """Each site's value and each edge's agreement ``[x_i = x_j]``, per state."""
    states = np.asarray(states)
    agree = states[..., EDGES[:, 0]] == states[..., EDGES[:, 1]]
    return np.concatenate([states, agree], axis=-1).astype(np.float64)


def exact_expectations(target, num_values):
    """The expected :func:`statistics`, by enumerating the model's log joint."""
    states = np.array(list(itertools.product(range(num_values), repeat=SIDE * SIDE)), np.int32)

    def log_p(x):
        return log_density(target.model, (), {}, {"x": x.reshape(SIDE, SIDE)})[0]

    log_p = np.asarray(jax.jit(jax.vmap(log_p))(jnp.asarray(states)), np.float64)
    weights = np.exp(log_p - log_p.max())
    return weights @ statistics(states) / weights.sum()


def sampled_expectations(sampler, seed=0):
    """Means of the :func:`statistics` over `SWEEPS` sweeps, and their standard errors."""

    def step(state, key):
        state = sampler.sweep(state, key)
        return state, sampler.read(state)

    keys = random.split(random.key(seed), SWEEPS)
    draws = jax.jit(lambda: lax.scan(step, sampler.init, keys)[1])()
    stats = statistics(draws)[200:]
    ess = np.asarray(effective_sample_size(stats[None]))
    return stats.mean(0), stats.std(0) / np.sqrt(ess)


SAMPLERS = ["checkerboard"] + (["THRML"] if bench_sweeps.THRML_INSTALLED else [])


@pytest.mark.parametrize("model", ["ising", "potts"])
@pytest.mark.parametrize("name", SAMPLERS)
def test_lattice_samplers_draw_the_exact_marginals(model, name):
    target = bench_sweeps.make_target(model, SIDE)
    exact = exact_expectations(target, 2 if model == "ising" else 3)
    sampler = bench_sweeps.make_sampler(name, target)
    mean, mcse = sampled_expectations(sampler)
    assert np.all(np.abs(mean - exact) < 5 * mcse + 1e-3), (mean, exact, mcse)
