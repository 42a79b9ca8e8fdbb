"""The parts of a log density that depend on neither the state nor a traced value, computed
once and placed in the program as values.

A model closes over its data, and numpyro passes the model's arguments as constants
(``jit_model_args=False``), so that inside a compiled step ``dist.Categorical(logits=field)``
normalises a constant array, ``dist.Normal(loc, scale).log_prob`` takes the log of a
constant scale, and so on. XLA folds such operations on constants while compiling, slowly:
on a 1000 x 1000 3-state Potts model, each fold of the normalisation of the field took 3 to
8 s of compile time (``slow_operation_alarm``), and a first run of 100 sweeps took 57 s.
:func:`hoist_constants` splits the function's program where it is traced: the operations
whose inputs are all concrete (the data and what is computed from it alone) run once,
eagerly, as one compiled program that takes those constants as arguments (so that nothing
is left to fold), and their results enter the traced program as values. Nested ``jit``
calls are opened, so that a call mixing the state with data hoists the data's part; other
operations with inner programs (``scan``, ``cond``, ``custom_jvp``) are hoisted whole or
not at all.
"""

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp

__all__ = ["MIN_HOISTED_SIZE", "hoist_constants"]

# primitives whose inner program is a plain call: opened, so that a call that mixes traced
# and constant inputs hoists its constant part
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr"}
_PLACEHOLDER = object()  # a known value the replaying walk does not compute


#: Hoisting starts at a constant of this many elements. It costs a compilation of the
#: constant part; XLA's folding costs about a microsecond per element and operation.
#: Measured on the normalisation of a ``(p, p, 3)`` field (compile and first call, two
#: alternations): 30,000 elements 0.35-0.51 s folded, 0.57-0.63 s hoisted; 120,000 0.65-0.71
#: and 0.66-0.73 s; 270,000 0.89-0.96 and 0.68-0.74 s; 3,000,000 4.7 and 0.57 s.
MIN_HOISTED_SIZE = 2**17


def hoist_constants(fn: Callable[..., Any], cache: dict | None = None) -> Callable[..., Any]:
    """`fn`, with the operations of its program that depend only on concrete values it
    closes over (one of at least :data:`MIN_HOISTED_SIZE` elements among them) computed
    once, outside the program being traced. Called on concrete arguments, it is `fn`
    itself.

    :param cache: where the constant parts are kept by program and constants, so that a
        function traced again (every ``run``, every chain) computes them once.
    """
    cache = {} if cache is None else cache

    def hoisted(*args: Any) -> Any:
        leaves, tree = jax.tree.flatten(args)
        if not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return fn(*args)
        shapes = [jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)) for v in leaves]
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*jax.tree.unflatten(tree, shapes))
        out_tree = jax.tree.structure(out_shape)
        concrete = [c for c in closed.consts if not isinstance(c, jax.core.Tracer)]
        if max((jnp.size(c) for c in concrete), default=0) < MIN_HOISTED_SIZE:
            return jax.tree.unflatten(out_tree, jex.jaxpr_as_fun(closed)(*leaves))
        key = (str(closed.jaxpr), tuple(map(id, concrete)))
        if key not in cache:
            # the constants are kept with their part, so that their ids are not reused
            cache[key] = (concrete, _constant_part(closed, concrete, len(leaves)))
        crossed = cache[key][1]
        if crossed is None:  # no operation on the constants alone: nothing to hoist
            return jax.tree.unflatten(out_tree, jex.jaxpr_as_fun(closed)(*leaves))
        outs = _Walk(record=False, crossed=crossed).outputs(closed, list(closed.consts), leaves)
        return jax.tree.unflatten(out_tree, outs)

    return hoisted


def _constant_part(closed: Any, concrete: list, num_args: int) -> list | None:
    """The known values that the unknown operations of `closed` read, computed eagerly
    (even inside the trace of a step) as one compiled program whose arguments are the
    `concrete` constants, so that XLA has nothing to fold; ``None`` when that program
    computes nothing (the step reads the constants themselves)."""

    def part(*values: Any) -> list:
        it = iter(values)
        consts = [c if isinstance(c, jax.core.Tracer) else next(it) for c in closed.consts]
        walk = _Walk(record=True)
        walk.outputs(closed, consts, [_PLACEHOLDER] * num_args)
        return walk.crossed

    traced = jax.jit(part).trace(*concrete)
    if not traced.jaxpr.eqns:
        return None
    with jax.ensure_compile_time_eval():
        return traced.lower().compile()(*concrete)


class _Walk:
    """One evaluation of a jaxpr whose values are known (concrete, or computed from concrete
    values only) or not (the arguments, traced values, and what depends on them), the same
    in both of its modes. Recording, it computes the known operations and collects in
    `crossed` the known values that unknown operations (or the outputs) read, in the order
    read, once per variable and scope; replaying, it takes them from `crossed` in that order
    and binds the unknown operations in the caller's trace."""

    def __init__(self, record: bool, crossed: Sequence[Any] = ()) -> None:
        self.record = record
        self.crossed: list = list(crossed)
        self._next = 0

    def outputs(self, closed: Any, consts: list, args: list) -> list:
        """`closed`'s outputs at `consts` (whose known ones are those concrete in
        ``closed.consts``) and the unknown `args`."""
        const_known = _known_consts(closed.consts)
        outs = self._run(closed.jaxpr, consts, const_known, args, [False] * len(args))
        return [self._cross(value, known, {}, None) for value, known in outs]

    def _cross(self, value: Any, known: bool, crossed_here: dict, var: Any) -> Any:
        if not known or isinstance(var, jex.Literal):
            return value
        if var is not None and var in crossed_here:
            return crossed_here[var]
        if self.record:
            self.crossed.append(value)
        else:
            value = self.crossed[self._next]
            self._next += 1
        if var is not None:
            crossed_here[var] = value
        return value

    def _run(
        self, jaxpr: Any, consts: list, const_known: list, args: list, arg_known: list
    ) -> list[tuple[Any, bool]]:
        env: dict = {}
        crossed_here: dict = {}

        def read(var: Any) -> tuple[Any, bool]:
            return (var.val, True) if isinstance(var, jex.Literal) else env[var]

        env.update(zip(jaxpr.constvars, zip(consts, const_known, strict=True), strict=True))
        env.update(zip(jaxpr.invars, zip(args, arg_known, strict=True), strict=True))
        for eqn in jaxpr.eqns:
            inputs = [read(var) for var in eqn.invars]
            knowns = [known for _, known in inputs]
            name = eqn.primitive.name
            if all(knowns) and not eqn.effects:
                outs = (
                    self._bind(eqn, [v for v, _ in inputs])
                    if self.record
                    else [_PLACEHOLDER] * len(eqn.outvars)
                )
                env.update((var, (out, True)) for var, out in zip(eqn.outvars, outs, strict=True))
            elif name in _CALLS:
                # opened: the call's constant part is hoisted too
                inner = eqn.params[_CALLS[name]]
                inner_consts = list(inner.consts)
                outs = self._run(
                    inner.jaxpr,
                    inner_consts,
                    _known_consts(inner_consts),
                    [v for v, _ in inputs],
                    knowns,
                )
                env.update(zip(eqn.outvars, outs, strict=True))
            else:
                values = [
                    self._cross(value, known, crossed_here, var)
                    for var, (value, known) in zip(eqn.invars, inputs, strict=True)
                ]
                outs = [_PLACEHOLDER] * len(eqn.outvars) if self.record else self._bind(eqn, values)
                env.update((var, (out, False)) for var, out in zip(eqn.outvars, outs, strict=True))
        return [read(var) for var in jaxpr.outvars]

    @staticmethod
    def _bind(eqn: Any, values: Sequence[Any]) -> list:
        params = eqn.primitive.get_bind_params(eqn.params)
        out = eqn.primitive.bind(*values, **params)
        return list(out) if eqn.primitive.multiple_results else [out]


def _known_consts(consts: Sequence[Any]) -> list[bool]:
    return [not isinstance(c, jax.core.Tracer) for c in consts]
