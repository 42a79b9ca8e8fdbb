"""The latent sites of a numpyro model, by how the kernels treat them: sampled (discrete),
summed out (marked for enumeration) and the others (continuous)."""

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax

from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import conditioned, latent_sample_sites
from numpyro.infer.initialization import init_to_uniform

from numpyro_discrete.model.layout import discrete_sites

__all__ = ["ModelSites", "model_sites", "reading_trace", "site_summary"]


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
    model_trace = reading_trace(conditioned(model), rng_key, model_args, model_kwargs)
    discrete = discrete_sites(model_trace)
    latent = latent_sample_sites(model_trace)
    enumerated = tuple(
        name for name in latent if model_trace[name]["infer"].get("enumerate", "") == "parallel"
    )
    continuous = tuple(name for name in latent if name not in discrete and name not in enumerated)
    return ModelSites(discrete, enumerated, continuous, model_trace)


def reading_trace(
    model: Callable, rng_key: jax.Array, model_args: tuple, model_kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The trace of `model` at the point the kernels read it: continuous latent sites where
    numpyro's ``init_to_uniform`` puts them (uniform in ``(-2, 2)`` unconstrained, NUTS's
    default start), discrete ones drawn from the prior given those.

    A prior draw of the continuous sites (numpyro's ``prototype_trace``) would compile
    samplers that nothing else runs: the gamma sampler behind Dirichlet, Gamma and Beta
    priors alone compiles for 2-8 s on a CPU core. Evaluated eagerly even inside a trace
    (``init`` under ``jit`` or ``pmap``), and always in that one evaluation context, so that
    the operations compiled for one reading are reused by the next (JAX compiles an
    operation again for each context).
    """
    seeded = seed(model, rng_key)
    with jax.ensure_compile_time_eval():
        return trace(substitute(seeded, substitute_fn=init_to_uniform)).get_trace(
            *model_args, **model_kwargs
        )


def site_summary(model_trace: Mapping[str, Any], names: tuple[str, ...]) -> str:
    """The sites `names` with their distributions, for messages."""
    return ", ".join(f"{name!r} ({type(model_trace[name]['fn']).__name__})" for name in names)
