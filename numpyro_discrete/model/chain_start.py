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
"""

from collections.abc import Callable, Collection, Mapping
from typing import Any

import jax

from numpyro.distributions import biject_to
from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import conditioned

__all__ = ["init_strategy_start"]


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
