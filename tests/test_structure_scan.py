"""Structure detection through scans: ``lax.scan`` and numpyro's ``contrib.control_flow.scan``
are unrolled, so that a chain written as a scan (an HMM) is detected as a chain, a counter
carried through the scan indexes what it indexes at each iteration, and a carry accumulating
every coordinate stays dense (against brute-force probing)."""

import numpy as np
import pytest

import jax
from jax import lax, random
import jax.numpy as jnp

import numpyro
from numpyro.contrib.control_flow import scan
import numpyro.distributions as dist

from numpyro_discrete.model.initial_values import initial_position
from numpyro_discrete.model.target import DiscreteTarget
from numpyro_discrete.structure.dependencies import _Analysis, detect_dependencies

from helpers import coloured_ratios_checker

K = 3
# numpy constants: float64 in the tests with 64-bit floats
TRANS = np.full((K, K), 0.1) + 0.7 * np.eye(K)
TRANS = TRANS / TRANS.sum(-1, keepdims=True)
LOG_TRANS = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]))


# --- helpers ------------------------------------------------------------------------------------


def _brute_force(terms_fn, num_coords, num_values, seed=0, num_points=6):
    """``(E, N)`` boolean: term ``e`` changes when coordinate ``j`` alone moves to another of
    its `num_values` values, at `num_points` random points."""
    terms_fn = jax.jit(terms_fn)
    rng = np.random.default_rng(seed)
    found = None
    for _ in range(num_points):
        x = rng.integers(0, num_values, num_coords).astype(np.int32)
        base = np.asarray(terms_fn(x))
        if found is None:
            found = np.zeros((base.shape[0], num_coords), bool)
        for j in range(num_coords):
            for value in range(num_values):
                if value != x[j]:
                    moved = np.asarray(terms_fn(_set(x, j, value)))
                    found[:, j] |= ~((moved == base) | (np.isneginf(moved) & np.isneginf(base)))
    return found


def _set(x, j, value):
    y = x.copy()
    y[j] = value
    return y


def _detected(deps):
    """``(E, N)`` boolean of the detected dependencies (dense terms on every coordinate)."""
    found = np.zeros((deps.num_terms, deps.num_coords), bool)
    found[deps.terms, deps.coords] = True
    found[deps.dense] = True
    return found


def _hmm(data):
    """An HMM written with numpyro's scan: ``x_t ~ Categorical(trans[x_{t-1}])``,
    ``y_t ~ Normal(x_t, 1)``."""

    def model():
        def step(x_prev, y):
            x = numpyro.sample("x", dist.Categorical(jnp.asarray(TRANS)[x_prev]))
            numpyro.sample("y", dist.Normal(x.astype(float), 1.0), obs=y)
            return x, None

        scan(step, 0, data)

    return model


def _target(model):
    return DiscreteTarget.from_model(model, random.key(0), (), {}, weights="exact")


def _target_detected(target):
    structure = target.structure
    found = np.zeros((structure.num_terms, structure.num_coords), bool)
    found[structure.pair_terms, structure.pair_coords] = True
    found[structure.dense_terms] = True
    return found


# --- numpyro's scan -----------------------------------------------------------------------------


def test_hmm_written_with_scan_is_a_chain():
    num_steps = 100
    data = jnp.asarray(np.random.default_rng(0).normal(size=num_steps), jnp.float32)
    target = _target(_hmm(data))
    structure = target.structure
    assert not target.structure_note
    assert structure.num_colours in (2, 3)
    assert structure.dense_terms.size == 0
    found = _target_detected(target)
    for term in range(structure.num_terms):
        coords = np.flatnonzero(found[term])
        assert 1 <= coords.size <= 2, (term, coords)
        assert coords.max() - coords.min() <= 1, (term, coords)
    # x_t's term on x_{t-1} and x_t, y_t's term on x_t: every transition is seen
    pairs = {(int(c.min()), int(c.max())) for c in map(np.flatnonzero, found)}
    assert {(t - 1, t) for t in range(1, num_steps)} <= pairs


def test_hmm_written_with_scan_covers_the_brute_force_dependencies():
    num_steps = 5
    data = jnp.linspace(-1.0, 2.0, num_steps)
    target = _target(_hmm(data))
    probed = _brute_force(target.log_terms(), num_steps, K)
    found = _target_detected(target)
    assert (probed <= found).all()
    assert (probed == found).all()  # (the transitions are not uniform: no spurious pair)


def test_coloured_ratios_of_an_hmm_written_with_scan_equal_brute_force(x64):
    """The chain's colour-batched exact ratios (a few evaluations of the terms) are the
    brute-force ones (one evaluation of ``log pi`` per coordinate and value)."""
    num_steps = 12
    target = _target(_hmm(np.linspace(-1.0, 3.0, num_steps)))
    assert target.structure.num_colours in (2, 3)
    check_coloured_ratios = coloured_ratios_checker(target, target.structure)
    for seed in range(3):
        check_coloured_ratios(initial_position(target, random.key(seed), None, (), {}))


def test_a_counter_carried_through_a_scan_indexes_per_iteration():
    """A carry that does not depend on x (a step counter) is read at each iteration: the
    observations are independent given the states, one colour."""
    num_steps = 8
    weights = jnp.linspace(0.5, 2.0, num_steps)
    data = jnp.linspace(-1.0, 1.0, num_steps)

    def model():
        def step(i, y):
            x = numpyro.sample("x", dist.Bernoulli(0.4))
            numpyro.sample("y", dist.Normal(weights[i] * x, 1.0), obs=y)
            return i + 1, None

        scan(step, 0, data)

    target = _target(model)
    probed = _brute_force(target.log_terms(), num_steps, 2)
    found = _target_detected(target)
    assert (probed <= found).all()
    assert (found.sum(axis=1) == 1).all()
    assert target.structure.num_colours == 1


def test_a_carry_accumulating_every_state_is_dense():
    """A running sum of the states carried through the scan, feeding a factor: the factor
    depends on every state (soundness: no sparse structure is invented)."""
    num_steps = 6

    def model():
        def step(total, _):
            x = numpyro.sample("x", dist.Bernoulli(0.4))
            return total + 1.0 * x, None

        total, _ = scan(step, 0.0, None, length=num_steps)
        numpyro.factor("total", 0.3 * total**2)

    target = _target(model)
    probed = _brute_force(target.log_terms(), num_steps, 2)
    found = _target_detected(target)
    assert (probed <= found).all()
    assert target.structure.dense_terms.size == 1
    assert target.structure.num_colours == num_steps


# --- lax.scan programs --------------------------------------------------------------------------

N = 6
WEIGHTS = jnp.linspace(0.5, 1.5, N)
EMISSIONS = jnp.array([0.1, 0.2, -0.3])


def counter(x):
    """A counter carried through the scan reads ``x[i]`` (ys: one term per coordinate)."""
    _, ys = lax.scan(lambda i, _: (i + 1, x[i] * WEIGHTS[i]), 0, None, length=N)
    return ys


def chain(x):
    def step(prev, current):
        return current, jnp.asarray(LOG_TRANS)[prev, current]

    return lax.scan(step, x[0], x[1:])[1]


def reversed_chain(x):
    def step(following, current):
        return current, jnp.asarray(LOG_TRANS)[current, following] + 0.1 * following

    return lax.scan(step, x[-1], x[:-1], reverse=True)[1]


def two_carries(x):
    """A second-order chain: the carry holds the last two states."""

    def step(carry, current):
        last, before = carry
        return (current, last), jnp.asarray(LOG_TRANS)[before, current] + 0.1 * last

    return lax.scan(step, (x[1], x[0]), x[2:])[1]


def nested(x):
    """Chains along the rows of ``x`` as a (2, 3) array, a scan in a scan."""

    def row_chain(carry, row):
        def step(prev, current):
            return current, jnp.asarray(LOG_TRANS)[prev, current]

        return carry, lax.scan(step, row[0], row[1:])[1]

    return lax.scan(row_chain, 0, x.reshape(2, 3))[1].ravel()


def unrolled(x):
    return lax.scan(lambda p, c: (c, jnp.asarray(LOG_TRANS)[p, c]), x[0], x[1:], unroll=2)[1]


def with_keys(x):
    """PRNG keys and a counter carried beside the states."""

    def step(carry, _):
        key, i = carry
        key, sub = random.split(key)
        return (key, i + 1), x[i] * 1.0 + 0.0 * random.uniform(sub)

    return lax.scan(step, (random.key(0), 0), None, length=N)[1]


def running_sum(x):
    """Prefix sums as ys and the total: term ``t`` depends on ``x[:t + 1]``."""
    total, prefix = lax.scan(lambda c, v: (c + v, (c + v) * 1.0), 0, x)
    return jnp.concatenate([prefix, jnp.reshape(total * 0.3, (1,))])


def batched_gather(x):
    """An HMM's transition terms without a scan: ``take_along_axis`` of logits that depend
    on x reads row ``t`` for term ``t`` only (the gather's batching axis)."""
    logits = x[:, None] * EMISSIONS + jnp.array([0.0, 1.0, 0.0])
    return jnp.take_along_axis(logits, x[:, None] % K, 1)[:, 0]


PROGRAMS = {
    "counter": counter,
    "chain": chain,
    "reversed_chain": reversed_chain,
    "two_carries": two_carries,
    "nested": nested,
    "unrolled": unrolled,
    "with_keys": with_keys,
    "running_sum": running_sum,
    "batched_gather": batched_gather,
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_scans_detected_as_brute_force_finds(name):
    terms_fn = PROGRAMS[name]
    deps = detect_dependencies(terms_fn, np.zeros(N, np.int32))
    found = _detected(deps)
    probed = _brute_force(terms_fn, N, K)
    assert (probed <= found).all()
    assert (found == probed).all()
    # the last prefix sum and the total cover every coordinate: dense
    assert deps.dense.tolist() == (
        [False] * (N - 1) + [True, True] if name == "running_sum" else [False] * deps.num_terms
    )


def test_a_large_set_carried_through_a_scan_becomes_dense():
    deps = detect_dependencies(running_sum, np.zeros(100, np.int32), max_set_size=16)
    assert not deps.dense[:16].any() and deps.dense[16:].all()


# --- fallback -----------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [{"_split_transpose": True}, {"a_new_parameter": 1}])
def test_scans_with_unknown_parameters_fall_back_to_the_dense_rule(params):
    """Every output of a scan the rule does not understand depends on everything its inputs
    depend on; with the parameters it knows, the first product depends on two coordinates."""
    closed = jax.make_jaxpr(lambda x: lax.scan(lambda c, v: (c + v, c * v), x[0], x[1:]))(
        jnp.zeros(N, jnp.int32)
    )
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert eqn.params["num_consts"] == 0
    carry_sets = np.array([0], np.int32)
    xs_sets = np.arange(1, N, dtype=np.int32)[:, None]
    invals = [jnp.int32(0), jnp.arange(1, N, dtype=jnp.int32)]
    _, known, _ = _Analysis(N, 64).eval_eqn(eqn, invals, [carry_sets, xs_sets], [False, False])
    assert sorted(known[1][0][known[1][0] >= 0].tolist()) == [0, 1]
    unknown = eqn.replace(params={**eqn.params, **params})
    _, outsets, _ = _Analysis(N, 64).eval_eqn(
        unknown, invals, [carry_sets, xs_sets], [False, False]
    )
    assert [sets.shape for sets in outsets] == [(N,), (N - 1, N)]
    for sets in outsets:
        assert (np.sort(sets, axis=-1) == np.arange(N)).all()


def test_a_scan_reading_traced_values_falls_back_to_the_dense_rule():
    """Under an enclosing ``jit``, a scan over traced data cannot be evaluated for the
    counter it carries: its outputs depend on everything its inputs depend on."""
    found = {}

    @jax.jit
    def detect(data):
        def terms_fn(x):
            return lax.scan(lambda i, d: (i + 1, x[i] * d), 0, data)[1]

        found["deps"] = detect_dependencies(terms_fn, np.zeros(N, np.int32))
        return data

    detect(jnp.ones(N))
    assert found["deps"].dense.all()


def test_stacked_arrays_keep_their_dependencies():
    """``jnp.stack`` (a primitive of its own) moves the sets with the data."""

    def terms(x):
        xf = x.astype(jnp.float32)
        return jnp.stack([xf * 2.0, xf[::-1]], axis=1).ravel()

    dependencies = detect_dependencies(terms, np.zeros(3, np.int32))
    assert not dependencies.dense.any()
    pairs = set(zip(dependencies.terms.tolist(), dependencies.coords.tolist(), strict=True))
    assert pairs == {(0, 0), (1, 2), (2, 1), (3, 1), (4, 2), (5, 0)}
