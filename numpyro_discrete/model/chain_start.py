"""Where a chain of a mixed model starts: every site at one coherent point.

numpyro's ``Gibbs`` starts each block at a draw from the prior (its prototype trace) and
then initialises the HMC block by its ``init_strategy`` given the discrete values: the
discrete sites are drawn under continuous values the chain never takes. Under a diffuse
prior this starts chains deep in the tails; on the N-mixture model of the gallery a prior
draw of the abundance rate (``Exponential(0.1)``) near 40 set every count ``N_i`` near 40,
the detection probability followed to 0.1, and that chain stayed on the ridge ``N p =
const`` (posterior probability below ``1e-6``) for thousands of sweeps while three chains
started elsewhere agreed. :func:`init_strategy_start` reads the model once with the
continuous sites where the inner kernel's ``init_strategy`` puts them (by default
uniformly in ``(-2, 2)`` unconstrained) and the discrete sites drawn from the model given
those values: the start numpyro's NUTS gives a continuous model, extended to the discrete
sites.

Where the discrete sites are summed out, the continuous sites' marginal can have local
modes that a start from ``init_to_uniform`` descends into and no local sampler leaves: on
the gallery's HMM (``T = 1000, K = 4``), 1 to 4 of 64 such starts (by how they are
descended) end in a mode 180 nats below the main one, with two state means on one level
(``tools/hmm_modes.py``), and a chain of the gallery's run stayed there (R-hat 5.67).
:func:`chain_start` draws several starts there, :func:`descended_start` descends each a
little on the potential and keeps the lowest, as optimisation-based initialisations do:
of 16 groups of 4 such starts, after 100 steps of its descent none kept a start in a local
mode, and the gallery's run converged (R-hat 1.00).

:func:`compiled_once` compiles such a start, run once per chain, with cheaper options.
"""

from collections.abc import Callable, Collection, Mapping
from typing import Any

import jax
from jax import random
from jax.flatten_util import ravel_pytree
import jax.numpy as jnp

from numpyro.distributions import biject_to
from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import conditioned, with_conditioning
from numpyro.infer.initialization import init_to_uniform
from numpyro.infer.util import potential_energy

from numpyro_discrete.model.sites import ModelSites

__all__ = [
    "DESCENT_RATE",
    "DESCENT_STEPS",
    "INIT_COMPILER_OPTIONS",
    "chain_start",
    "compiled_once",
    "descend",
    "descended_start",
    "init_strategy_start",
]

DESCENT_STEPS = 100
"""Steps of :func:`descend` per start in :func:`descended_start`."""

DESCENT_RATE = 0.05
"""Adam's step size in :func:`descend`, in unconstrained units: 100 steps move a
coordinate by at most 5, past ``init_to_uniform``'s radius of 2."""


def init_strategy_start(
    model: Callable,
    rng_key: jax.Array,
    init_strategy: Callable,
    discrete: Collection[str],
    continuous: Collection[str],
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
) -> dict[str, jax.Array]:
    """``init_params`` for numpyro's ``Gibbs``: the `continuous` sites' unconstrained values
    where `init_strategy` puts them, and the `discrete` sites' values drawn from `model`
    given those (a value of zero probability is moved later, as any drawn start is:
    :func:`~numpyro_discrete.model.feasible_start.feasible_start`).

    :param init_strategy: a numpyro init strategy (``init_to_uniform``, ``init_to_median``,
        ...); it leaves the discrete sites to be drawn.
    """
    # the key is set before the strategy reads it (numpyro's `initialize_model` order)
    started = substitute(seed(conditioned(model), rng_key), substitute_fn=init_strategy)
    model_trace = trace(started).get_trace(*model_args, **model_kwargs)
    start = {name: model_trace[name]["value"] for name in discrete}
    for name in continuous:
        site = model_trace[name]
        start[name] = biject_to(site["fn"].support).inv(site["value"])
    return start


def chain_start(
    model: Callable,
    rng_key: jax.Array,
    init_strategy: Callable,
    sites: ModelSites,
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
    *,
    marginal: Callable | None = None,
    num_starts: int = 1,
) -> dict[str, jax.Array]:
    """``init_params`` for numpyro's ``Gibbs`` on `model`: :func:`init_strategy_start`, or,
    where the continuous sites' `marginal` is given (the model the inner kernel samples,
    its discrete sites summed out), `num_starts` > 1 and the strategy is numpyro's
    ``init_to_uniform`` (a strategy that puts the chain at given values is kept), the
    continuous sites at the :func:`descended_start` of `num_starts` such starts on the
    marginal's potential, and the discrete ones drawn from `model` given them."""
    strategy = getattr(init_strategy, "func", init_strategy)
    if marginal is None or num_starts == 1 or strategy is not init_to_uniform:
        discrete, continuous = sites.discrete, sites.continuous
        return init_strategy_start(
            model, rng_key, init_strategy, discrete, continuous, model_args, model_kwargs
        )
    # init_to_uniform's starts, drawn at once: each continuous site uniform in (-radius,
    # radius) in its unconstrained space (one draw, not one trace of the model per start)
    radius = getattr(init_strategy, "keywords", {}).get("radius", 2.0)
    prototype = {}
    for name in sites.continuous:
        site = sites.trace[name]
        prototype[name] = biject_to(site["fn"].support).inv(site["value"])
    flat, unravel = ravel_pytree(prototype)
    key_starts, key_discrete = random.split(rng_key)
    starts = random.uniform(
        key_starts, (num_starts,) + flat.shape, flat.dtype, minval=-radius, maxval=radius
    )
    # the marginal does not depend on the discrete values: any serve
    kwargs = with_conditioning(
        model_kwargs, {name: sites.trace[name]["value"] for name in sites.discrete}
    )

    def potential(x: jax.Array) -> jax.Array:
        return potential_energy(marginal, model_args, kwargs, unravel(x))

    chosen = unravel(descended_start(potential, starts))

    def at_chosen(site: dict) -> jax.Array | None:
        # each continuous site through its own support as the model reads it there (a
        # support may depend on another site's value), the discrete ones left to be drawn
        if site["type"] == "sample" and site["name"] in chosen:
            return biject_to(site["fn"].support)(chosen[site["name"]])
        return None

    discrete = init_strategy_start(
        model, key_discrete, at_chosen, sites.discrete, (), model_args, model_kwargs
    )
    return {**discrete, **chosen}


def descend(
    potential: Callable[[jax.Array], jax.Array],
    flat: jax.Array,
    steps: int = DESCENT_STEPS,
    rate: float = DESCENT_RATE,
) -> tuple[jax.Array, jax.Array]:
    """`flat` after `steps` steps of Adam (Kingma and Ba 2015, its default moment decays)
    on `potential`, and the ``(steps + 1,)`` potentials along the way (the first at `flat`,
    the last at the end); gradient entries that are not finite are taken as zero. One
    loop of ``steps + 1`` evaluations of the value and gradient, whose last update is not
    taken: a separate evaluation of the potential at either end would be another copy of
    it in the compiled program (1.5 s of compilation on the gallery's HMM)."""

    def step(carry: tuple, i: jax.Array) -> tuple[tuple, jax.Array]:
        x, m, v = carry
        value, grad = jax.value_and_grad(potential)(x)
        grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        m_hat, v_hat = m / (1 - 0.9 ** (i + 1)), v / (1 - 0.999 ** (i + 1))
        moved = x - rate * m_hat / (jnp.sqrt(v_hat) + 1e-8)
        return (jnp.where(i < steps, moved, x), m, v), value

    zeros = jnp.zeros_like(flat)
    (x, _, _), values = jax.lax.scan(step, (flat, zeros, zeros), jnp.arange(steps + 1))
    return x, values


def descended_start(potential: Callable[[jax.Array], jax.Array], starts: jax.Array) -> jax.Array:
    """Of the `starts` ``(K, D)`` and the same starts moved by :func:`descend` on
    `potential`, the one of lowest potential (the first start where no potential is
    finite). The descents run one after the other (``lax.map``): on the gallery's HMM
    this compiled in 5.3 s against 6.3 s batched by ``vmap``, and ran as fast."""

    def candidates(start: jax.Array) -> tuple[jax.Array, jax.Array]:
        descended, values = descend(potential, start, DESCENT_STEPS)
        return descended, values[jnp.array([0, -1])]

    descended, energies = jax.lax.map(candidates, starts)
    energies = jnp.where(jnp.isfinite(energies), energies, jnp.inf)
    # (start, descended) of every start in one order; argmin takes the first of equal values
    is_descended, index = jnp.unravel_index(jnp.argmin(energies.T), energies.T.shape)
    return jnp.where(is_descended, descended[index], starts[index])


INIT_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}
"""XLA's options on CPU for :class:`~numpyro_discrete.LBPGibbs`'s compiled ``init`` (a chain's
start and numpyro's ``Gibbs.init``), a program that runs once per chain: LLVM's
optimisation level 1 instead of the default 3. Three compilations of each, alternated in one
process (2 cores): the gallery mixture's ``init`` compiled in 3.05-3.76 s against
3.61-4.27 s, the gallery HMM's in 7.2-8.6 s against 8.4-9.4 s, and the HMM's ran in
0.66-0.70 s against 0.57-0.66 s (its 4 descents); level 0 ran those descents 6 times
slower."""


def compiled_once(fun: Callable, rng_key: jax.Array) -> Callable:
    """`fun` jitted for a program that runs once per chain: with
    :data:`INIT_COMPILER_OPTIONS` on CPU, XLA's defaults elsewhere and inside the trace of
    a caller (`rng_key` a tracer: ``chain_method="parallel"``), where the options belong to
    the caller's program."""
    traced = isinstance(rng_key, jax.core.Tracer)
    options = INIT_COMPILER_OPTIONS if jax.default_backend() == "cpu" and not traced else None
    return jax.jit(fun, compiler_options=options)
