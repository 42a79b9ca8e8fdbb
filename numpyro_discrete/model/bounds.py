"""Support bounds known at ``init``. The kernels fix each discrete site's support when they
are initialised, so its bounds must be constants of the model (data, model arguments), but
a constant computed with ``jnp`` is a tracer when ``init`` itself runs inside a trace (numpyro
calls it under ``pmap`` for ``chain_method="parallel"``). :func:`concrete_supports` reads the
bounds with the latent values abstract and every other operation evaluated eagerly (under
:func:`jax.ensure_compile_time_eval`): a bound that is still traced depends on a latent
site's value or on a traced model argument, and the error says which.
"""

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro.distributions import constraints
from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import (
    GIBBS_SITES_KWARG,
    conditioned,
    latent_sample_sites,
)

from numpyro_discrete.model.errors import ModelError
from numpyro_discrete.model.sites import reading_trace

__all__ = ["concrete_supports"]


def concrete_supports(
    model: Callable,
    model_trace: Mapping[str, Any],
    sites: Sequence[str],
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
) -> dict[str, constraints.Constraint]:
    """
    The supports of the discrete `sites` of `model` (traced in `model_trace`, possibly with
    traced values), their bounds as numpy arrays. Raises, naming the site, when a bound
    depends on the value of a latent site (of any block of a Gibbs sweep: the values in
    ``model_kwargs["_gibbs_sites"]`` are latent too) or on a traced model argument.
    """
    kwargs = dict(model_kwargs)
    latent = dict(kwargs.pop(GIBBS_SITES_KWARG, None) or {})
    latent.update({name: model_trace[name]["value"] for name in latent_sample_sites(model_trace)})
    supports = _supports_at(model, latent, latent, model_args, kwargs, sites)
    traced = [name for name in sites if _is_traced(supports[name])]
    if traced:
        _raise_for_traced(model, traced, model_args, kwargs)
    return {name: _as_numpy(supports[name]) for name in sites}


def _supports_at(
    model: Callable,
    values: Mapping[str, Any],
    abstract: Collection[str],
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
    sites: Sequence[str],
) -> dict[str, constraints.Constraint]:
    """The supports of `sites` with the latent `values` substituted, those named in
    `abstract` as abstract values (bounds computed from them are tracers) and every other
    operation of the model evaluated eagerly. The supports may hold tracers: only read
    whether their bounds are traced, or the bounds that are not."""
    found = {}
    model = conditioned(model)

    def run(abstract_values: dict[str, jax.Array]) -> None:
        data = {**values, **abstract_values}
        with jax.ensure_compile_time_eval():
            replay = substitute(seed(model, random.key(0)), data=data)
            model_trace = trace(replay).get_trace(*model_args, **model_kwargs)
        found.update({name: model_trace[name]["fn"].support for name in sites})

    shapes = {
        name: jax.ShapeDtypeStruct(jnp.shape(values[name]), jnp.result_type(values[name]))
        for name in abstract
    }
    jax.eval_shape(run, shapes)
    return found


def _element_support(support: constraints.Constraint) -> constraints.Constraint:
    """`support` without its `independent` wrappers: each element of a site moves alone."""
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    return support


def _bounds(support: constraints.Constraint) -> list[Any]:
    support = _element_support(support)
    if isinstance(support, constraints.integer_interval):
        return [support.lower_bound, support.upper_bound]
    if isinstance(support, constraints.integer_greater_than):
        return [support.lower_bound]
    return []


def _is_traced(support: constraints.Constraint) -> bool:
    return any(isinstance(bound, jax.core.Tracer) for bound in _bounds(support))


def _as_numpy(support: constraints.Constraint) -> constraints.Constraint:
    """The element support of `support`, with numpy bounds."""
    support = _element_support(support)
    bounds = [np.asarray(bound) for bound in _bounds(support)]
    if isinstance(support, constraints.integer_interval):
        return constraints.integer_interval(*bounds)
    if isinstance(support, constraints.integer_greater_than):
        return constraints.integer_greater_than(*bounds)
    return support


def _raise_for_traced(
    model: Callable,
    traced: Sequence[str],
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
) -> None:
    """Why the bounds of the `traced` sites are traced: a traced model argument (still
    traced with every latent value concrete), or the latent sites they are computed from
    (found one latent site at a time)."""
    draw = reading_trace(conditioned(model), random.key(0), model_args, model_kwargs)
    latent = {name: draw[name]["value"] for name in latent_sample_sites(draw)}
    concrete = _supports_at(model, latent, (), model_args, model_kwargs, traced)
    from_arguments = [name for name in traced if _is_traced(concrete[name])]
    if from_arguments:
        name = from_arguments[0]
        raise ModelError(
            f"site {name!r} ({type(draw[name]['fn']).__name__}) has support bounds computed "
            "from a model argument that is traced where the kernel's `init` runs (`init` "
            "called inside `jit`/`vmap` with the model's arguments as traced inputs); "
            "the kernel fixes each site's support at `init`. Pass the arrays the bounds "
            "are computed from as concrete values: to `MCMC.run` (which keeps them concrete "
            "at `init` for every chain_method, `jit_model_args=True` included) or closed "
            "over by the model."
        )
    name = traced[0]
    sources = [
        source
        for source in latent
        if _is_traced(
            _supports_at(model, latent, (source,), model_args, model_kwargs, [name])[name]
        )
    ]
    raise ModelError(
        f"site {name!r} ({type(draw[name]['fn']).__name__}) has support bounds computed "
        f"from the value of latent site(s) {sources}; the kernel fixes each site's "
        "support at `init`, so its bounds must be constants of the model (data or model "
        "arguments). Give the site a fixed support that covers every value it can take "
        "and put the dependence in the density (`numpyro.factor`), or marginalise it "
        "with `infer={'enumerate': 'parallel'}`."
    )
