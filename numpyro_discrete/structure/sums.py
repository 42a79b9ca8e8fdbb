"""Terms hidden in sums: a term function whose scalars are sums, rewritten to return the
summands.

Users write factors as sums (``numpyro.factor("prior", jnp.sum(J * x[1:] * x[:-1]))``,
``dist.Bernoulli(p).log_prob(x).sum()``, a sum of such sums): one scalar term that depends
on every coordinate, so that detection (:mod:`~numpyro_discrete.structure.dependencies`)
sees a dense model. :func:`split_sums` evaluates the term function's jaxpr with every
value that is a sum kept as its summands (``ALGORITHMS.md``, "Structure"):

- a ``reduce_sum`` of an array that depends on ``x`` keeps the reduced elements, and a
  ``dot_general`` (``a @ b``, ``jnp.dot``, ``einsum``) with an operand that depends on ``x``
  keeps the products it sums (while there are at most :data:`MAX_DOT_SUMMANDS` of them);
- a ``dot_general`` of a sum and an array distributes over the sum: ``h @ W @ v``, an
  RBM's energy as users write it, is the sum of its ``h_j W_jk v_k``, each on two
  coordinates;
- sums pass unchanged through additions and subtractions (of sums or of plain arrays,
  which join the sum's plain part), negation, products and quotients with a scalar that
  does not depend on ``x`` (a weight, numpyro's ``scale``), float conversions, and data
  moves that place every element once (reshape, transpose, squeeze, expansion, reversal,
  concatenation, stacking, a broadcast that adds only axes of size 1); a sum of sums keeps
  all summands;
- any other use (a product of two sums, a ``logsumexp``, a comparison, an indexing)
  computes the sum there, by the program's own operation (a sum carries its value as the
  program computes it, so that a sum computed there costs what it cost before and rounds
  as before): a truly dense factor stays dense.

At the output, each value that is still a sum contributes its plain part in place and its
summands as extra terms, so that the total (``log pi``) is unchanged. The rewrite depends
only on the program, not on values: it returns the same number of terms at every point,
under ``jit``, ``vmap`` and ``jvp``.
"""

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.extend.core as jex
import jax.numpy as jnp

__all__ = ["split_sums"]

# inlined with the summands tracked inside (no custom differentiation rule is lost)
_INLINED_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr"}
# data moves that place every element of their operand exactly once
_PLACEMENTS = frozenset("reshape transpose squeeze expand_dims rev".split())
#: A ``dot_general`` is split into its products only up to this many of them (a large
#: matrix product stays one computed value: its products would cost memory at every
#: evaluation of the terms).
MAX_DOT_SUMMANDS = 2**20


class _Summands(NamedTuple):
    """Summands of shape ``T + (k,)``, summed over the last axis and then moved into the
    value's shape by `placement` (data moves, each placing every element once)."""

    terms: jax.Array
    placement: tuple[Callable[[jax.Array], jax.Array], ...] = ()

    def placed(self) -> jax.Array:
        value = jnp.sum(self.terms, axis=-1)
        for move in self.placement:
            value = move(value)
        return value

    def scaled(self, factor: Callable[[jax.Array], jax.Array]) -> "_Summands":
        return self._replace(terms=factor(self.terms))


class _Sum(NamedTuple):
    """A value ``plain + sum of the placed summands`` of shape `shape` (`plain` may be
    ``None``: zero), and `direct`, the same value computed by the program's own operations
    (where an equation made it; under ``jit`` whichever of the two is unused is dropped)."""

    shape: tuple[int, ...]
    dtype: Any
    plain: jax.Array | None
    summands: tuple[_Summands, ...]
    direct: jax.Array | None = None

    def value(self) -> jax.Array:
        if self.direct is not None:
            return self.direct
        total = jnp.zeros(self.shape, self.dtype) if self.plain is None else self.plain
        for part in self.summands:
            total = total + part.placed().astype(self.dtype)
        return total


def split_sums(fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    """
    `fn` (arrays to a 1-D array of terms) rewritten so that the scalars it computes as
    sums of arrays depending on its arguments return their summands as extra terms (see
    the module's docstring); the sum of the terms is unchanged.
    """

    def split(*args: Any) -> jax.Array:
        closed = jax.make_jaxpr(fn)(*args)
        flat_args = jax.tree.leaves(args)
        (out,) = _Interpreter().eval_jaxpr(
            closed.jaxpr, closed.consts, flat_args, [True] * len(flat_args)
        )
        if not isinstance(out, _Sum):
            return out
        dtype = out.dtype
        pieces = [jnp.ravel(out.plain if out.plain is not None else jnp.zeros(out.shape, dtype))]
        pieces += [jnp.ravel(part.terms).astype(dtype) for part in out.summands]
        return jnp.concatenate(pieces)

    return split


class _Interpreter:
    """One evaluation of a jaxpr with sums kept as summands; `depends` tracks which values
    depend on the function's arguments (a constant factor keeps a sum a sum)."""

    def eval_jaxpr(
        self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], depends: Sequence[bool]
    ) -> list:
        env: dict = {}
        dep: dict = {}

        def read(var: Any) -> tuple[Any, bool]:
            if isinstance(var, jex.Literal):
                return var.val, False
            return env[var], dep[var]

        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var], dep[var] = value, False
        for var, value, d in zip(jaxpr.invars, args, depends, strict=True):
            env[var], dep[var] = value, d
        for eqn in jaxpr.eqns:
            invals, indeps = zip(*map(read, eqn.invars), strict=True) if eqn.invars else ((), ())
            outvals = self.eval_eqn(eqn, list(invals), list(indeps))
            for var, value in zip(eqn.outvars, outvals, strict=True):
                if not isinstance(var, jex.DropVar):
                    env[var], dep[var] = value, any(indeps)
        return [read(var)[0] for var in jaxpr.outvars]

    def eval_eqn(self, eqn: Any, invals: list, indeps: list) -> list:
        name = eqn.primitive.name
        params = eqn.primitive.get_bind_params(eqn.params)
        if name in _INLINED_CALLS and any(indeps):
            inner = params[_INLINED_CALLS[name]]
            if isinstance(inner, jex.ClosedJaxpr):
                return self.eval_jaxpr(inner.jaxpr, inner.consts, invals, indeps)
            return self.eval_jaxpr(inner, (), invals, indeps)
        split = None
        if any(isinstance(v, _Sum) for v in invals):
            split = self.through_sum(eqn, name, invals, indeps, params)
            invals = [v.value() if isinstance(v, _Sum) else v for v in invals]
        elif name == "reduce_sum" and indeps[0]:
            split = self.split_reduce_sum(invals[0], tuple(params["axes"]))
        elif name == "dot_general" and any(indeps):
            (aval,) = [var.aval for var in eqn.outvars]
            shape = tuple(aval.shape)
            contracted = params["dimension_numbers"][0][0]
            if _dot_is_split(
                shape, aval.dtype, _size([jnp.shape(invals[0])[d] for d in contracted])
            ):
                products = _dot_products(invals, params, shape, aval.dtype)
                split = _Sum(shape, aval.dtype, None, (_Summands(products),))
        out = eqn.primitive.bind(*invals, **params)
        if split is not None:
            return [split._replace(direct=out)]
        return out if eqn.primitive.multiple_results else [out]

    def split_reduce_sum(self, operand: Any, axes: tuple[int, ...]) -> _Sum | None:
        """``reduce_sum`` of an array: its elements over `axes` as summands."""
        operand = jnp.asarray(operand)
        if not (jnp.issubdtype(operand.dtype, jnp.number) and axes):
            return None
        kept = [a for a in range(operand.ndim) if a not in axes]
        moved = jnp.transpose(operand, kept + list(axes))
        shape = tuple(operand.shape[a] for a in kept)
        terms = moved.reshape(shape + (-1,))
        return _Sum(shape, operand.dtype, None, (_Summands(terms),))

    def through_sum(
        self, eqn: Any, name: str, invals: list, indeps: list, params: dict
    ) -> _Sum | None:
        """The result of `eqn` as a sum, or ``None`` where the sum must be computed."""
        (out_aval,) = [var.aval for var in eqn.outvars] if len(eqn.outvars) == 1 else [None]
        if out_aval is None:
            return None
        shape, dtype = tuple(out_aval.shape), out_aval.dtype
        if name in ("add", "add_any", "sub"):
            return self.add(invals, shape, dtype, negate_second=name == "sub")
        if name == "neg":
            (value,) = invals
            return _scale(value, lambda a: -a)
        if name in ("mul", "div"):
            # a sum times (or over) a scalar that does not depend on x
            positions = [i for i, v in enumerate(invals) if isinstance(v, _Sum)]
            if len(positions) != 1 or (name == "div" and positions[0] == 1):
                return None
            other = 1 - positions[0]
            if indeps[other] or jnp.size(invals[other]) != 1:
                return None
            factor = jnp.reshape(jnp.asarray(invals[other]), ())
            if name == "mul":
                return _scale(invals[positions[0]], lambda a: a * factor.astype(a.dtype))
            return _scale(invals[positions[0]], lambda a: a / factor.astype(a.dtype))
        if name == "convert_element_type":
            (value,) = invals
            if not jnp.issubdtype(params["new_dtype"], jnp.inexact):
                return None
            new = _scale(value, lambda a: a.astype(params["new_dtype"]))
            return new._replace(dtype=params["new_dtype"])
        if name == "reduce_sum":
            return self.reduce(invals[0], tuple(params["axes"]))
        if name == "broadcast_in_dim" and _size(shape) == _size(invals[0].shape):
            return _moved(invals[0], partial(eqn.primitive.bind, **params), shape)
        if name in _PLACEMENTS:
            return _moved(invals[0], partial(eqn.primitive.bind, **params), shape)
        if name == "concatenate":
            return _concatenated(invals, params["dimension"], shape, dtype)
        if name == "stack":
            return _stacked(invals, params["axis"], shape, dtype)
        if name == "dot_general":
            return _dot_of_sum(invals, params, shape, dtype)
        return None

    def add(self, invals: list, shape: tuple, dtype: Any, negate_second: bool) -> _Sum | None:
        """A sum of sums and plain arrays: the sums' summands, the plain values added up."""
        if any(isinstance(v, _Sum) and v.shape != shape for v in invals):
            return None  # a sum broadcast to more elements: computed
        plain: jax.Array | None = None
        summands: list[_Summands] = []
        for position, value in enumerate(invals):
            sign = -1.0 if negate_second and position == 1 else 1.0
            if isinstance(value, _Sum):
                part_plain = value.plain
                parts = value.summands
                if sign < 0:
                    parts = tuple(p.scaled(lambda a: -a) for p in parts)
                    part_plain = None if part_plain is None else -part_plain
                summands.extend(parts)
            else:
                part_plain = sign * jnp.asarray(value) if sign < 0 else jnp.asarray(value)
            if part_plain is not None:
                part_plain = jnp.broadcast_to(part_plain, shape).astype(dtype)
                plain = part_plain if plain is None else plain + part_plain
        return _Sum(shape, dtype, plain, tuple(summands))

    def reduce(self, value: _Sum, axes: tuple[int, ...]) -> _Sum | None:
        """``reduce_sum`` of a sum: summands kept in place gain the reduced elements; the
        plain part and the moved summands are reduced as arrays (their elements become
        summands)."""
        kept = [a for a in range(len(value.shape)) if a not in axes]
        shape = tuple(value.shape[a] for a in kept)
        summands: list[_Summands] = []
        plain_total: jax.Array | None = value.plain
        for part in value.summands:
            if part.placement:
                placed = part.placed().astype(value.dtype)
                plain_total = placed if plain_total is None else plain_total + placed
                continue
            terms = jnp.transpose(part.terms, kept + list(axes) + [len(value.shape)])
            summands.append(_Summands(terms.reshape(shape + (-1,))))
        if plain_total is not None:
            split = self.split_reduce_sum(plain_total, axes)
            if split is None:
                return None
            summands.extend(split.summands)
        return _Sum(shape, value.dtype, None, tuple(summands))


def _stacked(invals: list, axis: int, shape: tuple, dtype: Any) -> _Sum:
    """``jnp.stack``: each operand given a new axis at `axis`, then concatenated along it."""

    def expand(a: jax.Array) -> jax.Array:
        return jnp.expand_dims(a, axis)

    expanded = [
        _moved(v, expand, v.shape[:axis] + (1,) + v.shape[axis:])
        if isinstance(v, _Sum)
        else expand(jnp.asarray(v))
        for v in invals
    ]
    return _concatenated(expanded, axis, shape, dtype)


def _dot_is_split(shape: tuple, dtype: Any, num_contracted: int, copies: int = 1) -> bool:
    """Whether a ``dot_general`` of output `shape` summing `num_contracted` products per
    element is split, `copies` times (the summands of a sum operand): not where each element
    is one product, nor for integers, nor past :data:`MAX_DOT_SUMMANDS` products."""
    return (
        num_contracted >= 2
        and jnp.issubdtype(dtype, jnp.inexact)
        and _size(shape) * num_contracted * copies <= MAX_DOT_SUMMANDS
    )


def _dot_products(operands: Sequence[Any], params: dict, shape: tuple, dtype: Any) -> jax.Array:
    """The products a ``dot_general`` of two arrays sums, ``shape + (K,)`` (``K`` the size
    of the contracted axes)."""
    lhs, rhs = (jnp.asarray(a) for a in operands)
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    num_products = _size([lhs.shape[d] for d in lhs_contract])
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_contract and d not in lhs_batch]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_contract and d not in rhs_batch]
    batch = tuple(lhs.shape[d] for d in lhs_batch)
    # the output's axes (batch, lhs free, rhs free), the contracted ones flattened last
    left = jnp.transpose(lhs, [*lhs_batch, *lhs_free, *lhs_contract]).reshape(
        batch + tuple(lhs.shape[d] for d in lhs_free) + (1,) * len(rhs_free) + (num_products,)
    )
    right = jnp.transpose(rhs, [*rhs_batch, *rhs_free, *rhs_contract]).reshape(
        batch + (1,) * len(lhs_free) + tuple(rhs.shape[d] for d in rhs_free) + (num_products,)
    )
    return left.astype(dtype) * right.astype(dtype)


def _dot_of_sum(invals: list, params: dict, shape: tuple, dtype: Any) -> _Sum | None:
    """A ``dot_general`` of a sum and an array: the products of each summand (and of the
    sum's plain part) with the array, a ``dot_general`` being linear in each operand. A
    product of two sums is computed (dense)."""
    positions = [i for i, v in enumerate(invals) if isinstance(v, _Sum)]
    if len(positions) != 1:
        return None
    position = positions[0]
    value: _Sum = invals[position]

    def products(operand: jax.Array) -> jax.Array:
        pair = list(invals)
        pair[position] = operand
        return _dot_products(pair, params, shape, dtype)

    contracted = params["dimension_numbers"][0][position]
    num_summands = sum(p.terms.shape[-1] for p in value.summands) + (value.plain is not None)
    num_contracted = _size([value.shape[d] for d in contracted])
    if not _dot_is_split(shape, dtype, num_contracted, num_summands):
        return None
    parts = []
    if value.plain is not None:
        parts.append(products(value.plain))
    for part in value.summands:
        # each summand moved into the operand's shape (data moves are linear), then its
        # products: shape + (m, K), flattened to shape + (m K,)
        columns = part.terms
        for move in part.placement:
            columns = jax.vmap(move, in_axes=-1, out_axes=-1)(columns)
        per_summand = jax.vmap(products, in_axes=-1, out_axes=-2)(columns)
        parts.append(per_summand.reshape(shape + (-1,)))
    return _Sum(shape, dtype, None, tuple(_Summands(p) for p in parts))


def _size(shape: Sequence[int]) -> int:
    size = 1
    for n in shape:
        size *= int(n)
    return size


def _scale(value: _Sum, factor: Callable[[jax.Array], jax.Array]) -> _Sum:
    plain = None if value.plain is None else factor(value.plain)
    return value._replace(plain=plain, summands=tuple(p.scaled(factor) for p in value.summands))


def _moved(value: _Sum, move: Callable[[jax.Array], jax.Array], shape: tuple) -> _Sum:
    """A data move placing every element once: applied to the plain part now and to the
    summands when they are placed."""
    plain = None if value.plain is None else move(value.plain)
    summands = tuple(p._replace(placement=p.placement + (move,)) for p in value.summands)
    return _Sum(shape, value.dtype, plain, summands)


def _concatenated(invals: list, axis: int, shape: tuple, dtype: Any) -> _Sum:
    """A concatenation with sums among its operands: the plain parts concatenated (zeros
    for a sum without one), each summand placed at its operand's slot."""
    shapes = [v.shape if isinstance(v, _Sum) else jnp.shape(v) for v in invals]
    plains = []
    for value, operand_shape in zip(invals, shapes, strict=True):
        if isinstance(value, _Sum):
            plains.append(jnp.zeros(operand_shape, dtype) if value.plain is None else value.plain)
        else:
            plains.append(jnp.asarray(value).astype(dtype))
    summands: list[_Summands] = []
    for position, value in enumerate(invals):
        if not isinstance(value, _Sum):
            continue

        def place(a: jax.Array, position: int = position) -> jax.Array:
            pieces = [
                a.astype(dtype) if i == position else jnp.zeros(s, dtype)
                for i, s in enumerate(shapes)
            ]
            return jnp.concatenate(pieces, axis=axis)

        summands.extend(p._replace(placement=p.placement + (place,)) for p in value.summands)
    return _Sum(shape, dtype, jnp.concatenate(plains, axis=axis), tuple(summands))
