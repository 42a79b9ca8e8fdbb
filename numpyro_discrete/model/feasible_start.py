"""A chain starts where the density is positive.

A prior draw of the discrete sites can have zero posterior probability: in an N-mixture
model ``N_i ~ Poisson(lambda)`` must be at least every count observed at site ``i``
(``counts ~ Binomial(N_i, p)``), and a draw from the prior usually is not. numpyro's
``initialize_model`` re-draws the continuous sites up to 100 times; re-drawing the discrete
ones from the prior would rarely help (every site must land above its counts at once).
:func:`feasible_start` moves only the coordinates that share an infinite term, in their own
support, until every term is finite: a count unbounded above moves away from its lower
bound by doubling its distance (``log2`` of the largest count rounds for the N-mixture), a
bounded value (binary, categorical, bounded ordinal) to its next value, cyclically.

Moving every suspect by one value at a time never changes their order, so a constraint
between coordinates (change points ``tau_1 < tau_2 < tau_3`` imposed by a ``factor`` of
``-inf``) cannot be met that way. After those rounds, the suspects of a bounded support are
drawn again, uniformly in their supports, as numpyro's ``init_to_uniform`` retries its draw,
for up to :data:`REDRAW_ROUNDS` more rounds.
"""

from collections.abc import Callable
import warnings
import weakref

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core.neighbourhood import UNBOUNDED, CoordinateSupports
from numpyro_discrete.structure.colouring import TermStructure

__all__ = ["MAX_ROUNDS", "REDRAW_ROUNDS", "feasible_start"]

#: rounds of moves by one value (or a doubling) before the suspects are drawn again
MAX_ROUNDS = 48

#: rounds of uniform draws of the suspects after the moves, before giving up (the caller's
#: check of the initial density then names the sites)
REDRAW_ROUNDS = 64


def _impossible(terms: jax.Array) -> jax.Array:
    """Terms of zero probability: not finite, or at numpyro's floor for a zero probability
    (``clamp_probs`` keeps ``Bernoulli(0).log_prob(1)`` at ``log`` of the smallest normal
    float, -87.3 in float32, whose gradient in the other sites may be NaN)."""
    floor = np.log(np.finfo(terms.dtype).tiny) + 1.0
    return ~jnp.isfinite(terms) | (terms <= floor)


def _suspects(terms: jax.Array, structure: TermStructure, movable: np.ndarray) -> jax.Array:
    """The movable coordinates that share a term of zero probability."""
    bad = _impossible(terms)
    count = jnp.zeros(structure.num_coords, jnp.int32)
    if structure.pair_terms.size:
        count = count.at[structure.pair_coords].add(bad[structure.pair_terms].astype(jnp.int32))
    suspect = count > 0
    if structure.dense_terms.size:
        suspect = suspect | jnp.any(bad[structure.dense_terms])
    return suspect & movable


def _moved(x: jax.Array, supports: CoordinateSupports) -> jax.Array:
    """Every coordinate's next value to try (see the module docstring)."""
    lower = jnp.asarray(supports.lower, x.dtype)
    upper = jnp.asarray(supports.upper, x.dtype)
    unbounded = np.asarray(supports.upper) >= UNBOUNDED
    span = jnp.where(unbounded, 1, upper - lower + 1)
    grown = lower + 2 * (x - lower) + 1
    cycled = lower + (x - lower + 1) % span
    return jnp.where(unbounded, jnp.minimum(grown, UNBOUNDED - 1), cycled)


def _redrawn(rng_key: jax.Array, x: jax.Array, supports: CoordinateSupports) -> jax.Array:
    """Every coordinate of a bounded support drawn uniformly in it; the others as
    :func:`_moved` moves them."""
    lower = jnp.asarray(supports.lower, x.dtype)
    unbounded = np.asarray(supports.upper) >= UNBOUNDED
    upper = jnp.asarray(np.where(unbounded, supports.lower, supports.upper), x.dtype)
    drawn = random.randint(rng_key, x.shape, lower, upper + 1, x.dtype)
    return jnp.where(unbounded, _moved(x, supports), drawn)


def feasible_start(
    log_terms: Callable[[jax.Array], jax.Array],
    structure: TermStructure,
    supports: CoordinateSupports,
    x: jax.Array,
    movable: np.ndarray,
    rng_key: jax.Array,
) -> jax.Array:
    """`x` where every term of ``log pi`` has positive probability; else the coordinates of
    `movable` (a static ``(N,)`` mask: those drawn, not given) that share a term of zero
    probability moved round by round (:data:`MAX_ROUNDS` at most), then drawn again with
    `rng_key` (:data:`REDRAW_ROUNDS` at most), until none of them is left; `x` itself if
    the rounds run out. A term that stays impossible through values that cannot move is
    left to the caller's check of the initial density."""
    with warnings.catch_warnings():
        # numpyro warns of the out-of-support values this function exists to move
        warnings.filterwarnings("ignore", "Out-of-support", UserWarning)
        return _feasible_start(log_terms, structure, supports, x, movable, rng_key)


def _feasible_start(log_terms, structure, supports, x, movable, rng_key):
    if isinstance(x, jax.core.Tracer):  # staged into the caller's program
        return _moved_until_possible(log_terms, structure, supports, x, movable, rng_key)
    # concrete (a chain's `init`, run eagerly): compiled programs, as op by op the model's
    # operations compiled one by one (37 programs on a 50 x 50 Ising lattice)
    if not bool(_any_impossible(log_terms, x)):
        return x  # the usual case, decided without compiling the loop
    return jax.jit(
        lambda x, key: _moved_until_possible(log_terms, structure, supports, x, movable, key)
    )(x, rng_key)


# the compiled check of each `log_terms` (a target's is the same function for the same
# arguments), so that a later chain's check compiles nothing; held weakly, so that neither
# the function nor the model arguments it closes over outlive their kernel
_CHECKS: "weakref.WeakKeyDictionary[Callable, Callable]" = weakref.WeakKeyDictionary()


def _any_impossible(log_terms: Callable[[jax.Array], jax.Array], x: jax.Array) -> jax.Array:
    check = _CHECKS.get(log_terms)
    if check is None:
        terms = weakref.ref(log_terms)
        check = _CHECKS[log_terms] = jax.jit(lambda x: jnp.any(_impossible(terms()(x))))
    return check(x)


def _moved_until_possible(log_terms, structure, supports, x, movable, rng_key):
    def cond(carry: tuple[jax.Array, jax.Array, jax.Array]) -> jax.Array:
        _, suspect, i = carry
        return jnp.any(suspect) & (i < MAX_ROUNDS + REDRAW_ROUNDS)

    def body(carry: tuple[jax.Array, jax.Array, jax.Array]):
        x, suspect, i = carry
        new = lax.cond(
            i < MAX_ROUNDS,
            lambda: _moved(x, supports),
            lambda: _redrawn(random.fold_in(rng_key, i), x, supports),
        )
        x = jnp.where(suspect, new, x)
        return x, _suspects(log_terms(x), structure, movable), i + 1

    start = (x, _suspects(log_terms(x), structure, movable), jnp.asarray(0))
    moved, suspect, _ = lax.while_loop(cond, body, start)
    # out of rounds (values cycling, or terms that are merely tiny): the draw as it was
    return jnp.where(jnp.any(suspect), x, moved)
