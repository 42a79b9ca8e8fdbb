"""Which coordinates each term of a log density depends on, read from the traced program.

:func:`detect_dependencies` traces a *term function* (flat integer vector ``x`` of ``N``
coordinates to a 1-D array of terms whose sum is ``log pi(x)``) to a jaxpr, and evaluates
that jaxpr once at a concrete ``x``, carrying beside every intermediate array the set of
coordinates each of its elements depends on (``ALGORITHMS.md``, "Structure"). Sets are
integer arrays of shape ``value.shape + (K,)``, padded with ``-1``.

- Elementwise operations take the union of their operands' sets; data movement (reshape,
  slicing, broadcasting, concatenation, gathers with indices that do not depend on ``x``)
  moves the sets with the data, by applying the same operation to them; reductions take the
  union over the reduced axes; a gather whose indices depend on ``x`` (``locs[z]``) depends
  on those indices, plus on every element of its operand if that depends on ``x``.
- **Sound by construction**: an operation without a rule (loops, sorts, scatters, FFTs, ...)
  makes every output element depend on every coordinate any of its inputs depends on, and a
  set larger than ``max_set_size`` becomes *dense* (every coordinate). Both only
  over-approximate: more colours, never a wrong ratio.
- **What it can miss**: indices and masks (``select_n`` predicates) computed from values
  other than ``x`` (a continuous parameter conditioned on by Gibbs, ``jnp.floor(theta)``)
  are read at their values during detection; if they change later, a dependency may be
  missed. Kernels stay exact (their MH test uses ``log pi`` itself); only their proposals
  become approximate.
- A term that is a sum over the lattice (``jnp.sum(J * x[:-1] * x[1:])`` as one factor)
  depends on every coordinate: write factors elementwise to expose the structure.
"""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import lax
import jax.extend.core as jex
import jax.numpy as jnp

__all__ = ["TermDependencies", "detect_dependencies"]

_PAD = -1

# operations whose output element i is computed from the operands' elements i only
_ELEMENTWISE = frozenset(
    """abs acos acosh add add_any and asin asinh atan atan2 atanh bessel_i0e bessel_i1e cbrt ceil
    clamp convert_element_type copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2
    expm1 floor ge gt igamma igammac imag integer_pow is_finite le lgamma log log1p logistic
    lt max min mul ne neg nextafter not or polygamma population_count pow real
    reduce_precision regularized_incomplete_beta rem round rsqrt select_n shift_left
    shift_right_arithmetic shift_right_logical sign sin sinh sqrt square stop_gradient sub
    tan tanh xor zeta""".split()
)
# operations locally constant in their inputs: a derivative never sees through them
_LOCALLY_CONSTANT = frozenset("eq ne lt le gt ge is_finite sign floor ceil round".split())
_REDUCTIONS = frozenset(
    "reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax "
    "argmin".split()
)
_CUMULATIVE = frozenset("cumsum cumprod cummax cummin cumlogsumexp".split())
# call-like operations: the inner jaxpr's inputs and outputs are the operation's own
_CALL_JAXPR_PARAMS = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
}


class TermDependencies(NamedTuple):
    """
    The coordinates each term depends on, as ``(term, coordinate)`` pairs.

    - **num_coords** - ``N``, the number of coordinates.
    - **num_terms** - ``E``, the number of terms.
    - **terms**, **coords** - integer arrays of the pairs ``(e, j)`` with ``j in dep(e)``,
      sorted by term; dense terms have no pairs.
    - **dense** - boolean array of shape ``(E,)``: terms that may depend on every coordinate.
    """

    num_coords: int
    num_terms: int
    terms: np.ndarray
    coords: np.ndarray
    dense: np.ndarray

    @property
    def is_dense(self) -> bool:
        """Whether some term may depend on every coordinate (no sparse structure)."""
        return bool(self.dense.any())


def detect_dependencies(
    terms_fn: Callable[[jax.Array], jax.Array],
    x: np.ndarray,
    *,
    max_set_size: int = 64,
    smooth_only: bool = False,
) -> TermDependencies:
    """
    The dependencies of the terms of `terms_fn` on the coordinates of `x`, read from its
    jaxpr evaluated at `x` (see the module's docstring for the rules and what they miss).

    :param terms_fn: flat integer vector ``(N,)`` to a 1-D array of terms ``(E,)``.
    :param x: a concrete flat vector at which the program is evaluated.
    :param max_set_size: a term depending on more coordinates counts as dense.
    :param smooth_only: drop the dependencies that pass through operations locally
        constant in their inputs (comparisons, rounding, conversions to integers or
        booleans): the dependencies a derivative can see.
    """
    x = jnp.asarray(x)
    closed = jax.make_jaxpr(terms_fn)(x)
    if len(closed.out_avals) != 1 or len(closed.out_avals[0].shape) != 1:
        raise ValueError(f"the term function must return one 1-D array, got {closed.out_avals}")
    num_coords = int(x.shape[0])
    analysis = _Analysis(num_coords, max_set_size, smooth_only)
    identity = np.arange(num_coords, dtype=np.int32)[:, None]
    _, (sets,) = analysis.eval_jaxpr(closed.jaxpr, closed.consts, [x], [identity])
    num_terms = int(closed.out_avals[0].shape[0])
    if sets is None:
        sets = np.full((num_terms, 1), _PAD, np.int32)
    sets = np.broadcast_to(sets, (num_terms, sets.shape[-1]))
    # a term on every coordinate (a factor summed over all of them) is dense at any size
    covers_all = ((sets >= 0) & (sets < num_coords)).sum(axis=1) == num_coords
    dense = (sets == num_coords).any(axis=1) | (covers_all & (num_coords > 1))
    terms, slots = np.nonzero((sets >= 0) & ~dense[:, None])
    return TermDependencies(
        num_coords, num_terms, terms.astype(np.int32), sets[terms, slots].astype(np.int32), dense
    )


class _Analysis:
    """One evaluation of a jaxpr with the dependency sets of its values. ``num_coords`` (one
    past the last coordinate) stands for "every coordinate" in a set."""

    def __init__(self, num_coords: int, max_set_size: int, smooth_only: bool = False) -> None:
        self.everything = num_coords
        self.max_set_size = max_set_size
        self.smooth_only = smooth_only

    # --- sets -------------------------------------------------------------------------------

    def compact(self, sets: np.ndarray) -> np.ndarray | None:
        """Deduplicate the last axis; too large sets or sets holding "every" become dense."""
        shape, width = sets.shape[:-1], sets.shape[-1]
        rows = np.sort(sets.reshape(-1, width), axis=1)
        if width > 1:
            rows[:, 1:][rows[:, 1:] == rows[:, :-1]] = _PAD
        count = (rows >= 0).sum(axis=1)
        if not count.any():
            return None
        dense = (rows == self.everything).any(axis=1) | (count > self.max_set_size)
        rows = -np.sort(-rows, axis=1)  # descending: the padding goes last
        rows = rows[:, : max(1, min(int(count.max()), self.max_set_size))]
        rows[dense] = _PAD
        rows[dense, 0] = self.everything
        return rows.reshape(shape + rows.shape[-1:])

    def union(self, sets: Sequence[np.ndarray | None], shape: tuple[int, ...]) -> np.ndarray | None:
        """Elementwise union of `sets` broadcast to `shape`."""
        present = [np.broadcast_to(s, shape + s.shape[-1:]) for s in sets if s is not None]
        if not present:
            return None
        if len(present) == 1:
            return present[0]
        return self.compact(np.concatenate(present, axis=-1))

    def union_over_axes(self, sets: np.ndarray, shape: tuple, axes: Sequence[int]) -> np.ndarray:
        """The union over `axes` of `sets` (broadcast to `shape`), those axes removed."""
        sets = np.broadcast_to(sets, shape + sets.shape[-1:])
        kept = [axis for axis in range(len(shape)) if axis not in axes]
        moved = np.transpose(sets, kept + list(axes) + [len(shape)])
        return self.compact(moved.reshape(tuple(shape[a] for a in kept) + (-1,)))

    def everything_of(self, sets: Sequence[np.ndarray | None]) -> np.ndarray | None:
        """One set: the union of every element of `sets`."""
        flat = [s.reshape(1, -1) for s in sets if s is not None]
        if not flat:
            return None
        every = self.compact(np.concatenate(flat, axis=1))
        return None if every is None else every[0]

    # --- evaluation -------------------------------------------------------------------------

    def eval_jaxpr(
        self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], arg_sets: Sequence[Any]
    ) -> tuple[list, list]:
        """The (lazy) output values and the sets of `jaxpr` at `args`. Values are computed
        only where a rule needs them (indices that do not depend on ``x``): the log density
        itself is never evaluated, and no operation is compiled that the sets do not need."""
        values: dict = {}
        sets: dict = {}

        def read(var: Any) -> tuple[Any, Any]:
            if isinstance(var, jex.Literal):
                return var.val, None
            return values[var], sets[var]

        for var, value in zip(jaxpr.constvars, consts, strict=True):
            values[var], sets[var] = value, None
        for var, value, s in zip(jaxpr.invars, args, arg_sets, strict=True):
            values[var], sets[var] = value, s
        for eqn in jaxpr.eqns:
            invals, insets = zip(*map(read, eqn.invars), strict=True) if eqn.invars else ((), ())
            outvals, outsets = self.eval_eqn(eqn, list(invals), list(insets))
            for var, value, s in zip(eqn.outvars, outvals, outsets, strict=True):
                if not isinstance(var, jex.DropVar):
                    values[var], sets[var] = value, s
        outs = [read(var) for var in jaxpr.outvars]
        return [v for v, _ in outs], [s for _, s in outs]

    def eval_eqn(self, eqn: Any, invals: list, insets: list) -> tuple[list, list]:
        name = eqn.primitive.name
        if name in _CALL_JAXPR_PARAMS and any(s is not None for s in insets):
            inner = eqn.params[_CALL_JAXPR_PARAMS[name]]
            if isinstance(inner, jex.ClosedJaxpr):
                return self.eval_jaxpr(inner.jaxpr, inner.consts, invals, insets)
            return self.eval_jaxpr(inner, (), invals, insets)
        params = eqn.primitive.get_bind_params(eqn.params)
        outvals = _lazy_outputs(eqn, invals, params)
        if all(s is None for s in insets) or (self.smooth_only and _locally_constant(eqn)):
            return outvals, [None] * len(outvals)
        shapes = [tuple(var.aval.shape) for var in eqn.outvars]
        inshapes = [tuple(var.aval.shape) for var in eqn.invars]
        if self.smooth_only and name == "mul" and any(s is None for s in insets):
            # a product with a constant zero (an instantiated zero tangent) is zero
            outsets = [self.times_constant(invals, insets, shapes[0])]
        elif name == "select_n" and insets[0] is None:
            outsets = [self.select(invals[0], insets[1:], shapes[0])]
        elif name in _ELEMENTWISE:
            outsets = [self.union(insets, shape) for shape in shapes]
        elif name in _DATA_MOVES and all(
            s is None for i, s in enumerate(insets) if i not in _data_operands(name, len(insets))
        ):
            move = _DATA_MOVES[name]
            width = max(s.shape[-1] for s in insets if s is not None)
            padded = [
                _padded(s, shape, width) if i in _data_operands(name, len(insets)) else s
                for i, (s, shape) in enumerate(zip(insets, inshapes, strict=True))
            ]
            moved = move(padded, invals, params)
            outsets = [self.compact(m) for m in (moved if isinstance(moved, list) else [moved])]
        elif name == "gather":
            outsets = [self.gather(invals, insets, inshapes, shapes[0], params)]
        elif name in _REDUCTIONS:
            outsets = [self.union_over_axes(insets[0], inshapes[0], tuple(params["axes"]))]
        elif name in _CUMULATIVE:
            axis = params["axis"]
            reduced = self.union_over_axes(insets[0], inshapes[0], (axis,))
            outsets = [
                None
                if reduced is None
                else np.broadcast_to(
                    np.expand_dims(reduced, axis), inshapes[0] + reduced.shape[-1:]
                )
            ]
        elif name == "dot_general":
            outsets = [self.dot_general(inshapes, insets, shapes[0], params)]
        else:
            # no rule: every output element depends on everything any input depends on
            every = self.everything_of(insets)
            outsets = [
                None if every is None else np.broadcast_to(every, shape + every.shape[-1:])
                for shape in shapes
            ]
        return outvals, outsets

    def times_constant(self, invals: list, insets: list, shape: tuple) -> np.ndarray | None:
        """A product with a constant operand: no dependency where that operand is zero."""
        constant = next(v for v, s in zip(invals, insets, strict=True) if s is None)
        sets = self.union(insets, shape)
        if sets is None:
            return None
        is_zero = np.broadcast_to(np.asarray(_force(constant)) == 0, shape)
        return self.compact(np.where(is_zero[..., None], _PAD, sets))

    def select(self, predicate: Any, cases: list, shape: tuple) -> np.ndarray | None:
        """``select_n`` with a predicate that does not depend on x (a mask): each element
        depends on the case it takes only, so masked-out terms depend on nothing."""
        if all(s is None for s in cases):
            return None
        width = max(s.shape[-1] for s in cases if s is not None)
        stacked = np.stack([_padded(s, shape, width) for s in cases])
        chosen = np.broadcast_to(np.asarray(_force(predicate)).astype(np.int32), shape)
        return self.compact(np.take_along_axis(stacked, chosen[None, ..., None], axis=0)[0])

    def gather(
        self, invals: list, insets: list, inshapes: list, shape: tuple, params: dict
    ) -> np.ndarray | None:
        operand_sets, index_sets = insets
        if index_sets is None:
            # indices known: the sets move as the data does (one small compiled gather)
            indices = _force(invals[1])
            width = operand_sets.shape[-1]
            operand = jnp.asarray(_padded(operand_sets, inshapes[0], width))
            params = dict(params, fill_value=_PAD)
            with jax.ensure_compile_time_eval():
                moved = jax.vmap(
                    lambda o: lax.gather_p.bind(o, indices, **params), in_axes=-1, out_axes=-1
                )(operand)
            moved = np.asarray(moved)
            return self.compact(np.where(moved < 0, _PAD, moved))
        # indices depending on x: each output element depends on its index vector (the
        # last axis of the indices), placed at the output's batch axes
        index_shape = inshapes[1]
        by_position = self.union_over_axes(index_sets, index_shape, (len(index_shape) - 1,))
        if by_position is None:
            return self.everything_of([operand_sets])
        for axis in sorted(params["dimension_numbers"].offset_dims):
            by_position = np.expand_dims(by_position, axis)
        by_position = np.broadcast_to(by_position, shape + by_position.shape[-1:])
        # and on any element of the operand it may read
        return self.union([by_position, self.everything_of([operand_sets])], shape)

    def dot_general(
        self, inshapes: list, insets: list, shape: tuple, params: dict
    ) -> np.ndarray | None:
        (contract_l, contract_r), (batch_l, batch_r) = params["dimension_numbers"]
        parts = []
        for side, (operand_shape, s, contract, batch) in enumerate(
            zip(inshapes, insets, (contract_l, contract_r), (batch_l, batch_r), strict=True)
        ):
            if s is None:
                continue
            free = [a for a in range(len(operand_shape)) if a not in contract and a not in batch]
            s = np.broadcast_to(s, operand_shape + s.shape[-1:])
            s = np.transpose(s, list(batch) + free + list(contract) + [len(operand_shape)])
            kept = tuple(operand_shape[a] for a in list(batch) + free)
            reduced = self.compact(s.reshape(kept + (-1,)))
            if reduced is None:
                continue
            # output axes: batch, free of the left operand, free of the right one
            insert_at = len(kept) if side == 0 else len(batch)
            for _ in range(len(shape) - len(kept)):
                reduced = np.expand_dims(reduced, insert_at)
            parts.append(reduced)
        return self.union(parts, shape)


def _locally_constant(eqn: Any) -> bool:
    if eqn.primitive.name in _LOCALLY_CONSTANT:
        return True
    if eqn.primitive.name == "convert_element_type":
        return not jnp.issubdtype(eqn.params["new_dtype"], jnp.inexact)
    return False


# --- values, computed on demand ----------------------------------------------------------------


class _Lazy:
    """A value computed the first time a rule asks for it."""

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute = compute
        self._value: Any = None
        self._done = False

    def get(self) -> Any:
        if not self._done:
            # eagerly, even when detection runs inside a trace (``init`` under ``pmap``)
            with jax.ensure_compile_time_eval():
                self._value, self._done = self._compute(), True
        return self._value


def _force(value: Any) -> Any:
    return value.get() if isinstance(value, _Lazy) else value


def _lazy_outputs(eqn: Any, invals: list, params: dict) -> list:
    result = _Lazy(lambda: eqn.primitive.bind(*map(_force, invals), **params))
    if not eqn.primitive.multiple_results:
        return [result]
    return [_Lazy(lambda i=i: result.get()[i]) for i in range(len(eqn.outvars))]


# --- data movement on the sets (numpy), the value's index operands forced ---------------------


def _padded(sets: np.ndarray | None, shape: tuple, width: int) -> np.ndarray:
    """`sets` broadcast to `shape`, padded to `width` slots (``None``: no dependency)."""
    if sets is None:
        return np.full(shape + (width,), _PAD, np.int32)
    sets = np.broadcast_to(sets, shape + sets.shape[-1:])
    extra = width - sets.shape[-1]
    if extra:
        sets = np.concatenate([sets, np.full(shape + (extra,), _PAD, sets.dtype)], axis=-1)
    return sets


def _data_operands(name: str, num_operands: int) -> tuple[int, ...]:
    if name == "concatenate":
        return tuple(range(num_operands))
    return {"dynamic_update_slice": (0, 1), "pad": (0, 1)}.get(name, (0,))


def _broadcast_in_dim(sets: list, values: list, params: dict) -> np.ndarray:
    operand = sets[0]
    shape = tuple(params["shape"])
    expanded = [1] * len(shape)
    for axis, size in zip(params["broadcast_dimensions"], operand.shape[:-1], strict=True):
        expanded[axis] = size
    return np.broadcast_to(operand.reshape(expanded + [-1]), shape + operand.shape[-1:])


def _reshape(sets: list, values: list, params: dict) -> np.ndarray:
    operand = sets[0]
    if params.get("dimensions") is not None:
        operand = np.transpose(operand, tuple(params["dimensions"]) + (operand.ndim - 1,))
    return operand.reshape(tuple(params["new_sizes"]) + operand.shape[-1:])


def _slice(sets: list, values: list, params: dict) -> np.ndarray:
    strides = params.get("strides") or (1,) * len(params["start_indices"])
    index = tuple(
        slice(start, limit, stride)
        for start, limit, stride in zip(
            params["start_indices"], params["limit_indices"], strides, strict=True
        )
    )
    return sets[0][index]


def _clamped_starts(values: list, shape: tuple, sizes: tuple) -> tuple:
    starts = [int(np.asarray(_force(v))) for v in values]
    return tuple(
        slice(min(max(start, 0), dim - size), min(max(start, 0), dim - size) + size)
        for start, dim, size in zip(starts, shape, sizes, strict=True)
    )


def _dynamic_slice(sets: list, values: list, params: dict) -> np.ndarray:
    operand = sets[0]
    return operand[_clamped_starts(values[1:], operand.shape[:-1], tuple(params["slice_sizes"]))]


def _dynamic_update_slice(sets: list, values: list, params: dict) -> np.ndarray:
    operand, update = np.array(sets[0]), sets[1]
    operand[_clamped_starts(values[2:], operand.shape[:-1], update.shape[:-1])] = update
    return operand


def _pad(sets: list, values: list, params: dict) -> np.ndarray:
    operand, padding = sets
    config = params["padding_config"]
    shape = tuple(
        lo + hi + n + max(n - 1, 0) * interior
        for (lo, hi, interior), n in zip(config, operand.shape[:-1], strict=True)
    )
    out = np.array(np.broadcast_to(padding, shape + operand.shape[-1:]))
    source, target = [], []
    for (lo, _, interior), n, size in zip(config, operand.shape[:-1], shape, strict=True):
        position = lo + np.arange(n) * (interior + 1)
        inside = (position >= 0) & (position < size)
        source.append(np.flatnonzero(inside))
        target.append(position[inside])
    out[np.ix_(*target, np.arange(out.shape[-1]))] = operand[
        np.ix_(*source, np.arange(operand.shape[-1]))
    ]
    return out


def _split(sets: list, values: list, params: dict) -> list:
    boundaries = np.cumsum(params["sizes"])[:-1]
    return np.split(sets[0], boundaries, axis=params["axis"])


_DATA_MOVES: dict[str, Callable[[list, list, dict], Any]] = {
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "transpose": lambda s, v, p: np.transpose(s[0], tuple(p["permutation"]) + (s[0].ndim - 1,)),
    "squeeze": lambda s, v, p: np.squeeze(s[0], axis=tuple(p["dimensions"])),
    "expand_dims": lambda s, v, p: np.expand_dims(s[0], axis=tuple(p["dimensions"])),
    "rev": lambda s, v, p: np.flip(s[0], axis=tuple(p["dimensions"])),
    "slice": _slice,
    "concatenate": lambda s, v, p: np.concatenate(s, axis=p["dimension"]),
    "pad": _pad,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "split": _split,
}
