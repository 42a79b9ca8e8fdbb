"""Correct on models nobody hand-picked: random small numpyro models in the idioms users
write (:mod:`random_models`), through the code ``MCMC`` runs.

- detected dependencies contain the true ones (found by brute force);
- the exact one-step transition matrices built from each kernel's own proposal
  probabilities, with the layout, neighbourhoods and colouring detection produced for the
  model, leave the enumerated posterior invariant, and the compiled ``sample`` step draws
  from those matrices (chi-square);
- every kernel through ``MCMC``, under every chain method and in 32- and 64-bit mode,
  moves every coordinate whose posterior is not degenerate, and its frequencies match the
  enumerated posterior;
- the minimal models of the bugs this suite found, as regressions.

The default suite runs a few dozen examples (derandomised: the same ones every run); the
slow tier (``-m slow``) runs at least 500 model-kernel pairs in one process.
"""

import contextlib
import math
import warnings

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
import random_models as rm

import jax
from jax import random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
from numpyro.infer.gibbs import with_conditioning
from numpyro.infer.util import log_density

from numpyro_discrete import (
    ACS,
    ALBP,
    DMALA,
    LBP,
    AutoDiscrete,
    BlockGibbs,
    ChromaticGibbs,
    CollapsedDraw,
    LBPGibbs,
)
from numpyro_discrete.core import block_gibbs, chromatic, collapse, offset_sweep, table_sweep
from numpyro_discrete.core.local_ratios import exact_local_fn, pair_table_ratios
from numpyro_discrete.core.neighbourhood import coordinate_neighbourhood, squared_distance_fn
from numpyro_discrete.core.pair_tables import pair_tables
from numpyro_discrete.structure.chain_blocks import find_chain_blocks
from numpyro_discrete.structure.stencils import find_stencil

from helpers import (
    assert_invariant_and_irreducible,
    assert_irreducible,
    assert_step_draws_from,
    block_sweep_matrix,
    chi_square_rows,
    chromatic_sweep_matrix,
    compiled_sweep_tables,
    coordinatewise_transition_matrices,
    enumerate_model,
    mcse_of_mean,
    offset_probabilities,
    path_transition_matrix,
    sampled_sweep_counts,
    site_scan_matrix,
    state_lookup,
    table_scan_matrix,
    target_distribution,
)

# LBP with a fixed even path length is left out: on unit-step sites it keeps the parity of
# the number of changes and is not irreducible (it warns); the exact tests cover it
KERNELS = {
    "AutoDiscrete": lambda model: AutoDiscrete(model),
    "LBP": lambda model: LBP(model),
    "ALBP": lambda model: ALBP(model),
    "ACS": lambda model: ACS(model),
    "DMALA": lambda model: DMALA(model, step_size=0.5),
    "ChromaticGibbs": lambda model: ChromaticGibbs(model),
    "BlockGibbs": lambda model: BlockGibbs(model),
}
CHAIN_METHODS = ("sequential", "vectorized", "parallel")
NUM_WARMUP = 1000
NUM_SAMPLES = 2000
# a coordinate whose posterior puts less than this on its most likely value must move
DEGENERATE = 0.98
# marginal frequencies within this many ESS-based standard errors (plus a small slack for
# the noise of the ESS estimate itself)
NUM_SE, SLACK = 5.0, 0.01

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    # no shrinking: each example compiles its own programs, so shrinking a failure takes
    # minutes; the failure message names the whole model instead
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)


@contextlib.contextmanager
def quiet():
    """Warnings that are advice (dense structure, parity of path lengths), not failures."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def flat_draws(spec: rm.ModelSpec, samples: dict) -> np.ndarray:
    """``(chains, draws, N)`` integer draws, sites in declaration order."""
    return np.concatenate(
        [
            np.asarray(samples[site.name]).reshape(samples[site.name].shape[:2] + (-1,))
            for site in spec.sites
        ],
        axis=-1,
    )


def check_draws(draws: np.ndarray, states: np.ndarray, pi: np.ndarray, label: str) -> None:
    """Irreducibility (every non-degenerate coordinate changes in every chain) and
    frequencies: every coordinate's marginal and the mean of ``log pi`` (a statistic of the
    joint) within :data:`NUM_SE` standard errors of the enumerated values."""
    index = state_lookup(states)(draws.reshape(-1, draws.shape[-1])).reshape(draws.shape[:2])
    for j in range(states.shape[1]):
        values = np.unique(states[:, j])
        marginal = np.array([pi[states[:, j] == v].sum() for v in values])
        if marginal.max() < DEGENERATE:
            changes = (np.diff(draws[:, :, j], axis=1) != 0).sum(1)
            assert np.all(changes > 0), f"{label}: coordinate {j} never changed: {changes}"
        indicators = (draws[:, :, j, None] == values).astype(float)
        error = np.abs(indicators.mean((0, 1)) - marginal)
        se = mcse_of_mean(indicators)
        bound = NUM_SE * np.nan_to_num(se, nan=0.0) + SLACK
        assert np.all(error < bound), (
            f"{label}: coordinate {j} marginal {indicators.mean((0, 1))} vs exact {marginal} "
            f"(se {se})"
        )
    # a hard constraint gives states probability 0: never drawn, and left out of log pi
    possible = pi > 0
    assert np.all(possible[index]), f"{label}: drew a state of zero probability"
    log_pi = np.log(np.where(possible, pi, 1.0))
    energy = log_pi[index][..., None]
    exact = float(pi @ log_pi)
    se = float(mcse_of_mean(energy)[0])
    spread = np.ptp(log_pi[possible])
    assert abs(energy.mean() - exact) <= NUM_SE * np.nan_to_num(se) + SLACK * spread, (
        f"{label}: E[log pi] {energy.mean()} vs exact {exact} (se {se})"
    )


def run_mcmc(kernel, chain_method: str, seed: int, num_warmup=NUM_WARMUP) -> MCMC:
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=NUM_SAMPLES,
        num_chains=2,
        chain_method=chain_method,
        progress_bar=False,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("always", RuntimeWarning)
        mcmc.run(random.key(seed))
        jax.block_until_ready(mcmc.get_samples())
        jax.effects_barrier()
    # no false alarm: these kernels move every coordinate
    stuck = [str(w.message) for w in caught if "never changed" in str(w.message)]
    assert not stuck, stuck
    return mcmc


def sample_and_check(
    spec: rm.ModelSpec, kernel_name: str, chain_method: str, x64: bool, clear_caches=False
):
    label = f"{kernel_name}/{chain_method}/x64={x64} on {spec.describe()}"
    states, pi = rm.enumerated_posterior(spec)
    with jax.enable_x64(x64):
        model = rm.build_model(spec)
        if spec.continuous:
            kernel = LBPGibbs(NUTS(model), discrete_kernel=KERNELS[kernel_name](model))
        else:
            kernel = KERNELS[kernel_name](model)
        mcmc = run_mcmc(kernel, chain_method, spec.seed)
        draws = flat_draws(spec, mcmc.get_samples(group_by_chain=True))
    if clear_caches:
        # every example compiles programs of its own model, which JAX keeps for the rest of
        # the process (memory grew by about 60 MB per example): only the 500-example run
        # needs to drop them (a worker of the fast suite crashed once after clearing)
        jax.effects_barrier()
        jax.clear_caches()
    check_draws(draws, states, pi, label)


# --- structure -------------------------------------------------------------------------------


def discrete_target(spec: rm.ModelSpec, kernel):
    """The kernel initialised on the model of `spec` (as ``MCMC`` does) and its target."""
    with quiet():
        state = jax.jit(lambda key: kernel.init(key, 0, None, (), {}))(random.key(spec.seed))
    target = kernel._target
    assert list(target.layout.names) == spec.discrete_names
    return state, target


@pytest.mark.slow
@settings(max_examples=25, **SETTINGS)
@given(spec=rm.model_specs(continuous=False))
def test_detected_dependencies_contain_the_true_ones(spec):
    """Changing a coordinate alone changes only terms detection paired with it (or dense
    ones): a missed dependency would make colour-batched ratios and sweeps inexact."""
    _, target = discrete_target(spec, ChromaticGibbs(rm.build_model(spec)))
    structure = target.structure
    states = rm.enumerated_states(spec)
    true = rm.true_dependencies(target.log_terms(), states, np.random.default_rng(spec.seed))
    detected = np.zeros_like(true)
    detected[structure.pair_terms, structure.pair_coords] = True
    detected[structure.dense_terms] = True
    missed = np.argwhere(true & ~detected)
    assert not missed.size, f"(term, coordinate) pairs missed: {missed} on {spec.describe()}"
    # and the colouring separates every pair of coordinates sharing a true term
    for term in np.flatnonzero(true.any(1) & ~np.isin(np.arange(len(true)), structure.dense_terms)):
        coords = np.flatnonzero(true[term])
        assert len(set(structure.colour[coords])) == len(coords), spec.describe()


# --- exact transition matrices of the compiled steps ----------------------------------------


def _small(spec: rm.ModelSpec, max_states: int) -> bool:
    return len(rm.enumerated_states(spec)) <= max_states


@settings(max_examples=4, **SETTINGS)
@given(spec=rm.model_specs(continuous=False))
def test_chromatic_sweep_is_exact_on_random_models(spec, x64):
    """The sweep matrix from the kernel's own class conditionals (the colouring, member
    layout and neighbourhoods detection produced) leaves the posterior invariant to 1e-10,
    is irreducible, and the compiled step draws from it."""
    assume(_small(spec, 120))
    kernel = ChromaticGibbs(rm.build_model(spec))
    _, target = discrete_target(spec, kernel)
    states = rm.enumerated_states(spec)
    pi = target_distribution(target, states)
    # a proven colouring with ordinal windows: the kernel tests each coordinate alone
    coordinate_test = kernel.mh_test and target.structure.exact
    matrix = chromatic_sweep_matrix(
        target, target.structure, states, coordinate_test=coordinate_test
    )
    if coordinate_test:
        # the same invariant distribution as the joint test of the definition
        joint = chromatic_sweep_matrix(target, target.structure, states)
        np.testing.assert_allclose(pi @ joint, pi, atol=1e-10)
    if not kernel.mh_test:
        # the kernel takes every draw: that is the MH sweep (which then accepts everything)
        gibbs = chromatic_sweep_matrix(target, target.structure, states, mh_test=False)
        np.testing.assert_allclose(gibbs, matrix, atol=1e-10)
    if target.num_colours == target.num_coords and not kernel.mh_test:
        # classes of one coordinate: the kernel runs the systematic scan of exact
        # conditionals, each read from log pi itself (the definition's sweep, above)
        order = chromatic.class_members(target.structure)[0][: target.num_coords]
        scan = site_scan_matrix(target, target.neighbourhood, states, order)
        np.testing.assert_allclose(scan, matrix, atol=1e-10)
    assert_invariant_and_irreducible(matrix, pi, rows_atol=1e-10)
    assert_step_draws_from(matrix, kernel, target, states, spec.seed, spec.describe())


@settings(max_examples=4, **SETTINGS)
@given(spec=rm.model_specs(continuous=False))
def test_pair_tables_give_the_scan_conditionals_on_random_models(spec, x64):
    """Where detection proved every term to depend on two coordinates at most, the exact
    local ratios read from pair tables equal the brute-force ones at every state; the sweep
    by tables (what ``ChromaticGibbs`` runs on such a model) has the matrix of the scan
    reading its conditionals from ``log pi`` (1e-10), in a random order of single
    coordinates and by the detected colouring, and the compiled sweep draws from it; the
    tables summed by offset give the gathered conditionals at every state, and the sweep by
    offsets carries ``log pi`` forward to the terms' value at its draw."""
    assume(_small(spec, 120))
    kernel = ChromaticGibbs(rm.build_model(spec))
    _, target = discrete_target(spec, kernel)
    supports = target.supports
    tables = pair_tables(target.structure, supports.lower, supports.upper)
    assume(tables is not None)
    states = rm.enumerated_states(spec)
    structure = target.structure
    by_tables = pair_table_ratios(target.log_terms(), tables, None)
    # the whole supports ChromaticGibbs reads, and windows of one (ALBP's ordinal moves)
    for neighbourhood in (target.neighbourhood, coordinate_neighbourhood(target.supports, 1)):
        brute = jax.jit(jax.vmap(exact_local_fn(target.log_density(), neighbourhood)))

        @jax.jit
        @jax.vmap
        def ratios(x, neighbourhood=neighbourhood):
            valid = neighbourhood.valid(x)
            log_p, d = by_tables(x, None, neighbourhood.candidates(x), valid)
            return log_p, jnp.where(valid, d, -jnp.inf)

        for got, expected in zip(ratios(states), brute(jnp.asarray(states)), strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=spec.describe())
    # the same tables summed by offset (what ChromaticGibbs runs where the classes and
    # offsets are few; the classes do not change the conditionals): the same conditionals
    one_class = structure._replace(colour=np.zeros_like(structure.colour), num_colours=1)
    offsets = offset_sweep.offset_layout(tables, one_class)
    if offsets is not None:
        summed = offset_sweep.offset_tables(
            offsets, table_sweep.constant_tables(tables, target.log_terms())
        )
        gathered = compiled_sweep_tables(tables, target.log_terms())
        everyone = np.arange(target.num_coords)
        logits = jax.jit(lambda x: table_sweep.class_logits(tables, gathered, x, everyone))
        for x in states:
            expected = np.asarray(jax.nn.softmax(logits(jnp.asarray(x)), axis=-1), np.float64)
            got = offset_probabilities(offsets, summed, jnp.asarray(x))
            np.testing.assert_allclose(got, expected, atol=1e-9, err_msg=spec.describe())
    # by the detected colouring, the sweep by offsets carries log pi forward by its classes'
    # changes (offset_sweep.class_change): the value of the terms at its draw
    by_colour = offset_sweep.offset_layout(tables, structure)
    if by_colour is not None:
        log_terms = target.log_terms()
        offset_kernel = offset_sweep.build_kernel(by_colour)
        summed = offset_sweep.offset_tables(
            by_colour, table_sweep.constant_tables(tables, log_terms)
        )

        @jax.jit
        def carried(key, x):
            state = chromatic.init(x, log_terms)
            carry = table_sweep.SweepTables(summed, log_terms, False)
            new, _ = offset_kernel(key, state, carry)
            return new.log_density, jnp.sum(log_terms(new.position))

        keys = random.split(random.key(spec.seed), len(states))
        for key, x in zip(keys, states, strict=True):
            got, expected = carried(key, jnp.asarray(x))
            np.testing.assert_allclose(got, expected, atol=1e-9, err_msg=spec.describe())
    # the sweep by tables: in a random order of single coordinates, and by the detected
    # colouring (valid: a class's draw is its coordinates' moves in any order)
    random_order = np.random.default_rng(spec.seed).permutation(target.num_coords)
    colour_order = chromatic.class_members(structure)[0][: target.num_coords]
    for order, colour in (
        (random_order, np.argsort(random_order)),
        (colour_order, structure.colour),
    ):
        by_log_pi = site_scan_matrix(target, target.neighbourhood, states, order)
        by_tables = table_scan_matrix(target, tables, states, order)
        np.testing.assert_allclose(by_tables, by_log_pi, atol=1e-10, err_msg=spec.describe())
        classes = structure._replace(
            colour=colour.astype(np.int32), num_colours=int(colour.max()) + 1
        )
        kernel = table_sweep.build_kernel(tables, classes)

        def sweep(key, state, log_terms, kernel=kernel):
            values = table_sweep.sweep_tables(tables, log_terms)
            return kernel(key, state, table_sweep.SweepTables(values, log_terms))

        counts = sampled_sweep_counts(sweep, target, states, spec.seed)
        assert chi_square_rows(counts, by_log_pi) > 1e-4, spec.describe()


@settings(max_examples=3, **SETTINGS)
@given(spec=rm.model_specs(continuous=False))
def test_stencil_conditionals_are_the_gathered_ones_on_random_models(spec, x64):
    """Where detection's pairs form a stencil, a sweep computes each class's conditionals
    for every coordinate by slices: at every state, the members' rows equal the gathered
    conditionals of the definition, and the other coordinates only stay."""
    kernel = ChromaticGibbs(rm.build_model(spec))
    _, target = discrete_target(spec, kernel)
    structure = target.structure
    assume(not structure.dense_terms.size)
    stencil = find_stencil(
        structure.pair_terms, structure.pair_coords, structure.num_terms, structure.num_coords
    )
    assume(stencil is not None)
    log_terms = target.log_terms()
    order, starts, sizes, _ = chromatic.class_members(structure)

    @jax.jit
    def both(x, in_class, members):
        args = (log_terms, structure, target.neighbourhood, x, log_terms(x), in_class)
        return (
            chromatic.class_logits(*args, members),
            chromatic.class_logits(*args, None, stencil),
        )

    states = rm.enumerated_states(spec)
    rows = np.random.default_rng(spec.seed).permutation(len(states))[:30]
    for c in range(structure.num_colours):
        in_class = structure.colour == c
        members = order[starts[c] : starts[c] + sizes[c]]
        for x in states[rows]:
            (values, logits), (all_values, all_logits) = both(
                jnp.asarray(x), jnp.asarray(in_class), jnp.asarray(members)
            )
            np.testing.assert_array_equal(all_values[members], values, spec.describe())
            np.testing.assert_allclose(
                all_logits[members], logits, rtol=1e-9, atol=1e-9, err_msg=spec.describe()
            )
            others = np.asarray(all_logits)[~in_class]
            assert np.all(others[:, 0] == 0.0) and np.all(others[:, 1:] == -np.inf)


@pytest.mark.slow
@settings(max_examples=4, **SETTINGS)
@given(spec=rm.model_specs(continuous=False))
def test_block_sweep_is_exact_on_random_models(spec, x64):
    """The chain-block sweep from the kernel's own potentials (the blocks and classes that
    detection produced) leaves the posterior invariant to 1e-10, is irreducible, and the
    compiled step draws from it."""
    assume(_small(spec, 120))
    kernel = BlockGibbs(rm.build_model(spec))
    _, target = discrete_target(spec, kernel)
    found = find_chain_blocks(target.structure, target.layout.names, target.layout.shapes)
    plan = block_gibbs.block_plan(found, target.structure, target.layout.coordinate_supports())
    states = rm.enumerated_states(spec)
    pi = target_distribution(target, states)
    matrix = block_sweep_matrix(target, plan, states)
    if not kernel.mh_test:
        # the kernel takes every draw: that is the MH sweep (which then accepts everything)
        gibbs = block_sweep_matrix(target, plan, states, mh_test=False)
        np.testing.assert_allclose(gibbs, matrix, atol=1e-10)
    assert_invariant_and_irreducible(matrix, pi, rows_atol=1e-10)
    assert_step_draws_from(matrix, kernel, target, states, spec.seed, spec.describe())


@pytest.mark.slow
@settings(max_examples=4, **SETTINGS)
@given(spec=rm.model_specs(continuous=False), path_length=st.sampled_from([1, 2]))
def test_path_step_is_exact_on_random_models(spec, path_length, x64):
    """LBP-R's matrix from the kernel's own local ratios and neighbourhood is in detailed
    balance to 1e-10, and the compiled step draws from it."""
    assume(_small(spec, 120) and spec.num_coords >= path_length)
    kernel = LBP(rm.build_model(spec), path_length=path_length)
    _, target = discrete_target(spec, kernel)
    states = rm.enumerated_states(spec)
    pi = target_distribution(target, states)
    num_candidates = target.neighbourhood.candidates(jnp.asarray(states[0])).shape[1]
    assume(math.perm(spec.num_coords, path_length) * num_candidates**path_length <= 2000)
    matrix, mass = path_transition_matrix(
        target.local_fn((), {}), target.neighbourhood, states, path_length, "sqrt"
    )
    np.testing.assert_allclose(mass, 1.0, atol=1e-10)
    flow = pi[:, None] * matrix
    np.testing.assert_allclose(flow, flow.T, atol=1e-10)
    if path_length == 1:
        assert_irreducible(matrix)
    assert_step_draws_from(matrix, kernel, target, states, spec.seed, spec.describe())


@pytest.mark.slow
@settings(max_examples=3, **SETTINGS)
@given(spec=rm.model_specs(continuous=False))
def test_coordinatewise_step_is_exact_on_random_models(spec, x64):
    """DMALA's matrix (every vector of per-coordinate choices) from the kernel's own local
    ratios, neighbourhood and squared distances is in detailed balance to 1e-10 and
    irreducible, and the compiled step draws from it."""
    assume(_small(spec, 100))
    kernel = DMALA(rm.build_model(spec), step_size=0.5)
    _, target = discrete_target(spec, kernel)
    states = rm.enumerated_states(spec)
    num_columns = target.neighbourhood.candidates(jnp.asarray(states[0])).shape[1] + 1
    assume(num_columns**spec.num_coords <= 4096)
    pi = target_distribution(target, states)
    matrix_at = coordinatewise_transition_matrices(
        target.local_fn((), {}),
        target.neighbourhood,
        squared_distance_fn(target.supports, target.move_scales),
        states,
    )
    matrix, mass = matrix_at(0.5, 0.5)
    np.testing.assert_allclose(mass, 1.0, atol=1e-10)
    flow = pi[:, None] * matrix
    np.testing.assert_allclose(flow, flow.T, atol=1e-10)
    assert_irreducible(matrix)
    assert_step_draws_from(matrix, kernel, target, states, spec.seed, spec.describe())


# --- sampling through MCMC -----------------------------------------------------------------


def model_kernel_pairs(continuous: st.SearchStrategy[bool]) -> st.SearchStrategy[tuple]:
    """``(spec, kernel name, chain method, x64)``; `continuous` draws whether the model has
    a continuous site (then the kernel is the discrete block of ``LBPGibbs(NUTS)``)."""
    return st.tuples(
        continuous.flatmap(rm.model_specs),
        st.sampled_from(sorted(KERNELS)),
        st.sampled_from(CHAIN_METHODS),
        st.booleans(),
    )


@pytest.mark.slow
@settings(max_examples=10, **SETTINGS)
@given(pair=model_kernel_pairs(st.just(False)))
def test_kernels_sample_random_models(pair):
    sample_and_check(*pair)


@pytest.mark.slow
@settings(max_examples=2, **SETTINGS)
@given(pair=model_kernel_pairs(st.just(True)))
def test_lbp_gibbs_samples_random_mixed_models(pair):
    """``LBPGibbs(NUTS, discrete_kernel=...)``: the discrete posterior with the continuous
    site integrated out (on a grid)."""
    sample_and_check(*pair)


@pytest.mark.slow
@settings(max_examples=500, **SETTINGS)
# one model in four has a continuous site (LBPGibbs with NUTS compiles for longest)
@given(pair=model_kernel_pairs(st.sampled_from([False, False, False, True])))
def test_many_random_model_kernel_pairs(pair):
    """At least 500 model-kernel pairs in one process (the slow tier runs without xdist):
    every kernel, chain method and precision, discrete-only models and, inside
    ``LBPGibbs(NUTS)``, models with a continuous site."""
    sample_and_check(*pair, clear_caches=True)


@pytest.mark.slow
@settings(max_examples=12, **SETTINGS)
@given(
    spec=rm.constrained_model_specs(),
    kernel_name=st.sampled_from(sorted(KERNELS)),
    chain_method=st.sampled_from(CHAIN_METHODS),
)
def test_kernels_sample_random_constrained_models(spec, kernel_name, chain_method):
    """Hard constraints (orderings and truncations, as factors of ``-inf``): each chain
    starts inside them from a prior draw that is often outside, never draws a state of zero
    probability, and samples the enumerated posterior."""
    sample_and_check(spec, kernel_name, chain_method, x64=False)


# --- the discrete sites summed out (CollapsedDraw) ------------------------------------------


def check_summed_out_model(spec, chains: bool) -> None:
    """The inner kernel's model of the default ``LBPGibbs`` on `spec`'s model is the exact
    marginal of the discrete sites (chains summed out by the forward algorithm where
    `chains`, independent coordinates otherwise), in value and gradient, at any discrete
    values it is conditioned on."""
    model = rm.build_model(spec)
    kernel = LBPGibbs(NUTS(model))
    with quiet():
        kernel.init(random.key(spec.seed), 0, None, (), {})
    draw = kernel.discrete_kernel
    assert isinstance(draw, CollapsedDraw), spec.describe()
    assert (draw.chains is not None) == chains, spec.describe()
    states = jnp.asarray(rm.enumerated_states(spec))
    inner_model = kernel.inner_kernel.model

    @jax.jit
    def summed_out(mu, flat):
        conditioning = with_conditioning({}, rm.unflatten(spec, flat))
        return log_density(inner_model, (), conditioning, {"mu": mu})[0]

    @jax.jit
    def exact(mu):
        def log_joint(flat):
            return log_density(model, (), {}, {**rm.unflatten(spec, flat), "mu": mu})[0]

        return jax.scipy.special.logsumexp(jax.vmap(log_joint)(states))

    rng = np.random.default_rng(spec.seed)
    for mu in (-1.3, 0.4):
        flat = states[rng.integers(states.shape[0])]
        np.testing.assert_allclose(summed_out(mu, flat), exact(mu), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(
            jax.grad(summed_out)(mu, flat), jax.grad(exact)(mu), rtol=1e-7, atol=1e-9
        )


@settings(max_examples=2, **SETTINGS)
@given(spec=rm.independent_model_specs())
def test_summed_out_model_is_the_enumerated_marginal_on_random_models(spec, x64):
    """Where the coordinates are independent given the continuous site, the default
    ``LBPGibbs`` sums them out: its inner kernel's model is their exact marginal, in value
    and gradient, at any discrete values it is conditioned on."""
    check_summed_out_model(spec, chains=False)


@settings(max_examples=3, **SETTINGS)
@given(spec=rm.independent_model_specs())
def test_summed_out_sums_by_slices_equal_sums_by_gathers_on_random_models(spec, x64):
    """The table ``s`` of the summed-out coordinates from the stencil's slices (the fast
    path, where the pairs form a stencil) equals the definition's gathers by each
    coordinate's terms, in value and in the marginal's gradient; where detection finds no
    stencil, the gathers are what runs."""
    model = rm.build_model(spec)
    kernel = LBPGibbs(NUTS(model))
    with quiet():
        kernel.init(random.key(spec.seed), 0, None, (), {})
    draw = kernel.discrete_kernel
    assert isinstance(draw, CollapsedDraw), spec.describe()
    by_gathers = draw.table._replace(stencil=None)

    def potentials(mu, table):
        log_terms = draw._target.log_terms((), with_conditioning({}, {"mu": mu}))
        return collapse.log_potentials(log_terms, table)

    def marginal(mu, table):
        return collapse.log_marginal(*potentials(mu, table))

    # compiled whole, each table's pair: run op by op, the model's terms compiled one small
    # program per operation and example (most of this test's time)
    def both(table):
        return jax.jit(lambda mu: (potentials(mu, table), jax.grad(marginal)(mu, table)))

    fast_fn, slow_fn = both(draw.table), both(by_gathers)
    for mu in (-1.3, 0.4):
        (fast, fast_grad), (slow, slow_grad) = fast_fn(mu), slow_fn(mu)
        for fast_part, slow_part in zip(fast, slow, strict=True):
            np.testing.assert_allclose(fast_part, slow_part, rtol=1e-12 if x64 else 1e-6)
        np.testing.assert_allclose(fast_grad, slow_grad, rtol=1e-10 if x64 else 1e-5)


@settings(max_examples=3, **SETTINGS)
@given(spec=rm.chain_model_specs())
def test_summed_out_chains_are_the_enumerated_marginal_on_random_models(spec, x64):
    """Where the coordinates form chains that share no term, the default ``LBPGibbs`` sums
    them out by the forward algorithm: its inner kernel's model is their exact marginal,
    in value and gradient (the chain marginals of the custom gradient rule)."""
    check_summed_out_model(spec, chains=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    "specs", [rm.independent_model_specs, rm.chain_model_specs], ids=["independent", "chains"]
)
@settings(max_examples=3, **SETTINGS)
@given(data=st.data(), chain_method=st.sampled_from(CHAIN_METHODS), x64=st.booleans())
def test_summed_out_sampler_samples_random_models(specs, data, chain_method, x64):
    """The default ``LBPGibbs`` on both kinds of models above (independent coordinates
    summed out, then drawn; chains summed out, then drawn by forward filtering, backward
    sampling) against the enumerated posterior of the discrete sites."""
    sample_and_check(data.draw(specs(), label="spec"), "AutoDiscrete", chain_method, x64)


# --- the bugs this suite found, minimal ---------------------------------------------------


def padded_class_model():
    """Coordinate 0 (``b[0]``) is in the smaller of two colour classes, so its class is
    padded: the reverse move read coordinate 0's new value in the padding row and rejected
    every move of ``b[0]`` (it never changed)."""
    b = numpyro.sample("b", dist.Bernoulli(0.4).expand([4]))
    o = numpyro.sample("o", dist.Bernoulli(0.5).expand([3]))
    numpyro.factor("c1", 0.8 * (b[1:] == b[:-1]))
    numpyro.factor("c2", -0.3 * (o[1:] - o[:-1]) ** 2)
    numpyro.factor("c3", 0.5 * b[:3] * o)


@pytest.mark.parametrize(
    "chain_method",
    ["sequential", *(pytest.param(m, marks=pytest.mark.slow) for m in CHAIN_METHODS[1:])],
)
def test_chromatic_moves_coordinate_zero_of_a_padded_class(chain_method):
    kernel = ChromaticGibbs(padded_class_model)
    mcmc = run_mcmc(kernel, chain_method, 0, num_warmup=100)
    assert kernel.num_colours == 2
    sites = {"b": ((4,), range(2)), "o": ((3,), range(2))}
    states, pi = enumerate_model(padded_class_model, (), sites)
    samples = mcmc.get_samples(group_by_chain=True)
    draws = np.concatenate([np.asarray(samples["b"]), np.asarray(samples["o"])], -1)
    check_draws(draws, states, pi, "padded class")


BINOMIAL_TOTALS, BINOMIAL_PROBS = np.arange(40) + 1, np.linspace(0.1, 0.9, 40)


def varying_binomial_model():
    numpyro.sample("b", dist.Binomial(jnp.asarray(BINOMIAL_TOTALS), jnp.asarray(BINOMIAL_PROBS)))


@pytest.mark.slow
def test_albp_parallel_reads_the_target_as_sequential_chains_do():
    """Under ``pmap`` ``init`` is traced: the target read scales and ratio modes from
    staged values and fell back to span-based scales and gradient ratios, which froze
    coordinates of this model (4 of 40 per chain). It is now read at a concrete draw."""
    kernels = {}
    for method in ("sequential", "parallel"):
        kernels[method] = ALBP(varying_binomial_model)
        mcmc = run_mcmc(kernels[method], method, 428)
        draws = np.asarray(mcmc.get_samples(group_by_chain=True)["b"])
        changes = (np.diff(draws, axis=1) != 0).sum(1)
        assert np.all(changes > 20), (method, changes)
        mean = draws.mean((0, 1))
        np.testing.assert_allclose(mean, BINOMIAL_TOTALS * BINOMIAL_PROBS, rtol=0.15, atol=0.1)
    sequential, parallel = (kernels[m]._target for m in ("sequential", "parallel"))
    assert parallel.weights_mode == sequential.weights_mode == {"b": "exact"}
    np.testing.assert_allclose(parallel.move_scales, sequential.move_scales)


@pytest.mark.slow
@pytest.mark.parametrize("kernel_name", ["ChromaticGibbs", "ACS"])
def test_64_bit_mode(kernel_name, x64):
    """``num_changed`` was int64 in 64-bit mode against the int32 of the initial state,
    so the sampling loop refused its carry."""

    def chain():
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([20]))
        s = 2.0 * x - 1.0
        numpyro.factor("c", 0.3 * s[1:] * s[:-1])

    mcmc = run_mcmc(KERNELS[kernel_name](chain), "sequential", 0)
    assert abs(float(mcmc.get_samples()["x"].mean()) - 0.5) < 0.05
