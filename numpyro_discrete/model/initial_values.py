"""A chain's initial values for a :class:`~numpyro_discrete.model.target.DiscreteTarget`:
``init_params`` checked against the sites and their supports, a prior draw elsewhere, moved
where the density is zero, and the check that the chain can start there."""

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro_discrete.model.errors import ModelError
from numpyro_discrete.model.feasible_start import feasible_start
from numpyro_discrete.model.sites import reading_trace
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["check_init_params", "check_initial_log_density", "initial_position"]


def check_init_params(target: DiscreteTarget, init_params: Mapping[str, Any] | None) -> None:
    """Raise, naming the sites, when concrete `init_params` lie outside their supports."""
    outside = target.layout.out_of_support(init_params or {})
    if not outside:
        return
    if target.model is not None:
        raise ModelError(
            f"`init_params` has values outside the support of sites {', '.join(outside)}; "
            "give each site values its distribution can produce."
        )
    raise ModelError(
        f"`init_params` has values outside the support of sites {', '.join(outside)}. With "
        "`potential_fn`, the kernel treats sites as binary unless `supports` says "
        "otherwise, e.g. `supports={'s': SiteSupport.categorical(3)}`."
    )


def initial_position(
    target: DiscreteTarget,
    rng_key: jax.Array,
    init_params: Mapping[str, jax.Array] | None,
    model_args: tuple,
    model_kwargs: Mapping[str, Any] | None,
    given: Collection[str] | None = None,
) -> jax.Array:
    """One chain's flat initial vector: `init_params` where given, a prior draw (with
    `rng_key`) elsewhere; the drawn sites, and those of `init_params` not in `given`
    (default: all of them are given), moved where the density is zero
    (:func:`~numpyro_discrete.model.feasible_start.feasible_start`)."""
    layout = target.layout
    values = dict(init_params or {})
    unknown = sorted(set(values) - set(layout.names))
    if unknown:
        raise ModelError(
            f"`init_params` has sites {unknown} that the kernel does not sample; its "
            f"sites are {list(layout.names)}."
        )
    for name, shape in zip(layout.names, layout.shapes, strict=True):
        if name in values and tuple(jnp.shape(values[name])) != shape:
            raise ModelError(
                f"`init_params[{name!r}]` has shape {tuple(jnp.shape(values[name]))}, "
                f"but site {name!r} has shape {shape}."
            )
    missing = [name for name in layout.names if name not in values]
    if missing:
        kwargs = {} if model_kwargs is None else dict(model_kwargs)
        # the discrete sites drawn from the prior given the conditioning, by the program
        # that read the model (compiled once, reused by every chain); drawn op by op, each
        # sampler compiled on its own (0.36 s for the Ising lattice's Bernoulli draw)
        model_trace = reading_trace(target.model, rng_key, model_args, kwargs)
        values.update({name: model_trace[name]["value"] for name in missing})
    drawn = [n for n in layout.names if n in missing or (given is not None and n not in given)]
    if drawn:
        movable = np.zeros(layout.num_coords, bool)
        for name in drawn:
            movable[layout.site_coords(name)] = True
        return feasible_start(
            target.log_terms(model_args, model_kwargs),
            target.structure,
            target.supports,
            layout.flatten(values),
            movable,
            random.fold_in(rng_key, 1),
        )
    return layout.flatten(values)


def check_initial_log_density(sites: Collection[str], log_density: jax.Array) -> None:
    """Raise, naming the discrete `sites`, when ``log pi`` is not finite at the initial
    values of a chain (concrete: outside a trace): given so, or no draw the start could find
    meets the model's constraints."""
    if isinstance(log_density, jax.core.Tracer) or np.all(np.isfinite(log_density)):
        return
    raise ModelError(
        "the potential energy is "
        f"{np.ravel(-np.asarray(log_density)).tolist()} at the initial values of sites "
        f"{list(sites)}, so the chain cannot start there. Pass "
        "`init_params` (to `MCMC.run`) with values of positive probability."
    )
