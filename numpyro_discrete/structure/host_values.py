"""Operations on constants evaluated with numpy on the host, where the dependency analyses
read a value (a mask, an index, a zero of a constant factor).

JAX evaluates an operation outside a trace by compiling a program for it (about 0.03-0.05 s
on a CPU core, once per operation, parameters and shapes). Reading a model's structure
forces a few dozen such values, so that compiling them was most of ``init``'s time on small
models. Here the operations whose results numpy computes bit for bit as XLA does (data
movement, comparisons, logic, IEEE arithmetic) run in numpy; any other operation, or an
operand numpy cannot hold (a PRNG key, a tracer), is left to JAX (:func:`host_bind` returns
``None``). ``tests/test_structure_host_values.py`` checks every rule against JAX.
"""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import jax
import jax.extend.core as jex

__all__ = ["gather_positions", "host_bind", "host_rules"]

_NUMERIC = "biuf"  # numpy kinds: bool, int, uint, float


def _broadcast_in_dim(x: np.ndarray, *, shape: tuple, broadcast_dimensions: tuple, **_: Any):
    expanded = [1] * len(shape)
    for axis, size in zip(broadcast_dimensions, x.shape, strict=True):
        expanded[axis] = size
    return np.broadcast_to(x.reshape(expanded), shape)


def _slice(x: np.ndarray, *, start_indices: tuple, limit_indices: tuple, strides: Any):
    strides = strides or (1,) * x.ndim
    return x[tuple(map(slice, start_indices, limit_indices, strides))]


def _dynamic_slice(x: np.ndarray, *starts: np.ndarray, slice_sizes: tuple):
    # XLA clamps each start so that the slice lies inside the operand
    starts = [
        int(np.clip(s, 0, dim - size))
        for s, dim, size in zip(starts, x.shape, slice_sizes, strict=True)
    ]
    return x[tuple(slice(s, s + size) for s, size in zip(starts, slice_sizes, strict=True))]


def _select_n(which: np.ndarray, *cases: np.ndarray):
    return np.choose(np.asarray(which, np.int32), cases)


def _iota(*, dtype: Any, shape: tuple, dimension: int, **_: Any):
    index = [1] * len(shape)
    index[dimension] = shape[dimension]
    return np.broadcast_to(np.arange(shape[dimension], dtype=dtype).reshape(index), shape)


def _convert(x: np.ndarray, *, new_dtype: Any, **_: Any):
    if x.dtype.kind == "f" and np.dtype(new_dtype).kind in "iub":
        return None  # XLA's float-to-integer conversion saturates and maps NaN to 0
    return x.astype(new_dtype)


def gather_positions(
    operand_shape: tuple, indices: np.ndarray, params: dict
) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each output element of ``lax.gather_p`` with `params` reads its operand: the
    flat operand positions and whether the element is read at all (``FILL_OR_DROP`` fills
    a slice that leaves the operand), following XLA's gather semantics (the index vector on
    the last axis of `indices`). ``None`` for a mode this does not model."""
    numbers, sizes, mode = params["dimension_numbers"], params["slice_sizes"], params["mode"]
    modes = jax.lax.GatherScatterMode
    if mode not in (modes.CLIP, modes.PROMISE_IN_BOUNDS, modes.FILL_OR_DROP):
        return None
    ndim, batch_shape = len(operand_shape), indices.shape[:-1]
    starts = np.zeros(batch_shape + (ndim,), np.int64)
    starts[..., list(numbers.start_index_map)] = indices
    # the largest start of each dimension whose slice fits in the operand
    last = np.asarray(operand_shape) - np.asarray(sizes)
    in_bounds = np.ones(batch_shape, bool)
    if mode == modes.FILL_OR_DROP:
        in_bounds = np.all((starts >= 0) & (starts <= last), axis=-1)
        starts = np.where(in_bounds[..., None], starts, 0)
    else:  # XLA clamps the start of a slice into the operand
        starts = np.clip(starts, 0, last)
    for operand_axis, index_axis in zip(
        numbers.operand_batching_dims, numbers.start_indices_batching_dims, strict=True
    ):
        starts[..., operand_axis] = np.arange(batch_shape[index_axis]).reshape(
            [-1 if axis == index_axis else 1 for axis in range(len(batch_shape))]
        )
    offset_axes = tuple(numbers.offset_dims)
    # batch axes of the output, then the offsets at their own axes
    positions = np.expand_dims(starts, offset_axes) if offset_axes else starts
    sliced = [
        d
        for d in range(ndim)
        if d not in numbers.collapsed_slice_dims and d not in numbers.operand_batching_dims
    ]
    out_ndim = len(batch_shape) + len(offset_axes)
    for axis, d in zip(offset_axes, sliced, strict=True):
        offset = np.arange(sizes[d]).reshape([-1 if a == axis else 1 for a in range(out_ndim)])
        positions = positions + np.eye(ndim, dtype=np.int64)[d] * offset[..., None]
    flat = np.ravel_multi_index(tuple(np.moveaxis(positions, -1, 0)), operand_shape)
    return flat, np.expand_dims(in_bounds, offset_axes) if offset_axes else in_bounds


def _gather(operand: np.ndarray, indices: np.ndarray, **params: Any):
    found = gather_positions(operand.shape, indices, params)
    if found is None:
        return None
    flat, in_bounds = found
    fill = params["fill_value"]
    if fill is None:  # lax.gather's defaults
        kind = operand.dtype.kind
        if kind == "f":
            fill = np.nan
        elif kind == "b":
            fill = True
        else:
            info = np.iinfo(operand.dtype)
            fill = info.max if kind == "u" else info.min
    return np.where(in_bounds, operand.reshape(-1)[flat], np.asarray(fill).astype(operand.dtype))


def _elementwise(function: Callable) -> Callable:
    return lambda *operands, **_: function(*operands)


#: numpy implementations of JAX primitives, by name; each takes the operands as numpy
#: arrays and the primitive's bind parameters, and returns an array or None (left to JAX)
host_rules: dict[str, Callable] = {
    **{
        name: _elementwise(function)
        for name, function in {
            "add": np.add,
            "sub": np.subtract,
            "mul": np.multiply,
            "neg": np.negative,
            "abs": np.abs,
            "max": np.maximum,
            "min": np.minimum,
            "eq": np.equal,
            "ne": np.not_equal,
            "lt": np.less,
            "le": np.less_equal,
            "gt": np.greater,
            "ge": np.greater_equal,
            "and": np.bitwise_and,
            "or": np.bitwise_or,
            "xor": np.bitwise_xor,
            "not": np.invert,
            "copy": np.copy,
            "copy_p": np.copy,
            "select_n": _select_n,
        }.items()
    },
    "clamp": lambda low, x, high: np.minimum(np.maximum(x, low), high),
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": lambda x, *, new_sizes, **_: x.reshape(new_sizes),
    "squeeze": lambda x, *, dimensions: np.squeeze(x, tuple(dimensions)),
    "transpose": lambda x, *, permutation: np.transpose(x, permutation),
    "concatenate": lambda *xs, dimension: np.concatenate(xs, dimension),
    "slice": _slice,
    "dynamic_slice": _dynamic_slice,
    "iota": _iota,
    "convert_element_type": _convert,
    "gather": _gather,
}


def _on_host(value: Any) -> np.ndarray | None:
    dtype = getattr(value, "dtype", None)
    if isinstance(value, jax.core.Tracer) or (
        dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.extended)
    ):
        return None
    array = np.asarray(value) if not isinstance(value, np.ndarray) else value
    return array if array.dtype.kind in _NUMERIC else None


def _eval_jaxpr(closed: jex.ClosedJaxpr, args: Sequence[np.ndarray]) -> list | None:
    values: dict = {}

    def read(var: Any) -> Any:
        return np.asarray(var.val, var.aval.dtype) if isinstance(var, jex.Literal) else values[var]

    for var, value in zip(closed.jaxpr.constvars, closed.consts, strict=True):
        values[var] = _on_host(value)
    values.update(zip(closed.jaxpr.invars, args, strict=True))
    for eqn in closed.jaxpr.eqns:
        outs = _bind(eqn.primitive, [read(v) for v in eqn.invars], eqn.params, eqn.outvars)
        if outs is None:
            return None
        values.update(zip(eqn.outvars, outs, strict=True))
    return [read(var) for var in closed.jaxpr.outvars]


def _bind(primitive: Any, operands: list, params: dict, outvars: Sequence[Any]) -> list | None:
    if any(x is None for x in operands):
        return None
    if primitive.name == "jit":
        return _eval_jaxpr(params["jaxpr"], operands)
    rule = host_rules.get(primitive.name)
    if rule is None or primitive.multiple_results:
        return None
    with np.errstate(all="ignore"):
        out = rule(*operands, **params)
    if out is None:
        return None
    aval = outvars[0].aval
    out = np.asarray(out, aval.dtype)
    return [out] if out.shape == tuple(aval.shape) else None


def host_bind(eqn: jex.JaxprEqn, operands: Sequence[Any], params: dict) -> list | None:
    """The outputs of `eqn` at concrete `operands` computed by numpy, or ``None`` where an
    operation of it (or of a ``jit`` inside it) has no host rule or an operand is not a
    plain numeric array."""
    return _bind(eqn.primitive, [_on_host(x) for x in operands], params, eqn.outvars)
