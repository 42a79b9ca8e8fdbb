"""The coordinate-wise proposal with a step size and a balancing exponent: every coordinate
proposed independently, in parallel (DMALA, Zhang et al. 2022; the proposal of ACS, Pynadath
et al. 2024, whose schedules are in :mod:`~numpyro_discrete.core.cyclical`).

Pure JAX, no numpyro. The chain state is a :class:`~numpyro_discrete.core.state.State`; the
target enters through a :data:`~numpyro_discrete.core.local_ratios.LocalFn` returning
``log pi(x)`` and the ``(N, M)`` table ``d`` of local log-ratios over the candidate values of
a :class:`~numpyro_discrete.core.neighbourhood.Neighbourhood`.

Proposal (eq. 5 of the ACS paper). Every coordinate ``j`` moves independently to
``v in {x_j} + candidates_j(x)`` with probability

    ``Q_j(v | x) = softmax_v( beta * d_j(v) - dist(v, x_j)^2 / (2 alpha) )``,

with ``d_j(x_j) = 0`` (staying put has logit 0). The distance is the integer difference for
ordinal coordinates, 1 for a binary flip and the one-hot distance ``sqrt(2)`` between two
categories. With gradient ratios ``d_j(v) = grad_j (v - x_j)`` this is the paper's proposal;
with exact ratios it is its first line (eq. 4) restricted to single-coordinate changes.
``log A = log pi(y) - log pi(x) + log Q(x | y) - log Q(y | x)`` (eq. 6), the reverse
proposal using the ratios at ``y``. Ordinal candidates lie in a window symmetric around
``x_j``, so ``x_j`` is always a candidate from ``y_j``: every move can be reversed.

Example: an exact draw from a product of Bernoullis is kept by a DMALA step.

.. doctest::

    >>> import jax
    >>> import jax.numpy as jnp
    >>> from numpyro_discrete.core import coordinatewise, local_ratios, neighbourhood, state
    >>> logits = jnp.linspace(-2.0, 2.0, 8)
    >>> binary = neighbourhood.binary_neighbourhood
    >>> local_fn = local_ratios.gradient_local_fn(lambda x: jnp.sum(x * logits), binary)
    >>> distance = neighbourhood.squared_distance_fn(neighbourhood.CoordinateSupports.binary(8))
    >>> kernel = coordinatewise.build_kernel(binary, distance)
    >>> def step(x, key):
    ...     new, info = kernel(key, state.init(x, local_fn), local_fn, 0.5, 0.5)
    ...     return new.position
    >>> keys = jax.random.split(jax.random.key(0), 20000)
    >>> x0 = jax.random.bernoulli(keys[0], jax.nn.sigmoid(logits), (20000, 8)).astype(jnp.int32)
    >>> x1 = jax.vmap(step)(x0, keys)
    >>> bool(jnp.all(jnp.abs(x1.mean(0) - jax.nn.sigmoid(logits)) < 0.02))
    True
"""

from collections.abc import Callable

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import Neighbourhood, SquaredDistanceFn
from numpyro_discrete.core.noise import gumbel
from numpyro_discrete.core.rows import row_argmax, row_log_softmax, row_take
from numpyro_discrete.core.state import Info, State, mh_accept

__all__ = [
    "apply_choices",
    "build_kernel",
    "proposal_log_prob",
    "proposal_log_probs",
    "reverse_choices",
]


def proposal_log_probs(
    log_ratios: jax.Array,
    squared_distance: jax.Array,
    step_size: jax.Array,
    balancing: jax.Array,
) -> jax.Array:
    """
    Eq. 5: the ``(N, M + 1)`` table of ``log Q_j``; column 0 is staying at ``x_j``, column
    ``m + 1`` moving to candidate ``m``. Invalid candidates (``d = -inf``) and undefined
    ratios (NaN, ``+inf``) get probability zero.

    :param log_ratios: ``(N, M)`` local log-ratios ``d``.
    :param squared_distance: ``(N, M)`` squared distances of the candidates from ``x``.
    :param step_size: ``alpha > 0``.
    :param balancing: ``beta`` (``g(t) = t^beta``).
    """
    logits = balancing * log_ratios - squared_distance / (2.0 * step_size)
    logits = jnp.where(jnp.isfinite(log_ratios), logits, -jnp.inf)
    stay = jnp.zeros(logits.shape[:1] + (1,), logits.dtype)
    return row_log_softmax(jnp.concatenate([stay, logits], axis=1))


def proposal_log_prob(log_probs: jax.Array, choices: jax.Array) -> jax.Array:
    """``log Q(y | x) = sum_j log Q_j(y_j | x)`` of the column `choices` taken in each row."""
    return jnp.sum(row_take(log_probs, choices))


def apply_choices(position: jax.Array, choices: jax.Array, candidates: jax.Array) -> jax.Array:
    """The new state: coordinate ``j`` stays if ``choices[j] == 0``, else takes candidate
    ``choices[j] - 1`` of the ``(N, M)`` table `candidates` at `position`."""
    moved = row_take(candidates, jnp.maximum(choices - 1, 0))
    return jnp.where(choices == 0, position, moved).astype(position.dtype)


def reverse_choices(
    position: jax.Array, new_position: jax.Array, new_candidates: jax.Array
) -> jax.Array:
    """The choices that move `new_position` back to `position` (0 where nothing changed),
    given the candidate table at `new_position`."""
    restores = new_candidates == position[:, None]
    index = 1 + jnp.argmax(restores, axis=1)
    return jnp.where(new_position == position, 0, index).astype(jnp.int32)


def build_kernel(
    neighbourhood: Neighbourhood, squared_distance: SquaredDistanceFn
) -> Callable[..., tuple[State, Info]]:
    """
    The coordinate-wise transition kernel (Alg. 1, lines 5-10, for one step).

    :param neighbourhood: candidate values per coordinate.
    :param squared_distance: see
        :func:`~numpyro_discrete.core.neighbourhood.squared_distance_fn`.
    :return: ``kernel(rng_key, state, local_fn, step_size, balancing, metropolis=True) ->
        (state, info)``; with ``metropolis=False`` every proposal of finite density is taken
        (InitBurnin's first stage, Alg. 3 line 2), otherwise it is M-H corrected.
    """

    def log_probs_at(x: jax.Array, log_ratios: jax.Array, alpha: jax.Array, beta: jax.Array):
        candidates = neighbourhood.candidates(x)
        log_q = proposal_log_probs(log_ratios, squared_distance(x, candidates), alpha, beta)
        return candidates, log_q

    def kernel(
        rng_key: jax.Array,
        state: State,
        local_fn: LocalFn,
        step_size: jax.Array,
        balancing: jax.Array,
        metropolis: jax.Array | bool = True,
    ) -> tuple[State, Info]:
        key_proposal, key_accept = random.split(rng_key)
        x = state.position
        # Alg. 1, lines 5-7: every coordinate drawn independently from Q_j(. | x)
        candidates_x, log_q_x = log_probs_at(x, state.log_ratios, step_size, balancing)
        # Gumbel-max per coordinate (what `random.categorical` does), with the package's
        # fast noise and a row argmax over the few options
        noise_x = gumbel(key_proposal, log_q_x.size, log_q_x.dtype).reshape(log_q_x.shape)
        choices = row_argmax(log_q_x + noise_x)
        y = apply_choices(x, choices, candidates_x)
        log_p_y, log_ratios_y = local_fn(y)
        candidates_y, log_q_y = log_probs_at(y, log_ratios_y, step_size, balancing)
        back = reverse_choices(x, y, candidates_y)
        # Alg. 1, line 8 (eq. 6); an undefined potential at y rejects
        log_accept = (
            log_p_y
            - state.log_density
            + proposal_log_prob(log_q_y, back)
            - proposal_log_prob(log_q_x, choices)
        )
        new_state, accept_prob, is_accepted = mh_accept(
            key_accept,
            log_accept,
            State(y, log_p_y, log_ratios_y),
            state,
            jnp.isfinite(log_p_y),
            metropolis,
        )
        num_changed = jnp.where(is_accepted, jnp.sum(y != x, dtype=jnp.int32), 0)
        return new_state, Info(accept_prob, is_accepted, num_changed)

    return kernel
