"""Systematic-scan Gibbs: the chromatic sweep (:mod:`~numpyro_discrete.core.chromatic`)
when every colour class is one coordinate (a dense model, a complete graph of pairs, or a
structure that could not be read). A class of one coordinate gains nothing from
colour-batching: its conditional is ``log pi`` at each of its options, which is exact
whatever the detected structure, so no term is credited to a coordinate and no
Metropolis-Hastings test is needed where the options are the coordinate's whole support.
Each coordinate then costs its ``M`` evaluations of ``log pi`` (batched) and nothing else:
the new ``log pi`` is the evaluation of the value drawn (Geman and Geman 1984).

Where the structure is proven and every term depends on two coordinates at most (a
pairwise model: a stochastic block model's edges, a fully connected Boltzmann machine), the
scan may read each conditional from pair tables instead
(:mod:`~numpyro_discrete.core.pair_tables`), evaluated in one batch at the start of the
sweep: a visit then costs gathers of its own terms' entries, no evaluation of the model.

Its state is the chromatic sweep's (:func:`~numpyro_discrete.core.chromatic.init`).

Example: two coupled binary coordinates, visited in turn.

.. doctest::

    >>> import numpy as np
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_discrete.core import chromatic, site_scan
    >>> from numpyro_discrete.core.neighbourhood import binary_neighbourhood
    >>> log_terms = lambda x: jnp.array([1.5 * (x[0] == x[1]), 0.5 * x[0]])
    >>> sweep = jax.jit(lambda key, s: site_scan.build_kernel(
    ...     binary_neighbourhood, np.arange(2))(key, s, log_terms))
    >>> state = chromatic.init(jnp.zeros(2, jnp.int32), log_terms)  # the sweeps' state
    >>> draws = []
    >>> for key in jax.random.split(jax.random.key(0), 4000):
    ...     state, info = sweep(key, state)
    ...     draws.append(state.position)
    >>> # P(x_0 = 1) = (e^2 + e^0.5) / (e^2 + e^0.5 + e^1.5 + 1)
    >>> p = (np.exp(2) + np.exp(0.5)) / (np.exp(2) + np.exp(0.5) + np.exp(1.5) + 1)
    >>> bool(abs(np.mean(draws, 0)[0] - p) < 0.03)
    True
"""

from collections.abc import Callable

import numpy as np

import jax
from jax import lax
import jax.numpy as jnp

from numpyro_discrete.core import noise
from numpyro_discrete.core.chromatic import LogTerms
from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.pair_tables import PairTables, evaluate_pair_tables, slot_log_potentials
from numpyro_discrete.core.state import Info, SweepState

__all__ = ["build_kernel", "pair_conditional", "site_conditional"]


def site_conditional(
    log_terms: LogTerms,
    neighbourhood: Neighbourhood,
    x: jax.Array,
    log_p: jax.Array,
    j: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """
    The conditional of coordinate `j` at `x`, unnormalised: ``(values, log_p_values)`` of
    shape ``(1 + M,)``, its options (the current value first, then the candidates) and
    ``log pi`` at each (``-inf`` for an invalid candidate or an undefined value), from
    ``M`` batched evaluations of the terms. The conditional is their softmax, whatever
    ``log pi(x)`` is (a state of probability zero moves to a valid option).

    :param log_p: ``log pi(x)``.
    """
    moves, valid = _moves(neighbourhood, x, j)
    log_p_moves = jax.vmap(lambda v: jnp.sum(log_terms(x.at[j].set(v))))(moves)
    log_p_values = jnp.concatenate([log_p[None], jnp.where(valid, log_p_moves, -jnp.inf)])
    return (
        jnp.concatenate([x[j][None], moves]),
        jnp.where(jnp.isnan(log_p_values), -jnp.inf, log_p_values),
    )


def _moves(neighbourhood: Neighbourhood, x: jax.Array, j: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(moves, valid)``, ``(M,)``: coordinate `j`'s candidates at `x` (its current value
    in place of an invalid one) and which are valid."""
    valid = neighbourhood.valid(x)[j]
    return jnp.where(valid, neighbourhood.candidates(x)[j], x[j]).astype(x.dtype), valid


def pair_conditional(
    layout: PairTables,
    tables: jax.Array,
    neighbourhood: Neighbourhood,
    x: jax.Array,
    j: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """
    The conditional of coordinate `j` at `x` from pair tables
    (:func:`~numpyro_discrete.core.pair_tables.evaluate_pair_tables`): ``(values, logits)``
    as in :func:`site_conditional`, the logits ``log pi`` at each option up to a constant.
    """
    log_potentials = slot_log_potentials(layout, tables, x, j[None])[0]  # (S,)
    moves, valid = _moves(neighbourhood, x, j)
    values = jnp.concatenate([x[j][None], moves])
    slots = values - jnp.asarray(layout.lower)[j]
    logits = log_potentials[jnp.clip(slots, 0, layout.num_slots - 1)]
    logits = jnp.where(jnp.concatenate([jnp.ones(1, bool), valid]), logits, -jnp.inf)
    return values, jnp.where(jnp.isnan(logits), -jnp.inf, logits)


def build_kernel(
    neighbourhood: Neighbourhood, order: np.ndarray, tables: PairTables | None = None
) -> Callable[[jax.Array, SweepState, LogTerms], tuple[SweepState, Info]]:
    """
    One sweep of systematic-scan Gibbs: ``(rng_key, state, log_terms) -> (state, info)``,
    the coordinates in `order`, each drawn from its exact conditional over its current
    value and its valid candidates. ``info.accept_prob`` is 1 (every draw is taken).

    Exact only where each coordinate's options are its whole support (binary and
    categorical coordinates, enumerated ordinal ones): an ordinal window moves with the
    value, and its draw needs the chromatic sweep's test.

    :param neighbourhood: the candidate values of each coordinate.
    :param order: the coordinates, in the order visited (static).
    :param tables: read the conditionals from these pair tables
        (:func:`~numpyro_discrete.core.pair_tables.pair_tables`) instead of evaluating
        ``log pi``: the same conditionals, and the same draws but for rounding.
    """
    order = np.asarray(order, np.int32)

    def draw(logits: jax.Array, uniform: jax.Array) -> jax.Array:
        # inversion over the unnormalised probabilities, the current value's (slot 0) first
        probs = jnp.exp(logits - jnp.max(logits))
        return jnp.sum(jnp.cumsum(probs)[:-1] <= uniform * jnp.sum(probs), dtype=jnp.int32)

    def visit(log_terms: LogTerms, carry: tuple, inputs: tuple) -> tuple:
        x, log_p = carry
        j, uniform = inputs
        values, log_p_values = site_conditional(log_terms, neighbourhood, x, log_p, j)
        slot = draw(log_p_values, uniform)
        return (x.at[j].set(values[slot]), log_p_values[slot]), slot > 0

    def visit_by_tables(evaluated: jax.Array, x: jax.Array, inputs: tuple) -> tuple:
        j, uniform = inputs
        values, logits = pair_conditional(tables, evaluated, neighbourhood, x, j)
        slot = draw(logits, uniform)
        return x.at[j].set(values[slot]), slot > 0

    def kernel(
        rng_key: jax.Array, state: SweepState, log_terms: LogTerms
    ) -> tuple[SweepState, Info]:
        x = state.position
        uniforms = noise.uniform(rng_key, order.size, jnp.result_type(float))
        if tables is None:
            # log pi anew: another block (the continuous sites) may have moved since the state
            (x, log_p), changed = lax.scan(
                lambda carry, inputs: visit(log_terms, carry, inputs),
                (x, jnp.sum(log_terms(x))),
                (jnp.asarray(order), uniforms),
            )
        else:
            evaluated = evaluate_pair_tables(tables, log_terms, x.dtype)
            x, changed = lax.scan(
                lambda x, inputs: visit_by_tables(evaluated, x, inputs),
                x,
                (jnp.asarray(order), uniforms),
            )
            log_p = jnp.sum(log_terms(x))
        info = Info(jnp.ones((), log_p.dtype), jnp.array(True), jnp.sum(changed, dtype=jnp.int32))
        return SweepState(x, log_p), info

    return kernel
