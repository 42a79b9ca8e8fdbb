"""The ratio mode of each site (``weights``): gradient estimates of the local log-ratios or
exact ones, ``"auto"`` resolved from the program and the structure."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro.infer.gibbs import GIBBS_SITES_KWARG, conditioned

from numpyro_discrete.core.local_ratios import brute_force_ratios
from numpyro_discrete.core.neighbourhood import Neighbourhood, SupportKind
from numpyro_discrete.model.detection import read_dependencies
from numpyro_discrete.model.errors import ModelError
from numpyro_discrete.model.layout import SiteLayout
from numpyro_discrete.model.potential import (
    SiteLogJoint,
    flat_log_density,
    gradient_is_available,
)
from numpyro_discrete.model.sites import reading_trace
from numpyro_discrete.structure.colouring import TermStructure

__all__ = [
    "AUTO_EXACT_MAX_EVALUATIONS",
    "GRADIENT_ERROR_LIMIT",
    "WeightsArgument",
    "ReadingPoint",
    "reading_point",
    "gradient_errors",
    "resolve_weights",
]

WeightsArgument = str | Mapping[str, str]

# "auto" picks colour-batched exact ratios when they cost at most this many evaluations of
# the terms per step (C classes x M candidates): within about 3x of one gradient
AUTO_EXACT_MAX_EVALUATIONS = 8
# "auto" keeps gradient ratios on a site where exact ones are costly unless, at the reading
# point, their median error over this many coordinates exceeds this many nats
GRADIENT_CHECKED_COORDS = 16
GRADIENT_ERROR_LIMIT = 1.0


def resolve_weights(
    weights: WeightsArgument,
    log_joint: SiteLogJoint,
    log_terms: SiteLogJoint,
    layout: SiteLayout,
    initial: jax.Array,
    structure: TermStructure,
    neighbourhood: Neighbourhood,
    check_point: tuple[SiteLogJoint, jax.Array] | None = None,
) -> dict[str, str]:
    """Per site, ``"gradient"`` or ``"exact"``. ``"auto"`` is exact for categorical sites
    (unordered values: a gradient in the value means nothing), for sites the log density
    cannot be differentiated in (a value used as an index), for sites whose gradient is
    zero everywhere (a value used only in comparisons, e.g. ``where(t < tau, ...)``), and,
    when the structure is sparse enough for colour-batched exact ratios to cost at most
    :data:`AUTO_EXACT_MAX_EVALUATIONS` evaluations of the terms, for sites in which
    ``log pi`` is not affine (where the gradient is only an approximation); when exact
    ratios cost more, for sites whose gradient ratios are off by more than
    :data:`GRADIENT_ERROR_LIMIT` nats (median over a sample of coordinates) at
    `check_point`, ``(log_joint, x)``: a state of the model drawn the same way under every
    chain method (:func:`reading_point`; by default the initial state); the
    gradient otherwise (on an affine site it gives the exact ratios, at about half the
    cost: ``benchmarks/bench_structure.py``)."""
    if isinstance(weights, Mapping):
        unknown = sorted(set(weights) - set(layout.names))
        if unknown:
            raise ModelError(
                f"`weights` names sites {unknown} that the kernel does not sample; its "
                f"sites are {list(layout.names)}."
            )
        requested = {site: weights.get(site, "auto") for site in layout.names}
    else:
        requested = dict.fromkeys(layout.names, weights)
    coloured_cost = None
    if not structure.dense_terms.size:
        num_candidates = int(jax.eval_shape(neighbourhood.candidates, initial).shape[1])
        coloured_cost = structure.num_colours * num_candidates
    cheap_exact = coloured_cost is not None and coloured_cost <= AUTO_EXACT_MAX_EVALUATIONS
    modes = {}
    for site, support in zip(layout.names, layout.supports, strict=True):
        mode = requested[site]
        if mode == "auto" and support.kind == SupportKind.CATEGORICAL:
            mode = "exact"
        elif mode != "exact":
            available = gradient_is_available(log_joint, layout, site)
            if mode == "gradient" and not available:
                raise ModelError(
                    "the log density cannot be differentiated in the values "
                    f"of site {site!r} (a value used as an index, e.g. `locs[{site}]`, or in "
                    f"an integer-only operation). Use `weights='exact'` or "
                    f"`weights='auto'` (or `weights={{{site!r}: 'exact'}}`)."
                )
            mode = "gradient" if available else "exact"
        modes[site] = mode
    auto_gradient = [
        site for site in layout.names if requested[site] == "auto" and modes[site] == "gradient"
    ]
    for site in _zero_gradient_sites(log_terms, layout, auto_gradient, initial):
        modes[site] = "exact"
    auto_gradient = [site for site in auto_gradient if modes[site] == "gradient"]
    if cheap_exact:
        for site in _non_affine_sites(log_terms, layout, structure, auto_gradient, initial):
            modes[site] = "exact"
    elif auto_gradient:
        check_log_joint, point = check_point or (log_joint, initial)
        for site in _poor_gradient_sites(
            check_log_joint, layout, neighbourhood, auto_gradient, point
        ):
            modes[site] = "exact"
    return modes


def gradient_errors(
    log_joint: SiteLogJoint,
    layout: SiteLayout,
    neighbourhood: Neighbourhood,
    site: str,
    x: jax.Array,
    num_checked: int = GRADIENT_CHECKED_COORDS,
) -> np.ndarray:
    """``|d_gradient - d_exact|`` of up to `num_checked` coordinates of `site`, spread over
    it, and their valid candidate values one unit away at the flat state `x`: the error of
    the first-order Taylor ratios (Grathwohl et al. 2021) against the exact ones at the
    smallest move, which measures the density's curvature in the site's own unit (longer
    jumps of ordinal windows are off by more, and by design: a gradient ranks them)."""
    coords = layout.site_coords(site)
    coords = np.unique(coords[np.linspace(0, coords.size - 1, num_checked).astype(int)])
    relaxed = flat_log_density(log_joint, layout, float_sites=(site,))
    exact_rows = brute_force_ratios(flat_log_density(log_joint, layout), coords)

    @jax.jit
    def errors(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        candidates = neighbourhood.candidates(x)[coords]
        unit = jnp.abs(candidates - x[coords, None]) == 1
        valid = neighbourhood.valid(x)[coords] & unit
        grad = jax.grad(relaxed)(x.astype(jnp.result_type(float)))[coords]
        d_gradient = (candidates - x[coords, None]).astype(grad.dtype) * grad[:, None]
        _, d_exact = exact_rows(x, None, neighbourhood.candidates(x), neighbourhood.valid(x))
        return jnp.abs(d_gradient - d_exact), valid

    error, valid = (np.asarray(a) for a in errors(x))
    return error[valid & np.isfinite(error)]


class ReadingPoint(NamedTuple):
    """Where a model's target is read: the model's :func:`~numpyro_discrete.model.sites.
    reading_trace` with a fixed key, the values numpyro's ``Gibbs`` conditions on replaced
    by that draw's.

    - **log_joint** - the discrete sites' log joint given that draw of the others.
    - **x** - the flat discrete values of the draw.
    - **trace** - the model's trace at the draw.
    - **kwargs** - the model's keyword arguments with that draw's conditioning values.
    """

    log_joint: SiteLogJoint
    x: jax.Array
    trace: dict[str, Any]
    kwargs: dict[str, Any]


def reading_point(
    model: Callable,
    discrete_sites: Sequence[str],
    layout: SiteLayout,
    site_functions: Callable[[tuple, Mapping[str, Any]], tuple[SiteLogJoint, SiteLogJoint]],
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
) -> ReadingPoint:
    """The :class:`ReadingPoint` of `model`: the same for every chain and under every chain
    method (whose conditioning values are traced under ``vmap`` and ``pmap``), so that the
    structure, the move scales and the ratio modes read there are too."""
    plain_kwargs = {k: v for k, v in model_kwargs.items() if k != GIBBS_SITES_KWARG}
    # conditioned on nothing, the model itself, read by the program that read its sites
    draw = reading_trace(conditioned(model), random.key(0), model_args, plain_kwargs)
    kwargs = dict(plain_kwargs)
    if GIBBS_SITES_KWARG in model_kwargs:
        given = model_kwargs[GIBBS_SITES_KWARG]
        kwargs[GIBBS_SITES_KWARG] = {name: draw[name]["value"] for name in given}
    x = layout.flatten({name: draw[name]["value"] for name in discrete_sites})
    return ReadingPoint(site_functions(model_args, kwargs)[0], x, dict(draw), kwargs)


def _poor_gradient_sites(
    log_joint: SiteLogJoint,
    layout: SiteLayout,
    neighbourhood: Neighbourhood,
    sites: list[str],
    initial: jax.Array,
) -> list[str]:
    """The `sites` whose gradient ratios at the initial state are off from the exact ones
    by more than :data:`GRADIENT_ERROR_LIMIT` nats (the median over a sample of
    coordinates, :func:`gradient_errors`): proposals ranked by them are mostly rejected."""
    poor = []
    for site in sites:
        try:
            errors = gradient_errors(log_joint, layout, neighbourhood, site, initial)
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
            continue  # traced model arguments: no check
        if errors.size and np.median(errors) > GRADIENT_ERROR_LIMIT:
            poor.append(site)
    return poor


def _non_affine_sites(
    log_terms: SiteLogJoint,
    layout: SiteLayout,
    structure: TermStructure,
    sites: list[str],
    initial: jax.Array,
) -> list[str]:
    """The `sites` in whose values ``log pi`` is not affine, coordinate by coordinate (where
    gradient ratios are only approximations): some term's derivative in a coordinate depends
    on that coordinate itself (a Gaussian likelihood of a 0/1 value, ``(y - w x)^2``), read
    from the program of the terms' tangents, one colour class at a time (a term has at most
    one coordinate in a class, so its tangent is that coordinate's derivative alone)."""
    if not sites:
        return []
    relaxed = flat_log_density(log_terms, layout, float_sites=tuple(sites))
    float_dtype = jnp.result_type(float)
    is_site = np.zeros(layout.num_coords, bool)
    for site in sites:
        is_site[layout.site_coords(site)] = True
    non_affine = np.zeros(layout.num_coords, bool)
    for c in range(structure.num_colours):
        members = np.flatnonzero(is_site & (structure.colour == c))
        if not members.size:
            continue
        # x with the members' values taken from `moving` (a gather with fixed indices, so
        # that the tangent flows through the members only)
        source = np.arange(layout.num_coords)
        source[members] = layout.num_coords + np.arange(members.size)

        def derivative(x: jax.Array, members=members, source=source) -> jax.Array:
            def merged(moving: jax.Array) -> jax.Array:
                return relaxed(jnp.concatenate([x, moving])[source])

            ones = jnp.ones(members.size, float_dtype)
            return jax.jvp(merged, (x[members],), (ones,))[1]

        dependencies = read_dependencies(
            derivative, np.asarray(initial, float_dtype), smooth_only=True
        )
        if dependencies is None:
            return []  # traced model arguments: no check
        if dependencies.is_dense:
            non_affine[members] = True
            continue
        on_members = np.isin(dependencies.coords, members)
        non_affine[dependencies.coords[on_members]] = True
    return [site for site in sites if non_affine[layout.site_coords(site)].any()]


def _zero_gradient_sites(
    log_terms: SiteLogJoint, layout: SiteLayout, sites: list[str], initial: jax.Array
) -> list[str]:
    """The `sites` in whose values ``log pi`` has a gradient that is zero everywhere: no
    term depends on them through a differentiable path (values used only in comparisons,
    as indices, or rounded). Read from the program of the terms' tangents: a tangent that
    does not flow from a coordinate's input tangent is a structural zero."""
    if not sites:
        return []
    relaxed = flat_log_density(log_terms, layout, float_sites=tuple(sites))
    float_dtype = jnp.result_type(float)
    point = np.asarray(initial, float_dtype)
    tangents = read_dependencies(
        lambda t: jax.jvp(relaxed, (point,), (t,))[1], np.zeros(point.shape, float_dtype)
    )
    if tangents is None:
        return []  # traced model arguments: no check
    if tangents.is_dense:
        return []  # some term's tangent may flow from any coordinate
    smooth = np.zeros(layout.num_coords, bool)
    smooth[tangents.coords] = True
    return [site for site in sites if not smooth[layout.site_coords(site)].any()]
