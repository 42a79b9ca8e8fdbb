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
same scan reads each conditional from pair tables instead
(:mod:`~numpyro_discrete.core.table_sweep`): a visit then costs gathers of its own terms'
entries, no evaluation of the model.

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
from numpyro_discrete.core.state import Info, SweepState

__all__ = ["build_kernel", "site_conditional"]


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
    valid = neighbourhood.valid(x)[j]
    moves = jnp.where(valid, neighbourhood.candidates(x)[j], x[j]).astype(x.dtype)
    log_p_moves = jax.vmap(lambda v: jnp.sum(log_terms(x.at[j].set(v))))(moves)
    log_p_values = jnp.concatenate([log_p[None], jnp.where(valid, log_p_moves, -jnp.inf)])
    return (
        jnp.concatenate([x[j][None], moves]),
        jnp.where(jnp.isnan(log_p_values), -jnp.inf, log_p_values),
    )


def build_kernel(
    neighbourhood: Neighbourhood, order: np.ndarray
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

    def kernel(
        rng_key: jax.Array, state: SweepState, log_terms: LogTerms
    ) -> tuple[SweepState, Info]:
        x = state.position
        uniforms = noise.uniform(rng_key, order.size, jnp.result_type(float))
        # log pi anew: another block (the continuous sites) may have moved since the state
        (x, log_p), changed = lax.scan(
            lambda carry, inputs: visit(log_terms, carry, inputs),
            (x, jnp.sum(log_terms(x))),
            (jnp.asarray(order), uniforms),
        )
        info = Info(jnp.ones((), log_p.dtype), jnp.array(True), jnp.sum(changed, dtype=jnp.int32))
        return SweepState(x, log_p), info

    return kernel
