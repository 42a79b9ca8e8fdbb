"""The latent sites of a numpyro model, by how the kernels treat them: sampled (discrete),
summed out (marked for enumeration) and the others (continuous); the model read once per
model and arguments (:func:`reading_trace`), and :func:`same_objects`, whether a later call
has the arguments an earlier one was set up for."""

from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro.distributions import Distribution
from numpyro.distributions.util import lazy_property
from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import conditioned, latent_sample_sites
from numpyro.infer.initialization import init_to_uniform

from numpyro_discrete.model.layout import discrete_sites
from numpyro_discrete.structure.lazy_values import staged

__all__ = ["ModelSites", "kept_for", "model_sites", "reading_trace", "same_objects", "site_summary"]


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
    priors alone compiles for 2-8 s on a CPU core. Concrete even inside a trace (``init``
    under ``jit`` or ``pmap``): computed by one compiled program per model
    (:func:`_compiled_reading`), or else op by op, always in the one evaluation context
    ``jax.ensure_compile_time_eval``, so that the operations compiled for one reading are
    reused by the next (JAX compiles an operation again for each context).
    """
    compiled = _compiled_reading(model, rng_key, model_args, model_kwargs)
    if compiled is not None:
        return compiled
    with jax.ensure_compile_time_eval():
        return _read(model, rng_key, model_args, model_kwargs)


def _read(
    model: Callable, rng_key: jax.Array, model_args: tuple, model_kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    seeded = seed(model, rng_key)
    return trace(substitute(seeded, substitute_fn=init_to_uniform)).get_trace(
        *model_args, **model_kwargs
    )


class _Reading(NamedTuple):
    """One compiled reading of a model and the static part of the trace it returns."""

    # the compiled program, None where the model cannot be read as one (read op by op)
    program: Callable | None
    # the trace's treedef, its leaves (`_COMPUTED` for each one the program returns) and the
    # attributes its distributions lose in a rebuild (`_missing_attributes`)
    trace_def: Any
    trace_leaves: list
    missing: list
    # what the cache key refers to by identity, kept alive while the entry is
    referents: list


try:  # the settings jit keys its own cache on (x64, default device, ...), not public
    from jax._src.config import trace_context
except ImportError:  # a JAX without it: the setting that changes a reading's dtypes

    def trace_context() -> Any:
        return jax.config.jax_enable_x64


#: Compiled readings by model, argument structure and array signature, most recent last
_READINGS: OrderedDict[tuple, _Reading] = OrderedDict()
_MAX_READINGS = 16


def _compiled_reading(
    model: Callable, rng_key: jax.Array, model_args: tuple, model_kwargs: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The reading trace computed by one compiled program, or None where it cannot be.

    Run op by op, a reading compiles each of the model's operations as a program of its
    own (about 0.03-0.05 s each on a CPU core, dozens per model); one program for the
    whole model compiles in 0.6-0.9 s on the gallery's models and is reused by every later
    reading of the same model with arguments of the same shapes (the kernels read a model
    several times: the site check, the reading point, each chain). The trace's computed values
    and distribution parameters come back as arrays, its static parts (site names, plates,
    constants the model closes over) as they were. Inputs that are traced (a reading
    inside ``vmap`` or ``pmap`` with traced conditioning) or distributions that keep a
    computed value outside their pytree fields keep the op-by-op reading.
    """
    leaves, treedef = jax.tree.flatten((_raw_key(rng_key), model_args, dict(model_kwargs)))
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return None
    is_array = [isinstance(leaf, jax.Array | np.ndarray) for leaf in leaves]
    statics = [None if array else leaf for leaf, array in zip(leaves, is_array, strict=True)]
    model_key, referents = _identity_key(model)
    try:
        # by type too: `True`, `1` and `1.0` are equal keys but may give other traces
        static_key = tuple((type(leaf), leaf) for leaf in statics)
        hash(static_key)
    except TypeError:
        return None
    signature = tuple(
        (jnp.shape(leaf), jnp.result_type(leaf), getattr(leaf, "weak_type", False))
        for leaf, array in zip(leaves, is_array, strict=True)
        if array
    )
    # jit's own key of the settings that change a program (x64, default device, ...), as
    # the program is traced: staged, whether or not the caller evaluates eagerly
    with staged():
        context = trace_context()
    key = (model_key, treedef, static_key, signature, context)
    arrays = [leaf for leaf, array in zip(leaves, is_array, strict=True) if array]
    reading = _READINGS.get(key)
    if reading is None:
        reading = _READINGS[key] = _compile_reading(model, treedef, statics, arrays, referents)
        while len(_READINGS) > _MAX_READINGS:
            _READINGS.popitem(last=False)
    _READINGS.move_to_end(key)
    if reading.program is None:
        return None
    try:
        computed = iter(reading.program(arrays))
    except Exception:
        # read op by op from now on, which raises the model's own errors
        _READINGS[key] = reading._replace(program=None)
        return None
    full = [next(computed) if leaf is _COMPUTED else leaf for leaf in reading.trace_leaves]
    model_trace = jax.tree.unflatten(reading.trace_def, full)
    for name, depth, attribute, value in reading.missing:
        setattr(_distribution_chain(model_trace[name].get("fn"))[depth], attribute, value)
    return model_trace


def _raw_key(rng_key: jax.Array) -> jax.Array:
    """A typed key of the default implementation as its raw data, which draws the same
    values: so that a reading with ``random.key`` and one with ``random.PRNGKey`` (the
    kernels' own readings and a user's key) are one program, not two compilations."""
    dtype = getattr(rng_key, "dtype", None)
    if (
        dtype is not None
        and not isinstance(rng_key, jax.core.Tracer)
        and jnp.issubdtype(dtype, jax.dtypes.prng_key)
        and str(random.key_impl(rng_key)) == jax.config.jax_default_prng_impl
    ):
        return random.key_data(rng_key)
    return rng_key


def _identity_key(model: Callable) -> tuple[Any, list]:
    """A cache key for `model` and the objects it refers to by identity: a ``partial``
    (numpyro wraps the model in a new one for each conditioning) by its function and
    arguments, anything else by identity."""
    if isinstance(model, partial):
        parts = [model.func, *model.args, *model.keywords.values()]
        keys, referents = [], []
        for part in parts:
            key, refs = _identity_key(part)
            keys.append(key)
            referents += refs
        return ("partial", tuple(model.keywords), tuple(keys)), referents
    return id(model), [model]


#: Marks a leaf of the trace that the program computes
_COMPUTED = object()


def _compile_reading(
    model: Callable, treedef: Any, statics: list, arrays: list, referents: list
) -> _Reading:
    """The compiled reading of `model`: its input `arrays` as arguments, its other inputs
    (`statics`, None in place of each array) as constants, compiled ahead of time, so that
    it runs when called with concrete arrays rather than being staged into a trace the
    caller may be inside. Its program is None where tracing fails or the trace cannot be
    rebuilt (:func:`_missing_attributes`)."""
    recorded: dict[str, Any] = {}

    def read(arrays: list) -> list:
        arrays_left = iter(arrays)
        full = [next(arrays_left) if leaf is None else leaf for leaf in statics]
        rng_key, model_args, model_kwargs = jax.tree.unflatten(treedef, full)
        model_trace = _read(model, rng_key, model_args, model_kwargs)
        leaves, trace_def = jax.tree.flatten(model_trace)
        computed = [isinstance(leaf, jax.core.Tracer) for leaf in leaves]
        recorded["missing"] = _missing_attributes(
            model_trace, jax.tree.unflatten(trace_def, leaves)
        )
        recorded["trace_def"] = trace_def
        recorded["leaves"] = [
            _COMPUTED if c else leaf for leaf, c in zip(leaves, computed, strict=True)
        ]
        return [leaf for leaf, c in zip(leaves, computed, strict=True) if c]

    try:
        # staged whole, even where the caller evaluates eagerly (`ensure_compile_time_eval`)
        with staged():
            program = jax.jit(read).lower(arrays).compile()
    except Exception:
        program = None
    if program is None or recorded["missing"] is None:
        return _Reading(None, None, [], [], referents)
    return _Reading(
        program, recorded["trace_def"], recorded["leaves"], recorded["missing"], referents
    )


def _missing_attributes(
    model_trace: Mapping[str, Any], rebuilt: Mapping[str, Any]
) -> list[tuple[str, int, str, Any]] | None:
    """The attributes the trace's distributions (and their base distributions) lose when
    rebuilt from their pytree fields, as ``(site, depth, attribute, value)``, lazily
    computed ones apart (numpyro's ``Independent`` keeps ``reparametrized_params`` outside
    its fields; a user's distribution class may keep anything there). None where one of
    them holds a computed value, which the program cannot return."""
    missing = []
    for name, site in model_trace.items():
        chain = _distribution_chain(site.get("fn"))
        for depth, (fn, again) in enumerate(
            zip(chain, _distribution_chain(rebuilt[name].get("fn")), strict=True)
        ):
            for attribute in set(vars(fn)) - set(vars(again)):
                if isinstance(getattr(type(fn), attribute, None), lazy_property):
                    continue
                value = vars(fn)[attribute]
                if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value)):
                    return None
                missing.append((name, depth, attribute, value))
    return missing


def _distribution_chain(fn: Any) -> list[Distribution]:
    """`fn` and its base distributions, outermost first (none if `fn` is no distribution)."""
    chain = []
    while isinstance(fn, Distribution):
        chain.append(fn)
        fn = getattr(fn, "base_dist", None)
    return chain


def site_summary(model_trace: Mapping[str, Any], names: tuple[str, ...]) -> str:
    """The sites `names` with their distributions, for messages."""
    return ", ".join(f"{name!r} ({type(model_trace[name]['fn']).__name__})" for name in names)


def same_objects(a: Any, b: Any) -> bool:
    """Whether two pytrees have one structure and the same leaves (the same objects, or
    equal Python scalars): numpyro passes a model's arguments to every chain's ``init`` and
    to a later run's as the same objects, and a program that closes over them as
    constants can then be reused."""
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    return tree_a == tree_b and all(
        x is y or (isinstance(x, int | float | str) and type(x) is type(y) and x == y)
        for x, y in zip(leaves_a, leaves_b, strict=True)
    )


def kept_for(kept: dict, arguments: Any, build: Callable[[], Any]) -> Any:
    """``build()``, kept in `kept` with `arguments` and returned again while later calls pass
    the same objects (:func:`same_objects`): a compiled program that closes over a model's
    arguments is then compiled once for a later chain or run. Where an argument is traced,
    built anew and not kept."""
    last = kept.get("last")
    if last is not None and same_objects(last[0], arguments):
        return last[1]
    value = build()
    if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(arguments)):
        kept["last"] = (arguments, value)
    return value
