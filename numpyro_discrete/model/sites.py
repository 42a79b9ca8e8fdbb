"""The latent sites of a numpyro model, by how the kernels treat them: sampled (discrete),
summed out (marked for enumeration) and the others (continuous)."""

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax

from numpyro.infer.gibbs import conditioned, latent_sample_sites, prototype_trace

from numpyro_discrete.model.layout import discrete_sites

__all__ = ["ModelSites", "model_sites", "site_summary"]


class ModelSites(NamedTuple):
    """
    The latent sites of a model trace, by how the kernels treat them.

    - **discrete** - discrete latent sites the kernels sample.
    - **enumerated** - sites marked ``infer={"enumerate": "parallel"}``, summed out.
    - **continuous** - the other latent sites.
    - **trace** - the trace they were read from.
    """

    discrete: tuple[str, ...]
    enumerated: tuple[str, ...]
    continuous: tuple[str, ...]
    trace: Mapping[str, Any]


def model_sites(
    model: Callable, rng_key: jax.Array, model_args: tuple, model_kwargs: Mapping[str, Any]
) -> ModelSites:
    """Trace `model` (with any conditioning in `model_kwargs`) and sort its latent sites."""
    model_trace = prototype_trace(conditioned(model), rng_key, model_args, dict(model_kwargs))
    discrete = discrete_sites(model_trace)
    latent = latent_sample_sites(model_trace)
    enumerated = tuple(
        name for name in latent if model_trace[name]["infer"].get("enumerate", "") == "parallel"
    )
    continuous = tuple(name for name in latent if name not in discrete and name not in enumerated)
    return ModelSites(discrete, enumerated, continuous, model_trace)


def site_summary(model_trace: Mapping[str, Any], names: tuple[str, ...]) -> str:
    """The sites `names` with their distributions, for messages."""
    return ", ".join(f"{name!r} ({type(model_trace[name]['fn']).__name__})" for name in names)
