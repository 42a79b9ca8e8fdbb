"""Structure detection: which coordinates each term depends on (against brute-force probing),
the colouring (valid, with the expected colour counts), colour-batched exact ratios equal to
the brute-force definition on every kind of model, and what ``weights="auto"`` picks."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist

from numpyro_discrete.core.local_ratios import coloured_ratios, exact_local_fn, pair_table_ratios
from numpyro_discrete.core.pair_tables import pair_tables
from numpyro_discrete.model import potential
from numpyro_discrete.model.initial_values import initial_position
from numpyro_discrete.model.target import DiscreteTarget
from numpyro_discrete.structure.colouring import (
    colour_coordinates,
    interaction_graph,
    term_structure,
    two_colouring,
)
from numpyro_discrete.structure.dependencies import detect_dependencies

from helpers import coloured_ratios_checker

# --- models -----------------------------------------------------------------------------------

LATTICE = 4
FIELD = np.linspace(-0.5, 0.5, LATTICE * LATTICE).reshape(LATTICE, LATTICE)


def ising_model():
    """Open-lattice Ising model, one elementwise factor per edge direction."""
    x = numpyro.sample("x", dist.Bernoulli(0.45).expand([LATTICE, LATTICE]))
    s = 2.0 * x - 1.0
    numpyro.factor("field", FIELD * s)
    numpyro.factor("right", 0.4 * s[:, :-1] * s[:, 1:])
    numpyro.factor("down", 0.3 * s[:-1, :] * s[1:, :])


def potts_model():
    """Colours used as indices (an emission table) and in comparisons (agreement, order)."""
    z = numpyro.sample("z", dist.Categorical(jnp.ones(3) / 3).expand([3, 3]))
    locs = jnp.array([-1.0, 0.0, 2.0])
    numpyro.sample("y", dist.Normal(locs[z], 1.0), obs=jnp.linspace(-1.0, 2.0, 9).reshape(3, 3))
    numpyro.factor("agree", 0.5 * (z[:, :-1] == z[:, 1:]))
    numpyro.factor("order", 0.2 * (z[:-1, :] > z[1:, :]))


def mixture_model():
    """Assignments of a mixture given its parameters: ``y_i ~ N(locs[z_i], 1)``."""
    z = numpyro.sample("z", dist.Categorical(jnp.array([0.2, 0.3, 0.5])).expand([6]))
    numpyro.sample("y", dist.Normal(jnp.array([-2.0, 0.0, 3.0])[z], 1.0), obs=jnp.arange(6.0))


def block_model():
    """A stochastic block model: edge ``(i, j)`` observed with probability ``B[z_i, z_j]``."""
    z = numpyro.sample("z", dist.Categorical(jnp.array([0.4, 0.6])).expand([5]))
    block = jnp.array([[0.8, 0.1], [0.1, 0.6]])
    upper = jnp.triu(jnp.ones((5, 5), bool), 1)
    adjacency = (jnp.arange(25).reshape(5, 5) % 3 == 0).astype(jnp.float32)
    with numpyro.handlers.mask(mask=upper):
        numpyro.sample("a", dist.Bernoulli(block[z[:, None], z[None, :]]), obs=adjacency)


def fhmm_model(num_chains=3, num_steps=4):
    """A factorial HMM: Markov chains of binary states, observations of their weighted sum."""
    x = numpyro.sample("x", dist.Bernoulli(0.4).expand([num_chains, num_steps]))
    stay = jnp.where(x[:, 1:] == x[:, :-1], jnp.log(0.8), jnp.log(0.2))
    numpyro.factor("markov", stay)
    w = jnp.array([1.0, -0.5, 2.0])[:num_chains]
    numpyro.sample("y", dist.Normal(w @ x, 0.5), obs=jnp.linspace(0.0, 2.0, num_steps))


def mixed_model():
    """Binary, categorical and ordinal sites interacting through shared terms."""
    b = numpyro.sample("b", dist.Bernoulli(0.3).expand([3]))
    c = numpyro.sample("c", dist.Categorical(jnp.array([0.2, 0.5, 0.3])).expand([3]))
    n = numpyro.sample("n", dist.Binomial(5, 0.4).expand([3]))
    locs = jnp.array([-1.0, 0.5, 1.5])
    numpyro.sample("y", dist.Normal(b + locs[c] + 0.3 * n, 1.0), obs=jnp.array([0.2, 1.0, 2.5]))
    numpyro.factor("chain", 0.2 * n[:-1] * b[1:])


def dense_model():
    """One scalar factor over every coordinate that is not a sum (a square of one): no
    sparse structure."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([5]))
    numpyro.factor("all", 0.3 * jnp.sum(x[:-1] * x[1:]) ** 2)


MODELS = {
    "ising": ising_model,
    "potts": potts_model,
    "mixture": mixture_model,
    "block": block_model,
    "fhmm": fhmm_model,
    "mixed": mixed_model,
    "dense": dense_model,
}


def _target(model, weights="exact"):
    return DiscreteTarget.from_model(model, random.key(0), (), {}, weights=weights)


def _random_position(target, seed=1):
    return initial_position(target, random.key(seed), None, (), {})


def _probed_dependencies(target, x):
    """Brute force: the terms that change when one coordinate moves to each candidate."""
    log_terms = jax.jit(target.log_terms())
    base = np.asarray(log_terms(x))
    candidates = np.asarray(target.neighbourhood.candidates(x))
    valid = np.asarray(target.neighbourhood.valid(x))
    pairs = set()
    for j in range(x.shape[0]):
        for m in np.flatnonzero(valid[j]):
            changed = np.asarray(log_terms(x.at[j].set(candidates[j, m]))) != base
            pairs.update((int(e), j) for e in np.flatnonzero(changed))
    return pairs


def _detected_pairs(target):
    structure = target.structure
    return set(zip(structure.pair_terms.tolist(), structure.pair_coords.tolist(), strict=True))


def _assert_valid_colouring(structure):
    """No term depends on two coordinates of one class."""
    colour = structure.colour
    for term in np.unique(structure.pair_terms):
        coords = structure.pair_coords[structure.pair_terms == term]
        assert len(np.unique(colour[coords])) == len(coords), (term, coords, colour[coords])


# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [name for name in MODELS if name != "dense"])
def test_detected_dependencies_cover_the_probed_ones(name):
    """Every dependency a single-coordinate change reveals is detected (detection is sound);
    on models whose terms change whenever an argument does, the two are equal."""
    target = _target(MODELS[name])
    probed = set()
    for seed in range(3):
        probed |= _probed_dependencies(target, _random_position(target, seed))
    detected = _detected_pairs(target)
    assert probed <= detected
    if name in ("ising", "mixture", "block", "fhmm"):  # (priors chosen non-uniform)
        assert detected == probed


def test_masked_terms_depend_on_nothing():
    """numpyro's masks (``handlers.mask``, ``obs_mask``) select a constant where masked."""
    target = _target(block_model)
    masked = ~np.triu(np.ones((5, 5), bool), 1).ravel()
    prior_terms = 5  # the assignments' own log-probabilities come first
    assert not np.isin(np.flatnonzero(masked) + prior_terms, target.structure.pair_terms).any()


def test_a_factor_of_every_coordinate_is_dense():
    target = _target(dense_model)
    assert target.structure.dense_terms.size == 1
    assert target.num_colours == 5


def test_elementwise_and_sliced_programs():
    """Rules for reshapes, transposes, slices, pads, concatenation, dynamic slices, gathers
    with fixed indices, reductions over part of an array and products (``dot_general``)."""
    neighbours = np.array([[1, 2], [0, 3], [0, 3], [1, 2]])

    def terms(x):
        grid = x.reshape(2, 2).T
        padded = jnp.pad(grid, ((1, 0), (0, 1)))  # [[0,0,0],[x0,x2,0],[x1,x3,0]]
        gathered = x[neighbours]  # (4, 2): the neighbours of each coordinate
        rows = jnp.sum(grid, axis=1)  # x0 + x2, x1 + x3
        window = jax.lax.dynamic_slice(x, (1,), (2,))
        product = grid.astype(jnp.float32) @ jnp.ones(2)  # x0 + x2, x1 + x3
        return jnp.concatenate(
            [
                padded.ravel().astype(jnp.float32),
                jnp.sum(gathered, axis=1).astype(jnp.float32),
                rows.astype(jnp.float32),
                window.astype(jnp.float32),
                product,
            ]
        )

    deps = detect_dependencies(terms, np.zeros(4, np.int32))
    sets = {}
    for term, coord in zip(deps.terms, deps.coords, strict=True):
        sets.setdefault(int(term), set()).add(int(coord))
    expected = [set(), set(), set(), {0}, {2}, set(), {1}, {3}, set()]
    expected += [{1, 2}, {0, 3}, {0, 3}, {1, 2}]
    expected += [{0, 2}, {1, 3}, {1}, {2}, {0, 2}, {1, 3}]
    assert [sets.get(e, set()) for e in range(len(expected))] == expected
    assert not deps.is_dense


def test_values_used_as_indices_and_in_loops():
    """A gather whose indices depend on x depends on them (and on every element of the
    operand if those depend on x: here all coordinates, so dense); a scan's carry depends
    on what each iteration adds to it."""
    table = jnp.arange(12.0).reshape(4, 3)

    def terms(x):
        by_index = table[x[0], x[1]] + jnp.zeros(1)
        read_from_x = x[x[2]] * 1.0 + jnp.zeros(1)
        carry, _ = jax.lax.scan(lambda c, xi: (c + xi, None), 0, x[2:4])
        return jnp.concatenate([by_index, read_from_x, jnp.reshape(carry * 1.0, (1,))])

    deps = detect_dependencies(terms, np.array([1, 2, 0, 1], np.int32))
    sets = {}
    for term, coord in zip(deps.terms, deps.coords, strict=True):
        sets.setdefault(int(term), set()).add(int(coord))
    assert sets == {0: {0, 1}, 2: {2, 3}}
    assert deps.dense.tolist() == [False, True, False]  # x[x[2]] reads any coordinate


def test_large_sets_become_dense():
    deps = detect_dependencies(lambda x: jnp.cumsum(x * 1.0), np.zeros(100, np.int32))
    assert deps.is_dense and int(deps.dense.sum()) == 100


# --- colouring ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [("ising", 2), ("mixture", 1), ("block", 5), ("fhmm", 6), ("potts", 2), ("mixed", None)],
)
def test_colourings_are_valid_with_the_expected_counts(name, expected):
    """Lattice: 2 colours; mixture assignments: 1; every pair of a block model interacts
    (5); a 3-chain factorial HMM at most 2K."""
    structure = _target(MODELS[name]).structure
    _assert_valid_colouring(structure)
    if expected is not None:
        assert structure.num_colours <= expected
    if name in ("ising", "mixture", "block"):
        assert structure.num_colours == expected


def test_lattice_of_a_hundred_thousand_coordinates_has_two_colours():
    side = 316

    def terms(x):
        s = 2.0 * x.reshape(side, side) - 1.0
        return jnp.concatenate(
            [(s[:, :-1] * s[:, 1:]).ravel(), (s[:-1, :] * s[1:, :]).ravel(), s.ravel()]
        )

    structure = term_structure(detect_dependencies(terms, np.zeros(side * side, np.int32)))
    assert structure.num_colours == 2
    assert interaction_graph(
        detect_dependencies(terms, np.zeros(side * side, np.int32))
    ).nnz == 4 * side * (side - 1)


@pytest.mark.parametrize("seed", range(20))
def test_colouring_of_random_graphs(seed):
    """Random graphs (sparse, with isolated nodes, several components, odd cycles or not):
    every colouring is proper; the breadth-first two-colouring exists exactly where
    networkx finds the graph bipartite, and then the colouring has two classes."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    num_edges = int(rng.integers(0, 2 * n))
    rows, cols = rng.integers(0, n, (2, num_edges))
    keep = rows != cols
    if seed % 2:  # a forest: bipartite whatever the edges drawn
        keep &= cols < rows
        cols = np.where(keep, rng.integers(0, np.maximum(rows, 1)), cols)
        rows, cols = rows[keep], cols[keep]
        _, first = np.unique(rows, return_index=True)
        rows, cols = rows[first], cols[first]
    else:
        rows, cols = rows[keep], cols[keep]
    adjacency = scipy.sparse.csr_array(
        (np.ones(2 * rows.size, np.int8), (np.r_[rows, cols], np.r_[cols, rows])), shape=(n, n)
    )
    adjacency.sum_duplicates()
    colour = colour_coordinates(adjacency)
    r, c = adjacency.nonzero()
    assert np.all(colour[r] != colour[c])
    assert np.all(np.diff(np.bincount(colour)) <= 0)  # numbered by decreasing class size
    bipartite = nx.is_bipartite(nx.from_scipy_sparse_array(adjacency))
    assert (two_colouring(adjacency) is not None) == bipartite
    if bipartite:
        assert colour.max() + 1 == (2 if adjacency.nnz else 1)


# --- colour-batched exact ratios ----------------------------------------------------------------


# the sums of irregular models (gathers, or a scatter for very uneven degrees) in the slow
# tier; the kernels' own tests run the gathers too
@pytest.mark.parametrize(
    "sums",
    [
        "stencil",
        pytest.param("gather", marks=pytest.mark.slow),
        pytest.param("scatter", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("name", list(MODELS))
def test_coloured_ratios_equal_brute_force(name, sums, x64):
    """``C x M`` evaluations of the terms give the same table as ``N x M`` evaluations of
    ``log pi`` (the dense model through one class per coordinate), whether the changes are
    summed per coordinate by stencil (slices, where the pairs form one), by gathers (padded
    term lists) or by a scatter (the pairs)."""
    target = _target(MODELS[name])
    structure = target.structure
    if sums == "scatter":
        structure = structure._replace(coord_terms=None)
    check_coloured_ratios = coloured_ratios_checker(target, structure, sums == "stencil")

    every_other = coloured_ratios(
        target.log_terms(), structure, np.arange(0, structure.num_coords, 2), sums == "stencil"
    )

    def valid_of(x):
        return np.asarray(target.neighbourhood.valid(x))

    for seed in range(3):
        x = _random_position(target, seed)
        d_brute = check_coloured_ratios(x)
        # the kernels' local function uses them wherever the structure is sparse
        np.testing.assert_allclose(jax.jit(target.local_fn((), {}))(x)[1], d_brute, atol=1e-9)
        # the rows of a subset of the coordinates (the exact sites beside gradient ones)
        _, d_rows = jax.jit(every_other)(x, None, target.neighbourhood.candidates(x), valid_of(x))
        rows = np.arange(0, x.shape[0], 2)
        np.testing.assert_allclose(
            np.where(valid_of(x)[rows], d_rows, -np.inf), d_brute[rows], rtol=1e-9, atol=1e-9
        )


PAIRWISE_MODELS = ["ising", "potts", "mixture", "block"]


@pytest.mark.parametrize("name", list(MODELS))
def test_pair_table_ratios_equal_brute_force(name, x64):
    """Where every term depends on two coordinates at most (lattices, the mixture's unary
    terms, the block model's pairs), the exact ratios read from pair tables equal the
    brute-force ones, for every coordinate and for every other one (the exact sites beside
    gradient ones); a term of three coordinates or a dense one (the factorial HMM's
    emissions, the mixed and dense models) has no tables."""
    target = _target(MODELS[name])
    supports = target.supports
    layout = pair_tables(target.structure, supports.lower, supports.upper)
    assert (layout is not None) == (name in PAIRWISE_MODELS)
    if layout is None:
        return
    log_terms = target.log_terms()
    brute = jax.jit(exact_local_fn(target.log_density(), target.neighbourhood))
    rows = np.arange(0, target.num_coords, 2)

    @jax.jit
    def by_tables(x):
        candidates, valid = target.neighbourhood.candidates(x), target.neighbourhood.valid(x)
        log_p, d = pair_table_ratios(log_terms, layout, None)(x, None, candidates, valid)
        _, d_rows = pair_table_ratios(log_terms, layout, rows)(x, log_p, candidates, valid)
        return log_p, jnp.where(valid, d, -jnp.inf), jnp.where(valid[rows], d_rows, -jnp.inf)

    for seed in range(3):
        x = _random_position(target, seed)
        log_p, d, d_rows = by_tables(x)
        log_p_brute, d_brute = brute(x)
        np.testing.assert_allclose(log_p, log_p_brute, rtol=1e-10)
        np.testing.assert_allclose(d, d_brute, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(d_rows, d_brute[rows], rtol=1e-9, atol=1e-9)


def test_the_local_function_reads_pair_tables_where_they_cost_less(monkeypatch, x64):
    """150 labels that all interact by pairs: ``C x M = 300`` evaluations colour-batched,
    51 states in the tables, which the target's local function then reads (equal to brute
    force)."""
    built = []

    def recorded(*args):
        built.append(args[1])
        return pair_table_ratios(*args)

    monkeypatch.setattr(potential, "pair_table_ratios", recorded)

    def labels():
        z = numpyro.sample("z", dist.Categorical(jnp.ones(3) / 3).expand([150]))
        affinity = jnp.array([[0.5, -0.2, 0.1], [-0.2, 0.4, 0.0], [0.1, 0.0, 0.3]])
        numpyro.factor("pairs", jnp.triu(affinity[z[:, None], z[None, :]], 1))

    target = _target(labels)
    supports = target.supports
    layout = pair_tables(target.structure, supports.lower, supports.upper)
    assert target.num_colours == 150 and layout.num_states == 51
    x = _random_position(target)
    log_p, d = jax.jit(target.local_fn((), {}))(x)
    assert len(built) == 1 and built[0].num_states == 51
    log_p_brute, d_brute = jax.jit(exact_local_fn(target.log_density(), target.neighbourhood))(x)
    np.testing.assert_allclose(log_p, log_p_brute, rtol=1e-10)
    np.testing.assert_allclose(d, d_brute, rtol=1e-9, atol=1e-9)


# --- what "auto" picks --------------------------------------------------------------------------


def change_point_model():
    """A change point used only in a comparison: its gradient is zero everywhere."""
    tau = numpyro.sample("tau", dist.DiscreteUniform(0, 20))
    rate = jnp.where(jnp.arange(20) < tau, 1.0, 4.0)
    numpyro.sample("y", dist.Poisson(rate), obs=jnp.arange(20) % 5)


def dense_bernoulli_model():
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([12]))
    numpyro.factor("all", 0.3 * jnp.sum(x) ** 2)


def gaussian_emission_model():
    """0/1 states seen through a Gaussian: ``log pi`` is quadratic in each of them."""
    z = numpyro.sample("z", dist.Bernoulli(0.3).expand([6]))
    numpyro.sample("y", dist.Normal(2.0 * z, 1.0), obs=jnp.arange(6.0))


@pytest.mark.parametrize(
    "model, expected",
    [
        (ising_model, {"x": "gradient"}),  # affine in each spin: the gradient is exact
        (gaussian_emission_model, {"z": "exact"}),  # cheap (1 colour) and not affine
        (fhmm_model, {"x": "exact"}),  # cheap (<= 6 colours) and not affine
        (mixture_model, {"z": "exact"}),  # categorical
        (dense_bernoulli_model, {"x": "gradient"}),  # dense: N evaluations
        (change_point_model, {"tau": "exact"}),  # a zero gradient is no guide
    ],
)
def test_auto_weights(model, expected):
    assert _target(model, weights="auto").weights_mode == expected


def test_auto_keeps_gradients_where_exact_ratios_cost_many_evaluations():
    def wide_model():
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([12]))
        numpyro.factor("pairs", 0.1 * x[:, None] * x[None, :])  # every pair: 12 colours

    target = _target(wide_model, weights="auto")
    assert target.num_colours == 12
    assert target.weights_mode == {"x": "gradient"}


def test_auto_keeps_gradients_on_a_large_affine_lattice():
    """Tangents accumulate through ``add_any``: an elementwise rule, not a dense one."""

    def lattice():
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([12, 12]))
        s = 2 * x - 1
        numpyro.factor("right", 0.3 * s[:, :-1] * s[:, 1:])
        numpyro.factor("down", 0.3 * s[:-1, :] * s[1:, :])

    target = _target(lattice, weights="auto")
    assert target.num_colours == 2
    assert target.weights_mode == {"x": "gradient"}
