"""The sweep by offsets (:mod:`numpyro_discrete.core.offset_sweep`): its conditionals equal
the exact ones and the gathered tables' on enumerable spaces (binary log-odds, tables of 3
slots with lower bounds, a coordinate with fewer values than the others, homogeneous rows as
scalars and inhomogeneous ones as arrays), its draws those of the sweep by gathered tables
with the same key, and ``ChromaticGibbs`` running it on lattices against enumeration under
every chain method."""

import numpy as np
import pytest
from test_chromatic import _conditional_matrix, _space

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ChromaticGibbs, SiteSupport
from numpyro_discrete.core import chromatic, offset_sweep, table_sweep
from numpyro_discrete.core.pair_tables import pair_tables
from numpyro_discrete.model.target import DiscreteTarget

from helpers import (
    assert_mean_within_mcse,
    chi_square_rows,
    enumerate_model,
    offset_probabilities,
    sampled_sweep_counts,
    site_scan_matrix,
    target_distribution,
)


def _layouts(target, structure=None):
    structure = target.structure if structure is None else structure
    supports = target.supports
    layout = pair_tables(structure, supports.lower, supports.upper)
    return layout, offset_sweep.offset_layout(layout, structure)


@pytest.mark.parametrize("space", ["binary", "pairwise"])
def test_offset_sweep_draws_exact_conditionals(space, x64):
    """On four binary spins on a cycle (log-odds) and on a binary, a categorical and two
    ordinal (1..3) coordinates (3 slots, lower bounds, a coordinate of 2 values among 3
    slots): each coordinate's conditional from the offsets equals the exact one to 1e-10 at
    every state; one compiled sweep draws what the sweep by gathered tables draws with the
    same key (and carries ``log pi`` forward to the value of the terms), and its
    transitions match the product of its classes' exact moves (chi-square)."""
    target, states = _space(space)
    structure = target.structure
    layout, offsets = _layouts(target)
    assert offsets is not None
    log_terms = target.log_terms()
    tables = offset_sweep.offset_tables(offsets, table_sweep.constant_tables(layout, log_terms))
    pi = target_distribution(target, states)
    for i, state in enumerate(states):
        conditionals = offset_probabilities(offsets, tables, jnp.asarray(state))
        for j in range(states.shape[1]):
            exact = _conditional_matrix(states, pi, j)[i]
            slots = states[:, j] - target.supports.lower[j]
            expected = np.bincount(slots, weights=exact, minlength=layout.num_slots)
            np.testing.assert_allclose(conditionals[j], expected, atol=1e-10)
    by_offsets = offset_sweep.build_kernel(offsets)
    by_gathers = table_sweep.build_kernel(layout, structure)
    gathered = table_sweep.sweep_tables(layout, log_terms)

    @jax.jit
    def both(key, x):
        state = chromatic.init(x, log_terms)
        new_offsets, _ = by_offsets(key, state, table_sweep.SweepTables(tables, log_terms))
        new_gathers, _ = by_gathers(key, state, table_sweep.SweepTables(gathered, log_terms))
        carried, _ = by_offsets(key, state, table_sweep.SweepTables(tables, log_terms, False))
        return new_offsets, new_gathers, carried

    for key, state in zip(random.split(random.key(1), len(states)), states, strict=True):
        new_offsets, new_gathers, carried = both(key, jnp.asarray(state))
        np.testing.assert_array_equal(new_offsets.position, new_gathers.position)
        np.testing.assert_allclose(new_offsets.log_density, new_gathers.log_density, atol=1e-10)
        # log pi carried forward by the classes' changes (offset_sweep.class_change)
        np.testing.assert_array_equal(carried.position, new_offsets.position)
        np.testing.assert_allclose(carried.log_density, new_offsets.log_density, atol=1e-10)
    order = chromatic.class_members(structure)[0][: structure.num_coords]
    matrix = site_scan_matrix(target, target.neighbourhood, states, order)

    def sweep(key, state, log_terms):
        return by_offsets(key, state, table_sweep.SweepTables(tables, log_terms))

    assert chi_square_rows(sampled_sweep_counts(sweep, target, states, 7), matrix) > 1e-3


def _lattice_potential(couplings):
    """A 3 x 3 open lattice of binary spins with the given right and down couplings."""

    def potential(z):
        s = 2.0 * z["x"].reshape(3, 3) - 1.0
        right = couplings[0] * s[:, :-1] * s[:, 1:]
        down = couplings[1] * s[:-1] * s[1:]
        return -jnp.concatenate([0.2 * s.ravel(), right.ravel(), down.ravel()])

    return potential


def test_offset_rows_are_scalars_where_a_lattice_is_homogeneous(x64):
    """A homogeneous open lattice: the offsets are ``+-1`` and ``+-3``, each row a scalar
    applied where the neighbour exists (not across a row's end); with random couplings the
    rows are arrays. Both give each coordinate's log-odds of the gathered tables at random
    states."""
    rng = np.random.default_rng(0)
    homogeneous = (np.full((3, 2), 0.5), np.full((2, 3), -0.3))
    inhomogeneous = (rng.normal(size=(3, 2)), rng.normal(size=(2, 3)))
    for couplings, scalar in ((homogeneous, True), (inhomogeneous, False)):
        potential = _lattice_potential([jnp.asarray(c) for c in couplings])
        target = DiscreteTarget.from_potential(potential, {"x": jnp.zeros(9, jnp.int32)})
        layout, offsets = _layouts(target)
        assert offsets.offsets == (-3, -1, 1, 3)
        right = offsets.has_neighbour[offsets.offsets.index(1)]
        np.testing.assert_array_equal(right, np.arange(9) % 3 != 2)
        tables = offset_sweep.offset_tables(
            offsets, table_sweep.constant_tables(layout, target.log_terms())
        )
        assert all(np.ndim(v) == 0 for row in tables.rows for r in row for v in r) == scalar
        gathered = table_sweep.sweep_tables(layout, target.log_terms())
        for x in rng.integers(0, 2, (20, 9)):
            x = jnp.asarray(x, jnp.int32)
            log_odds = offset_sweep.channels(offsets, tables, x)[0]
            logits = table_sweep.class_logits(layout, gathered, x, np.arange(9))
            np.testing.assert_allclose(log_odds, logits[:, 1] - logits[:, 0], atol=1e-10)


def test_offset_conditionals_where_pairs_are_forbidden(x64):
    """Rows are taken less their entry at slot 0 (slot 0's channel then reads no offset)
    only where those entries are finite: on a chain of five 3-valued coordinates where two
    neighbours may not both be 0 (``-inf``), the rows stay whole, and each coordinate's
    conditional equals the exact one at every state of positive probability; without the
    constraint, slot 0's rows are zero."""
    rng = np.random.default_rng(3)
    table, field = jnp.asarray(rng.normal(size=(3, 3))), jnp.asarray(rng.normal(size=(5, 3)))
    states = np.array(np.meshgrid(*[range(3)] * 5, indexing="ij")).reshape(5, -1).T
    for forbid in (True, False):

        def potential(z, forbid=forbid):
            x = z["x"]
            pairs = table[x[:-1], x[1:]]
            if forbid:
                pairs = jnp.where((x[:-1] == 0) & (x[1:] == 0), -jnp.inf, pairs)
            return -jnp.concatenate([field[jnp.arange(5), x], pairs])

        target = DiscreteTarget.from_potential(
            potential, {"x": jnp.ones(5, jnp.int32)}, supports={"x": SiteSupport.categorical(3)}
        )
        layout, offsets = _layouts(target)
        log_terms = target.log_terms()
        tables = offset_sweep.offset_tables(offsets, table_sweep.constant_tables(layout, log_terms))
        slot_zero_rows = [row[0] for rows in tables.rows for row in rows]
        assert all(np.ndim(r) == 0 and r == 0 for r in slot_zero_rows) != forbid
        pi = target_distribution(target, states.astype(np.int32))
        with np.errstate(invalid="ignore"):  # rows of the states of probability zero
            moves = [_conditional_matrix(states, pi, j) for j in range(5)]
        for i in np.flatnonzero(pi > 0):
            conditionals = offset_probabilities(offsets, tables, jnp.asarray(states[i]))
            for j in range(5):
                exact = moves[j][i]
                expected = np.bincount(states[:, j], weights=exact, minlength=3)
                np.testing.assert_allclose(conditionals[j], expected, atol=1e-10)


def test_offset_layout_only_for_few_offsets_and_classes():
    """No sweep by offsets beyond :data:`offset_sweep.MAX_CLASSES` classes (six coordinates
    all coupled: six classes) or :data:`offset_sweep.MAX_OFFSETS` offsets (every even
    coordinate of ten coupled with every odd one: two classes, offsets +-1, +-3, ..., +-9);
    the gathered tables remain."""

    def complete(z):
        x = z["x"]
        return -0.1 * jnp.triu(x[:, None] * x[None, :], 1)

    def bipartite(z):
        x = z["x"]
        return -0.1 * x[::2, None] * x[None, 1::2]

    for potential, size, num_colours in ((complete, 6, 6), (bipartite, 10, 2)):
        target = DiscreteTarget.from_potential(potential, {"x": jnp.zeros(size, jnp.int32)})
        assert target.structure.num_colours == num_colours
        layout, offsets = _layouts(target)
        assert layout is not None and offsets is None


def potts_model(field):
    x = numpyro.sample("x", dist.Categorical(logits=field))
    numpyro.factor("right", 0.7 * (x[:, :-1] == x[:, 1:]))
    numpyro.factor("down", 0.7 * (x[:-1] == x[1:]))


def ising_model(field):
    x = numpyro.sample("x", dist.Bernoulli(logits=field))
    s = 2.0 * x - 1.0
    numpyro.factor("right", 0.4 * s[:, :-1] * s[:, 1:])
    numpyro.factor("down", -0.5 * s[:-1] * s[1:])


@pytest.mark.parametrize(
    "chain_method",
    ["sequential", "vectorized", pytest.param("parallel", marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("model_name", ["ising", "potts"])
def test_chromatic_gibbs_by_offsets_matches_enumeration(model_name, chain_method):
    """``ChromaticGibbs`` on a 3 x 3 Ising lattice (binary) and a 2 x 4 Potts lattice (3
    colours) with inhomogeneous fields sweeps by offsets; two chains of 3000 sweeps give
    every coordinate's marginal within 4 Monte Carlo standard errors of enumeration."""
    if model_name == "ising":
        model, shape, values = ising_model, (3, 3), range(2)
        field = np.random.default_rng(1).normal(0.0, 0.5, shape)
    else:
        model, shape, values = potts_model, (2, 4), range(3)
        field = np.random.default_rng(1).normal(0.0, 0.5, shape + (3,))
    field = jnp.asarray(field, jnp.float32)
    states, pi = enumerate_model(model, (field,), {"x": (shape, values)})
    kernel = ChromaticGibbs(model)
    mcmc = MCMC(
        kernel,
        num_warmup=200,
        num_samples=3000,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(2), field)
    assert kernel.by_offsets and not kernel.mh_test
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["x"]).reshape(2, 3000, -1)
    for value in values[1:]:
        assert_mean_within_mcse(
            (draws == value).astype(float), ((states == value) * pi[:, None]).sum(0)
        )
