"""The target: ``log pi`` of the flat discrete vector, from a numpyro model (given its
arguments and any conditioning) or from a user ``potential_fn``; its *terms* (an array whose
sum is ``log pi``: every site's elementwise log-probability and every factor's array); and the
local log-ratio function the kernels use (see :mod:`numpyro_discrete.core.local_ratios`).
"""

from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp

from numpyro.infer.gibbs import with_conditioning
from numpyro.infer.util import compute_log_probs, log_density

from numpyro_discrete.core.local_ratios import (
    LocalFn,
    coloured_ratios,
    mixed_local_fn,
    pair_table_ratios,
)
from numpyro_discrete.core.neighbourhood import Neighbourhood
from numpyro_discrete.core.pair_tables import pair_tables
from numpyro_discrete.model.layout import SiteLayout
from numpyro_discrete.structure.colouring import TermStructure

__all__ = [
    "WEIGHT_MODES",
    "FlatLogDensity",
    "SiteLogJoint",
    "flat_log_density",
    "gradient_is_available",
    "local_fn_for",
    "model_log_joint",
    "model_log_terms",
    "potential_log_joint",
    "potential_log_terms",
]

WEIGHT_MODES = ("auto", "gradient", "exact")

SiteLogJoint = Callable[[Mapping[str, jax.Array]], jax.Array]
"""Site dict to ``log pi`` (a scalar) or, for the term functions, to its 1-D term array."""
FlatLogDensity = Callable[[jax.Array], jax.Array]


def model_log_joint(
    prepared_model: Callable,
    model_args: tuple,
    model_kwargs: Mapping[str, Any] | None,
    enum: bool,
) -> SiteLogJoint:
    """
    ``log pi`` of the model's discrete site values: the log joint of `prepared_model` (a
    model wrapped by :func:`numpyro.infer.gibbs.conditioned`) with the values, and any
    conditioning already in `model_kwargs`, fixed. Sites marked
    ``infer={"enumerate": "parallel"}`` are summed out when `enum` is set, as numpyro's
    ``DiscreteGibbs`` does.
    """
    if enum:
        from numpyro.contrib.funsor import log_density as enum_log_density

        density = enum_log_density
    else:
        density = log_density

    def log_joint(values: Mapping[str, jax.Array]) -> jax.Array:
        kwargs = with_conditioning(model_kwargs, dict(values))
        return density(prepared_model, model_args, kwargs, {})[0]

    return log_joint


def model_log_terms(
    prepared_model: Callable,
    model_args: tuple,
    model_kwargs: Mapping[str, Any] | None,
    enum: bool,
) -> SiteLogJoint:
    """
    The terms of :func:`model_log_joint`: every sample site's elementwise log-probability
    (latent and observed, numpyro's scale and mask applied) and every ``numpyro.factor``'s
    array, raveled and concatenated. With enumerated sites the log joint is one term (the
    sum over the enumerated values couples their sites).
    """
    if enum:
        log_joint = model_log_joint(prepared_model, model_args, model_kwargs, enum)
        return lambda values: jnp.reshape(log_joint(values), (1,))

    def log_terms(values: Mapping[str, jax.Array]) -> jax.Array:
        kwargs = with_conditioning(model_kwargs, dict(values))
        log_probs, _ = compute_log_probs(prepared_model, model_args, kwargs, {}, False)
        float_dtype = jnp.result_type(float)
        return jnp.concatenate([jnp.ravel(lp).astype(float_dtype) for lp in log_probs.values()])

    return log_terms


def potential_log_joint(potential_fn: Callable) -> SiteLogJoint:
    """``log pi = -sum(potential_fn(values))`` for the ``potential_fn`` mode (a potential
    may return its terms, an array, rather than their sum)."""

    def log_joint(values: Mapping[str, jax.Array]) -> jax.Array:
        return -jnp.sum(potential_fn(dict(values)))

    return log_joint


def potential_log_terms(potential_fn: Callable) -> SiteLogJoint:
    """The terms ``-potential_fn(values)``, raveled (one term for a scalar potential)."""

    def log_terms(values: Mapping[str, jax.Array]) -> jax.Array:
        return -jnp.ravel(potential_fn(dict(values))).astype(jnp.result_type(float))

    return log_terms


def flat_log_density(
    log_joint: SiteLogJoint, layout: SiteLayout, float_sites: Collection[str] = ()
) -> FlatLogDensity:
    """
    ``log pi`` of the flat vector. `float_sites` get float values, so that the density can
    be differentiated in them; the other sites keep the model's dtypes.
    """

    def fn(flat: jax.Array) -> jax.Array:
        return jnp.asarray(log_joint(layout.unflatten(flat, float_sites)), jnp.result_type(float))

    return fn


def gradient_is_available(log_joint: SiteLogJoint, layout: SiteLayout, site: str) -> bool:
    """
    Whether the log joint can be differentiated in float-cast values of `site` (the other
    sites keeping their integer values). It cannot when a value is used as an index
    (``locs[z]``) or in integer-only operations, which raise at trace time; only shapes are
    traced here, nothing is computed.
    """
    relaxed = flat_log_density(log_joint, layout, float_sites=(site,))
    probe = jax.ShapeDtypeStruct((layout.num_coords,), jnp.result_type(float))
    try:
        jax.eval_shape(jax.grad(relaxed), probe)
    except (TypeError, IndexError):
        return False
    return True


def local_fn_for(
    weights_mode: Mapping[str, str],
    log_joint: SiteLogJoint,
    layout: SiteLayout,
    neighbourhood: Neighbourhood,
    coloured: tuple[SiteLogJoint, TermStructure] | None = None,
) -> LocalFn:
    """
    The local log-ratio function for resolved per-site weight modes (``"gradient"`` or
    ``"exact"``): one gradient over the gradient sites, exact ratios on the others,
    colour-batched when `coloured` gives the site terms and their (sparse) structure.
    """
    gradient_sites = tuple(name for name in layout.names if weights_mode[name] == "gradient")
    exact_sites = [name for name in layout.names if weights_mode[name] == "exact"]
    if not exact_sites:
        exact_coords = np.zeros(0, np.int32)
    elif not gradient_sites:
        exact_coords = None
    else:
        exact_coords = np.concatenate([layout.site_coords(name) for name in exact_sites])
    exact_ratios = None
    has_exact_coords = exact_coords is None or len(exact_coords) > 0
    if has_exact_coords and coloured is not None:
        log_terms, structure = coloured
        flat_terms = flat_log_density(log_terms, layout)
        supports = layout.coordinate_supports()
        # pair tables where they take fewer evaluations than colour-batching: the classes
        # holding an exact coordinate, each at M candidates (a lattice's 2 x 1 builds none)
        rows = slice(None) if exact_coords is None else exact_coords
        num_classes = np.unique(structure.colour[rows]).size
        lower = np.asarray(supports.lower)
        num_candidates = jax.eval_shape(neighbourhood.candidates, lower).shape[1]
        max_states = num_classes * num_candidates - 1
        tables = pair_tables(structure, lower, supports.upper, max_states)
        if tables is not None:
            exact_ratios = pair_table_ratios(flat_terms, tables, exact_coords)
        else:
            exact_ratios = coloured_ratios(flat_terms, structure, exact_coords)
    return mixed_local_fn(
        flat_log_density(log_joint, layout, gradient_sites) if gradient_sites else None,
        flat_log_density(log_joint, layout) if exact_sites else None,
        neighbourhood,
        exact_coords,
        exact_ratios,
    )
