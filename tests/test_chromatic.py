"""ChromaticGibbs: exact transition matrices of a sweep on enumerable spaces (valid and
deliberately wrong colourings), the sampled transitions against them, sampling tests of
numpyro models against enumeration for each site kind, and the kernel inside numpyro's
protocol (LBPGibbs, numpyro's Gibbs, vectorized chains, extra fields, warnings)."""

import itertools

import numpy as np
import pytest

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs
from numpyro.infer.util import log_density

from numpyro_discrete import ChromaticGibbs, ChromaticGibbsState, LBPGibbs, SiteSupport
from numpyro_discrete.core import chromatic, offset_sweep, site_scan, table_sweep
from numpyro_discrete.core import pair_tables as pair_tables_module
from numpyro_discrete.core.neighbourhood import coordinate_neighbourhood
from numpyro_discrete.core.pair_tables import (
    coordinate_tables,
    evaluate_pair_tables,
    pair_tables,
    slot_log_potentials,
)
from numpyro_discrete.kernels.chromatic import WHOLE_SUPPORT_SPAN
from numpyro_discrete.model.target import DiscreteTarget
from numpyro_discrete.structure.stencils import find_stencil

from helpers import (
    assert_invariant_and_irreducible,
    assert_irreducible,
    assert_mean_within_mcse,
    assert_step_draws_from,
    chi_square_rows,
    chromatic_class_matrix,
    chromatic_sweep_matrix,
    enumerate_model,
    sampled_sweep_counts,
    site_scan_matrix,
    target_distribution,
)

# --- exact sweep matrices -----------------------------------------------------------------------

COUPLINGS = np.array([0.9, -1.2, 0.7, 1.1])
FIELDS = np.array([0.3, -0.4, 0.8, -0.1])


def cycle_potential(z):
    """Four binary spins on a cycle: their terms (fields and one term per edge)."""
    s = 2.0 * z["x"] - 1.0
    return -jnp.concatenate([FIELDS * s, COUPLINGS * s * jnp.roll(s, 1)])


def mixed_potential(z):
    """A binary, a categorical (3) and two ordinal (0..3) coordinates in shared terms."""
    b, c, n = z["b"], z["c"], z["n"]
    table = jnp.array([[0.2, -0.5, 0.9], [-0.3, 0.6, 0.1]])
    return -jnp.stack(
        [
            table[b[0], c[0]],
            0.4 * n[0] * (c[0] == 1) - 0.3 * (n[0] - 2.0) ** 2,
            -0.5 * (n[1] - n[0]) ** 2 + 0.2 * n[1] * b[0],
        ]
    )


MIXED_SUPPORTS = {
    "b": SiteSupport.binary(),
    "c": SiteSupport.categorical(3),
    "n": SiteSupport.ordinal(0, 3),
}
MIXED_INIT = {
    "b": jnp.zeros(1, jnp.int32),
    "c": jnp.zeros(1, jnp.int32),
    "n": jnp.ones(2, jnp.int32),
}


def pairwise_potential(z):
    """A binary, a categorical (3) and two ordinal (1..3) coordinates, each term of at most
    two of them (one of none): a model the pair tables take."""
    b, c, n = z["b"], z["c"], z["n"]
    table = jnp.array([[0.2, -0.5, 0.9], [-0.3, 0.6, 0.1]])
    return -jnp.stack(
        [
            table[b[0], c[0]],
            0.4 * n[0] * (c[0] == 1),
            -0.3 * (n[0] - 2.5) ** 2,
            -0.5 * (n[1] - n[0]) ** 2,
            0.2 * n[1] * b[0],
            jnp.asarray(0.7),
        ]
    )


PAIRWISE_SUPPORTS = dict(MIXED_SUPPORTS, n=SiteSupport.ordinal(1, 3))


def _space(name):
    if name == "binary":
        target = DiscreteTarget.from_potential(cycle_potential, {"x": jnp.zeros(4, jnp.int32)})
        values = [range(2)] * 4
    elif name == "pairwise":
        target = DiscreteTarget.from_potential(
            pairwise_potential, MIXED_INIT, supports=PAIRWISE_SUPPORTS
        )
        values = [range(2), range(3), range(1, 4), range(1, 4)]
    else:
        target = DiscreteTarget.from_potential(mixed_potential, MIXED_INIT, supports=MIXED_SUPPORTS)
        values = [range(2), range(3), range(4), range(4)]
    states = np.array(list(itertools.product(*values)), np.int32)
    return target, states


@pytest.mark.parametrize("space", ["binary", "mixed"])
@pytest.mark.parametrize("colouring", ["detected", "one class", "wrong"])
def test_sweep_leaves_the_target_invariant(space, colouring, x64):
    """``pi T = pi`` to 1e-10 for the detected colouring, for one class holding every
    coordinate and for a colouring that puts neighbours together (the MH correction keeps
    those exact); with the detected one, every class move is accepted."""
    target, states = _space(space)
    structure = target.structure
    if colouring == "one class":
        structure = structure._replace(colour=np.zeros_like(structure.colour), num_colours=1)
    elif colouring == "wrong":
        colour = np.arange(structure.num_coords) % 2
        colour[:2] = 0  # coordinates 0 and 1 share terms in both spaces
        structure = structure._replace(colour=colour.astype(np.int32), num_colours=2)
    pi = target_distribution(target, states)
    matrix = chromatic_sweep_matrix(target, structure, states)
    assert_invariant_and_irreducible(matrix, pi)
    if colouring == "detected":
        # a valid colouring: each class move is its exact conditional, always accepted
        for c in range(structure.num_colours):
            class_matrix = chromatic_class_matrix(target, structure, states, c)
            flow = pi[:, None] * class_matrix
            np.testing.assert_allclose(flow, flow.T, atol=1e-12)


@pytest.mark.parametrize("space", ["binary", "mixed"])
@pytest.mark.parametrize("by_stencil", [True, False])
def test_sampled_sweeps_follow_the_exact_matrix(space, by_stencil, x64):
    """Transitions counted from the jitted sweep match the rows of the exact matrix
    (chi-square), for a colouring with a wrong class too, with sums by stencil (these
    spaces' pairs form one) and by gathers (irregular models)."""
    target, states = _space(space)
    structure = target.structure
    colour = structure.colour.copy()
    colour[:2] = 0
    structure = structure._replace(colour=colour, num_colours=int(colour.max()) + 1)
    matrix = chromatic_sweep_matrix(target, structure, states)
    sweep = chromatic.build_kernel(target.neighbourhood, structure, by_stencil=by_stencil)
    assert chi_square_rows(sampled_sweep_counts(sweep, target, states, 3), matrix) > 1e-3


def _colouring(structure, colouring):
    if colouring == "wrong":
        colour = np.arange(structure.num_coords) % 3
        colour[:2] = 0
        return structure._replace(colour=colour.astype(np.int32), num_colours=3)
    if colouring == "one class":
        return structure._replace(colour=np.zeros_like(structure.colour), num_colours=1)
    return structure


@pytest.mark.parametrize("space", ["binary", "mixed"])
@pytest.mark.parametrize("mh_test, coordinate_test", [(True, False), (True, True), (False, False)])
@pytest.mark.parametrize("colouring", ["detected", "wrong"])
def test_unrolled_sweep_draws_what_the_loop_draws(space, mh_test, coordinate_test, colouring):
    """A sweep over few classes runs unrolled, each class with constant members; it must
    draw exactly the states of the loop over classes (the definition, with padded members),
    from every state, with every test the kernel can run and with a wrong colouring."""
    target, states = _space(space)
    structure = _colouring(target.structure, colouring)
    log_terms = target.log_terms()
    keys = random.split(random.key(7), 50)

    def chain_ends(max_unrolled_classes):
        sweep = chromatic.build_kernel(
            target.neighbourhood,
            structure,
            mh_test=mh_test,
            coordinate_test=coordinate_test,
            max_unrolled_classes=max_unrolled_classes,
            by_stencil=False,
        )

        @jax.jit
        def run(x):
            def step(state, key):
                state, info = sweep(key, state, log_terms)
                return state, (state.position, info.accept_prob, info.num_changed)

            return jax.lax.scan(step, chromatic.init(x, log_terms), keys)[1]

        return [np.asarray(a) for a in jax.vmap(run)(jnp.asarray(states))]

    looped, unrolled = chain_ends(0), chain_ends(structure.num_colours)
    np.testing.assert_array_equal(unrolled[0], looped[0])
    np.testing.assert_array_equal(unrolled[2], looped[2])
    np.testing.assert_allclose(unrolled[1], looped[1], rtol=1e-6)


@pytest.mark.parametrize("space", ["binary", "mixed"])
@pytest.mark.parametrize("colouring", ["detected", "one class", "wrong"])
def test_stencil_conditionals_are_the_gathered_ones(space, colouring, x64):
    """With a stencil, a class computes every coordinate's conditional by slices; its
    members' rows must be the conditionals of the definition (gathers at the members), and
    every other coordinate can only stay, at every state and in every class."""
    target, states = _space(space)
    structure = _colouring(target.structure, colouring)
    stencil = find_stencil(
        structure.pair_terms, structure.pair_coords, structure.num_terms, structure.num_coords
    )
    assert stencil is not None
    log_terms = target.log_terms()
    order, starts, sizes, _ = chromatic.class_members(structure)

    @jax.jit
    def both(x, in_class, members):
        terms = log_terms(x)
        args = (log_terms, structure, target.neighbourhood, x, terms, in_class)
        return (
            chromatic.class_logits(*args, members),
            chromatic.class_logits(*args, None, stencil),
        )

    for c in range(structure.num_colours):
        in_class = structure.colour == c
        members = order[starts[c] : starts[c] + sizes[c]]
        for x in states:
            (values, logits), (all_values, all_logits) = both(
                jnp.asarray(x), jnp.asarray(in_class), jnp.asarray(members)
            )
            np.testing.assert_array_equal(all_values[members], values)
            np.testing.assert_allclose(all_logits[members], logits, rtol=1e-9, atol=1e-9)
            others = np.asarray(all_logits)[~in_class]
            assert np.all(others[:, 0] == 0.0) and np.all(others[:, 1:] == -np.inf)


@pytest.mark.parametrize("space", ["binary", "mixed"])
@pytest.mark.parametrize(
    "mh_test, coordinate_test, colouring",
    [
        (True, False, "detected"),
        (True, True, "detected"),
        (False, False, "detected"),
    ],
)
def test_stencil_sweep_follows_the_exact_matrix(space, mh_test, coordinate_test, colouring, x64):
    """The compiled sweep with sums by stencil (one uniform per coordinate per sweep)
    draws from the exact matrix of the definition, with every test the kernel runs (a
    wrong colouring: `test_sampled_sweeps_follow_the_exact_matrix`, also by stencil)."""
    target, states = _space(space)
    structure = _colouring(target.structure, colouring)
    matrix = chromatic_sweep_matrix(target, structure, states, mh_test, coordinate_test)
    sweep = chromatic.build_kernel(
        target.neighbourhood, structure, mh_test=mh_test, coordinate_test=coordinate_test
    )
    assert chi_square_rows(sampled_sweep_counts(sweep, target, states, 5), matrix) > 1e-3


def _whole_supports(target):
    """The neighbourhood ChromaticGibbs runs: these spaces' ordinal coordinates (0..3)
    enumerated whole."""
    return coordinate_neighbourhood(target.supports, whole_support_span=WHOLE_SUPPORT_SPAN)


@pytest.mark.parametrize("space", ["binary", "mixed"])
def test_site_scan_draws_exact_conditionals(space, x64):
    """A sweep whose classes are single coordinates is a systematic scan: each visit's
    matrix is the coordinate's exact conditional (``pi`` on the states that differ from
    the current one at that coordinate only, to 1e-10), whatever the detected structure;
    the sweep leaves ``pi`` invariant, and the jitted kernel's transitions match the
    matrix (chi-square)."""
    target, states = _space(space)
    neighbourhood = _whole_supports(target)
    pi = target_distribution(target, states)
    order = np.array([2, 0, 3, 1])
    for j in range(states.shape[1]):
        np.testing.assert_allclose(
            site_scan_matrix(target, neighbourhood, states, [j]),
            _conditional_matrix(states, pi, j),
            atol=1e-10,
        )
    matrix = site_scan_matrix(target, neighbourhood, states, order)
    assert_invariant_and_irreducible(matrix, pi)
    sweep = site_scan.build_kernel(neighbourhood, order)
    assert chi_square_rows(sampled_sweep_counts(sweep, target, states, 5), matrix) > 1e-3


def _conditional_matrix(states, pi, j):
    """The exact Gibbs move of coordinate `j`: ``pi`` on the states equal elsewhere."""
    same_elsewhere = np.all(np.delete(states, j, 1)[:, None] == np.delete(states, j, 1), -1)
    definition = np.where(same_elsewhere, pi[None, :], 0.0)
    return definition / definition.sum(1, keepdims=True)


@pytest.mark.parametrize("space", ["binary", "pairwise"])
@pytest.mark.parametrize("classes", ["detected", "looped", "one per coordinate"])
def test_table_sweep_draws_exact_conditionals(space, classes, x64):
    """The sweep by pair tables, on binary coordinates (log-odds) and on a binary, a
    categorical and two ordinal (1..3) coordinates with a constant term (tables of ``S =
    3`` slots): each coordinate's conditional (:func:`table_sweep.class_logits`, what the
    kernel draws from) equals the exact one to 1e-10 at every state, and the jitted
    sweep's transitions match the product of the exact moves of its classes' coordinates
    (chi-square), for the detected colouring unrolled and looped, and for one class per
    coordinate (a systematic scan)."""
    target, states = _space(space)
    structure = target.structure
    if classes == "one per coordinate":
        colour = np.array([2, 0, 3, 1], np.int32)
        structure = structure._replace(colour=colour, num_colours=4)
    supports = target.supports
    layout = pair_tables(structure, supports.lower, supports.upper)
    log_terms = target.log_terms()
    values = table_sweep.sweep_tables(layout, log_terms)
    pi = target_distribution(target, states)
    logits = jax.jit(lambda x: table_sweep.class_logits(layout, values, x, np.arange(4)))
    for i, state in enumerate(states):
        conditionals = np.asarray(jax.nn.softmax(logits(jnp.asarray(state)), axis=-1))
        for j in range(4):
            exact = _conditional_matrix(states, pi, j)[i]
            slots = states[:, j] - supports.lower[j]
            expected = np.bincount(slots, weights=exact, minlength=layout.num_slots)
            np.testing.assert_allclose(conditionals[j], expected, atol=1e-10)
    order = chromatic.class_members(structure)[0][: structure.num_coords]
    matrix = site_scan_matrix(target, _whole_supports(target), states, order)
    assert_invariant_and_irreducible(matrix, pi)
    kernel = table_sweep.build_kernel(
        layout, structure, max_unrolled_classes=0 if classes == "looped" else 8
    )

    def sweep(key, state, log_terms):
        tables = table_sweep.SweepTables(table_sweep.sweep_tables(layout, log_terms), log_terms)
        return kernel(key, state, tables)

    assert chi_square_rows(sampled_sweep_counts(sweep, target, states, 5), matrix) > 1e-3


def test_pair_tables_only_where_every_term_has_two_coordinates_at_most():
    """The pair tables refuse a term of three coordinates and an unproven structure. A
    discrete-only model reads them, filled once for the run (four spins that all interact);
    with a continuous site moving, the same model's scan reads ``log pi`` (the tables would
    take 6 evaluations a sweep against 4)."""
    mixed, _ = _space("mixed")
    assert pair_tables(mixed.structure, mixed.supports.lower, mixed.supports.upper) is None
    cycle, _ = _space("binary")
    bounds = (cycle.supports.lower, cycle.supports.upper)
    assert pair_tables(cycle.structure, *bounds) is not None
    assert pair_tables(cycle.structure._replace(exact=False), *bounds) is None
    # no pairs at all (a constant term): every coordinate's log-potentials are 0
    constant = DiscreteTarget.from_potential(lambda z: jnp.zeros(()), {"x": jnp.zeros(3, int)})
    layout = pair_tables(constant.structure, np.zeros(3), np.ones(3))
    tables = coordinate_tables(layout, evaluate_pair_tables(layout, constant.log_terms(), int))
    potentials = slot_log_potentials(layout, tables, jnp.zeros(3, int), np.arange(3))
    np.testing.assert_array_equal(potentials, np.zeros((3, 2)))

    def four_spins(scale=None):
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([4]))
        coupling = 0.3 if scale is None else numpyro.sample("scale", dist.Normal(0.3, 0.1))
        numpyro.factor("pairs", coupling * jnp.triu(x[:, None] * x[None, :], 1))

    kernel = ChromaticGibbs(four_spins)
    MCMC(kernel, num_warmup=5, num_samples=5, progress_bar=False).run(random.key(0))
    assert kernel.num_colours == 4 and kernel.by_pair_tables
    mixed = LBPGibbs(NUTS(four_spins), discrete_kernel=ChromaticGibbs(four_spins))
    MCMC(mixed, num_warmup=5, num_samples=5, progress_bar=False).run(random.key(0), 1.0)
    discrete = mixed.discrete_kernel
    assert discrete.num_colours == 4 and not discrete.by_pair_tables


@pytest.mark.parametrize(
    "chain_method",
    ["sequential", "vectorized", pytest.param("parallel", marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("model_name", ["binary lattice", "categorical chain"])
@pytest.mark.parametrize("by_offsets", [True, False])
def test_table_sweep_carries_log_pi_forward_exactly(
    model_name, by_offsets, chain_method, monkeypatch, x64
):
    """The sweep by tables carries ``log pi`` forward by its draws' changes and evaluates it
    from the terms every ``EXACT_LOG_DENSITY_EVERY`` sweeps: after every sweep (carried or
    evaluated), the state's potential energy is ``-log pi`` of its draw, as numpyro computes
    it, on binary coordinates (log-odds) and on categorical ones (tables of 3 slots), with
    the tables summed by offset (what ``ChromaticGibbs`` runs on these models) and gathered
    (with no offsets allowed)."""
    if not by_offsets:
        monkeypatch.setattr(offset_sweep, "MAX_OFFSETS", 0)
    model = lattice_model if model_name == "binary lattice" else categorical_chain_model
    kernel = ChromaticGibbs(model)
    mcmc = MCMC(
        kernel,
        num_warmup=5,
        num_samples=2 * table_sweep.EXACT_LOG_DENSITY_EVERY + 7,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(3), extra_fields=("potential_energy", "num_changed"))
    assert kernel.by_pair_tables and kernel.by_offsets == by_offsets
    draws = mcmc.get_samples()
    energies = np.asarray(mcmc.get_extra_fields()["potential_energy"])
    # numpyro's log density of every draw, as one compiled program (op by op, each draw's
    # evaluation dispatched the model's operations one at a time)
    exact = jax.jit(jax.vmap(lambda values: log_density(model, (), {}, values)[0]))(draws)
    assert np.asarray(mcmc.get_extra_fields()["num_changed"]).sum() > 20
    np.testing.assert_allclose(-energies, exact, rtol=0, atol=1e-10)


def test_table_sweep_evaluates_log_pi_where_the_carried_one_is_not_finite(x64):
    """From a state of probability zero (``log pi = -inf``, which ``init`` refuses but the
    core sweep accepts), the carried value is not finite: the sweep evaluates the new
    ``log pi`` from the terms, even where the caller did not ask for it."""

    def forbidding(z):  # a chain of three binary values, no two neighbours both off
        x = z["x"]
        both_off = (x[:-1] == 0) & (x[1:] == 0)
        return -jnp.where(both_off, -jnp.inf, 0.4 * x[:-1] + 0.7 * x[:-1] * x[1:])

    target = DiscreteTarget.from_potential(forbidding, {"x": jnp.ones(3, jnp.int32)})
    supports = target.supports
    layout = pair_tables(target.structure, supports.lower, supports.upper)
    log_terms = target.log_terms()
    kernel = table_sweep.build_kernel(layout, target.structure)
    values = table_sweep.sweep_tables(layout, log_terms)
    sweep = jax.jit(
        lambda key, state: kernel(key, state, table_sweep.SweepTables(values, log_terms, False))
    )
    state = chromatic.init(jnp.zeros(3, jnp.int32), log_terms)
    assert np.isneginf(float(state.log_density))
    for key in random.split(random.key(0), 5):
        state, _ = sweep(key, state)
        expected = float(jnp.sum(log_terms(state.position)))
        assert np.isfinite(expected)
        np.testing.assert_allclose(float(state.log_density), expected, atol=1e-12)


def test_site_scan_leaves_a_state_of_probability_zero(x64):
    """From a state of probability zero (a start outside the support of a factor), the scan
    draws each coordinate among its valid options: the row of that state is a distribution
    on states of positive probability, no NaN."""

    def forbidding(z):
        x = z["x"]
        both_off = (x[0] == 0) & (x[1] == 0)
        return -jnp.stack([jnp.where(both_off, -jnp.inf, 0.4 * x[0]), 0.7 * x[0] * x[1]])

    target = DiscreteTarget.from_potential(forbidding, {"x": jnp.ones(2, jnp.int32)})
    states = np.array(list(itertools.product(range(2), repeat=2)), np.int32)
    matrix = site_scan_matrix(target, target.neighbourhood, states, [0, 1])
    pi = target_distribution(target, states)
    assert pi[0] == 0.0 and np.all(np.isfinite(matrix))
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
    assert np.all(matrix[:, 0] == 0.0)
    np.testing.assert_allclose(pi @ matrix, pi, atol=1e-12)


def test_a_kernel_of_single_coordinate_classes_runs_the_site_scan():
    """Where every class is one coordinate with its whole support as options,
    ``ChromaticGibbs`` takes every draw untested (``mh_test`` is ``False``), whether or not
    the structure is proven; an ordinal window keeps the test."""

    def dense_potential(z):
        # one term reads every coordinate: four classes of one
        coupling = 0.3 * jnp.sin(z["b"][0] + 2.0 * z["c"][0] - z["n"][0] * z["n"][1])
        return jnp.concatenate([mixed_potential(z), -coupling[None]])

    for window, tested in [(None, False), (1, True)]:
        kernel = ChromaticGibbs(
            potential_fn=dense_potential, supports=MIXED_SUPPORTS, ordinal_window=window
        )
        with pytest.warns(UserWarning, match="interacts with every other"):
            kernel.init(random.key(0), 0, MIXED_INIT, (), {})
        assert kernel.num_colours == 4 and kernel.mh_test is tested


def test_coordinate_tests_of_a_valid_colouring(x64):
    """A valid colouring of ordinal windows, each coordinate of a class tested on its own
    (what ``ChromaticGibbs`` runs on a proven structure with ordinal sites): ``pi T = pi``
    to 1e-10, irreducible, and the jitted sweep draws from that matrix (chi-square)."""
    target, states = _space("mixed")
    structure = target.structure
    pi = target_distribution(target, states)
    matrix = chromatic_sweep_matrix(target, structure, states, coordinate_test=True)
    assert_invariant_and_irreducible(matrix, pi)
    sweep = chromatic.build_kernel(target.neighbourhood, structure, coordinate_test=True)
    assert chi_square_rows(sampled_sweep_counts(sweep, target, states, 4), matrix) > 1e-3


# --- sampling numpyro models ------------------------------------------------------------------


def lattice_model():
    x = numpyro.sample("x", dist.Bernoulli(0.4).expand([3, 3]))
    s = 2.0 * x - 1.0
    numpyro.factor("right", 0.5 * s[:, :-1] * s[:, 1:])
    numpyro.factor("down", -0.3 * s[:-1, :] * s[1:, :])


def categorical_chain_model():
    z = numpyro.sample("z", dist.Categorical(jnp.array([0.5, 0.3, 0.2])).expand([5]))
    numpyro.factor("agree", 0.8 * (z[:-1] == z[1:]))
    numpyro.sample("y", dist.Normal(jnp.array([-1.0, 0.0, 1.5])[z], 1.0), obs=jnp.arange(5.0) / 3)


def ordinal_chain_model():
    n = numpyro.sample("n", dist.Binomial(6, 0.3).expand([4]))
    numpyro.factor("smooth", -0.3 * (n[:-1] - n[1:]) ** 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, sites, ordinal_window",
    [
        (lattice_model, {"x": ((3, 3), range(2))}, 1),
        (categorical_chain_model, {"z": ((5,), range(3))}, 1),
        (ordinal_chain_model, {"n": ((4,), range(7))}, 2),
    ],
    ids=["binary", "categorical", "ordinal"],
)
def test_posterior_means_match_enumeration(model, sites, ordinal_window):
    """Means of every coordinate within 4 Monte Carlo standard errors of the enumerated
    posterior (2 chains x 4000 sweeps, fixed seed)."""
    states, pi = enumerate_model(model, (), sites)
    kernel = ChromaticGibbs(model, ordinal_window=ordinal_window)
    mcmc = MCMC(
        kernel,
        num_warmup=200,
        num_samples=4000,
        num_chains=2,
        progress_bar=False,
        chain_method="vectorized",
    )
    mcmc.run(random.key(0), extra_fields=("accept_prob",))
    name = next(iter(sites))
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)[name]).reshape(2, 4000, -1)
    assert_mean_within_mcse(draws, pi @ states, what=name)
    accept_prob = mcmc.get_extra_fields()["accept_prob"]
    if name == "n":
        # a window is not the whole conditional: the correction rejects now and then
        assert 0.8 < float(np.mean(accept_prob)) < 1.0
    else:
        # the detected colourings are valid: every class move is accepted (float32)
        np.testing.assert_allclose(accept_prob, 1.0, atol=1e-5)


def small_ordinal_model():
    n = numpyro.sample("n", dist.Binomial(3, 0.4).expand([3]))
    numpyro.factor("smooth", -0.5 * (n[:-1] - n[1:]) ** 2)
    numpyro.sample("d", dist.DiscreteUniform(0, 2 * WHOLE_SUPPORT_SPAN))


def test_small_ordinal_supports_are_drawn_whole(x64):
    """Without an ``ordinal_window``, a bounded ordinal coordinate of span at most
    ``WHOLE_SUPPORT_SPAN`` has every other value of its support as candidates, so its draw
    is its exact conditional: where every ordinal support is that small, the sweep takes
    every draw, its matrix equals the tested sweep's to 1e-10, leaves the posterior
    invariant and the compiled step draws from it; a wider support keeps its windows and
    the test, and so does a given window."""
    kernel = ChromaticGibbs(small_ordinal_model)
    jax.jit(lambda key: kernel.init(key, 0, None, (), {}))(random.key(0))
    target = kernel._target
    x = jnp.array([1, 0, 3, 57])
    candidates, valid = target.neighbourhood.candidates(x), target.neighbourhood.valid(x)
    assert sorted(np.asarray(candidates[0][valid[0]]).tolist()) == [0, 2, 3]
    assert sorted(np.asarray(candidates[2][valid[2]]).tolist()) == [0, 1, 2]
    assert 57 not in np.asarray(candidates[3][valid[3]]) and valid[3].sum() < 2 * 100
    assert kernel.mh_test  # the wide DiscreteUniform keeps its windows and the test

    def model():
        n = numpyro.sample("n", dist.Binomial(3, 0.4).expand([3]))
        numpyro.factor("smooth", -0.5 * (n[:-1] - n[1:]) ** 2)

    kernel = ChromaticGibbs(model)
    jax.jit(lambda key: kernel.init(key, 0, None, (), {}))(random.key(0))
    target = kernel._target
    assert not kernel.mh_test
    states = np.array(list(itertools.product(range(4), repeat=3)), np.int32)
    pi = target_distribution(target, states)
    matrix = chromatic_sweep_matrix(target, target.structure, states, mh_test=False)
    tested = chromatic_sweep_matrix(target, target.structure, states)
    np.testing.assert_allclose(matrix, tested, atol=1e-10)
    np.testing.assert_allclose(pi @ matrix, pi, atol=1e-10)
    assert_irreducible(matrix)
    assert_step_draws_from(matrix, kernel, target, states, 1)
    windowed = ChromaticGibbs(model, ordinal_window=1)
    jax.jit(lambda key: windowed.init(key, 0, None, (), {}))(random.key(0))
    assert windowed.mh_test


def beta_lattice_model(y):
    """A continuous probability shared by a chain of binary states observed with noise."""
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    x = numpyro.sample("x", dist.Bernoulli(p).expand([4]))
    numpyro.factor("chain", 0.6 * (x[:-1] == x[1:]))
    numpyro.sample("y", dist.Normal(x, 0.6), obs=y)


Y_CHAIN = jnp.array([0.1, 0.9, 1.2, -0.2])


def _beta_lattice_moments():
    """E[p] and E[x] by enumerating x and integrating p on a fine grid."""
    grid = np.linspace(1e-4, 1 - 1e-4, 4001)
    states = np.array(list(itertools.product(range(2), repeat=4)))
    ones = states.sum(1)
    agree = (states[:, :-1] == states[:, 1:]).sum(1)
    y = np.asarray(Y_CHAIN)
    log_lik = -0.5 * (((y - states) / 0.6) ** 2).sum(1) + 0.6 * agree
    log_w = (
        np.log(grid)[None] * (1 + ones[:, None])
        + np.log1p(-grid)[None] * (1 + 4 - ones[:, None])
        + log_lik[:, None]
    )
    w = np.exp(log_w - log_w.max())
    return (w.sum(0) * grid).sum() / w.sum(), (w.sum(1) @ states) / w.sum()


@pytest.mark.slow
@pytest.mark.parametrize("composite", ["LBPGibbs", "Gibbs"])
def test_as_the_discrete_block_of_a_mixed_model(composite):
    """Beside NUTS, through LBPGibbs and as a block of numpyro's Gibbs: posterior means of
    ``p`` and ``x`` within 4 Monte Carlo standard errors of quadrature."""
    if composite == "LBPGibbs":
        kernel = LBPGibbs(
            NUTS(beta_lattice_model), discrete_kernel=ChromaticGibbs(beta_lattice_model)
        )
    else:
        kernel = Gibbs(
            [(ChromaticGibbs(beta_lattice_model), ["x"]), (NUTS(beta_lattice_model), None)]
        )
    mcmc = MCMC(kernel, num_warmup=500, num_samples=3000, num_chains=2, progress_bar=False)
    mcmc.run(random.key(1), Y_CHAIN)
    samples = mcmc.get_samples(group_by_chain=True)
    mean_p, mean_x = _beta_lattice_moments()
    assert_mean_within_mcse(samples["p"], mean_p, what="p")
    assert_mean_within_mcse(samples["x"], mean_x, what="x")


@pytest.mark.slow
def test_as_the_discrete_block_of_lbp_gibbs_in_parallel_chains():
    """Under ``pmap`` numpyro's Gibbs initialises the blocks inside the trace: the sweep's
    class tables must be constants, not tracers leaked into the later step traces."""
    kernel = LBPGibbs(NUTS(beta_lattice_model), discrete_kernel=ChromaticGibbs(beta_lattice_model))
    mcmc = MCMC(kernel, num_warmup=20, num_samples=20, num_chains=2, chain_method="parallel",
                progress_bar=False)  # fmt: skip
    mcmc.run(random.key(1), Y_CHAIN)
    x = np.asarray(mcmc.get_samples()["x"])
    assert x.shape[0] == 40 and set(np.unique(x)) <= {0, 1}


# --- the numpyro protocol -----------------------------------------------------------------------


def test_state_extra_fields_and_diagnostics():
    kernel = ChromaticGibbs(lattice_model)
    assert kernel.num_colours is None
    state = kernel.init(random.key(0), 10, None, (), None)
    assert isinstance(state, ChromaticGibbsState)
    assert kernel.num_colours == 2
    assert kernel.get_diagnostics_str(state) == "acc. prob=0.00, 2 colours"
    mcmc = MCMC(kernel, num_warmup=10, num_samples=20, progress_bar=False)
    mcmc.run(random.key(0), extra_fields=("accept_prob", "num_changed", "potential_energy"))
    extra = mcmc.get_extra_fields()
    assert extra["num_changed"].shape == (20,)
    assert mcmc.get_samples()["x"].dtype.kind == "i"


def test_potential_fn_with_terms():
    """A potential returning its terms (an array) exposes its structure."""
    kernel = ChromaticGibbs(potential_fn=cycle_potential)
    mcmc = MCMC(kernel, num_warmup=10, num_samples=10, progress_bar=False)
    mcmc.run(random.key(0), init_params={"x": jnp.zeros(4, jnp.int32)})
    assert kernel.num_colours == 2


@pytest.mark.parametrize(
    "chain_method",
    ["sequential", *(pytest.param(m, marks=pytest.mark.slow) for m in ["vectorized", "parallel"])],
)
def test_a_dense_model_warns_and_stays_exact(chain_method):
    """A dense model (one class per coordinate: the systematic scan) samples its
    enumerated posterior under every chain method."""

    def dense_model():
        x = numpyro.sample("x", dist.Bernoulli(0.3).expand([3]))
        numpyro.factor("all", 0.5 * jnp.sum(x) ** 2)

    states, pi = enumerate_model(dense_model, (), {"x": ((3,), range(2))})
    kernel = ChromaticGibbs(dense_model)
    mcmc = MCMC(
        kernel,
        num_warmup=100,
        num_samples=4000,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    with pytest.warns(UserWarning, match="interacts with every other"):
        mcmc.run(random.key(2))
    assert kernel.num_colours == 3 and not kernel.mh_test
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["x"])
    assert_mean_within_mcse(draws, pi @ states)


BOLTZMANN_COUPLINGS = np.triu(np.random.default_rng(3).normal(0.0, 0.35, (12, 12)), 1)


def boltzmann_model():
    """A fully connected Boltzmann machine on 12 spins, one factor term per pair."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([12]))
    s = 2.0 * x - 1.0
    numpyro.factor("pairs", BOLTZMANN_COUPLINGS * s[:, None] * s[None, :])


@pytest.mark.parametrize(
    "chain_method",
    ["sequential", *(pytest.param(m, marks=pytest.mark.slow) for m in ["vectorized", "parallel"])],
)
def test_a_pairwise_dense_model_scans_by_pair_tables(chain_method):
    """Every pair of the 12 spins shares a term (12 classes of one): ``ChromaticGibbs``
    reads each conditional from pair tables (10 evaluations of the terms a sweep, against
    12 for the scan by ``log pi``) and samples the enumerated posterior's means and
    pairwise products (4 MCSE) under every chain method."""
    sites = {"x": ((12,), range(2))}
    states, pi = enumerate_model(boltzmann_model, (), sites)
    kernel = ChromaticGibbs(boltzmann_model)
    mcmc = MCMC(
        kernel,
        num_warmup=100,
        num_samples=3000,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(5))
    assert kernel.num_colours == 12 and kernel.by_pair_tables and not kernel.mh_test
    draws = np.asarray(mcmc.get_samples(group_by_chain=True)["x"], np.float64)
    assert_mean_within_mcse(draws, pi @ states)
    first, second = np.triu_indices(12, 1)
    pairs = draws[..., first] * draws[..., second]
    exact = np.einsum("s,si,sj->ij", pi, states, states)[first, second]
    assert_mean_within_mcse(pairs, exact, what="pairwise products")


@pytest.mark.parametrize("chain_method", ["parallel", "vectorized"])
def test_structure_is_read_under_every_chain_method(chain_method):
    """Under ``pmap`` and ``vmap`` numpyro initialises chains inside a trace; the structure
    is still read (at a concrete draw) and the same for every chain."""
    kernel = ChromaticGibbs(lattice_model)
    mcmc = MCMC(
        kernel,
        num_warmup=10,
        num_samples=10,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(0))
    assert kernel.num_colours == 2
    assert mcmc.get_samples()["x"].shape == (20, 3, 3)


def graph_model(neighbours):
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([4]))
    numpyro.factor("edges", 0.5 * x[:, None] * x[neighbours])


def test_traced_indices_fall_back_to_one_class_per_coordinate_with_a_warning():
    """When indices come from traced model arguments (``jit`` over the data), nothing can
    be read: the kernel says so and moves one coordinate per class, still exact."""
    neighbours = jnp.array([[1, 3], [0, 2], [1, 3], [0, 2]])
    seen = []

    @jax.jit
    def build(neighbours):
        target = DiscreteTarget.from_model(graph_model, random.key(0), (neighbours,), {})
        seen.append((target.num_colours, target.structure_note))
        return neighbours

    build(neighbours)
    assert seen[0][0] == 4 and "traced" in seen[0][1]
    kernel = ChromaticGibbs(graph_model)
    with pytest.warns(UserWarning, match="could not detect the structure"):
        jax.jit(lambda nb: kernel.init(random.key(0), 10, None, (nb,), None))(neighbours)
    assert kernel.num_colours == 4


BOLTZMANN_DATA = np.random.default_rng(4).normal(0.0, 1.0, 12) + np.resize([1.0, -1.0], 12)


def boltzmann_regression_model(y):
    """:func:`boltzmann_model` whose spins are seen through ``y_i ~ N(mu s_i, 1)``,
    ``mu ~ N(1, 0.5)``."""
    mu = numpyro.sample("mu", dist.Normal(1.0, 0.5))
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([12]))
    s = 2.0 * x - 1.0
    numpyro.factor("pairs", BOLTZMANN_COUPLINGS * s[:, None] * s[None, :])
    numpyro.sample("y", dist.Normal(mu * s, 1.0), obs=y)


@pytest.mark.parametrize(
    "chain_method",
    ["sequential", *(pytest.param(m, marks=pytest.mark.slow) for m in ["vectorized", "parallel"])],
)
def test_pair_tables_follow_the_continuous_sites_of_a_mixed_model(chain_method):
    """Beside NUTS, the tables of the Boltzmann machine's terms change with ``mu``:
    ``ChromaticGibbs`` fills them every sweep (10 evaluations against 12 for the scan by
    ``log pi``), never once for the run, and the spins' means and ``mu``'s match the exact
    posterior (4 MCSE; ``mu`` integrated on a grid of 2000 points against the 4096 states
    enumerated)."""
    states = np.array(list(itertools.product(range(2), repeat=12)), np.float64)
    s = 2.0 * states - 1.0
    energy = np.einsum("ij,si,sj->s", BOLTZMANN_COUPLINGS, s, s)
    grid = np.linspace(-3.0, 5.0, 2000)  # +-8 prior standard deviations
    residuals = BOLTZMANN_DATA[None, None, :] - grid[:, None, None] * s[None]
    log_joint = (
        energy[None, :] - 0.5 * np.sum(residuals**2, -1) - 0.5 * ((grid[:, None] - 1.0) / 0.5) ** 2
    )
    weights = np.exp(log_joint - log_joint.max())  # (grid, states)
    weights /= weights.sum()
    exact_x, exact_mu = weights.sum(0) @ states, weights.sum(1) @ grid

    model = boltzmann_regression_model
    kernel = LBPGibbs(NUTS(model), discrete_kernel=ChromaticGibbs(model))
    mcmc = MCMC(
        kernel,
        num_warmup=300,
        num_samples=2000,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    mcmc.run(random.key(6), jnp.asarray(BOLTZMANN_DATA))
    assert kernel.discrete_kernel.by_pair_tables
    samples = mcmc.get_samples(group_by_chain=True)
    assert_mean_within_mcse(np.asarray(samples["x"], np.float64), exact_x)
    assert_mean_within_mcse(np.asarray(samples["mu"], np.float64), exact_mu, what="mu")


def test_pair_tables_fill_in_batches(monkeypatch, x64):
    """Where the states times the terms exceed the fill's batch, the terms are evaluated
    a few states at a time (``lax.map``): the same tables."""
    target, _ = _space("pairwise")
    supports = target.supports
    layout = pair_tables(target.structure, supports.lower, supports.upper)
    log_terms = target.log_terms()
    whole = evaluate_pair_tables(layout, log_terms, jnp.int32)
    monkeypatch.setattr(pair_tables_module, "FILL_BATCH_ELEMENTS", 2 * layout.state_of.shape[0])
    batched = evaluate_pair_tables(layout, log_terms, jnp.int32)
    assert layout.num_states > 2
    np.testing.assert_allclose(batched, whole, rtol=1e-12)
