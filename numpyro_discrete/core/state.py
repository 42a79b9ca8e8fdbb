"""What every proposal of the core shares: the chain state (with its cached local ratios for
the proposals that use them), the step's info, and the Metropolis-Hastings accept step."""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core.local_ratios import LocalFn

__all__ = ["Info", "State", "SweepState", "init", "mh_accept", "recompute_where", "select"]


class State(NamedTuple):
    """
    - **position** - flat integer state ``x``, shape ``(N,)``.
    - **log_density** - ``log pi(x)``, scalar.
    - **log_ratios** - local log-ratio table ``d(x)``, shape ``(N, M)``.
    """

    position: jax.Array
    log_density: jax.Array
    log_ratios: jax.Array


class SweepState(NamedTuple):
    """
    The chain state of the sweeps (chromatic and block Gibbs), which cache no local ratios:
    each class computes its conditionals from the current terms.

    - **position** - flat integer state ``x``, shape ``(N,)``.
    - **log_density** - ``log pi(x)``, scalar.
    """

    position: jax.Array
    log_density: jax.Array


class Info(NamedTuple):
    """
    - **accept_prob** - ``min(1, A)`` of this step's proposal.
    - **is_accepted** - whether the proposal was taken.
    - **num_changed** - number of coordinates that changed value (0 if rejected).
    """

    accept_prob: jax.Array
    is_accepted: jax.Array
    num_changed: jax.Array


def init(position: jax.Array, local_fn: LocalFn) -> State:
    """The state at `position`, with ``log pi`` and the local log-ratios cached."""
    log_p, log_ratios = local_fn(position)
    return State(position, log_p, log_ratios)


def select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """`on_true` where `pred`, else `on_false`, leaf by leaf (both computed): for the
    adaptation's scalars and schedules, where a conditional would cost more than it saves.
    The accept step of a whole chain state uses a conditional instead (:func:`mh_accept`)."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def recompute_where(
    needed: jax.Array, value: Any, recompute: Callable[..., Any], *inputs: jax.Array
) -> Any:
    """`value`, or ``recompute(*inputs)`` where `needed` (a scalar bool): a fallback or a
    refresh that a step rarely takes. A loop of at most one iteration rather than a
    ``lax.cond``: under ``vmap`` (vectorized chains) a ``cond`` whose predicate differs
    between chains becomes a ``select`` that computes both branches at every step, where a
    ``while_loop`` runs its body only while some chain of the batch needs it, and keeps the
    others' values. The inputs pass through an optimisation barrier with the loop's flag,
    so that XLA cannot hoist the body (which reads no value the loop changes) out of it."""

    def once(carry: tuple) -> tuple:
        pending, _, inputs = carry
        pending, inputs = lax.optimization_barrier((pending, inputs))
        return ~pending, recompute(*inputs), inputs

    return lax.while_loop(lambda carry: carry[0], once, (needed, value, inputs))[1]


def mh_accept(
    rng_key: jax.Array,
    log_accept: jax.Array,
    proposed: State,
    current: State,
    is_valid: jax.Array,
    metropolis: jax.Array | bool = True,
    uniform: jax.Array | None = None,
) -> tuple[State, jax.Array, jax.Array]:
    """
    The Metropolis-Hastings test of a proposal whose log acceptance ratio is `log_accept`.

    An invalid proposal (`is_valid` false: an undefined density at the proposal, or a
    proposal probability of zero) and a NaN ratio reject, so that neither NaN nor inf can
    reach the state. With ``metropolis=False`` every valid proposal is taken (a burn-in
    without correction, ACS's InitBurnin).

    The states may be any pytrees of the same structure. A caller that draws its uniforms
    in one batch passes this test's as `uniform` (then `rng_key` is unused).

    :return: ``(new_state, accept_prob, is_accepted)``, ``accept_prob = min(1, A)``.
    """
    log_accept = jnp.where(is_valid & ~jnp.isnan(log_accept), log_accept, -jnp.inf)
    accept_prob = jnp.exp(jnp.minimum(log_accept, 0.0))
    if uniform is None:
        uniform = random.uniform(rng_key)
    is_accepted = jnp.log(uniform) < log_accept
    if metropolis is not True:
        is_accepted = jnp.where(metropolis, is_accepted, is_valid)
    # a conditional rather than a select: measured on CPU (tools/compare_revisions.py),
    # it keeps ALBP's and ACS's steps as fast as the kernels' former own accept steps,
    # where a select was 2-5% slower; under `vmap` it becomes a select anyway
    new_state = lax.cond(is_accepted, lambda: proposed, lambda: current)
    return new_state, accept_prob, is_accepted
