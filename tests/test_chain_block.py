"""Chain blocks by forward filtering, backward sampling (:mod:`~numpyro_discrete.core.
chain_block`), against brute-force enumeration of all ``M^L`` states of random small chains
with invalid values and pairs:

- the log-normaliser and ``chain_log_prob`` of every state equal the enumerated ones;
- the exact distribution backward sampling draws from (the product of its conditionals)
  equals the enumerated one, and draws of both samplers (Gumbel-max maps composed by an
  associative scan, and the sequential scan) pass a chi-square test against it;
- a chain of probability zero gives ``-inf``, never NaN;
- on a chain of 2000 variables both filters agree with a plain recursion, in 64 and 32 bits;
- where the sequential recursions' products underflow in probability space (potentials in
  conflict by hundreds of nats), the log-space ones keep the draws exact;
- under ``vmap`` (a class of blocks) and ``jit`` the draws are those of one chain at a time.
"""

from functools import partial
import itertools

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
from scipy import stats

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core import chain_block
from numpyro_discrete.core.chain_marginal import log_normaliser

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
NUM_DRAWS = 20_000
METHODS = {"parallel": True, "sequential": False}


def random_chain(rng, length, num_values, invalid=0.0, dtype=np.float64):
    """Potentials ``(unary, pairwise)`` with about a fraction `invalid` of them ``-inf``."""
    unary = rng.normal(scale=1.5, size=(length, num_values))
    pairwise = rng.normal(scale=1.5, size=(length - 1, num_values, num_values))
    unary[rng.random(unary.shape) < invalid] = -np.inf
    pairwise[rng.random(pairwise.shape) < invalid] = -np.inf
    return unary.astype(dtype), pairwise.astype(dtype)


def enumerate_chain(unary, pairwise):
    """Every state (rows, in ``itertools.product`` order) and its unnormalised log-prob."""
    length, num_values = unary.shape
    states = np.array(list(itertools.product(range(num_values), repeat=length)), np.int32)
    positions = np.arange(length)
    log_p = unary[positions, states].sum(1)
    if length > 1:
        log_p = log_p + pairwise[positions[:-1], states[:, :-1], states[:, 1:]].sum(1)
    return states, log_p


def chi_square_pvalue(counts, probs):
    """Chi-square of `counts` against `probs`, the cells expected fewer than 5 times pooled
    (a stray draw of a rare state would otherwise dominate the statistic)."""
    assert np.all(counts[probs == 0] == 0), "a state of probability zero was drawn"
    expected = counts.sum() * probs
    rare = (expected < 5) & (probs > 0)
    observed = np.r_[counts[expected >= 5], counts[rare].sum()]
    expected = np.r_[expected[expected >= 5], expected[rare].sum()]
    observed, expected = observed[expected > 0], expected[expected > 0]
    if expected.size < 2:
        return 1.0
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


@jax.jit
def run_chain(key, unary, pairwise, states):
    """What the tests read, for both methods (one program: one compilation per shape): the
    filter, the backward conditionals, ``chain_log_prob`` of every enumerated state and
    `NUM_DRAWS` draws under ``vmap``."""
    outputs = {}
    for name, parallel in METHODS.items():
        log_alphas, log_z = chain_block.forward_filter(unary, pairwise, parallel)
        conditionals = chain_block.backward_conditionals(log_alphas, pairwise)
        log_probs = jax.vmap(chain_block.chain_log_prob, (0, None, None, None))(
            states, unary, pairwise, log_z
        )
        keys = random.split(key, NUM_DRAWS)
        sample = partial(chain_block.sample_chain, parallel=parallel)
        draws = jax.vmap(sample, (0, None, None))(keys, unary, pairwise)
        outputs[name] = (log_alphas, log_z, conditionals, log_probs, *draws)
    return outputs


#: ``(length, num_values, invalid, seed)`` of :func:`random_chain` always tried: one
#: position, one value and, last, no possible state (every pair invalid)
RANDOM_CHAIN_EXAMPLES = (
    (5, 3, 0.0, 0),
    (4, 4, 0.25, 1),
    (5, 2, 0.25, 2),
    (1, 3, 0.0, 3),
    (4, 1, 0.0, 4),
    (3, 2, 1.0, 5),
)


def random_chain_cases(test):
    """`test(length, num_values, invalid, seed)` on random chains (:func:`random_chain`)
    and on :data:`RANDOM_CHAIN_EXAMPLES`."""
    for length, num_values, invalid, seed in reversed(RANDOM_CHAIN_EXAMPLES):
        test = example(length=length, num_values=num_values, invalid=invalid, seed=seed)(test)
    return settings(max_examples=3, **SETTINGS)(
        given(
            length=st.integers(1, 5),
            num_values=st.integers(1, 4),
            invalid=st.sampled_from([0.0, 0.25, 0.5]),
            seed=st.integers(0, 2**31 - 1),
        )(test)
    )


@random_chain_cases
def test_exact_against_enumeration(length, num_values, invalid, seed):
    rng = np.random.default_rng(seed)
    unary, pairwise = random_chain(rng, length, num_values, invalid)
    states, log_p = enumerate_chain(unary, pairwise)
    log_z = np.logaddexp.reduce(log_p)
    possible = log_p > -np.inf
    probs = np.exp(log_p - log_z) if possible.any() else np.zeros_like(log_p)
    index = states @ num_values ** np.arange(length - 1, -1, -1)
    np.testing.assert_array_equal(index, np.arange(len(states)))
    with jax.enable_x64(True):
        outputs = run_chain(random.key(seed), unary, pairwise, states)
        for name, out in outputs.items():
            log_alphas, z, conditionals, log_probs, draws, draw_log_probs = map(np.asarray, out)
            for value in (log_alphas, z, conditionals, log_probs, draw_log_probs):
                assert not np.isnan(value).any(), name
            np.testing.assert_allclose(z, log_z, atol=1e-6, err_msg=name)
            np.testing.assert_array_equal(log_probs > -np.inf, possible, err_msg=name)
            np.testing.assert_allclose(log_probs[possible], log_p[possible] - log_z, atol=1e-6)
            # the distribution backward sampling draws from: x_{L-1} from the last filter,
            # then each x_i from its conditional given x_{i+1}
            log_q = log_alphas[-1, states[:, -1]]
            for i in range(length - 1):
                log_q = log_q + conditionals[i, states[:, i], states[:, i + 1]]
            if not possible.any():
                assert np.all(log_q == -np.inf) and np.all(draw_log_probs == -np.inf), name
                continue
            np.testing.assert_allclose(np.exp(log_q), probs, atol=1e-6, err_msg=name)
            drawn = draws @ num_values ** np.arange(length - 1, -1, -1)
            np.testing.assert_allclose(draw_log_probs, log_probs[drawn], atol=1e-12)
            counts = np.bincount(drawn, minlength=len(states))
            assert chi_square_pvalue(counts, probs) > 1e-4, name


def filter_reference(unary, pairwise):
    """The forward recursion one step at a time in numpy: normalised log-alphas and the
    log-normaliser."""
    alphas, log_z = [], 0.0
    alpha = unary[0]
    for i in range(len(unary)):
        if i:
            alpha = unary[i] + np.logaddexp.reduce(alphas[-1][:, None] + pairwise[i - 1], 0)
        norm = np.logaddexp.reduce(alpha)
        log_z += norm
        alphas.append(alpha - norm)
    return np.array(alphas), log_z


def long_chain(length=2000, num_values=3, seed=0):
    """A long chain with a third of its potentials ``-inf``, whole rows and columns of
    ``psi`` among them, kept possible by value 0 (always valid, and may follow itself)."""
    rng = np.random.default_rng(seed)
    unary, pairwise = random_chain(rng, length, num_values, invalid=1 / 3)
    unary[:, 0] = rng.normal(size=length)
    pairwise[:, 0, 0] = rng.normal(size=length - 1)
    assert np.all(pairwise == -np.inf, axis=2).any() and np.all(pairwise == -np.inf, 1).any()
    return unary, pairwise


@jax.jit
def long_chain_outputs(key, unary, pairwise):
    """For both methods: the filter, and a draw with its log-probability (the steps of
    ``sample_chain``, the filter shared)."""
    outputs = {}
    for name, parallel in METHODS.items():
        log_alphas, log_z = chain_block.forward_filter(unary, pairwise, parallel)
        states = chain_block.backward_sample(key, log_alphas, pairwise, parallel)
        log_prob = chain_block.chain_log_prob(states, unary, pairwise, log_z)
        outputs[name] = (log_alphas, log_z), (states, log_prob)
    return outputs


@pytest.mark.parametrize("bits", [64, 32])
def test_long_chain_agrees_with_recursion(bits):
    # 1e-5 in 32 bits too: the parallel filter shifts every product to maximum 0 (without,
    # its prefixes reach |log Z| ~ 2000 and the probabilities drift by 1e-4)
    rtol = 1e-5
    unary, pairwise = long_chain()
    alphas, log_z = filter_reference(unary, pairwise)
    positions = np.arange(len(unary))
    dtype = jnp.float64 if bits == 64 else jnp.float32
    with jax.enable_x64(bits == 64):
        outputs = long_chain_outputs(
            random.key(1), jnp.asarray(unary, dtype), jnp.asarray(pairwise, dtype)
        )
    for name, ((got, z), (states, log_prob)) in outputs.items():
        got, z = np.asarray(got), float(z)
        assert got.dtype == dtype and not np.isnan(got).any() and np.isfinite(z), name
        np.testing.assert_array_equal(got > -np.inf, alphas > -np.inf, err_msg=name)
        # probabilities, not logs: a log near 0 has no relative precision to test
        np.testing.assert_allclose(np.exp(got), np.exp(alphas), rtol=rtol, atol=rtol)
        np.testing.assert_allclose(z, log_z, rtol=rtol, err_msg=name)
        # the draw is a possible state
        assert states.dtype == jnp.int32 and np.isfinite(log_prob), name
        assert np.all(unary[positions, states] > -np.inf), name
        assert np.all(pairwise[positions[:-1], states[:-1], states[1:]] > -np.inf), name


@pytest.mark.parametrize("parallel", METHODS.values(), ids=METHODS.keys())
def test_vmap_over_chains_equals_one_at_a_time(parallel):
    rng = np.random.default_rng(3)
    chains = [random_chain(rng, 7, 3, invalid=0.2, dtype=np.float32) for _ in range(4)]
    for unary, _ in chains:
        unary[:, 0] = 0.0  # a chain of probability zero would make the comparison trivial
    for _, pairwise in chains:
        pairwise[:, 0, 0] = 0.0
    unary, pairwise = (jnp.asarray(np.stack(c)) for c in zip(*chains, strict=True))
    keys = random.split(random.key(4), len(chains))

    def draw_and_filter(key, unary, pairwise):
        draw = chain_block.sample_chain(key, unary, pairwise, parallel)
        return draw, chain_block.forward_filter(unary, pairwise, parallel)

    (states, log_probs), (log_alphas, log_z) = jax.jit(jax.vmap(draw_and_filter))(
        keys, unary, pairwise
    )
    one_chain = jax.jit(draw_and_filter)
    for b in range(len(chains)):
        (one_states, one_log_prob), (one_alphas, one_z) = one_chain(keys[b], unary[b], pairwise[b])
        assert np.isfinite(one_log_prob)
        np.testing.assert_array_equal(states[b], one_states)
        np.testing.assert_allclose(log_probs[b], one_log_prob, rtol=1e-6)
        np.testing.assert_allclose(log_alphas[b], one_alphas, rtol=1e-6)
        np.testing.assert_allclose(log_z[b], one_z, rtol=1e-6)


def test_sequential_recursions_are_exact_where_scaled_products_underflow():
    # potentials that conflict by hundreds of nats: x_1 = 1 is all but certain, and reached
    # from x_0 only through a value or a pair penalised by 100 nats (x_0 is then 0 or 1 with
    # probability 1/2 each). In 32 bits the recursions in probability space underflow to
    # zero, forward and backward, and those in log space take over.
    unary = np.array([[-100.0, 0.0], [0.0, 200.0], [0.0, 0.0], [3.0, -150.0]], np.float32)
    pairwise = np.array([[[0.0, 0.0], [0.0, -100.0]]] * 3, np.float32)
    assert not chain_block._forward_scaled(jnp.asarray(unary), jnp.asarray(pairwise))[2]
    states, log_p = enumerate_chain(unary.astype(np.float64), pairwise.astype(np.float64))
    log_z = np.logaddexp.reduce(log_p)
    probs = np.exp(log_p - log_z)
    log_alphas, got_z = jax.jit(partial(chain_block.forward_filter, parallel=False))(
        unary, pairwise
    )
    assert np.isfinite(np.asarray(log_alphas)[np.asarray(log_alphas) > -np.inf]).all()
    np.testing.assert_allclose(float(got_z), log_z, rtol=1e-6)
    sample = jax.vmap(partial(chain_block.sample_chain, parallel=False), (0, None, None))
    draws, draw_log_probs = jax.jit(sample)(random.split(random.key(0), NUM_DRAWS), unary, pairwise)
    index = np.asarray(draws) @ 2 ** np.arange(3, -1, -1)
    np.testing.assert_allclose(np.asarray(draw_log_probs), log_p[index] - log_z, atol=1e-4)
    assert 0.45 < np.mean(np.asarray(draws)[:, 0]) < 0.55
    assert chi_square_pvalue(np.bincount(index, minlength=len(states)), probs) > 1e-4


def test_vectorized_chains_fall_back_to_log_space_each_on_its_own():
    # under `vmap` (vectorized chains) a batch mixes a chain whose scaled products underflow
    # with an ordinary one: each gets what it gets alone, bit for bit, and the ordinary one
    # keeps its probability-space results (the fallback runs for the batch, selected per
    # chain)
    conflicting = (
        np.array([[-100.0, 0.0], [0.0, 200.0], [0.0, 0.0], [3.0, -150.0]], np.float32),
        np.array([[[0.0, 0.0], [0.0, -100.0]]] * 3, np.float32),
    )
    rng = np.random.default_rng(0)
    ordinary = (
        rng.normal(size=(4, 2)).astype(np.float32),
        rng.normal(size=(3, 2, 2)).astype(np.float32),
    )
    uniforms = jnp.asarray(rng.uniform(size=(2, 4)), jnp.float32)

    def filter_and_draw(unary: jax.Array, pairwise: jax.Array, uniforms: jax.Array) -> tuple:
        log_alphas, log_z = chain_block.forward_filter(unary, pairwise, parallel=False)
        draw = chain_block.backward_sample_from_uniforms(uniforms, log_alphas, pairwise)
        return log_alphas, log_z, draw

    one_at_a_time = jax.jit(filter_and_draw)
    batched = jax.jit(jax.vmap(filter_and_draw))(
        *(jnp.stack([a, b]) for a, b in zip(conflicting, ordinary, strict=True)), uniforms
    )
    for chain, (unary, pairwise) in enumerate((conflicting, ordinary)):
        alone = one_at_a_time(unary, pairwise, uniforms[chain])
        for got, expected in zip(batched, alone, strict=True):
            np.testing.assert_array_equal(np.asarray(got[chain]), np.asarray(expected))
    scaled = chain_block._forward_scaled(*(jnp.asarray(a) for a in ordinary))
    assert scaled[2]
    np.testing.assert_array_equal(np.asarray(batched[1][1]), np.asarray(scaled[1]))


# --- the log-normaliser's gradient (chains summed out) -------------------------------------


def enumerated_marginals(unary, pairwise):
    """``p(x_i = v)`` and ``p(x_i = u, x_{i+1} = v)`` by enumeration (zeros where no state
    is possible): the gradient of ``log Z`` in the unary and pairwise potentials."""
    length, num_values = unary.shape
    states, log_p = enumerate_chain(unary, pairwise)
    single = np.zeros_like(unary)
    pair = np.zeros_like(pairwise)
    if not (log_p > -np.inf).any():
        return single, pair
    probs = np.exp(log_p - np.logaddexp.reduce(log_p))
    for i in range(length):
        np.add.at(single[i], states[:, i], probs)
        if i < length - 1:
            np.add.at(pair[i], (states[:, i], states[:, i + 1]), probs)
    return single, pair


@random_chain_cases
def test_log_normaliser_gradient_is_the_enumerated_marginals(length, num_values, invalid, seed):
    """:func:`~numpyro_discrete.core.chain_marginal.log_normaliser`'s value and custom
    gradient against enumeration (64 bits, 1e-9), and against reverse-mode differentiation
    of the log-space filter (the rule it replaces)."""
    rng = np.random.default_rng(seed)
    unary, pairwise = random_chain(rng, length, num_values, invalid)
    states, log_p = enumerate_chain(unary, pairwise)
    single, pair = enumerated_marginals(unary, pairwise)
    with jax.enable_x64(True):
        value, (d_unary, d_pairwise) = jax.jit(jax.value_and_grad(log_normaliser, (0, 1)))(
            unary, pairwise
        )
        np.testing.assert_allclose(value, np.logaddexp.reduce(log_p), atol=1e-9)
        np.testing.assert_allclose(d_unary, single, atol=1e-9)
        np.testing.assert_allclose(d_pairwise, pair, atol=1e-9)
        if (log_p > -np.inf).any():
            by_autodiff = jax.jit(jax.grad(lambda u, p: chain_block._forward_log(u, p)[1], (0, 1)))
            for got, want in zip((d_unary, d_pairwise), by_autodiff(unary, pairwise), strict=True):
                np.testing.assert_allclose(got, np.nan_to_num(np.asarray(want)), atol=1e-9)


def test_log_normaliser_gradient_where_scaled_products_underflow():
    """32 bits, potentials in conflict by hundreds of nats (found by a search for a chain
    where both recursions' products underflow in probability space, checked here, and the
    exact marginal of ``x_1`` is 1/2): the log-space fallbacks keep the marginals exact. A
    batch of chains (a class of blocks) is differentiated chain by chain."""
    unary = np.array([[-100.0, -100.0], [-100.0, -100.0], [-200.0, -300.0]], np.float32)
    pairwise = np.array(
        [[[0.0, -300.0], [-200.0, -100.0]], [[-200.0, -200.0], [-100.0, -100.0]]], np.float32
    )
    # compiled, as in a step (op by op, the recursions' operations compile one by one)
    assert not jax.jit(chain_block._forward_scaled)(unary, pairwise)[2]
    kernels = np.asarray(jax.jit(chain_block._scaled_kernels)(unary, pairwise)[0])
    beta = kernels[1] @ np.full(2, 0.5, np.float32)
    assert (kernels[0] @ (beta / beta.sum())).sum() < chain_block._underflow_floor(np.float32)
    single, pair = enumerated_marginals(unary.astype(np.float64), pairwise.astype(np.float64))
    np.testing.assert_allclose(single[1], 0.5)
    d_unary, d_pairwise = jax.jit(jax.grad(log_normaliser, (0, 1)))(unary, pairwise)
    np.testing.assert_allclose(d_unary, single, atol=1e-5)
    np.testing.assert_allclose(d_pairwise, pair, atol=1e-5)
    rng = np.random.default_rng(7)
    batch = [random_chain(rng, 4, 3, 0.25, np.float32) for _ in range(3)]
    unaries, pairwises = (jnp.asarray(np.stack(parts)) for parts in zip(*batch, strict=True))
    weights = jnp.arange(1.0, 4.0)
    grads = jax.jit(jax.grad(lambda u, p: jnp.sum(weights * log_normaliser(u, p)), (0, 1)))(
        unaries, pairwises
    )
    for b, (u, p) in enumerate(batch):
        single, pair = enumerated_marginals(u.astype(np.float64), p.astype(np.float64))
        np.testing.assert_allclose(grads[0][b], weights[b] * single, atol=1e-5)
        np.testing.assert_allclose(grads[1][b], weights[b] * pair, atol=1e-5)
