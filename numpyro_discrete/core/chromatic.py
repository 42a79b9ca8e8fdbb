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
    >>> float(info.acceptance_rate)
    1.0
    >>> bool(np.allclose(np.mean(means, 0), jax.nn.sigmoid(logits), atol=0.05))
    True
"""

from collections.abc import Callable

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core.local_ratios import class_log_ratios
from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.state import Info, State, mh_accept
from numpyro_discrete.structure.colouring import TermStructure

__all__ = ["build_kernel", "class_conditional", "init"]

LogTerms = Callable[[jax.Array], jax.Array]


def init(position: jax.Array, log_terms: LogTerms) -> State:
    """The state at `position`: ``log pi`` is the sum of the terms; no ratios are cached
    (every class computes its own from the current terms)."""
    return State(position, jnp.sum(log_terms(position)), None)


def class_conditional(
    log_terms: LogTerms,
    structure: TermStructure,
    neighbourhood: Neighbourhood,
    x: jax.Array,
    terms_x: jax.Array,
    in_class: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """
    The proposal of one class at `x`: ``(values, log_probs)`` of shape ``(N, 1 + M)``, the
    options of each coordinate (its current value first, then its candidates) and their
    log-probabilities ``log p_j(v | x) = d[j, v] - logsumexp_v d[j, v]`` (``d = 0`` for the
    current value, ``-inf`` for invalid candidates). Rows outside the class are unused.

    :param terms_x: the terms at `x`.
    :param in_class: ``(N,)`` mask of the class.
    """
    candidates, valid = neighbourhood.candidates(x), neighbourhood.valid(x)
    values = jnp.concatenate([x[:, None], jnp.where(valid, candidates, x[:, None])], axis=1)
    d = class_log_ratios(log_terms, structure, x, terms_x, in_class, values[:, 1:])
    logits = jnp.concatenate([jnp.zeros_like(d[:, :1]), d], axis=1)
    valid = jnp.concatenate([jnp.ones_like(valid[:, :1]), valid], axis=1)
    logits = jnp.where(valid & ~jnp.isnan(logits), logits, -jnp.inf)
    return values, jax.nn.log_softmax(logits, axis=1)


def build_kernel(
    neighbourhood: Neighbourhood, structure: TermStructure
) -> Callable[[jax.Array, State, LogTerms], tuple[State, Info]]:
    """
    One chromatic sweep: ``(rng_key, state, log_terms) -> (state, info)``, the classes of
    `structure` in order. ``info.acceptance_rate`` is the mean acceptance probability over
    the classes, ``info.is_accepted`` whether every class's move was taken.

    :param neighbourhood: the candidate values of each coordinate (the conditional of a
        coordinate is over its current value and its valid candidates).
    :param structure: the dependency pairs and colouring of the terms.
    """
    colour = jnp.asarray(structure.colour)

    def conditional(log_terms: LogTerms, x: jax.Array, terms_x: jax.Array, in_class: jax.Array):
        return class_conditional(log_terms, structure, neighbourhood, x, terms_x, in_class)

    def class_move(log_terms: LogTerms, carry: tuple, inputs: tuple) -> tuple:
        x, terms_x, log_p = carry
        c, key = inputs
        key_draw, key_accept = random.split(key)
        in_class = colour == c
        # forward: each coordinate of the class from its conditional at x
        values, log_probs = conditional(log_terms, x, terms_x, in_class)
        slot = random.categorical(key_draw, log_probs, axis=1)
        y = jnp.where(in_class, jnp.take_along_axis(values, slot[:, None], 1)[:, 0], x)
        log_q_forward = jnp.sum(
            jnp.where(in_class, jnp.take_along_axis(log_probs, slot[:, None], 1)[:, 0], 0.0)
        )
        # reverse: each coordinate back to x_j from its conditional at y (the window of an
        # ordinal coordinate is symmetric, so x_j is always among y_j's options)
        terms_y = log_terms(y)
        log_p_y = jnp.sum(terms_y)
        values_y, log_probs_y = conditional(log_terms, y, terms_y, in_class)
        is_back = values_y == x[:, None]
        log_q_back = jnp.max(jnp.where(is_back, log_probs_y, -jnp.inf), axis=1)
        log_q_reverse = jnp.sum(jnp.where(in_class, log_q_back, 0.0))
        log_accept = log_p_y - log_p + log_q_reverse - log_q_forward
        (x_new, terms_new, log_p_new), accept_prob, accepted = mh_accept(
            key_accept,
            log_accept,
            (y, terms_y, log_p_y),
            (x, terms_x, log_p),
            jnp.isfinite(log_p_y),
        )
        num_changed = jnp.where(accepted, jnp.sum(y != x), 0)
        return (x_new, terms_new, log_p_new), (accept_prob, accepted, num_changed)

    def kernel(rng_key: jax.Array, state: State, log_terms: LogTerms) -> tuple[State, Info]:
        x = state.position
        terms_x = log_terms(x)
        classes = jnp.arange(structure.num_colours)
        keys = random.split(rng_key, structure.num_colours)
        (x, _, log_p), (accept_prob, accepted, num_changed) = lax.scan(
            lambda carry, inputs: class_move(log_terms, carry, inputs),
            (x, terms_x, jnp.sum(terms_x)),
            (classes, keys),
        )
        info = Info(jnp.mean(accept_prob), jnp.all(accepted), jnp.sum(num_changed))
        return State(x, log_p, None), info

    return kernel
