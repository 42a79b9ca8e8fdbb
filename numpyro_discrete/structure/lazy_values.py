"""Values of a jaxpr's variables computed only when a dependency rule reads them (indices
and masks that do not depend on ``x``), eagerly even inside a trace, and the evaluation of
a scan that returns what its rule reads in every iteration at once.

Eager evaluation inside a trace (``jax.ensure_compile_time_eval``: ``init`` under ``jit``
or ``pmap`` reads concrete values) evaluates each operation whose inputs are constants on
its own, compiling a small program for each (about 0.03-0.05 s on a CPU core). Where only a
program, its shapes or the values a rule asks for are wanted, that is pure cost:
:func:`staged` turns it off for a block. The values a rule asks for are computed by numpy
where it can (:mod:`~numpyro_discrete.structure.host_values`), by JAX otherwise.
"""

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

import jax
from jax import lax
import jax.extend.core as jex
import jax.numpy as jnp

from numpyro_discrete.structure.host_values import host_bind

__all__ = [
    "Lazy",
    "force",
    "lazy_outputs",
    "on_host",
    "scan_runner",
    "split_at",
    "staged",
    "typed",
]


try:  # JAX's own switch behind `ensure_compile_time_eval`, not public (jax 0.10)
    from jax._src.config import eager_constant_folding
except ImportError:  # a JAX without it: such blocks evaluate op by op, slower only
    eager_constant_folding = None


def staged() -> AbstractContextManager:
    """A block in which operations on constants are staged, not evaluated one by one."""
    if eager_constant_folding is None:
        return nullcontext()
    return eager_constant_folding(False)


class Lazy:
    """A value computed the first time a rule asks for it."""

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute = compute
        self._value: Any = None
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the value has been computed."""
        return self._done

    def get(self) -> Any:
        if not self._done:
            # eagerly, even when detection runs inside a trace (``init`` under ``pmap``)
            with jax.ensure_compile_time_eval():
                self._value, self._done = self._compute(), True
        return self._value


def force(value: Any) -> Any:
    return value.get() if isinstance(value, Lazy) else value


def lazy_outputs(eqn: Any, invals: list, params: dict) -> list:
    def compute() -> Any:
        operands = list(map(force, invals))
        outs = host_bind(eqn, operands, params)
        if outs is None:
            return eqn.primitive.bind(*operands, **params)
        return outs if eqn.primitive.multiple_results else outs[0]

    result = Lazy(compute)
    if not eqn.primitive.multiple_results:
        return [result]
    return [Lazy(lambda i=i: result.get()[i]) for i in range(len(eqn.outvars))]


def on_host(value: Any) -> Any:
    """`value` as a numpy array (cheap to index once per iteration), except where numpy
    cannot hold it (PRNG keys)."""
    if jnp.issubdtype(jnp.result_type(value), jax.dtypes.extended):
        return value
    return np.asarray(value)


def typed(value: Any, aval: Any) -> Any:
    """A literal's Python number as an array of its type in the jaxpr."""
    if isinstance(value, bool | int | float | complex):
        return np.asarray(value, aval.dtype)
    return value


def split_at(items: Sequence[Any], num_consts: int, num_carry: int) -> tuple[list, list, list]:
    items = list(items)
    return (
        items[:num_consts],
        items[num_consts : num_consts + num_carry],
        items[num_consts + num_carry :],
    )


def scan_runner(
    closed: Any, num_carry: int, length: int, reverse: bool, extra: tuple
) -> Callable[[list, list, list], tuple[list, list]]:
    """A scan of the body `closed` from ``(consts, init, xs)`` to the carries entering its
    iterations and the values of the body's variables `extra`, stacked."""
    if not isinstance(closed, jex.ClosedJaxpr):
        closed = jex.ClosedJaxpr(closed, ())
    jaxpr = closed.jaxpr
    num_outs = len(jaxpr.outvars)
    body = jex.jaxpr_as_fun(
        jex.ClosedJaxpr(jaxpr.replace(outvars=[*jaxpr.outvars, *extra]), closed.consts)
    )

    def run(consts: list, init: list, xs: list) -> tuple[list, list]:
        def step(carry: list, x: list) -> tuple[list, tuple[list, list]]:
            out = body(*consts, *carry, *x)
            return list(out[:num_carry]), (list(carry), list(out[num_outs:]))

        _, stacked = lax.scan(step, init, xs, length=length, reverse=reverse)
        return stacked

    return run
