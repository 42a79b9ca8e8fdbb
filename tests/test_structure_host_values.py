"""The host rules of :mod:`numpyro_discrete.structure.host_values` give JAX's values bit for
bit (same dtype, shape and elements) on the operations the dependency analyses read, as
``jnp`` writes them; a gather's positions follow XLA's semantics on random gathers."""

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import jax
from jax import lax
import jax.extend.core as jex
import jax.numpy as jnp

from numpyro_discrete.structure.host_values import host_bind, host_rules


def _replay(function, *args) -> set[str]:
    """Run each operation of `function`'s program on the host and by JAX at the same
    inputs, assert the host's outputs equal JAX's, and return the names it ran on the host."""
    closed = jax.make_jaxpr(function)(*args)
    values = dict(zip(closed.jaxpr.invars, map(np.asarray, args), strict=True))
    on_host = set()
    for eqn in closed.jaxpr.eqns:
        operands = [
            np.asarray(v.val, v.aval.dtype) if isinstance(v, jex.Literal) else values[v]
            for v in eqn.invars
        ]
        params = eqn.primitive.get_bind_params(eqn.params)
        expected = eqn.primitive.bind(*map(jnp.asarray, operands), **params)
        expected = expected if eqn.primitive.multiple_results else [expected]
        got = host_bind(eqn, operands, params)
        if got is not None:
            on_host.add(eqn.primitive.name)
            for host, reference in zip(got, expected, strict=True):
                assert host.dtype == reference.dtype and host.shape == reference.shape, eqn
                np.testing.assert_array_equal(host, np.asarray(reference), err_msg=str(eqn))
        values.update((v, np.asarray(r)) for v, r in zip(eqn.outvars, expected, strict=True))
    return on_host


OPERAND = np.arange(-6.0, 14.0, dtype=np.float32).reshape(4, 5)
INDICES = np.array([1, -2, 7, 0], np.int32)  # negative and out-of-bounds indices too


def test_data_moves_and_indexing_match_jax() -> None:
    def program(x, i):
        return (
            x[i],
            x[:, i[:2]],
            x[i, i],
            x.at[i].get(mode="fill"),
            x.at[i].get(mode="clip"),
            jnp.take_along_axis(x, jnp.abs(i[:, None]) % 5, 1),
            x[1:3, ::2],
            lax.dynamic_slice(x, (i[1], i[2]), (2, 2)),
            x.T.reshape(2, 10),
            jnp.concatenate([x, x[:1]]),
            jnp.squeeze(x[None]),
            jnp.broadcast_to(x[:, :1], (4, 5)),
            lax.iota(jnp.int32, 6),
        )

    on_host = _replay(program, OPERAND, INDICES)
    assert {"gather", "dynamic_slice", "slice", "concatenate", "broadcast_in_dim"} <= on_host


def test_arithmetic_logic_and_selection_match_jax() -> None:
    def program(x, i):
        mask = (x > 0) & ~(x == 3.0) | (x <= -5.0)
        return (
            x + 1.5,
            x - x.T.T,
            x * 0.1,
            -x,
            jnp.abs(x),
            jnp.maximum(x, 0.5),
            jnp.minimum(x, jnp.float32(np.nan)),
            jnp.clip(x, -2.0, 3.0),
            lax.clamp(np.float32(-2.0), x, np.float32(3.0)),
            jnp.where(mask, x, -x),
            jnp.where(i != 0, i, 2) ^ (i < 2),
            x.astype(jnp.int32).astype(jnp.float32),
            i.astype(jnp.float32) / 3.0,
            lax.select_n(i % 3, i, -i, 2 * i),
        )

    on_host = _replay(program, OPERAND, INDICES)
    assert {"add", "mul", "select_n", "and", "or", "not", "eq", "clamp"} <= on_host


def test_operations_without_a_rule_are_left_to_jax() -> None:
    eqn = jax.make_jaxpr(jnp.log)(OPERAND).jaxpr.eqns[0]
    assert "log" not in host_rules
    assert host_bind(eqn, [OPERAND], eqn.params) is None
    # float to integer conversion saturates in XLA: not modelled on the host
    eqn = jax.make_jaxpr(lambda x: x.astype(jnp.int32))(OPERAND).jaxpr.eqns[0]
    assert host_bind(eqn, [OPERAND], eqn.params) is None
    # a PRNG key is not a numeric array
    key = jax.random.key(0)
    eqn = jax.make_jaxpr(lambda k: k.reshape(1))(key).jaxpr.eqns[0]
    assert host_bind(eqn, [key], eqn.params) is None


@st.composite
def gathers(draw):
    """A random gather as ``jnp`` writes one: an operand, integer index arrays on some of
    its axes (others sliced whole), and an out-of-bounds mode."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    indexed = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
    num = draw(st.integers(1, 3))
    index = tuple(
        np.asarray(draw(st.lists(st.integers(-6, 6), min_size=num, max_size=num)), np.int32)
        if is_indexed
        else slice(None)
        for is_indexed in indexed
    )
    mode = draw(st.sampled_from(["fill", "clip", "promise_in_bounds"]))
    return shape, index, mode


@settings(max_examples=60, deadline=None)
@given(gathers())
def test_random_gathers_match_jax(case) -> None:
    shape, index, mode = case
    operand = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1.0
    arrays = [i for i in index if not isinstance(i, slice)]

    def program(x, *indices):
        it = iter(indices)
        return x.at[tuple(next(it) if not isinstance(i, slice) else i for i in index)].get(
            mode=mode
        )

    _replay(program, operand, *arrays)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_])
def test_a_dropped_slice_is_filled_as_jax_fills_it(dtype) -> None:
    operand = np.ones((3,), dtype)
    _replay(lambda x, i: x.at[i].get(mode="fill"), operand, np.array([5, -9, 1], np.int32))
