"""A sampler that cannot move a coordinate says so.

Every discrete kernel's state records which coordinates changed in the current phase
(warmup, then sampling) and the mean number of coordinates a step changed. At the end of
warmup and after 1024, 2048, 4096, ... sampling steps, :meth:`StuckCoordinateWatch.check`
looks at up to :data:`NUM_CHECKED` coordinates that never changed. Each gets the
probability ``p_j`` that its exact conditional (over its current value and the candidates
the kernel can propose) puts on its other values, compared with the mean ``p`` of
:data:`NUM_CHECKED` coordinates spread over the vector. A chain that changed the average
coordinate ``c`` times would change coordinate ``j`` about ``c min(1, p_j / p)`` times; when
that is at least :data:`MIN_EXPECTED_CHANGES` and ``j`` never changed, it is stuck, and a
``RuntimeWarning`` names its site and index. A kernel whose step draws every coordinate
once from its exact conditional (a sweep of :class:`~numpyro_discrete.ChromaticGibbs`)
changes ``j`` with probability at most ``p_j`` per step, so there the count is also at most
``steps p_j``: where a few coordinates move freely and the rest hardly at all (an RBM with
strong weights), ``c`` is the free coordinates' rate, and ``c min(1, p_j / p)`` called
coordinates stuck that an exact sampler would leave unchanged for hundreds of steps
(measured on the gallery's RBM: ``p_j = 0.01`` in 500 sweeps, 60 changes "expected"). The
sweeps of :class:`~numpyro_discrete.BlockGibbs` get the same bound: a block drawn jointly
changes its coordinates far more often than their one-site leave probabilities say (a
segment of a hidden chain moves at once), so ``c`` is high, and the proportional count
called a well-determined state of the gallery's factorial HMM stuck (``p_j = 0.01`` in 500
warmup steps, 52 changes "expected", while the block draws were exact). There the bound is
not exact (a coordinate's block marginal can leave its value more often than ``p_j``): it
can hide a stuck coordinate, never invent one. The count is rough (the rate of changes is
not proportional to the leave probability at one state, and that probability moves with the
state and the continuous values), so the threshold leaves a factor 2: a Poisson count of
mean 12.5 is 0 with probability below ``4e-6``. (Measured: a coordinate of a random model in
the slow tier whose conditional left its value with probability 0.01 was estimated at 11
changes in 1024 steps and changed about 7 times per 1000; the earlier threshold of 10 called
it stuck.)

The check runs inside the compiled sampling loop (a progress bar or not, sequential,
parallel or vectorized chains) under a ``lax.cond`` that is false at every other step, and
reports through a ``jax.pure_callback``: unlike ``jax.debug.callback`` it has no side effect
in JAX's sense, so the step keeps JAX's fast dispatch path (measured: 0.0047 ms per dispatch
of a tiny step with the gated callback, 0.0043 without it, 0.048 with
``jax.debug.callback``). Per step, it costs one comparison of the state with the previous
one; the check's program (a batched copy of the log density) is compiled with the step
(measured: 0.3-0.5 s more CPU time for ALBP's first run on a 50 x 50 Ising model). JAX's
persistent compilation cache stores no program with a host callback:
:func:`~numpyro_discrete.kernels.loop_checks.enable_loop_checks` leaves the check out.
"""

from collections.abc import Callable
from typing import Any
import warnings

import numpy as np

import jax
from jax import lax
import jax.numpy as jnp

from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.rows import row_logsumexp
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["StuckCoordinateWatch", "is_check_step", "leave_probabilities"]

NUM_CHECKED = 8
MIN_EXPECTED_CHANGES = 25.0
FIRST_SAMPLING_CHECK = 1024


def is_check_step(i: jax.Array, num_warmup: int) -> jax.Array:
    """Whether the state after step ``i`` (its ``i`` field, steps done) is checked: the
    end of warmup, and ``2^k >= 1024`` sampling steps."""
    sampling = i - num_warmup
    power_of_two = (sampling & (sampling - 1)) == 0
    end_of_warmup = (i == num_warmup) & (num_warmup > 0)
    return end_of_warmup | ((sampling >= FIRST_SAMPLING_CHECK) & power_of_two)


def leave_probabilities(
    log_density: Callable[[jax.Array], jax.Array],
    neighbourhood: Neighbourhood,
    x: jax.Array,
    coords: jax.Array,
) -> jax.Array:
    """For each coordinate of `coords`, the probability its exact conditional given the
    others puts on its candidate values other than ``x_j`` (``len(coords) x M``
    evaluations of ``log pi``)."""
    candidates = neighbourhood.candidates(x)[coords]
    valid = neighbourhood.valid(x)[coords]

    def moved(j: jax.Array, value: jax.Array) -> jax.Array:
        return log_density(x.at[j].set(value.astype(x.dtype)))

    log_p = jax.vmap(jax.vmap(moved, (None, 0)), (0, 0))(coords, candidates)
    d = jnp.where(valid, log_p - log_density(x), -jnp.inf)
    d = jnp.where(jnp.isnan(d), -jnp.inf, d)
    # P(leave) = sum_v e^d / (1 + sum_v e^d)
    return jax.nn.sigmoid(row_logsumexp(d))


class StuckCoordinateWatch:
    """The check of one kernel's chains (see the module docstring).

    :param target: the kernel's target.
    :param num_warmup: the run's warmup length.
    :param kernel_name: the name used in the warning.
    :param advice: ``site -> str``, what to try for a stuck coordinate of that site.
    :param sweeps: whether each step draws every coordinate once from an exact conditional,
        its own or its block's (a Gibbs sweep): a coordinate's expected changes are then also
        at most the steps times its leave probability.
    """

    def __init__(
        self,
        target: DiscreteTarget,
        num_warmup: int,
        kernel_name: str,
        advice: Callable[[str], str],
        sweeps: bool = False,
    ) -> None:
        self._target = target
        self._sweeps = sweeps
        self._num_warmup = num_warmup
        self._kernel_name = kernel_name
        self._advice = advice
        self._reported: set[int] = set()

    def coordinates_changed(self, state: Any, new_position: jax.Array) -> jax.Array:
        """The field ``coordinates_changed`` after one step from `state` to
        `new_position` (restarted when sampling starts)."""
        restart = state.i == self._num_warmup
        changed = jnp.where(restart, False, state.coordinates_changed)
        return changed | (new_position != self._target.flatten(state.z))

    def check(self, state: Any, model_args: tuple, model_kwargs: Any, batched: bool = False) -> Any:
        """`state` unchanged, after warning about stuck coordinates at a check step; with
        `batched`, a state with a leading chain axis (one check for every chain)."""
        step = state.i[0] if batched else state.i
        log_density = self._target.log_density(model_args, model_kwargs)
        neighbourhood = self._target.neighbourhood
        num_coords = self._target.num_coords
        num_checked = min(NUM_CHECKED, num_coords)

        spread = np.linspace(0, num_coords - 1, num_checked).astype(np.int32)

        def one_chain(z: Any, changed: jax.Array) -> tuple[jax.Array, ...]:
            x = self._target.flatten(z)
            # the coordinates that never changed first
            coords = jnp.argsort(changed, stable=True)[:num_checked].astype(jnp.int32)
            leave = leave_probabilities(
                log_density, neighbourhood, x, jnp.concatenate([coords, jnp.asarray(spread)])
            )
            return coords, ~changed[coords], leave[:num_checked], jnp.mean(leave[num_checked:])

        def report(state: Any) -> Any:
            fn = jax.vmap(one_chain) if batched else one_chain
            coords, unchanged, leave, mean_leave = fn(state.z, state.coordinates_changed)
            phase_steps = jnp.where(step <= self._num_warmup, step, step - self._num_warmup)
            mean_changes = state.mean_num_changed * phase_steps / num_coords
            expected = mean_changes[..., None] * jnp.minimum(
                1.0, leave / jnp.maximum(mean_leave, 1e-12)[..., None]
            )
            if self._sweeps:
                expected = jnp.minimum(expected, phase_steps * leave)
            flag = jax.pure_callback(
                self._warn,
                jax.ShapeDtypeStruct((), jnp.int32),
                step,
                coords,
                unchanged,
                leave,
                expected,
                mean_changes,
                vmap_method="sequential",
            )
            # the callback's result (always 0) is used, so that it is never elided
            return state._replace(coordinates_changed=state.coordinates_changed | (flag != 0))

        return lax.cond(is_check_step(step, self._num_warmup), report, lambda s: s, state)

    def _warn(self, step, coords, unchanged, leave, expected, mean_changes) -> np.int32:
        step = int(step)
        phase = (
            f"{step} warmup steps"
            if step <= self._num_warmup
            else f"{step - self._num_warmup} sampling steps"
        )
        coords, unchanged, leave, expected = (
            np.atleast_2d(a) for a in (coords, unchanged, leave, expected)
        )
        mean_changes = np.atleast_1d(mean_changes)
        layout = self._target.layout
        for chain in range(coords.shape[0]):
            for j, stuck, p, count in zip(
                coords[chain], unchanged[chain], leave[chain], expected[chain], strict=True
            ):
                if not stuck or count < MIN_EXPECTED_CHANGES or int(j) in self._reported:
                    continue
                self._reported.add(int(j))
                site, index = layout.coordinate_name(int(j))
                warnings.warn(
                    f"{self._kernel_name}: coordinate {site}{index} never changed in {phase} "
                    f"of chain {chain}, while the average coordinate changed "
                    f"{mean_changes[chain]:.0f} times and its exact conditional gives its "
                    f"other values probability {p:.2f} (about {count:.0f} changes expected): "
                    f"the chain is stuck in it, and its draws of {site!r} are wrong. "
                    f"{self._advice(site)}",
                    RuntimeWarning,
                    stacklevel=1,
                )
        return np.int32(0)
