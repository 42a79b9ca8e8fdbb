"""BlockGibbs: the chain blocks found from the structure, exact transition matrices of the
code ``MCMC`` runs (each block's draw equals its enumerated conditional; every class's move
leaves the posterior invariant), sampling under every chain method, and the errors."""

import itertools

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import BlockGibbs, LBPGibbs
from numpyro_discrete.core import block_gibbs
from numpyro_discrete.structure.chain_blocks import find_chain_blocks

from helpers import (
    assert_irreducible,
    block_class_matrix,
    block_sweep_matrix,
    chi_square_rows,
    sampled_transitions,
    state_lookup,
)

CHAIN_METHODS = ["sequential", "vectorized", "parallel"]


def binary_chain(length=5, coupling=1.2):
    """A binary chain with its coupling written as one sum and a field per site."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([length]))
    s = 2.0 * x - 1.0
    field = jnp.linspace(-0.5, 0.7, length)
    numpyro.factor("chain", coupling * jnp.sum(s[1:] * s[:-1]) + jnp.sum(field * s))


def two_chains(length=3):
    """A factorial model: two categorical chains in time (axis 0), coupled at every step
    through an observation (so they fall in two classes)."""
    x = numpyro.sample("x", dist.Categorical(jnp.ones(3) / 3).expand([length, 2]))
    table = jnp.array([[1.0, -0.5, 0.2], [-0.5, 1.0, -0.3], [0.2, -0.3, 1.0]])
    numpyro.factor("markov", table[x[1:], x[:-1]].sum())
    loc = x[:, 0] - 0.5 * x[:, 1]
    numpyro.sample("y", dist.Normal(loc.astype(float), 1.0), obs=jnp.array([0.3, 1.5, -0.2]))


def binary_factorial(length=3):
    """Two binary chains in time, their Markov prior one summed factor (a transition table
    that is not symmetric: ``(0, 1)`` and ``(1, 0)`` differ), coupled at every step through
    an observation (a small factorial HMM)."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([length, 2]))
    table = jnp.array([[0.9, -0.4], [0.2, 1.1]])
    states = x.astype(jnp.int32)
    numpyro.factor("markov", table[states[:-1], states[1:]].sum() + 0.3 * jnp.sum(x[0]))
    numpyro.sample(
        "y", dist.Normal(x @ jnp.array([1.0, -0.7]), 1.0), obs=jnp.array([0.3, 1.2, -0.4])
    )


def ordinal_chain(length=3):
    """Bounded ordinal coordinates (Binomial totals differing by coordinate)."""
    n = numpyro.sample("n", dist.Binomial(jnp.array([2, 3, 2]), 0.4))
    numpyro.factor("smooth", -0.6 * jnp.sum((n[1:] - n[:-1]) ** 2))


def lattice(size=(2, 3)):
    s = 2.0 * numpyro.sample("x", dist.Bernoulli(0.5).expand(list(size))) - 1.0
    numpyro.factor("pairs", 0.5 * (jnp.sum(s[1:] * s[:-1]) + jnp.sum(s[:, 1:] * s[:, :-1])))


def initialised(kernel, seed=0):
    state = kernel.init(random.key(seed), 0, None, (), {})
    return state, kernel._target


def all_states(target):
    supports = target.layout.coordinate_supports()
    counts = block_gibbs.value_counts(supports)
    values = [supports.lower[j] + np.arange(counts[j]) for j in range(target.num_coords)]
    return np.array(list(itertools.product(*values)), np.int32)


def posterior(target, states):
    log_p = np.asarray(jax.jit(jax.vmap(target.log_density()))(jnp.asarray(states)), np.float64)
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


@pytest.mark.parametrize(
    "model, axes, num_classes",
    [
        (binary_chain, {"x": 0}, 1),
        (two_chains, {"x": 0}, 2),
        (binary_factorial, {"x": 0}, 2),
        (ordinal_chain, {"n": 0}, 1),
        (lattice, {"x": 1}, 2),
    ],
)
def test_blocks_found_from_the_structure(model, axes, num_classes):
    kernel = BlockGibbs(model)
    _, target = initialised(kernel)
    found = find_chain_blocks(target.structure, target.layout.names, target.layout.shapes)
    assert dict(found.axes) == axes
    assert found.num_classes == num_classes
    assert kernel.blocks is not None


@pytest.mark.parametrize(
    "model", [binary_chain, binary_factorial, two_chains, ordinal_chain, lattice]
)
def test_each_block_draws_its_exact_conditional(model, x64):
    """Every class's move is the exact conditional of its blocks (acceptance 1, the rows
    are pi restricted to the class's fibre), so the sweep leaves pi invariant."""
    kernel = BlockGibbs(model)
    _, target = initialised(kernel)
    found = find_chain_blocks(target.structure, target.layout.names, target.layout.shapes)
    plan = block_gibbs.block_plan(found, target.structure, target.layout.coordinate_supports())
    states = all_states(target)
    pi = posterior(target, states)
    sweep = np.eye(len(states))
    for c in range(found.num_classes):
        matrix = block_class_matrix(target, plan, states, c)
        np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-6)
        # the Gibbs move (no test, potentials from the terms' values) is the same matrix
        gibbs = block_class_matrix(target, plan, states, c, mh_test=False)
        np.testing.assert_allclose(gibbs, matrix, atol=1e-6)
        outside = np.ones(target.num_coords, bool)
        outside[plan.coords[c][plan.coords[c] < target.num_coords]] = False
        for i in range(len(states)):
            same = np.all(states[:, outside] == states[i, outside], axis=1)
            np.testing.assert_allclose(matrix[i, same], pi[same] / pi[same].sum(), atol=1e-6)
            assert np.all(matrix[i, ~same] == 0)
        sweep = sweep @ matrix
    np.testing.assert_allclose(pi @ sweep, pi, atol=1e-6)
    assert_irreducible(sweep)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("parallel", "mh_test"), [(False, False), (True, False), (False, True), (True, True)]
)
def test_compiled_sample_follows_the_exact_sweep(parallel, mh_test, x64, monkeypatch):
    """Chi-square of one compiled ``kernel.sample`` from every state against the product of
    the class matrices, with sequential and with associative-scan filtering and sampling
    (the kernel picks one by backend), with and without the MH test (the structure is
    proven, so the kernel takes every draw; the test's matrix equals the Gibbs one)."""
    kernel = BlockGibbs(two_chains)
    _, target = initialised(kernel)
    assert target.structure.exact and not kernel.mh_test
    found = find_chain_blocks(target.structure, target.layout.names, target.layout.shapes)
    plan = block_gibbs.block_plan(found, target.structure, target.layout.coordinate_supports())
    build = block_gibbs.build_kernel
    monkeypatch.setattr(
        block_gibbs,
        "build_kernel",
        lambda plan, **kwargs: build(plan, parallel=parallel, mh_test=mh_test),
    )
    states = all_states(target)[::9]  # a subset of starting states; targets are all states
    every = all_states(target)
    sweep = block_sweep_matrix(target, plan, every)
    np.testing.assert_allclose(
        block_sweep_matrix(target, plan, every, mh_test=False), sweep, atol=1e-10
    )
    rows = state_lookup(every)(states)
    counts = sampled_transitions(kernel, target, states, 2000, 2, end_states=every)
    assert chi_square_rows(counts, sweep[rows]) > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("chain_method", CHAIN_METHODS)
def test_samples_match_enumeration_under_every_chain_method(chain_method):
    kernel = BlockGibbs(two_chains)
    mcmc = MCMC(
        kernel,
        num_warmup=50,
        num_samples=2000,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(3))
    x = np.asarray(mcmc.get_samples()["x"]).reshape(-1, 6)
    target = kernel._target
    states = all_states(target)
    pi = posterior(target, states)
    # every coordinate's marginal within 0.03 (4000 nearly independent draws: se < 0.008)
    for j in range(6):
        for v in range(3):
            exact = pi[states[:, j] == v].sum()
            assert abs(np.mean(x[:, j] == v) - exact) < 0.03, (j, v)


@pytest.mark.slow
def test_inside_lbp_gibbs_for_a_mixed_model():
    """The discrete block of ``LBPGibbs(NUTS)``: a chain whose coupling is continuous."""

    def model():
        coupling = numpyro.sample("coupling", dist.Uniform(0.0, 1.5))
        s = 2.0 * numpyro.sample("x", dist.Bernoulli(0.5).expand([4])) - 1.0
        numpyro.factor("chain", coupling * jnp.sum(s[1:] * s[:-1]))

    kernel = LBPGibbs(NUTS(model), discrete_kernel=BlockGibbs(model))
    mcmc = MCMC(kernel, num_warmup=300, num_samples=3000, progress_bar=False)
    mcmc.run(random.key(0))
    samples = mcmc.get_samples()
    s = 2.0 * np.asarray(samples["x"]) - 1.0
    # exact: E[s_i s_{i+1}] = E_coupling[tanh(coupling)] under the posterior of coupling,
    # whose density is proportional to (2 cosh(coupling))^3 on [0, 1.5]
    grid = np.linspace(0.0, 1.5, 3001)
    weight = np.cosh(grid) ** 3
    exact = float(np.sum(np.tanh(grid) * weight) / np.sum(weight))
    assert abs(np.mean(s[:, 1:] * s[:, :-1]) - exact) < 0.05


def test_a_stated_axis_that_is_not_a_chain_is_refused():
    def model():
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([2, 4]))
        numpyro.factor("rows", jnp.sum(x, axis=1) ** 2)  # all of a row at once

    kernel = BlockGibbs(model, blocks={"x": 1})
    with pytest.raises(ValueError, match="site 'x' along axis 1 are not chains"):
        kernel.init(random.key(0), 0, None, (), {})


def test_unbounded_sites_are_refused_with_the_fix():
    def model():
        numpyro.sample("n", dist.Poisson(3.0))

    with pytest.raises(ValueError, match="ChromaticGibbs or ALBP"):
        BlockGibbs(model).init(random.key(0), 0, None, (), {})
