"""Block Gibbs by chain blocks (``ALGORITHMS.md``, "Chain blocks"; Carter and Kohn 1994):
one sweep visits every class of chain blocks; the blocks of a class are drawn at once, each
jointly from its exact conditional given everything outside it, by forward filtering,
backward sampling (:mod:`~numpyro_discrete.core.chain_block`). The chain's unary and
pairwise log-potentials are read from the terms of ``log pi``: with every even position of
every block of the class set to value ``u`` and every odd one to ``v``, one evaluation of
the term array gives each term touching one position its value there and each term
touching two consecutive positions its value at ``(u, v)`` or ``(v, u)``; ``M^2``
evaluations give all potentials (``M`` without pairwise terms). Only the ``M`` with
``u = v`` need every term: the ``M (M - 1)`` others read only the span of the term array
that holds pair terms, and XLA drops the computation of what lies outside it. On a
factorial HMM that is the likelihood and the states' prior, about half of an evaluation:
``LBPGibbs``'s step at ``L = 1000, K = 10`` went from 2.75-2.94 to 2.17-2.33 ms (two
processes each, alternated). A Metropolis-Hastings test
of each class's joint move, with the reverse draw's probability from the potentials at the
new state, keeps the sweep exact when detection missed a dependency; when the blocks are
valid chains it accepts with probability 1, so where the structure is proven
(:attr:`~numpyro_discrete.structure.colouring.TermStructure.exact`) the test is skipped: a
class then costs its ``M^2`` evaluations only (no reverse potentials, and no evaluation at
the new state, the potentials being read from the terms' values), and ``log pi`` is
evaluated once per sweep.
"""

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core import noise
from numpyro_discrete.core.chain_block import (
    backward_sample,
    backward_sample_from_uniforms,
    chain_log_prob,
    forward_filter,
)
from numpyro_discrete.core.neighbourhood import CoordinateSupports, SupportKind
from numpyro_discrete.core.state import Info, SweepState, mh_accept
from numpyro_discrete.structure.chain_blocks import ChainBlocks
from numpyro_discrete.structure.colouring import TermStructure

__all__ = [
    "MAX_BLOCK_VALUES",
    "BlockPlan",
    "block_plan",
    "build_kernel",
    "class_potentials",
    "value_counts",
]

LogTerms = Callable[[jax.Array], jax.Array]

MAX_BLOCK_VALUES = 64
"""The most values a coordinate of a block may take (the potentials cost ``M^2``
evaluations of the terms per class)."""

MAX_PARALLEL_VALUES = 8
"""On accelerators, blocks of coordinates with at most this many values filter and sample
by associative scans (``O(L M^3)`` work in ``O(log L)`` depth); larger ones, and every block
on CPU, by sequential scans (``O(L M^2)``): on two CPU cores (beside a test run), three
binary chains filtered and drawn as one class took 0.047 ms sequential against 0.39 ms
parallel at ``L = 200``, 0.41 against 2.5 ms at ``L = 2000``."""


class BlockPlan(NamedTuple):
    """
    Static (numpy) tables of one sweep, per class ``c`` padded to common sizes.

    - **coords** - ``(C, B, L)`` the coordinates of the class's blocks, padded with ``N``.
    - **unary_terms**, **unary_slots** - ``(C, U)`` the terms touching one position of a
      block of the class and that position (``b L + i``), padded with ``E`` and ``B L``.
    - **pair_terms**, **pair_slots**, **pair_odd** - ``(C, P)`` the terms touching two
      consecutive positions ``(i, i + 1)``, the slot of ``i``, and whether ``i`` is odd
      (then the evaluation at ``(u, v)`` gives the pair ``(v, u)``).
    - **lower**, **num_values** - ``(N + 1,)`` the smallest value and the number of values
      of each coordinate (the padding row: 0 and 1).
    - **max_values** - ``M``, the most values of a coordinate.
    - **pair_span** - ``(lo, hi)``, the smallest range of term indices holding every
      class's pair terms (empty without them).
    """

    coords: np.ndarray
    unary_terms: np.ndarray
    unary_slots: np.ndarray
    pair_terms: np.ndarray
    pair_slots: np.ndarray
    pair_odd: np.ndarray
    lower: np.ndarray
    num_values: np.ndarray
    max_values: int
    pair_span: tuple[int, int]


def value_counts(supports: CoordinateSupports) -> np.ndarray:
    """``(N,)`` the number of values of each coordinate (huge for unbounded ones)."""
    ordinal = supports.kind == SupportKind.ORDINAL
    span = supports.upper.astype(np.int64) - supports.lower.astype(np.int64) + 1
    return np.where(ordinal, span, supports.num_categories).astype(np.int64)


def block_plan(
    blocks: ChainBlocks, structure: TermStructure, supports: CoordinateSupports
) -> BlockPlan:
    """The tables of a sweep over the classes of `blocks` (see :class:`BlockPlan`)."""
    num_coords, num_terms = structure.num_coords, structure.num_terms
    counts = value_counts(supports)
    per_class = [np.flatnonzero(blocks.block_class == c) for c in range(blocks.num_classes)]
    width = max(len(rows) for rows in per_class)
    length = blocks.coords.shape[1]
    coords = np.full((blocks.num_classes, width, length), num_coords, np.int32)
    slot_of = np.full((blocks.num_classes, num_coords + 1), -1, np.int64)
    for c, rows in enumerate(per_class):
        coords[c, : len(rows)] = blocks.coords[rows]
        flat = coords[c].ravel()
        real = flat < num_coords
        slot_of[c, flat[real]] = np.flatnonzero(real)
    unary, pairs = [], []
    for c in range(blocks.num_classes):
        slots = slot_of[c, structure.pair_coords]
        inside = slots >= 0
        terms, slots = structure.pair_terms[inside].astype(np.int64), slots[inside]
        order = np.lexsort((slots, terms))
        terms, slots = terms[order], slots[order]
        starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]]) if terms.size else terms
        sizes = np.diff(np.r_[starts, terms.size])
        one, two = starts[sizes == 1], starts[sizes == 2]
        unary_terms, unary_slots = terms[one], slots[one]
        if structure.dense_terms.size:
            # dense terms touch the class's (single) coordinate at slot 0
            unary_terms = np.r_[unary_terms, structure.dense_terms]
            unary_slots = np.r_[unary_slots, np.zeros(structure.dense_terms.size, np.int64)]
        unary.append((unary_terms, unary_slots))
        pair_slots = slots[two]
        pairs.append((terms[two], pair_slots, (pair_slots % length) % 2 == 1))
    num_slots = width * length
    pair_terms = np.concatenate([np.zeros(0, np.int64)] + [p[0] for p in pairs])
    pair_span = (int(pair_terms.min()), int(pair_terms.max()) + 1) if pair_terms.size else (0, 0)

    def padded(columns: list[np.ndarray], fill: int) -> np.ndarray:
        size = max((len(col) for col in columns), default=0)
        table = np.full((len(columns), size), fill, np.int64)
        for row, col in enumerate(columns):
            table[row, : len(col)] = col
        return table

    return BlockPlan(
        coords=coords,
        unary_terms=padded([u[0] for u in unary], num_terms).astype(np.int32),
        unary_slots=padded([u[1] for u in unary], num_slots).astype(np.int32),
        pair_terms=padded([p[0] for p in pairs], num_terms).astype(np.int32),
        pair_slots=padded([p[1] for p in pairs], num_slots).astype(np.int32),
        pair_odd=padded([p[2] for p in pairs], 0).astype(bool),
        lower=np.r_[supports.lower, 0].astype(np.int32),
        num_values=np.r_[np.minimum(counts, MAX_BLOCK_VALUES + 1), 1].astype(np.int32),
        max_values=int(counts.max()) if counts.size else 1,
        pair_span=pair_span,
    )


def class_potentials(
    log_terms: LogTerms,
    plan: BlockPlan,
    c: jax.Array,
    x: jax.Array,
    terms_x: jax.Array | None = None,
    batch_size: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """The unary ``(B, L, M)`` and pairwise ``(B, L - 1, M, M)`` log-potentials of the blocks
    of class `c` given `x` (``-inf`` for values outside a coordinate's support): each term's
    change from `terms_x`, the terms at `x`, or its value where `terms_x` is ``None``. The
    conditional is the same either way (the terms at `x` add a constant per block).

    The evaluations run `batch_size` at a time (``M`` where ``None``). Batched, the
    gradient of a model's gathers (``locs[x]``) is a batched scatter-add, slow on CPU: the
    gradient of an HMM's marginal (``T = 1000, M = 4``) took 2.8 ms in batches of ``M`` and
    1.0 ms one evaluation at a time, which leaves the values' time (0.27 and 0.32 ms)
    nearly unchanged."""
    coords = jnp.asarray(plan.coords)[c]
    num_blocks, length = coords.shape
    m = plan.max_values
    lower = jnp.asarray(plan.lower)[coords]
    count = jnp.asarray(plan.num_values)[coords]
    even = (jnp.arange(length) % 2 == 0)[None, :]
    dtype = jnp.result_type(float)
    baseline = 0.0 if terms_x is None else jnp.concatenate([terms_x, jnp.zeros(1, dtype)])
    unary_terms = jnp.asarray(plan.unary_terms)[c]
    pair_terms = jnp.asarray(plan.pair_terms)[c]

    def terms_at(u: jax.Array, v: jax.Array, span: tuple[int, int] | None = None) -> jax.Array:
        """The terms (less `baseline`, a zero appended for padding) with the class's even
        positions at `u` and odd ones at `v`; only those in `span` where one is given."""
        value = jnp.where(even, u, v)
        moved = lower + jnp.minimum(value, count - 1)
        y = x.at[coords].set(moved.astype(x.dtype), mode="drop")
        terms, shift = log_terms(y), baseline
        if span is not None:
            # a static slice: XLA drops the computation of every term outside it
            terms = terms[span[0] : span[1]]
            if terms_x is not None:
                shift = jnp.concatenate([terms_x[span[0] : span[1]], jnp.zeros(1, dtype)])
        return jnp.concatenate([terms, jnp.zeros(1, dtype)]) - shift

    values = jnp.arange(m)
    batch_size = m if batch_size is None else batch_size
    num_slots = num_blocks * length
    has_pairs = plan.pair_terms.shape[1] > 0
    if has_pairs:
        # the unary terms and the pairs (u, u) from every term; the pairs (u, v != u)
        # from the span of the pair terms only
        columns = jnp.concatenate([unary_terms, pair_terms])
        both = lax.map(lambda w: terms_at(w, w)[columns], values, batch_size=batch_size)
        diagonal = both[:, : unary_terms.shape[0]]
        lo, hi = plan.pair_span
        in_span = jnp.asarray(np.where(plan.pair_terms < hi, plan.pair_terms - lo, hi - lo))[c]
        grid = jnp.zeros((m, m, pair_terms.shape[0]), dtype)
        grid = grid.at[values, values].set(both[:, unary_terms.shape[0] :])
        if m > 1:
            first, second = (jnp.asarray(a) for a in np.nonzero(~np.eye(m, dtype=bool)))
            apart = lax.map(
                lambda uv: terms_at(uv[0], uv[1], (lo, hi))[in_span],
                (first, second),
                batch_size=batch_size,
            )  # (M (M - 1), P)
            grid = grid.at[first, second].set(apart)
        grid = jnp.moveaxis(grid, 2, 0)  # (P, M, M)
    else:
        diagonal = lax.map(lambda w: terms_at(w, w)[unary_terms], values, batch_size=batch_size)
    phi = jnp.zeros((num_slots + 1, m), dtype)
    phi = phi.at[jnp.asarray(plan.unary_slots)[c]].add(diagonal.T)[:num_slots]
    phi = phi.reshape(num_blocks, length, m)
    phi = jnp.where(values < count[..., None], phi, -jnp.inf)
    psi = jnp.zeros((num_blocks, max(length - 1, 0), m, m), dtype)
    if has_pairs:
        # (u, v) were set at even, odd positions: a pair starting at an odd one is (v, u)
        odd = jnp.asarray(plan.pair_odd)[c][:, None, None]
        pair = jnp.where(odd, jnp.swapaxes(grid, 1, 2), grid)
        flat = jnp.zeros((num_slots + 1, m, m), dtype)
        flat = flat.at[jnp.asarray(plan.pair_slots)[c]].add(pair)[:num_slots]
        psi = flat.reshape(num_blocks, length, m, m)[:, :-1]
    return phi, psi


def build_kernel(
    plan: BlockPlan, parallel: bool | None = None, mh_test: bool = True
) -> Callable[[jax.Array, SweepState, LogTerms], tuple[SweepState, Info]]:
    """
    One sweep over the classes of chain blocks: ``(rng_key, state, log_terms) -> (state,
    info)``. ``info.accept_prob`` is the mean acceptance probability over the classes,
    ``info.is_accepted`` whether every class's move was taken.

    :param parallel: filter and sample by associative scans; ``None`` decides by
        :data:`MAX_PARALLEL_VALUES` and the backend.
    :param mh_test: test each class's move by Metropolis-Hastings; ``False`` takes every
        draw, which is exact only when the blocks are proven to be chains given the rest
        (a structure whose :attr:`~numpyro_discrete.structure.colouring.TermStructure.exact`
        holds).
    """
    num_classes, num_blocks, length = plan.coords.shape
    if parallel is None:
        parallel = plan.max_values <= MAX_PARALLEL_VALUES and jax.default_backend() != "cpu"

    def sweep_noise(rng_key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Per class, what its blocks' draws read (a key per block for the parallel
        sampler, a uniform per position for the sequential one: all of a sweep's in one
        batch) and its test's uniform."""
        if parallel:
            keys = random.split(rng_key, num_classes + 1)
            block_keys = jax.vmap(lambda key: random.split(key, num_blocks))(keys[1:])
            return block_keys, random.uniform(keys[0], (num_classes,))
        num_draws = num_classes * num_blocks * length
        uniforms = noise.uniform(rng_key, num_draws + num_classes, jnp.result_type(float))
        return uniforms[:num_draws].reshape(num_classes, num_blocks, length), uniforms[num_draws:]

    def draw(class_noise: jax.Array, phi: jax.Array, psi: jax.Array) -> tuple:
        """The exact draws (value indices) of a class's blocks and their log-normalisers."""
        if parallel:

            def draw_block(key: jax.Array, phi: jax.Array, psi: jax.Array) -> tuple:
                log_alphas, log_z = forward_filter(phi, psi, parallel=True)
                return backward_sample(key, log_alphas, psi, parallel=True), log_z

            return jax.vmap(draw_block)(class_noise, phi, psi)
        # the sequential recursions take the class's blocks as one batch
        log_alphas, log_z = forward_filter(phi, psi, parallel=False)
        return backward_sample_from_uniforms(class_noise, log_alphas, psi), log_z

    def log_prob(index: jax.Array, phi: jax.Array, psi: jax.Array) -> jax.Array:
        """The log-probabilities of a class's blocks at `index` (value indices)."""
        filtered = partial(forward_filter, parallel=parallel)
        log_z = (jax.vmap(filtered) if parallel else filtered)(phi, psi)[1]
        return jax.vmap(chain_log_prob)(index, phi, psi, log_z)

    def drawn(
        log_terms: LogTerms,
        c: jax.Array,
        class_noise: jax.Array,
        x: jax.Array,
        terms_x: jax.Array | None,
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """Every block of class `c` from its exact conditional at `x`: the new state, the
        blocks' draws (value indices), potentials and log-normalisers."""
        coords = jnp.asarray(plan.coords)[c]
        lower = jnp.asarray(plan.lower)[coords]
        phi, psi = class_potentials(log_terms, plan, c, x, terms_x)
        index, log_z = draw(class_noise, phi, psi)
        y = x.at[coords].set((lower + index).astype(x.dtype), mode="drop")
        return y, index, (phi, psi), log_z

    def gibbs_move(log_terms: LogTerms, x: jax.Array, inputs: tuple) -> tuple:
        # the draw is the class's exact conditional: a Gibbs move, always taken. The
        # potentials come from the terms' values, so nothing is evaluated at the new state
        # (a fifth of a binary class's evaluations); log pi once, after the sweep
        c, class_noise, _ = inputs
        y = drawn(log_terms, c, class_noise, x, None)[0]
        return y, jnp.sum(y != x, dtype=jnp.int32)

    def tested_move(log_terms: LogTerms, carry: tuple, inputs: tuple) -> tuple:
        x, terms_x, log_p = carry
        c, class_noise, uniform = inputs
        coords = jnp.asarray(plan.coords)[c]
        lower = jnp.asarray(plan.lower)[coords]
        # forward: every block of the class from its exact conditional at x
        y, index, (phi, psi), log_z = drawn(log_terms, c, class_noise, x, terms_x)
        log_q_forward = jax.vmap(chain_log_prob)(index, phi, psi, log_z)
        terms_y = log_terms(y)
        log_p_y = jnp.sum(terms_y)
        num_changed = jnp.sum(y != x, dtype=jnp.int32)
        # reverse: the probability of drawing x's blocks from the conditionals at y
        phi_y, psi_y = class_potentials(log_terms, plan, c, y, terms_y)
        x_index = jnp.take(x, coords, mode="fill", fill_value=0) - lower
        x_index = jnp.where(coords < x.shape[0], x_index, 0)
        log_q_reverse = log_prob(x_index, phi_y, psi_y)
        log_accept = log_p_y - log_p + jnp.sum(log_q_reverse) - jnp.sum(log_q_forward)
        (x_new, terms_new, log_p_new), accept_prob, accepted = mh_accept(
            None,
            log_accept,
            (y, terms_y, log_p_y),
            (x, terms_x, log_p),
            jnp.isfinite(log_p_y),
            uniform=uniform,
        )
        num_changed = jnp.where(accepted, num_changed, 0)
        return (x_new, terms_new, log_p_new), (accept_prob, accepted, num_changed)

    def kernel(
        rng_key: jax.Array, state: SweepState, log_terms: LogTerms
    ) -> tuple[SweepState, Info]:
        x = state.position
        inputs = (jnp.arange(num_classes), *sweep_noise(rng_key))
        if not mh_test:
            x, num_changed = lax.scan(lambda x, inputs: gibbs_move(log_terms, x, inputs), x, inputs)
            log_p = jnp.sum(log_terms(x))
            info = Info(jnp.ones((), log_p.dtype), jnp.array(True), jnp.sum(num_changed))
            return SweepState(x, log_p), info
        terms_x = log_terms(x)
        (x, _, log_p), (accept_prob, accepted, num_changed) = lax.scan(
            lambda carry, inputs: tested_move(log_terms, carry, inputs),
            (x, terms_x, jnp.sum(terms_x)),
            inputs,
        )
        info = Info(jnp.mean(accept_prob), jnp.all(accepted), jnp.sum(num_changed, dtype=jnp.int32))
        return SweepState(x, log_p), info

    return kernel
