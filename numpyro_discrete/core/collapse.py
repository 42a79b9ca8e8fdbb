"""Discrete coordinates summed out of the target of the continuous ones and drawn back from
their exact conditional: the two halves of a partially collapsed Gibbs sampler (van Dyk and
Park 2008), for coordinates that are independent given the continuous sites ``theta`` (one
colour class of a proven colouring: each term of ``log pi`` depends on at most one of them),
and for chains of coordinates that share no term (one class of chain blocks covering every
coordinate: an HMM's states), :func:`chain_table`.

Then ``log pi(x, theta) = f(theta) + sum_j s_j(x_j; theta)``, and the continuous sites'
marginal is ``log p(theta) = f(theta) + sum_j logsumexp_v s_j(v; theta)``, differentiable in
``theta``. The table ``s_j(v)`` of every coordinate and option comes from ``M`` evaluations
of the terms: at the ``m``-th, every coordinate takes its ``m``-th option at once, which
changes each term through its one coordinate only. A sampler that moves ``theta`` on the
marginal and then draws ``x`` from ``prod_j pi(x_j | theta)`` leaves the joint invariant;
the draw must follow the move (drawn before it, ``x`` would be paired with a stale
``theta``).

Chains: ``log pi(x, theta) = f(theta) + sum_b [sum_i phi_bi(x_bi) + sum_i psi_bi(x_bi,
x_b,i+1)]``, and the marginal is ``f(theta) + sum_b log Z_b(theta)``, each block's
normaliser by the forward algorithm (:func:`~numpyro_discrete.core.chain_marginal.
log_normaliser`, whose gradient is the chain's marginals); the potentials come from the
``M^2`` evaluations of :func:`~numpyro_discrete.core.block_gibbs.class_potentials`, the draw
is the block's forward filtering, backward sampling.

A coordinate's options are its support's first :data:`MAX_SUMMED_VALUES` values; a larger
support (a Poisson count) is truncated there, which samples the posterior conditioned on
every coordinate below its last option. Its error is the posterior mass beyond, watched by
:func:`draw`'s ``top_probability``: for log-concave conditionals (Poisson and binomial
counts) the mass beyond the last option is at most ``p / (1 - r)`` times ``r``, ``p`` the
last option's probability and ``r < 1`` its ratio to the one before.

Example: three independent binary coordinates given ``theta = 0.5``.

.. doctest::

    >>> import numpy as np
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_discrete.core import collapse
    >>> from numpyro_discrete.core.neighbourhood import CoordinateSupports
    >>> theta = 0.5
    >>> log_terms = lambda x: jnp.concatenate([x * theta * jnp.arange(3.0), jnp.array([-theta])])
    >>> table = collapse.option_table(
    ...     CoordinateSupports.binary(3), np.array([0, 1, 2]), np.array([0, 1, 2]), 4)
    >>> free, s = collapse.log_potentials(log_terms, table)
    >>> float(free)  # the term of no coordinate
    -0.5
    >>> marginal = collapse.log_marginal(free, s)
    >>> bool(np.isclose(marginal, -0.5 + np.sum(np.log1p(np.exp(0.5 * np.arange(3))))))
    True
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from numpyro_discrete.core import noise
from numpyro_discrete.core.block_gibbs import BlockPlan, block_plan, class_potentials
from numpyro_discrete.core.chain_marginal import log_normaliser
from numpyro_discrete.core.local_ratios import stencil_sums
from numpyro_discrete.core.neighbourhood import UNBOUNDED, CoordinateSupports, SupportKind
from numpyro_discrete.core.rows import row_inverse_cdf, row_logsumexp, row_max, row_take
from numpyro_discrete.structure.chain_blocks import ChainBlocks
from numpyro_discrete.structure.colouring import TermStructure
from numpyro_discrete.structure.stencils import Stencil, find_stencil

__all__ = [
    "MAX_CHAIN_VALUES",
    "MAX_SUMMED_VALUES",
    "ChainTable",
    "OptionTable",
    "chain_log_marginal",
    "chain_table",
    "draw",
    "log_marginal",
    "log_potentials",
    "option_table",
]

MAX_SUMMED_VALUES = 128
"""The most options of a summed-out coordinate: a larger support is truncated there."""

MAX_CHAIN_VALUES = 16
"""The most values of a coordinate of a chain to sum out: the potentials cost ``M^2``
evaluations of the model's terms per gradient (``M (M - 1)`` of them of the pair terms
only), at most about :data:`~numpyro_discrete.kernels.auto.SWEEP_BUDGET`."""

LogTerms = Callable[[jax.Array], jax.Array]


class OptionTable(NamedTuple):
    """
    Static numpy arrays, and the dependency pairs as a stencil.

    - **values** - ``(N, M)`` the options of each coordinate: its support's first values
      (the last repeated where it has fewer than ``M``).
    - **valid** - ``(N, M)`` which options are values of the support.
    - **truncated** - ``(N,)`` whether the support goes on beyond the last option.
    - **coord_terms** - ``(N, D)`` the terms of each coordinate, padded with ``E``.
    - **free_terms** - the terms of no coordinate.
    - **stencil** - the ``(term, coordinate)`` pairs as affine pieces
      (:func:`~numpyro_discrete.structure.stencils.find_stencil`), or ``None``: where there
      is one, each coordinate's sum is taken by slices of the terms instead of gathers by
      `coord_terms`. The gradient of a gather is a scatter-add, slow on CPU: on a 300-point
      mixture's marginal, ``value_and_grad`` took 98-102 us by gathers and 39 us by slices,
      and the gallery mixture's ``LBPGibbs`` step 0.205 ms and 0.150 ms.
    """

    values: np.ndarray
    valid: np.ndarray
    truncated: np.ndarray
    coord_terms: np.ndarray
    free_terms: np.ndarray
    stencil: Stencil | None


def option_table(
    supports: CoordinateSupports,
    pair_terms: np.ndarray,
    pair_coords: np.ndarray,
    num_terms: int,
    max_values: int = MAX_SUMMED_VALUES,
) -> OptionTable:
    """The options of every coordinate (at most `max_values`) and the terms of each, from
    the ``(term, coordinate)`` dependency pairs of a structure in which no term depends on
    two coordinates (raises ``ValueError`` otherwise)."""
    num_coords = supports.lower.shape[0]
    terms, coords = np.asarray(pair_terms, np.int64), np.asarray(pair_coords, np.int64)
    if np.unique(terms).size != terms.size:
        raise ValueError("a term depends on two coordinates: they are not independent")
    # each coordinate's terms as a padded row (sums by gathers: a scatter-add is slow on CPU)
    order = np.lexsort((terms, coords))
    counts = np.bincount(coords, minlength=num_coords)
    rank = np.arange(terms.size) - np.repeat(np.cumsum(counts) - counts, counts)
    coord_terms = np.full((num_coords, max(int(counts.max(initial=0)), 1)), num_terms, np.int32)
    coord_terms[coords[order], rank] = terms[order]
    free_terms = np.setdiff1d(np.arange(num_terms), terms).astype(np.int32)
    lower = np.asarray(supports.lower, np.int64)
    categorical = supports.kind != SupportKind.ORDINAL
    upper = np.where(
        categorical, lower + supports.num_categories - 1, np.asarray(supports.upper, np.int64)
    )
    num_values = upper - lower + 1
    num_options = int(min(max_values, num_values.max()))
    offsets = np.arange(num_options)
    values = lower[:, None] + np.minimum(offsets[None, :], num_values[:, None] - 1)
    truncated = (supports.upper >= UNBOUNDED) | (num_values > num_options)
    return OptionTable(
        values.astype(np.int32),
        offsets[None, :] < num_values[:, None],
        np.asarray(truncated & ~categorical),
        coord_terms,
        free_terms,
        find_stencil(terms, coords, num_terms, num_coords),
    )


def log_potentials(log_terms: LogTerms, table: OptionTable) -> tuple[jax.Array, jax.Array]:
    """``(f, s)``: the sum of the terms of no coordinate and the ``(N, M)`` table ``s[j, m]``
    of the terms of coordinate ``j`` at its ``m``-th option (``-inf`` for an option outside
    the support or an undefined value), from ``M`` batched evaluations of `log_terms`."""
    terms = jax.vmap(log_terms)(jnp.asarray(table.values.T))  # (M, E)
    if table.stencil is not None:
        # the terms materialised first: fused into the slices' several consumers (the
        # logsumexp's max and sum, the gradient), their evaluations ran again in each, and
        # the N-mixture's step (128 options of binomial terms) took 1.72 ms against 0.94 ms
        # by gathers; with the barrier 0.86 ms
        terms = jax.lax.optimization_barrier(terms)
        s = stencil_sums(table.stencil, terms).T  # (N, M)
    else:
        padded = jnp.concatenate([terms, jnp.zeros_like(terms[:, :1])], axis=1)
        s = jnp.sum(padded.T[jnp.asarray(table.coord_terms)], axis=1)  # (N, M)
    s = jnp.where(jnp.asarray(table.valid) & ~jnp.isnan(s), s, -jnp.inf)
    return jnp.sum(terms[0, jnp.asarray(table.free_terms)]), s


def log_marginal(free: jax.Array, s: jax.Array) -> jax.Array:
    """``log p(theta) = f + sum_j logsumexp_m s[j, m]``."""
    return free + jnp.sum(row_logsumexp(s))


def draw(
    rng_key: jax.Array, table: OptionTable, s: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``x ~ prod_j pi(x_j | theta)``, by inversion of each row of ``exp(s)``. Returns
    ``(x, log_p_x, top_probability)``: ``sum_j s[j, x_j]`` and the largest conditional
    probability of a truncated coordinate's last option (0 without truncation)."""
    top = row_max(s)
    probs = jnp.exp(s - top[:, None])
    uniforms = noise.uniform(rng_key, s.shape[0], s.dtype)
    slot = row_inverse_cdf(probs, uniforms)
    x = row_take(jnp.asarray(table.values), slot)
    last = s[:, -1] - row_logsumexp(s)
    top_probability = jnp.max(jnp.where(jnp.asarray(table.truncated), jnp.exp(last), 0.0))
    return x, jnp.sum(row_take(s, slot)), top_probability


class ChainTable(NamedTuple):
    """
    One class of chain blocks that holds every coordinate, static.

    - **plan** - the blocks' :class:`~numpyro_discrete.core.block_gibbs.BlockPlan` (one
      class).
    - **free_terms** - the terms of no coordinate.
    """

    plan: BlockPlan
    free_terms: np.ndarray


def chain_table(
    blocks: ChainBlocks, structure: TermStructure, supports: CoordinateSupports
) -> ChainTable:
    """The table of `blocks` to sum out; raises ``ValueError`` naming why they cannot be:
    more than one class, a coordinate outside every block, a term that depends on two
    coordinates that are not neighbours in a block (or on three), a coordinate with more
    than :data:`MAX_CHAIN_VALUES` values."""
    num_coords = structure.num_coords
    if blocks.num_classes != 1:
        raise ValueError(f"the chains interact ({blocks.num_classes} classes of blocks)")
    if structure.dense_terms.size:
        raise ValueError("a term depends on every coordinate")
    plan = block_plan(blocks, structure, supports)
    if np.setdiff1d(np.arange(num_coords), plan.coords).size:
        raise ValueError("some coordinates are in no chain")
    if plan.max_values > MAX_CHAIN_VALUES:
        raise ValueError(
            f"a coordinate has {plan.max_values} values (at most {MAX_CHAIN_VALUES} are "
            "summed over along a chain)"
        )
    # every term of a coordinate must be one of the potentials, once
    coupled = np.unique(structure.pair_terms)
    read = np.concatenate([plan.unary_terms[0], plan.pair_terms[0]])
    read = read[read < structure.num_terms]
    if read.size != coupled.size or np.setdiff1d(coupled, read).size:
        raise ValueError("a term depends on coordinates that are not neighbours in a chain")
    free = np.setdiff1d(np.arange(structure.num_terms), coupled).astype(np.int32)
    return ChainTable(plan, free)


def chain_log_marginal(log_terms: LogTerms, table: ChainTable) -> jax.Array:
    """``log p(theta) = f(theta) + sum_b log Z_b(theta)``, differentiable in ``theta``."""
    x = jnp.asarray(table.plan.lower[:-1])  # any state: no potential depends on it
    # one evaluation at a time: the gradient of batched ones is slow on CPU
    phi, psi = class_potentials(log_terms, table.plan, 0, x, batch_size=1)
    free = jnp.sum(log_terms(x)[jnp.asarray(table.free_terms)])
    return free + jnp.sum(log_normaliser(phi, psi))
