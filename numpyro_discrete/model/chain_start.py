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
:func:`descended_start` draws several starts, descends each a little on the potential and
keeps the lowest, as optimisation-based initialisations do: of 16 groups of 4 such starts,
after 100 steps of its descent none kept a start in a local mode, and the gallery's run
converged (R-hat 1.00).
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
    "chain_start",
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
    :func:`descended_start` of `num_starts` such starts on the marginal's potential."""

    def start(key: jax.Array) -> dict[str, jax.Array]:
        return init_strategy_start(
            model, key, init_strategy, sites.discrete, sites.continuous, model_args, model_kwargs
        )

    uniform = getattr(init_strategy, "func", init_strategy) is init_to_uniform
    if marginal is None or num_starts == 1 or not uniform:
        return start(rng_key)

    def potential(params: Mapping[str, jax.Array]) -> jax.Array:
        kwargs = with_conditioning(model_kwargs, {name: params[name] for name in sites.discrete})
        continuous = {name: params[name] for name in sites.continuous}
        return potential_energy(marginal, model_args, kwargs, continuous)

    return descended_start(start, potential, sites.continuous, random.split(rng_key, num_starts))


def descend(
    potential: Callable[[jax.Array], jax.Array],
    flat: jax.Array,
    steps: int = DESCENT_STEPS,
    rate: float = DESCENT_RATE,
) -> jax.Array:
    """`flat` after `steps` steps of Adam (Kingma and Ba 2015, its default moment decays)
    on `potential`; gradient entries that are not finite are taken as zero."""

    def step(carry: tuple, i: jax.Array) -> tuple[tuple, None]:
        x, m, v = carry
        grad = jax.grad(potential)(x)
        grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        m_hat, v_hat = m / (1 - 0.9 ** (i + 1)), v / (1 - 0.999 ** (i + 1))
        return (x - rate * m_hat / (jnp.sqrt(v_hat) + 1e-8), m, v), None

    zeros = jnp.zeros_like(flat)
    (x, _, _), _ = jax.lax.scan(step, (flat, zeros, zeros), jnp.arange(steps))
    return x


def descended_start(
    start: Callable[[jax.Array], dict[str, jax.Array]],
    potential: Callable[[Mapping[str, jax.Array]], jax.Array],
    continuous: Collection[str],
    keys: jax.Array,
) -> dict[str, jax.Array]:
    """Of the starts ``start(key)``, one per key, and the same starts with their
    `continuous` values moved by :func:`descend` on `potential`, the one of lowest
    potential (the first drawn start where no potential is finite).

    :param start: a start (``init_params``) from a key, e.g. :func:`init_strategy_start`.
    :param potential: the potential energy of a start, through its `continuous` values.
    """

    def candidates(key: jax.Array) -> tuple[jax.Array, dict, dict]:
        drawn = start(key)
        flat, unravel = ravel_pytree({name: drawn[name] for name in continuous})

        def potential_of(x: jax.Array) -> jax.Array:
            return potential({**drawn, **unravel(x)})

        descended = {**drawn, **unravel(descend(potential_of, flat, DESCENT_STEPS))}
        energies = jnp.stack([potential(drawn), potential(descended)])
        return jnp.where(jnp.isfinite(energies), energies, jnp.inf), drawn, descended

    energies, drawn, descended = jax.vmap(candidates)(keys)
    # (drawn, descended) of every key in one order; argmin takes the first of equal values
    is_descended, index = jnp.unravel_index(jnp.argmin(energies.T), energies.T.shape)
    return jax.tree.map(lambda a, b: jnp.where(is_descended, b[index], a[index]), drawn, descended)
