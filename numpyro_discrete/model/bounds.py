"""Support bounds known at ``init``. The kernels fix each discrete site's support when they
are initialised, so its bounds must be constants of the model (data, model arguments), but
a constant computed with ``jnp`` is a tracer when ``init`` itself runs inside a trace (numpyro
calls it under ``pmap`` for ``chain_method="parallel"``). :func:`concrete_supports` reads the
bounds with the latent values abstract and every other operation evaluated eagerly (under
:func:`jax.ensure_compile_time_eval`): a bound that is still traced depends on a latent
site's value or on a traced model argument, and the error says which.

Evaluated op by op, each of the model's operations on its data compiles as a program of its
own (about 0.03 s each on a CPU core: 25 of them, 0.75 s of a first run, on the gallery's
block model), so the bounds are first read from one traced program of the model
(:func:`_traced_supports`), those that depend on a latent value found in its graph, the
others computed by one compiled program; the eager reading remains where the model closes
over traced values, and for the errors.
"""

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

import jax
from jax import random
import jax.extend.core as jex
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
from numpyro_discrete.structure.lazy_values import staged

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
    read = _traced_supports(model, latent, model_args, kwargs, sites)
    if read is not None and not read[1]:
        return read[0]
    supports = _supports_at(model, latent, latent, model_args, kwargs, sites)
    traced = [name for name in sites if _is_traced(supports[name])]
    if traced:
        _raise_for_traced(model, traced, model_args, kwargs)
    return {name: _as_numpy(supports[name]) for name in sites}


def _traced_supports(
    model: Callable,
    values: Mapping[str, Any],
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
    sites: Sequence[str],
) -> tuple[dict[str, constraints.Constraint], set[str]] | None:
    """The supports of `sites` from one traced program of `model` with the latent
    `values` as its inputs: ``(supports, dependent)``, the bounds of each support as numpy
    arrays computed by one compiled program, and the sites with a bound computed from a
    latent value (its graph reaches an input; such a support's bounds are not usable).
    None where the program closes over traced values (``init`` inside ``jit`` or ``pmap``
    with traced model arguments) or cannot be traced."""
    model = conditioned(model)
    names = list(values)
    shapes = [jax.ShapeDtypeStruct(jnp.shape(values[n]), jnp.result_type(values[n])) for n in names]
    element_supports: dict[str, constraints.Constraint] = {}

    def bounds(*latent: jax.Array) -> list[jax.Array]:
        replay = substitute(seed(model, random.key(0)), data=dict(zip(names, latent, strict=True)))
        model_trace = trace(replay).get_trace(*model_args, **model_kwargs)
        element_supports.update(
            (name, _element_support(model_trace[name]["fn"].support)) for name in sites
        )
        # Python numbers stay as they are (as the eager reading keeps them)
        return [b for name in sites for b in _bounds(element_supports[name]) if _is_array(b)]

    try:
        with staged():
            closed = jax.make_jaxpr(bounds)(*shapes)
    except Exception:
        return None
    if any(isinstance(c, jax.core.Tracer) for c in closed.consts):
        return None
    # a forward pass: what an operation computes from an input depends on it
    dependent = set(closed.jaxpr.invars)
    for eqn in closed.jaxpr.eqns:
        if any(isinstance(v, jex.Var) and v in dependent for v in eqn.invars):
            dependent.update(eqn.outvars)
    flags = iter(isinstance(v, jex.Var) and v in dependent for v in closed.jaxpr.outvars)
    # compiled ahead of time, so that it runs on concrete arrays even inside a trace the
    # caller is in (`init` under `pmap`); under `jax.disable_jit` it cannot run
    try:
        with staged():
            program = jax.jit(jex.jaxpr_as_fun(closed)).lower(*shapes).compile()
        # the bounds used depend on no input: zeros stand for the latent values (which may
        # be traced, in an `init` under `jit` or `pmap`)
        outs = iter(program(*(np.zeros(shape.shape, shape.dtype) for shape in shapes)))
    except Exception:
        return None
    supports, latent_bounds = {}, set()
    for name in sites:
        support = element_supports[name]
        numeric = []
        for bound in _bounds(support):
            if not _is_array(bound):
                numeric.append(np.asarray(bound))
                continue
            numeric.append(np.asarray(next(outs)))
            if next(flags):
                latent_bounds.add(name)
        supports[name] = _with_bounds(support, numeric)
    return supports, latent_bounds


def _is_array(bound: Any) -> bool:
    return isinstance(bound, jax.Array | np.ndarray)


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
    return _with_bounds(support, [np.asarray(bound) for bound in _bounds(support)])


def _with_bounds(support: constraints.Constraint, bounds: list[Any]) -> constraints.Constraint:
    """The element support `support` with the `bounds` given, in :func:`_bounds`' order."""
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
