"""The scale of moves of each ordinal coordinate, read from its site at ``init``.

An ordinal site's values may spread over one unit (a Bernoulli count) or hundreds (a
Poisson with mean ``10^4``). Moves of a fixed size mix at one end and crawl at the other, so
every ordinal coordinate gets a *scale* ``s_j``, the spread of its values: the standard
deviation of its distribution at the point the target is built from (capped at half a
bounded support's span), a quarter of the span where the distribution has no variance, and
the square root of its initial value (a Poisson-like spread) for an unbounded ``potential_fn``
site. The scale sets the ladder of move distances
(:func:`~numpyro_discrete.core.neighbourhood.ladder_offsets`) and the unit of ACS's step size
(:func:`~numpyro_discrete.core.neighbourhood.squared_distance_fn`). It only shapes the
proposals, whose Metropolis-Hastings test is exact whatever the scale.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

import jax

from numpyro_discrete.core.neighbourhood import UNBOUNDED, SupportKind
from numpyro_discrete.model.layout import SiteLayout

__all__ = ["move_scales", "support_spans"]


def support_spans(layout: SiteLayout) -> np.ndarray:
    """``(N,)`` spans ``upper - lower`` of the coordinates (``inf`` when unbounded)."""
    supports = layout.coordinate_supports()
    upper = np.asarray(supports.upper, np.float64)
    span = upper - np.asarray(supports.lower, np.float64)
    return np.where(upper >= UNBOUNDED, np.inf, span)


def _site_spread(site: Mapping[str, Any] | None, shape: tuple[int, ...]) -> np.ndarray:
    """Standard deviation of the site's distribution, broadcast to `shape`; NaN where it is
    unknown (no variance, a traced one, or an infinite one)."""
    unknown = np.full(shape, np.nan)
    if site is None:
        return unknown
    try:
        variance = site["fn"].variance
        spread = np.sqrt(np.broadcast_to(np.asarray(variance, np.float64), shape))
    except (NotImplementedError, jax.errors.TracerArrayConversionError, ValueError):
        return unknown
    return np.where(np.isfinite(spread) & (spread > 0), spread, np.nan)


def move_scales(
    layout: SiteLayout,
    initial: np.ndarray,
    model_trace: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """
    ``(N,)`` scales of the flat coordinates, at least 1 (1 for binary and categorical ones).

    :param layout: the layout of the discrete sites.
    :param initial: a concrete flat state (the fallback of unbounded sites without a
        distribution).
    :param model_trace: a concrete model trace whose sites carry their distributions;
        ``None`` for ``potential_fn`` targets.
    """
    spread = np.concatenate(
        [
            _site_spread(None if model_trace is None else model_trace.get(name), shape).ravel()
            for name, shape in zip(layout.names, layout.shapes, strict=True)
        ]
        or [np.zeros(0)]
    )
    span = support_spans(layout)
    fallback = np.where(
        np.isfinite(span), span / 4.0, np.sqrt(np.abs(np.asarray(initial, np.float64)))
    )
    scale = np.where(np.isnan(spread), fallback, np.minimum(spread, span / 2.0))
    ordinal = np.asarray(layout.coordinate_supports().kind) == SupportKind.ORDINAL
    return np.where(ordinal, np.maximum(scale, 1.0), 1.0)
