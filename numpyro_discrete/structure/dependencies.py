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
  on those indices, plus on every element of its operand that it may read (all of them but
  for the operand's batching axes: ``jnp.take_along_axis(logits, z[:, None], 1)`` reads row
  ``i`` of ``logits`` for term ``i`` only).
- A ``scan`` (``lax.scan``, numpyro's ``contrib.control_flow.scan``) is unrolled
  (:mod:`~numpyro_discrete.structure.scan_dependencies`): a chain (an HMM's
  ``x_t ~ Categorical(trans[x_{t-1}])`` in the body) stays a chain; a carry accumulating
  every ``x`` depends on all of them.
- **Sound by construction**: an operation without a rule (while loops, conditionals, sorts,
  scatters, FFTs, a scan with parameters this module does not know, ...) makes every
  output element depend on every coordinate any of its inputs depends on, and a
  set larger than ``max_set_size`` becomes *dense* (every coordinate). Both only
  over-approximate: more colours, never a wrong ratio.
- **What it can miss**: indices and masks (``select_n`` predicates) computed from values
  other than ``x`` are read at their values during detection. Those computed from the
  program's constants never change; those computed from the term function's other
  *inputs* (the model's arguments, a continuous parameter conditioned on by Gibbs,
  ``jnp.floor(theta)``) may, and a dependency may then be missed. The analysis tracks
  which values depend on those inputs: :attr:`TermDependencies.exact` says that no value it
  read did, so the dependencies hold at every ``x`` and every value of the inputs. Where
  they may not, kernels stay exact by their MH test (it uses ``log pi`` itself); only their
  proposals become approximate.
- A term that is a sum over the lattice (``jnp.sum(J * x[:-1] * x[1:])`` as one factor)
  depends on every coordinate here; :mod:`~numpyro_discrete.structure.sums` splits such
  sums into their summands before detection (the target does), so that only factors that
  are not sums (a ``logsumexp``, a square of a sum) stay dense.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

import jax
import jax.extend.core as jex
import jax.numpy as jnp

from numpyro_discrete.structure.data_moves import (
    DATA_MOVES,
    PAD,
    READS_VALUES,
    data_operands,
    padded,
)
from numpyro_discrete.structure.dependency_sets import SetAlgebra, same_sets
from numpyro_discrete.structure.host_values import gather_positions
from numpyro_discrete.structure.lazy_values import force, lazy_outputs, on_host, staged
from numpyro_discrete.structure.primitives import (
    CALL_JAXPR_PARAMS,
    CUMULATIVE,
    ELEMENTWISE,
    REDUCTIONS,
    is_locally_constant,
)
from numpyro_discrete.structure.scan_dependencies import unroll_scan

__all__ = ["TermDependencies", "detect_dependencies"]


class TermDependencies(NamedTuple):
    """
    The coordinates each term depends on, as ``(term, coordinate)`` pairs.

    - **num_coords** - ``N``, the number of coordinates.
    - **num_terms** - ``E``, the number of terms.
    - **terms**, **coords** - integer arrays of the pairs ``(e, j)`` with ``j in dep(e)``,
      sorted by term; dense terms have no pairs.
    - **dense** - boolean array of shape ``(E,)``: terms that may depend on every coordinate.
    - **exact** - whether the dependencies are proven to hold whatever the inputs: no value
      the analysis read (an index, a mask) depended on an input other than ``x``.
    """

    num_coords: int
    num_terms: int
    terms: np.ndarray
    coords: np.ndarray
    dense: np.ndarray
    exact: bool

    @property
    def is_dense(self) -> bool:
        """Whether some term may depend on every coordinate (no sparse structure)."""
        return bool(self.dense.any())


def detect_dependencies(
    terms_fn: Callable[..., jax.Array],
    x: np.ndarray,
    *,
    inputs: Sequence[Any] = (),
    max_set_size: int = 64,
    smooth_only: bool = False,
) -> TermDependencies:
    """
    The dependencies of the terms of `terms_fn` on the coordinates of `x`, read from its
    jaxpr evaluated at `x` (see the module's docstring for the rules and what they miss).

    :param terms_fn: ``(x, *inputs)`` with ``x`` a flat integer vector ``(N,)`` to a 1-D
        array of terms ``(E,)``.
    :param x: a concrete flat vector at which the program is evaluated.
    :param inputs: arrays that may take other values later (the model's arguments, the
        values Gibbs conditions on), read at these values; the result is
        :attr:`~TermDependencies.exact` if no value the rules read depends on them.
    :param max_set_size: a term depending on more coordinates counts as dense.
    :param smooth_only: drop the dependencies that pass through operations locally
        constant in their inputs (comparisons, rounding, conversions to integers or
        booleans): the dependencies a derivative can see.
    """
    x = jnp.asarray(x)
    # operations on constants staged too: the rules evaluate the values they read lazily
    with staged():
        closed = jax.make_jaxpr(terms_fn)(x, *inputs)
    if len(closed.out_avals) != 1 or len(closed.out_avals[0].shape) != 1:
        raise ValueError(f"the term function must return one 1-D array, got {closed.out_avals}")
    num_coords = int(x.shape[0])
    analysis = _Analysis(num_coords, max_set_size, smooth_only)
    identity = np.arange(num_coords, dtype=np.int32)[:, None]
    flat_inputs = jax.tree.leaves(tuple(inputs))
    _, (sets,), _ = analysis.eval_jaxpr(
        closed.jaxpr,
        closed.consts,
        [x, *flat_inputs],
        [identity] + [None] * len(flat_inputs),
        [False] + [True] * len(flat_inputs),
    )
    num_terms = int(closed.out_avals[0].shape[0])
    if sets is None:
        sets = np.full((num_terms, 1), PAD, np.int32)
    sets = np.broadcast_to(sets, (num_terms, sets.shape[-1]))
    # a term on every coordinate (a factor summed over all of them) is dense at any size
    covers_all = ((sets >= 0) & (sets < num_coords)).sum(axis=1) == num_coords
    dense = (sets == num_coords).any(axis=1) | (covers_all & (num_coords > 1))
    terms, slots = np.nonzero((sets >= 0) & ~dense[:, None])
    return TermDependencies(
        num_coords,
        num_terms,
        terms.astype(np.int32),
        sets[terms, slots].astype(np.int32),
        dense,
        not analysis.read_varying,
    )


class _Analysis(SetAlgebra):
    """One evaluation of a jaxpr with the dependency sets of its values. ``num_coords`` (one
    past the last coordinate) stands for "every coordinate" in a set."""

    def __init__(self, num_coords: int, max_set_size: int, smooth_only: bool = False) -> None:
        super().__init__(num_coords, max_set_size)
        self.smooth_only = smooth_only
        # compiled evaluations of scans returning what their rule reads (a nested scan's
        # is compiled once, not once per iteration of the outer one)
        self.scan_runners: dict[tuple, Callable] = {}
        # whether a rule read a value depending on an input other than x
        self.read_varying = False

    # --- evaluation -------------------------------------------------------------------------

    def eval_jaxpr(
        self,
        jaxpr: Any,
        consts: Sequence[Any],
        args: Sequence[Any],
        arg_sets: Sequence[Any],
        arg_varying: Sequence[bool],
        known: Mapping[Any, Any] | None = None,
        values: dict | None = None,
    ) -> tuple[list, list, list]:
        """The (lazy) output values, the sets and whether they vary (depend on an input other
        than ``x``) of `jaxpr` at `args`. Values are computed only where a rule needs them
        (indices that do not depend on ``x``): the log density itself is never evaluated,
        and no operation is compiled that the sets do not need. `known` values of variables
        replace theirs (a scan's values, computed at once for all of its iterations);
        `values`, when given, is filled with those of every variable."""
        values = {} if values is None else values
        sets: dict = {}
        varying: dict = {}

        def read(var: Any) -> tuple[Any, Any, bool]:
            if isinstance(var, jex.Literal):
                return var.val, None, False
            return values[var], sets[var], varying[var]

        for var, value in zip(jaxpr.constvars, consts, strict=True):
            values[var], sets[var], varying[var] = value, None, False
        for var, value, s, v in zip(jaxpr.invars, args, arg_sets, arg_varying, strict=True):
            values[var], sets[var], varying[var] = value, s, v
        for eqn in jaxpr.eqns:
            inputs = list(zip(*map(read, eqn.invars), strict=True)) if eqn.invars else [()] * 3
            outvals, outsets, outvarying = self.eval_eqn(eqn, *map(list, inputs))
            for var, value, s, v in zip(eqn.outvars, outvals, outsets, outvarying, strict=True):
                if not isinstance(var, jex.DropVar):
                    values[var], sets[var], varying[var] = value, s, v
                    if known is not None and var in known:
                        values[var] = known[var]
        outs = [read(var) for var in jaxpr.outvars]
        return [v for v, _, _ in outs], [s for _, s, _ in outs], [v for _, _, v in outs]

    def note_read(self, varies: bool) -> None:
        """A rule read a value: the dependencies are proven only if none of them varies."""
        self.read_varying |= bool(varies)

    def eval_eqn(
        self, eqn: Any, invals: list, insets: list, invarying: list
    ) -> tuple[list, list, list]:
        name = eqn.primitive.name
        if name in CALL_JAXPR_PARAMS and any(s is not None for s in insets):
            inner = eqn.params[CALL_JAXPR_PARAMS[name]]
            if isinstance(inner, jex.ClosedJaxpr):
                return self.eval_jaxpr(inner.jaxpr, inner.consts, invals, insets, invarying)
            return self.eval_jaxpr(inner, (), invals, insets, invarying)
        if name == "scan" and any(s is not None for s in insets):
            unrolled = unroll_scan(self, eqn, invals, insets, invarying)
            if unrolled is not None:
                return unrolled
        params = eqn.primitive.get_bind_params(eqn.params)
        outvals = lazy_outputs(eqn, invals, params)
        outvarying = [any(invarying)] * len(outvals)
        if all(s is None for s in insets) or (self.smooth_only and is_locally_constant(eqn)):
            return outvals, [None] * len(outvals), outvarying
        shapes = [tuple(var.aval.shape) for var in eqn.outvars]
        inshapes = [tuple(var.aval.shape) for var in eqn.invars]
        # the operands whose values the rule below reads (those without sets)
        read = [i for i, s in enumerate(insets) if s is None]
        if self.smooth_only and name == "mul" and any(s is None for s in insets):
            # a product with a constant zero (an instantiated zero tangent) is zero
            self.note_read(invarying[read[0]])
            outsets = [self.times_constant(invals, insets, shapes[0])]
        elif name == "select_n" and insets[0] is None:
            outsets = [self.select(invals[0], insets[1:], shapes[0], invarying[0])]
        elif name in ELEMENTWISE:
            outsets = [self.union(insets, shape) for shape in shapes]
        elif name in DATA_MOVES and all(
            s is None for i, s in enumerate(insets) if i not in data_operands(name, len(insets))
        ):
            move = DATA_MOVES[name]
            operands = data_operands(name, len(insets))
            if name in READS_VALUES:
                self.note_read(any(invarying[i] for i in read if i not in operands))
            width = max(s.shape[-1] for s in insets if s is not None)
            operand_sets = [
                padded(s, shape, width) if i in operands else s
                for i, (s, shape) in enumerate(zip(insets, inshapes, strict=True))
            ]
            moved = move(operand_sets, invals, params)
            outsets = [self.compact(m) for m in (moved if isinstance(moved, list) else [moved])]
        elif name == "gather":
            if insets[1] is None:
                self.note_read(invarying[1])
            outsets = [self.gather(invals, insets, inshapes, shapes[0], params)]
        elif name in REDUCTIONS:
            outsets = [self.union_over_axes(insets[0], inshapes[0], tuple(params["axes"]))]
        elif name in CUMULATIVE:
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
        return outvals, outsets, outvarying

    def times_constant(self, invals: list, insets: list, shape: tuple) -> np.ndarray | None:
        """A product with a constant operand: no dependency where that operand is zero."""
        constant = next(v for v, s in zip(invals, insets, strict=True) if s is None)
        sets = self.union(insets, shape)
        if sets is None:
            return None
        is_zero = np.broadcast_to(np.asarray(force(constant)) == 0, shape)
        return self.compact(np.where(is_zero[..., None], PAD, sets))

    def select(self, predicate: Any, cases: list, shape: tuple, varies: bool) -> np.ndarray | None:
        """``select_n`` with a predicate that does not depend on x (a mask): each element
        depends on the case it takes only, so masked-out terms depend on nothing. A predicate
        that `varies` counts as read only where the case taken depends on fewer coordinates
        than the others (a support check of observed data choosing the density over a
        constant ``-inf`` loses nothing if the data changes)."""
        if all(s is None for s in cases):
            return None
        width = max(s.shape[-1] for s in cases if s is not None)
        stacked = np.stack([padded(s, shape, width) for s in cases])
        chosen = np.broadcast_to(np.asarray(force(predicate)).astype(np.int32), shape)
        taken = self.compact(np.take_along_axis(stacked, chosen[None, ..., None], axis=0)[0])
        if varies:
            every = self.union(cases, shape)
            every = None if every is None else self.compact(np.asarray(every))
            self.note_read(not same_sets(taken, every, shape))
        return taken

    def gather(
        self, invals: list, insets: list, inshapes: list, shape: tuple, params: dict
    ) -> np.ndarray | None:
        operand_sets, index_sets = insets
        if index_sets is None:
            # indices known: the sets move as the data does
            indices = on_host(force(invals[1]))
            width = operand_sets.shape[-1]
            operand = padded(operand_sets, inshapes[0], width).reshape(-1, width)
            found = gather_positions(inshapes[0], indices, params)
            if found is None:  # a gather mode without a rule (one-hot): read anything
                return self.everything_of([operand_sets])
            flat, in_bounds = found
            return self.compact(np.where(in_bounds[..., None], operand[flat], PAD))
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
        readable = self.readable(operand_sets, inshapes, shape, params["dimension_numbers"])
        return self.union([by_position, readable], shape)

    def readable(
        self, operand_sets: np.ndarray | None, inshapes: list, shape: tuple, dimensions: Any
    ) -> np.ndarray | None:
        """The union of the operand elements each output element of a gather may read when
        its start indices are unknown: every element, but only those at the output element's
        own position along the operand's batching axes."""
        if operand_sets is None:
            return None
        operand_shape, index_shape = inshapes
        batching = tuple(dimensions.operand_batching_dims)
        if not batching:
            every = self.everything_of([operand_sets])
            return None if every is None else np.broadcast_to(every, shape + every.shape[-1:])
        others = tuple(axis for axis in range(len(operand_shape)) if axis not in batching)
        reduced = self.union_over_axes(operand_sets, operand_shape, others)
        if reduced is None:
            return None
        # the reduced axes are the batching axes in increasing order; each is matched to an
        # axis of the indices' batch shape (the indices but their last axis)
        index_axes = [
            dimensions.start_indices_batching_dims[batching.index(axis)]
            for axis in sorted(batching)
        ]
        order = np.argsort(index_axes)
        reduced = np.transpose(reduced, list(order) + [len(index_axes)])
        expanded = [1] * (len(index_shape) - 1)
        for axis in index_axes:
            expanded[axis] = index_shape[axis]
        reduced = reduced.reshape(expanded + [reduced.shape[-1]])
        for axis in sorted(dimensions.offset_dims):
            reduced = np.expand_dims(reduced, axis)
        return np.broadcast_to(reduced, shape + reduced.shape[-1:])

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
