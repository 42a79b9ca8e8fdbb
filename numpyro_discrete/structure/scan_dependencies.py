"""The dependency rule of ``scan`` (``lax.scan``, numpyro's ``contrib.control_flow.scan``):
the scan unrolled, its body evaluated once per iteration in the scan's order, the carry's
sets flowing from one iteration to the next and each iteration seeing its slice of the
``xs``; the ``ys``' sets are stacked. Values the rules read in the body (a counter carried
through the scan and used as an index) are those of the iteration: the carries, and the
values the first iterations read, come for every iteration at once from one compiled
evaluation of the scan."""

import math
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.extend.core as jex

from numpyro_discrete.structure.lazy_values import (
    Lazy,
    force,
    lazy_outputs,
    on_host,
    scan_runner,
    split_at,
    typed,
)

if TYPE_CHECKING:
    from numpyro_discrete.structure.dependencies import _Analysis

__all__ = ["unroll_scan"]

_SCAN_PARAMS = frozenset(
    "reverse length jaxpr num_consts num_carry unroll linear _split_transpose".split()
)
# a scan's iterations in which the analysis records the values its rules read in the body
# (computed for every later iteration at once, by one evaluation of the scan)
_RECORDED_STEPS = 2
# and the largest number of elements of one of those values over all iterations (larger
# ones are computed again in each iteration that reads them)
_RECORDED_SIZE = 10**7
# the errors of values that cannot be read (traced by an enclosing transformation)
_TRACED = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerIntegerConversionError,
)


def unroll_scan(
    analysis: "_Analysis", eqn: Any, invals: list, insets: list, invarying: list
) -> tuple[list, list, list] | None:
    """A ``scan`` unrolled: its body evaluated once per iteration with the sets of the
    iteration's inputs (the consts', the carry's from the previous iteration, the
    iteration's slice of the ``xs``'), the ``ys``' sets stacked; ``None`` (no rule) for
    parameters this rule does not know."""
    params = eqn.params
    if set(params) - _SCAN_PARAMS or params.get("_split_transpose", False):
        return None
    closed = params["jaxpr"]
    if isinstance(closed, jex.ClosedJaxpr):
        body, body_consts = closed.jaxpr, closed.consts
    else:
        body, body_consts = closed, ()
    length, reverse = int(params["length"]), bool(params["reverse"])
    num_consts, num_carry = int(params["num_consts"]), int(params["num_carry"])
    outvals = lazy_outputs(eqn, invals, eqn.primitive.get_bind_params(params))
    consts, init, xs = split_at(invals, num_consts, num_carry)
    const_sets, carry_sets, xs_sets = split_at(insets, num_consts, num_carry)
    const_varying, carry_varying, xs_varying = split_at(invarying, num_consts, num_carry)
    ys_varying = [False] * (len(eqn.outvars) - num_carry)
    xs_shapes = [tuple(var.aval.shape) for var in eqn.invars[num_consts + num_carry :]]
    xs_sets = [
        None if s is None else np.broadcast_to(s, shape + s.shape[-1:])
        for s, shape in zip(xs_sets, xs_shapes, strict=True)
    ]
    # values, read only where a rule needs them: the xs on the host, sliced per
    # iteration; the carries entering every iteration and the variables of the body the
    # rules read in the first iterations, from one evaluation of the scan returning them
    xs_host = [Lazy(lambda v=v: on_host(force(v))) for v in xs]
    in_avals = [var.aval for var in eqn.invars]
    eqn_vars = {var for e in body.eqns for var in e.outvars if not isinstance(var, jex.DropVar)}
    read_vars: dict = {}  # (ordered set) the body's variables the rules read
    computed: Lazy | None = None
    computed_vars: tuple = ()
    y_shapes = [tuple(var.aval.shape[1:]) for var in eqn.outvars[num_carry:]]
    y_sets: list[list] = [[None] * length for _ in y_shapes]
    carry, known = init, None
    for step in range(length):
        t = length - 1 - step if reverse else step
        if step:
            if computed is None or len(read_vars) > len(computed_vars):
                computed_vars = tuple(read_vars)
                computed = Lazy(
                    lambda extra=computed_vars: _scan_values(
                        analysis, closed, in_avals, consts, init, xs, length, reverse, extra
                    )
                )
                if computed_vars:
                    # the rules read values in the body: computed now, and where they
                    # cannot be (an input traced by an enclosing transformation), no rule
                    try:
                        computed.get()
                    except _TRACED:
                        return None
            carry = [Lazy(lambda k=k, t=t, c=computed: c.get()[0][k][t]) for k in range(num_carry)]
            known = {
                var: Lazy(lambda j=j, t=t, c=computed: c.get()[1][j][t])
                for j, var in enumerate(computed_vars)
            }
        x_values = [Lazy(lambda v=v, t=t: v.get()[t]) for v in xs_host]
        x_sets = [None if s is None else s[t] for s in xs_sets]
        values: dict = {}
        _, outsets, outvarying = analysis.eval_jaxpr(
            body,
            body_consts,
            [*consts, *carry, *x_values],
            [*const_sets, *carry_sets, *x_sets],
            [*const_varying, *carry_varying, *xs_varying],
            known,
            values,
        )
        carry_varying = outvarying[:num_carry]
        ys_varying = [a or b for a, b in zip(ys_varying, outvarying[num_carry:], strict=True)]
        if step < _RECORDED_STEPS:
            read_vars.update(
                (var, None)
                for var, value in values.items()
                if var in eqn_vars
                and isinstance(value, Lazy)
                and value.done
                and math.prod(var.aval.shape) * length <= _RECORDED_SIZE
            )
        carry_sets = outsets[:num_carry]
        for stacked, s in zip(y_sets, outsets[num_carry:], strict=True):
            stacked[t] = s
    stacked_sets = [analysis.stack(s, shape) for s, shape in zip(y_sets, y_shapes, strict=True)]
    return outvals, list(carry_sets) + stacked_sets, list(carry_varying) + ys_varying


def _scan_values(
    analysis: "_Analysis",
    closed: Any,
    in_avals: list,
    consts: list,
    init: list,
    xs: list,
    length: int,
    reverse: bool,
    extra: tuple,
) -> tuple[list, list]:
    """The carry entering each iteration of a scan and the values of the body's variables
    `extra`, stacked by the position of the iteration's slice of the xs (one evaluation
    of the scan of inputs of types `in_avals`)."""
    key = (closed, extra, len(init), length, reverse)
    if key not in analysis.scan_runners:
        analysis.scan_runners[key] = jax.jit(scan_runner(closed, len(init), length, reverse, extra))
    inputs = [typed(force(v), aval) for v, aval in zip(consts + init + xs, in_avals, strict=True)]
    carries, read = analysis.scan_runners[key](*split_at(inputs, len(consts), len(init)))
    return [on_host(v) for v in carries], [on_host(v) for v in read]
