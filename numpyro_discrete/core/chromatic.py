"""Chromatic Gibbs with a correction (``ALGORITHMS.md``, "Structure"; Gonzalez et al. 2011):
one sweep visits every colour class of a colouring of the coordinates; in a class, every
coordinate draws its new value at once from its conditional given the others (computed
colour-batched from the terms of ``log pi``), and a Metropolis-Hastings test of the joint
move keeps the sweep exact whatever the colouring. For a valid colouring the draw *is* the
conditional of the class and the test accepts with probability 1.

Example: ten independent binary coordinates (one class), sampled from their conditionals.

.. doctest::

    >>> import numpy as np
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_discrete.core import chromatic
    >>> from numpyro_discrete.core.neighbourhood import binary_neighbourhood
    >>> from numpyro_discrete.structure.colouring import term_structure
    >>> from numpyro_discrete.structure.dependencies import detect_dependencies
    >>> logits = jnp.linspace(-2.0, 2.0, 10)
    >>> log_terms = lambda x: x * logits
    >>> x = jnp.zeros(10, jnp.int32)
    >>> structure = term_structure(detect_dependencies(log_terms, x))
    >>> structure.num_colours
    1
    >>> sweep = jax.jit(lambda key, s: chromatic.build_kernel(
    ...     binary_neighbourhood, structure)(key, s, log_terms))
    >>> state = chromatic.init(x, log_terms)
    >>> means = []
    >>> for key in jax.random.split(jax.random.key(0), 2000):
    ...     state, info = sweep(key, state)
    ...     means.append(state.position)
    >>> float(info.accept_prob)
    1.0
    >>> bool(np.allclose(np.mean(means, 0), jax.nn.sigmoid(logits), atol=0.05))
    True
"""

from collections.abc import Callable

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core import noise
from numpyro_discrete.core.local_ratios import (
    candidate_columns,
    class_deltas,
    credit,
    stencil_sums,
)
from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.rows import row_inverse_cdf, row_log_softmax, row_max, row_take
from numpyro_discrete.core.state import Info, SweepState, mh_accept
from numpyro_discrete.structure.colouring import TermStructure
from numpyro_discrete.structure.stencils import Stencil, structure_stencil

__all__ = ["build_kernel", "class_logits", "class_members", "init"]

LogTerms = Callable[[jax.Array], jax.Array]

# Sweeps over at most this many colour classes are unrolled (`build_kernel`): a lattice's 2
# classes, a mixture's 1; a sparse graph's colourings rarely need more.
MAX_UNROLLED_CLASSES = 8


def init(position: jax.Array, log_terms: LogTerms) -> SweepState:
    """The state at `position`: ``log pi`` is the sum of the terms; no ratios are cached
    (every class computes its own from the current terms)."""
    return SweepState(position, jnp.sum(log_terms(position)))


def class_members(structure: TermStructure) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The coordinates of every class as slices of one static array: ``(order, starts,
    sizes, width)``; class ``c`` is ``order[starts[c] : starts[c] + sizes[c]]``, read as a
    window of the largest class size `width` whose tail (beyond its size) is masked."""
    sizes = np.bincount(structure.colour, minlength=structure.num_colours)
    width = int(sizes.max())
    order = np.argsort(structure.colour, kind="stable").astype(np.int32)
    padded = np.concatenate([order, np.full(width, structure.num_coords, np.int32)])
    starts = (np.cumsum(sizes) - sizes).astype(np.int32)
    return padded, starts, sizes.astype(np.int32), width


def class_logits(
    log_terms: LogTerms,
    structure: TermStructure,
    neighbourhood: Neighbourhood,
    x: jax.Array,
    terms_x: jax.Array,
    in_class: jax.Array,
    members: jax.Array | None,
    stencil: Stencil | None = None,
) -> tuple[jax.Array, jax.Array]:
    """
    The proposal of one class at `x`, unnormalised: ``(values, logits)`` of shape ``(S, 1 +
    M)`` for its coordinates `members`, their options (the current value first, then the
    candidates) and the log-ratios ``d[j, v] = log pi(x with x_j = v) - log pi(x)`` (``0``
    for the current value, ``-inf`` for invalid candidates), from ``M`` evaluations of the
    terms. A member equal to ``N`` (padding) can only stay (its values are those of
    coordinate 0, never used).

    :param terms_x: the terms at `x`.
    :param in_class: ``(N,)`` mask of the class.
    :param members: ``(S,)`` its coordinates, padded with ``N``; ``None`` for every
        coordinate (``S = N``), those outside the class staying with log-probability 0,
        their sums read from `stencil` (no gathers).
    :param stencil: the structure's pairs as pieces, with `members` ``None``.
    """
    candidates, valid = neighbourhood.candidates(x), neighbourhood.valid(x)
    moves = jnp.where(valid, candidates, x[:, None])
    deltas = class_deltas(log_terms, x, terms_x, in_class, moves)
    if members is None:
        d = candidate_columns(stencil_sums(stencil, deltas))
        valid = valid & in_class[:, None]
        values = jnp.concatenate([x[:, None], moves], axis=1)
    else:
        coord_class = jnp.where(in_class, 0, -1).astype(jnp.int32)
        d = credit(structure, deltas[None], coord_class, members)
        is_member = members < x.shape[0]
        rows = jnp.where(is_member, members, 0)
        valid = valid[rows] & is_member[:, None]
        values = jnp.concatenate([x[rows, None], moves[rows]], axis=1)
    logits = jnp.concatenate([jnp.zeros_like(d[:, :1]), d], axis=1)
    valid = jnp.concatenate([jnp.ones_like(valid[:, :1]), valid], axis=1)
    return values, jnp.where(valid & ~jnp.isnan(logits), logits, -jnp.inf)


def build_kernel(
    neighbourhood: Neighbourhood,
    structure: TermStructure,
    mh_test: bool = True,
    coordinate_test: bool = False,
    max_unrolled_classes: int = MAX_UNROLLED_CLASSES,
    by_stencil: bool = True,
) -> Callable[[jax.Array, SweepState, LogTerms], tuple[SweepState, Info]]:
    """
    One chromatic sweep: ``(rng_key, state, log_terms) -> (state, info)``, the classes of
    `structure` in order. ``info.accept_prob`` is the mean acceptance probability over
    the classes, ``info.is_accepted`` whether every class's move was taken.

    :param neighbourhood: the candidate values of each coordinate (the conditional of a
        coordinate is over its current value and its valid candidates).
    :param structure: the dependency pairs and colouring of the terms.
    :param mh_test: test each class's move by Metropolis-Hastings; ``False`` takes every
        draw (the reverse conditionals are not computed), which is exact only when the
        colouring is proven valid (:attr:`~TermStructure.exact`) and every coordinate's
        options are its whole support (binary and categorical coordinates; an ordinal
        coordinate's window moves with its value).
    :param coordinate_test: with `mh_test`, test each coordinate of a class on its own
        instead of the class's joint move. Exact when the colouring is proven valid: the
        class's conditional is then the product of its coordinates' (they share no term),
        and a product of Metropolis-Hastings moves, each leaving its factor invariant,
        leaves the product invariant. A joint test accepts with the product of the
        coordinates' probabilities, which vanishes on large classes of ordinal coordinates
        (50 counts of an N-mixture model accepted with probability 1e-40 and froze).
    :param max_unrolled_classes: up to this many classes, the sweep is unrolled: each class
        is its own piece of the program, with its members as constants (gathers at constant
        indices, no dynamic slices or padding), which halves a lattice sweep's time on CPU;
        beyond it, one loop over the classes keeps the program's size, and its compile
        time, independent of the number of classes. Both give the same draws.
    :param by_stencil: in an unrolled sweep, when the pairs form a stencil
        (:func:`~numpyro_discrete.structure.stencils.find_stencil`: lattices, elementwise
        factors), every class computes the conditionals of all coordinates, those outside
        it staying, with sums by shifted slices instead of gathers and scatters (a core
        sweep 1.26x faster on a 200 x 200 Ising lattice on CPU, 1.05x at 50 x 50). Its
        draws come from other uniforms than the gathers' (one per coordinate instead of one
        per member): the same chain, another stream.
    """
    # numpy, not jax arrays: `init` may run inside a trace (`pmap`), where a jax array made
    # here would be a tracer captured by the kernel and leaked into later traces
    colour = np.asarray(structure.colour)
    num_coords = structure.num_coords
    order, starts, sizes, width = class_members(structure)

    unrolled = structure.num_colours <= max_unrolled_classes
    stencil = structure_stencil(structure) if by_stencil and unrolled else None
    # uniforms per class: one per member it draws and one for its test; a stencil sweep
    # draws every coordinate in every class, but each uses its own only in its own class,
    # so one uniform per coordinate serves the whole sweep
    num_rows = width if stencil is None else num_coords

    def class_move(log_terms: LogTerms, carry: tuple, inputs: tuple) -> tuple:
        x, terms_x, log_p = carry
        c, draws, test_uniform, coordinate_uniforms = inputs
        in_class = colour == c
        if stencil is not None:
            # every coordinate is a row; outside the class, its only option is to stay
            members = None
            is_member = jnp.asarray(in_class)

            def rows_of(a: jax.Array) -> jax.Array:
                return a

            def written(x: jax.Array, row_values: jax.Array) -> jax.Array:
                return row_values
        else:
            if unrolled:
                # c is a Python int: the members are constants, unpadded
                members = jnp.asarray(order[starts[c] : starts[c] + sizes[c]])
                draws = draws[: sizes[c]]
                coordinate_uniforms = coordinate_uniforms[: sizes[c]]
            else:
                members = lax.dynamic_slice(jnp.asarray(order), (jnp.asarray(starts)[c],), (width,))
                members = jnp.where(jnp.arange(width) < jnp.asarray(sizes)[c], members, num_coords)
            is_member = members < num_coords

            def rows_of(a: jax.Array) -> jax.Array:
                return a[jnp.where(is_member, members, 0)]

            def written(x: jax.Array, row_values: jax.Array) -> jax.Array:
                # members are sorted (a stable argsort); unrolled, also unique (no padding)
                return x.at[members].set(
                    row_values, mode="drop", indices_are_sorted=True, unique_indices=unrolled
                )

        # forward: each coordinate of the class from its conditional at x, by inversion
        values, logits = class_logits(
            log_terms, structure, neighbourhood, x, terms_x, in_class, members, stencil
        )
        if mh_test:
            log_probs = row_log_softmax(logits)
            probs = jnp.exp(log_probs)
        else:
            # the test needs the normalised log-probabilities; the inversion does not (it
            # scales the uniforms by each row's total)
            probs = jnp.exp(logits - row_max(logits)[:, None])
        slot = row_inverse_cdf(probs, draws)
        new_values = row_take(values, slot)
        y = written(x, new_values)
        terms_y = log_terms(y)
        log_p_y = jnp.sum(terms_y)
        num_changed = jnp.sum(y != x, dtype=jnp.int32)
        if not mh_test:
            # the draw is the class's exact conditional: a Gibbs move, always taken
            return (y, terms_y, log_p_y), (jnp.ones((), log_p.dtype), jnp.array(True), num_changed)
        log_q_forward = jnp.sum(row_take(log_probs, slot))
        # reverse: each coordinate back to x_j from its conditional at y (the window of an
        # ordinal coordinate is symmetric, so x_j is always among y_j's options)
        values_y, logits_y = class_logits(
            log_terms, structure, neighbourhood, y, terms_y, in_class, members, stencil
        )
        log_probs_y = row_log_softmax(logits_y)
        # a row outside the class (padding, or another class's coordinate) only ever
        # stays, in both directions (log-probability 0); padding reads coordinate 0's
        # values, which this move may have changed
        is_back = (values_y == values[:, :1]) | ~is_member[:, None]
        log_q_back = row_max(jnp.where(is_back, log_probs_y, -jnp.inf))
        if coordinate_test:
            # per coordinate: log pi(y_j | rest) - log pi(x_j | rest) is its logit at the
            # slot drawn (the current value's logit is 0), so the test needs no new terms
            log_q_drawn = row_take(log_probs, slot)
            log_accept_j = (log_q_drawn - log_probs[:, 0]) + log_q_back - log_q_drawn
            accept_j = jnp.exp(jnp.minimum(jnp.nan_to_num(log_accept_j, nan=-jnp.inf), 0.0))
            taken = (coordinate_uniforms < accept_j) | ~is_member
            x_new = written(x, jnp.where(taken, new_values, rows_of(x)))
            terms_new = log_terms(x_new)
            num_changed = jnp.sum(x_new != x, dtype=jnp.int32)
            accept_prob = jnp.sum(jnp.where(is_member, accept_j, 0.0)) / jnp.maximum(
                jnp.sum(is_member), 1
            )
            return (x_new, terms_new, jnp.sum(terms_new)), (
                accept_prob.astype(log_p.dtype),
                jnp.all(taken),
                num_changed,
            )
        log_q_reverse = jnp.sum(log_q_back)
        log_accept = log_p_y - log_p + log_q_reverse - log_q_forward
        (x_new, terms_new, log_p_new), accept_prob, accepted = mh_accept(
            None,
            log_accept,
            (y, terms_y, log_p_y),
            (x, terms_x, log_p),
            jnp.isfinite(log_p_y),
            uniform=test_uniform,
        )
        num_changed = jnp.where(accepted, num_changed, 0)
        return (x_new, terms_new, log_p_new), (accept_prob, accepted, num_changed)

    def kernel(
        rng_key: jax.Array, state: SweepState, log_terms: LogTerms
    ) -> tuple[SweepState, Info]:
        x = state.position
        terms_x = log_terms(x)
        # one batch of uniforms per sweep: each class's draws (by inversion) and its test
        dtype = jnp.result_type(float)
        num_colours = structure.num_colours
        tested = coordinate_test and mh_test
        # the coordinates' own tests draw from a key of their own: the other draws stay
        # those of earlier versions
        coordinate_key = random.fold_in(rng_key, 1)
        if stencil is None:
            uniforms = noise.uniform(rng_key, num_colours * (num_rows + 1), dtype)
            uniforms = uniforms.reshape(num_colours, num_rows + 1)
            draws, tests = uniforms[:, :-1], uniforms[:, -1]
            coordinate_uniforms = (
                noise.uniform(coordinate_key, num_colours * num_rows, dtype)
                if tested
                else jnp.zeros(0, dtype)
            ).reshape(num_colours, -1)
        else:
            # (lists, not broadcasts: every class reads the same arrays, no copies)
            uniforms = noise.uniform(rng_key, num_rows + num_colours, dtype)
            draws = [uniforms[:num_rows]] * num_colours
            tests = uniforms[num_rows:]
            coordinate_uniforms = [
                noise.uniform(coordinate_key, num_rows, dtype) if tested else jnp.zeros(0, dtype)
            ] * num_colours
        carry = (x, terms_x, jnp.sum(terms_x))
        if unrolled:
            moves = []
            for c in range(num_colours):
                carry, move = class_move(
                    log_terms, carry, (c, draws[c], tests[c], coordinate_uniforms[c])
                )
                moves.append(move)
            accept_prob, accepted, num_changed = map(jnp.stack, zip(*moves, strict=True))
        else:
            carry, (accept_prob, accepted, num_changed) = lax.scan(
                lambda carry, inputs: class_move(log_terms, carry, inputs),
                carry,
                (jnp.arange(num_colours), draws, tests, coordinate_uniforms),
            )
        x, _, log_p = carry
        info = Info(jnp.mean(accept_prob), jnp.all(accepted), jnp.sum(num_changed, dtype=jnp.int32))
        return SweepState(x, log_p), info

    return kernel
