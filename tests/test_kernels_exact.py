"""Exact tests of the numpyro kernels' steps. Property-based: random small discrete models
(random pairwise couplings, fields and non-affine terms over random mixes of binary,
categorical and ordinal sites of random shapes), given to the numpyro kernels as a
``potential_fn`` with ``supports``. The transition matrix each kernel's step implements
(LBP-R, ALBP's frozen mixture, ACS at each schedule position), enumerated over every state
and every move with the kernel's own resolved local ratios and neighbourhood, is in detailed
balance with the target to round-off (float64). And ALBP's frozen step, through the kernel's
own ``init``/``sample``, draws from the mixture of LBP kernels it stands for."""

import itertools
import math
from typing import NamedTuple
import warnings

from hypothesis import event, given, settings
from hypothesis import strategies as st
import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete import ACS, ALBP, LBP, SiteSupport
from numpyro_discrete.core import cyclical
from numpyro_discrete.core.local_ratios import gradient_local_fn
from numpyro_discrete.core.neighbourhood import binary_neighbourhood, squared_distance_fn

from helpers import (
    all_binary_states,
    assert_irreducible,
    assert_reversible,
    chi_square_rows,
    coordinatewise_transition_matrices,
    path_transition_matrix,
    random_binary_target,
    state_index,
)

SHAPES = [(), (1,), (2,), (2, 1)]
# the enumeration stays small: at most this many states, and ordered paths (with their
# choices of new values) per state
MAX_STATES = 64
MAX_PATHS = 1500


class Model(NamedTuple):
    """A random model: its sites ``(kind, shape, support, lower, upper)``, ordinal window,
    the seed and scale of its coefficients, and the longest path the tests enumerate."""

    sites: list
    window: int
    seed: int
    scale: float
    max_path_length: int


@st.composite
def site_specs(draw):
    kind = draw(st.sampled_from(["binary", "categorical", "ordinal"]))
    shape = draw(st.sampled_from(SHAPES))
    if kind == "binary":
        return kind, shape, SiteSupport.binary(), 0, 1
    if kind == "categorical":
        num_categories = draw(st.integers(3, 4))
        return kind, shape, SiteSupport.categorical(num_categories), 0, num_categories - 1
    lower = draw(st.integers(-2, 1))
    upper = lower + draw(st.integers(1, 3))
    return kind, shape, SiteSupport.ordinal(lower, upper), lower, upper


def _num_candidates(sites, window):
    """``M``, the width of the candidate table (as ``coordinate_neighbourhood`` builds it)."""
    kinds = {kind for kind, *_ in sites}
    if kinds == {"binary"}:
        return 1
    nominal = max([upper for kind, *_, upper in sites if kind != "ordinal"], default=0)
    return max(nominal, 2 * window if "ordinal" in kinds else 0)


@st.composite
def models(draw):
    sites = draw(st.lists(site_specs(), min_size=1, max_size=3))
    num_coords = sum(math.prod(shape) for _, shape, *_ in sites)
    num_states = math.prod(
        (upper - lower + 1) ** math.prod(shape) for _, shape, _, lower, upper in sites
    )
    if not 1 <= num_coords <= 4 or num_states > MAX_STATES:
        draw(st.nothing())
    window = draw(st.integers(1, 2))
    num_candidates = _num_candidates(sites, window)
    max_path_length = max(
        r
        for r in range(1, min(num_coords, 3) + 1)
        if math.perm(num_coords, r) * num_candidates**r <= MAX_PATHS
    )
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.floats(0.1, 1.5))
    return Model(sites, window, seed, scale, max_path_length)


def build_target(sites, seed, scale, lookups):
    """
    ``log pi`` of a site dict: fields, pairwise couplings and a softplus term (so that
    gradient weights are approximate), plus a
    random table read at the integer values of the sites where `lookups` is set (values
    used as indices: exact weights only).
    Returns ``(potential_fn, flat_log_pi, names)``.
    """
    names = [f"s{i}" for i in range(len(sites))]
    sizes = [math.prod(shape) for _, shape, *_ in sites]
    starts = np.cumsum([0] + sizes)
    lower = np.concatenate(
        [np.full(size, site[3]) for size, site in zip(sizes, sites, strict=True)]
    )
    num_coords = lower.size
    rng = np.random.default_rng(seed)
    field = jnp.asarray(rng.normal(0.0, scale, num_coords))
    coupling = jnp.asarray(np.triu(rng.normal(0.0, scale, (num_coords, num_coords)), 1))
    weights = jnp.asarray(rng.normal(0.0, scale, (2, num_coords)))
    table = jnp.asarray(rng.normal(0.0, scale, (num_coords, 4)))

    def smooth(xf):
        return field @ xf + xf @ coupling @ xf + jnp.sum(jnp.logaddexp(0.0, weights @ xf))

    def lookup(k, value):
        # site k's values used as indices: traces only for integer values
        coords = np.arange(starts[k], starts[k + 1])
        return jnp.sum(table[coords, jnp.ravel(value) - lower[coords]])

    def potential_fn(z):
        xf = jnp.concatenate([jnp.ravel(z[name]) for name in names]).astype(float)
        log_p = smooth(xf)
        for k, name in enumerate(names):
            if lookups[k]:
                log_p = log_p + lookup(k, z[name])
        return -log_p

    def flat_log_pi(x):
        values = {name: x[starts[k] : starts[k + 1]] for k, name in enumerate(names)}
        return -potential_fn(values)

    return potential_fn, flat_log_pi, names


def init_params(sites, names):
    return {
        name: jnp.full(shape, lower, jnp.int32)
        for name, (_, shape, _, lower, _) in zip(names, sites, strict=True)
    }


def enumerate_states(sites):
    values = [
        range(lower, upper + 1)
        for _, shape, _, lower, upper in sites
        for _ in range(math.prod(shape))
    ]
    return np.array(list(itertools.product(*values)), dtype=np.int32)


def lookup_mask(sites, weights):
    """Which sites read a table (a value used as an index) under a weights mode."""
    per_site = {
        "gradient": lambda kind: False,
        "exact": lambda kind: True,
        # auto: categorical sites read tables (exact), the others stay smooth (gradient)
        "auto": lambda kind: kind == "categorical",
    }[weights]
    return [per_site(kind) for kind, *_ in sites]


def initialised(kernel_cls, model, weights, num_warmup=0, **kwargs):
    """The kernel initialised on the model; its resolved local function and neighbourhood
    (the pieces its compiled step uses), the enumerated states and their probabilities."""
    sites = model.sites
    potential_fn, flat_log_pi, names = build_target(
        sites, model.seed, model.scale, lookup_mask(sites, weights)
    )
    kernel = kernel_cls(
        potential_fn=potential_fn,
        supports={name: support for name, (_, _, support, *_) in zip(names, sites, strict=True)},
        weights=weights,
        ordinal_window=model.window,
        **kwargs,
    )
    params = init_params(sites, names)
    with warnings.catch_warnings():
        # even path lengths on unit-step sites warn about parity; the balance still holds
        warnings.simplefilter("ignore", UserWarning)
        # compiled: the eager init evaluates op by op, several times slower on tiny models
        state = jax.jit(lambda key: kernel.init(key, num_warmup, params, (), None))(
            random.key(model.seed)
        )
    expected = {
        name: "exact"
        if weights == "exact" or (weights == "auto" and kind == "categorical")
        else "gradient"
        for name, (kind, *_) in zip(names, sites, strict=True)
    }
    assert kernel.weights_mode == expected
    states = enumerate_states(sites)
    log_p = np.asarray(jax.jit(jax.vmap(flat_log_pi))(jnp.asarray(states)), np.float64)
    pi = np.exp(log_p - log_p.max())
    target = kernel._target
    return kernel, state, target.local_fn((), {}), target.neighbourhood, states, pi / pi.sum()


def lbp_matrix(local_fn, neighbourhood, states, path_length, balancing):
    matrix, forward_mass = path_transition_matrix(
        local_fn, neighbourhood, states, path_length, balancing
    )
    np.testing.assert_allclose(forward_mass, 1.0, atol=1e-12)
    return matrix


@st.composite
def lbp_cases(draw):
    model = draw(models())
    return model, draw(st.integers(1, model.max_path_length))


@settings(max_examples=4, deadline=None, derandomize=True)
@given(
    case=lbp_cases(),
    weights=st.sampled_from(["gradient", "exact", "auto"]),
    balancing=st.sampled_from(["sqrt", "barker"]),
)
def test_lbp_detailed_balance(case, weights, balancing):
    model, path_length = case
    with jax.enable_x64(True):
        kernel, _, local_fn, neighbourhood, states, pi = initialised(
            LBP, model, weights, path_length=path_length, balancing=balancing
        )
        matrix = lbp_matrix(local_fn, neighbourhood, states, path_length, balancing)
        assert_reversible(matrix, pi)
        if path_length == 1:
            # every single-coordinate move has positive probability: the chain reaches
            # every state
            assert_irreducible(matrix)


@settings(max_examples=2, deadline=None, derandomize=True)
@given(
    model=models(),
    weights=st.sampled_from(["gradient", "exact", "auto"]),
    target_accept_prob=st.floats(0.2, 0.9),
)
def test_albp_frozen_kernel_detailed_balance(model, weights, target_accept_prob):
    """A real warmup adapts the real scale ``R_t``; after it, ``R_t`` stays frozen and each
    step uses the path length ``floor(R_t) + Bernoulli(frac(R_t))``, so the kernel is the
    mixture ``(1 - frac) LBP-floor + frac LBP-ceil``, which is in detailed balance."""
    num_warmup = 40
    with jax.enable_x64(True):
        kernel, state, local_fn, neighbourhood, states, pi = initialised(
            ALBP,
            model,
            weights,
            num_warmup=num_warmup,
            target_accept_prob=target_accept_prob,
            max_path_length=model.max_path_length,
        )

        def step(state, _):
            state = kernel.sample(state, (), None)
            return state, state.path_length

        scales = np.asarray(jax.jit(lambda s: lax.scan(step, s, None, num_warmup + 5)[1])(state))
        scale = float(scales[num_warmup - 1])
        np.testing.assert_array_equal(scales[num_warmup - 1 :], scale)
        assert 1.0 <= scale <= model.max_path_length
        low = math.floor(scale)
        frac = scale - low
        event(f"fractional R_t: {frac > 0}")
        matrix = (1.0 - frac) * lbp_matrix(local_fn, neighbourhood, states, low, "sqrt")
        if frac > 0:
            matrix += frac * lbp_matrix(local_fn, neighbourhood, states, low + 1, "sqrt")
        assert_reversible(matrix, pi)


def acs_matrices(kernel, local_fn, states):
    """The exact transition matrices of the ACS coordinate-wise step at any ``(alpha,
    beta)``, with the kernel's own neighbourhood and squared distances; each checks that the
    proposal probabilities of every state sum to 1."""
    target = kernel._target
    squared_distance = squared_distance_fn(target.supports)
    matrix_at = coordinatewise_transition_matrices(
        local_fn, target.neighbourhood, squared_distance, states
    )

    def matrix(step_size, balancing):
        matrix, forward_mass = matrix_at(step_size, balancing)
        np.testing.assert_allclose(forward_mass, 1.0, atol=1e-12)
        return matrix

    return matrix


@settings(max_examples=2, deadline=None, derandomize=True)
@given(
    model=models(),
    weights=st.sampled_from(["gradient", "exact", "auto"]),
    cycle_length=st.integers(2, 4),
    alpha=st.tuples(st.floats(0.05, 0.5), st.floats(0.5, 5.0)),
    betas=st.lists(st.floats(0.5, 0.95), min_size=4, max_size=4),
)
def test_acs_detailed_balance_at_every_schedule_position(
    model, weights, cycle_length, alpha, betas
):
    """Every step of an ACS cycle, at its position's step size (the cosine schedule between
    step_size_max and step_size_min) and balancing parameter (a non-increasing schedule), is in
    detailed balance."""
    step_size_min, step_size_max = alpha
    balancing = np.sort(betas)[::-1][:cycle_length]
    step_sizes = cyclical.cosine_schedule(step_size_max, step_size_min, cycle_length)
    with jax.enable_x64(True):
        kernel, _, local_fn, _, states, pi = initialised(
            ACS,
            model,
            weights,
            num_warmup=1000,
            cycle_length=cycle_length,
            step_size_max=step_size_max,
            step_size_min=step_size_min,
        )
        matrix_at = acs_matrices(kernel, local_fn, states)
        for k in range(cycle_length):
            assert_reversible(matrix_at(step_sizes[k], balancing[k]), pi)


def test_albp_frozen_scale_is_a_mixture_of_lbp_kernels(x64):
    """ALBP after warmup with R_t = 1.5 moves by 0.5 LBP-1 + 0.5 LBP-2 (through the
    numpyro kernel's own `init`/`sample`)."""
    num_coords, draws = 4, 20000
    log_pi = random_binary_target(num_coords, seed=11)
    states = all_binary_states(num_coords)
    local_fn = gradient_local_fn(log_pi, binary_neighbourhood)
    matrices = [
        path_transition_matrix(local_fn, binary_neighbourhood, states, r, "sqrt")[0] for r in (1, 2)
    ]
    mixture = 0.5 * (matrices[0] + matrices[1])
    kernel = ALBP(potential_fn=lambda z: -log_pi(z["x"]), init_path_length=1.5)
    kernel.init(random.key(0), 0, {"x": jnp.asarray(states[0])}, (), None)
    sample = jax.jit(jax.vmap(lambda s: kernel.sample(s, (), None)))
    # one compiled program for every starting state (an eager vmap of `init` per state
    # would dispatch its operations one by one)
    init = jax.jit(jax.vmap(lambda k, x: kernel.init(k, 0, {"x": x}, (), None), (0, None)))
    counts = np.zeros_like(mixture)
    for row, x in enumerate(states):
        new_state = sample(init(random.split(random.key(100 + row), draws), jnp.asarray(x)))
        np.testing.assert_allclose(new_state.path_length, 1.5)
        np.add.at(counts[row], np.asarray(state_index(new_state.z["x"])), 1)
    assert chi_square_rows(counts, mixture) > 1e-4
