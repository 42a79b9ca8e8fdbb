"""Site layout: which sites are discrete, their supports and shapes, and the map between a
dict of site values and one flat integer vector. Static numpy metadata only, resolved once at
``init`` (it must stay concrete under ``pmap``/``vmap``, so it is read from shapes and support
constraints, never from traced values).
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
import math
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp

from numpyro.distributions import (
    CategoricalLogits,
    CategoricalProbs,
    ExpandedDistribution,
    Independent,
    MaskedDistribution,
    constraints,
)

from numpyro_discrete.core.neighbourhood import UNBOUNDED, CoordinateSupports, SupportKind
from numpyro_discrete.model.errors import ModelError

__all__ = [
    "SiteLayout",
    "SiteSupport",
    "discrete_sites",
    "is_binary_support",
    "layout_from_params",
    "layout_from_trace",
]


@dataclass(frozen=True, eq=False)
class SiteSupport:
    """
    The support of a discrete site, and how the kernels move in it.

    - **kind** - a :class:`~numpyro_discrete.core.neighbourhood.SupportKind`: ``BINARY``
      (values ``{0, 1}``), ``CATEGORICAL`` (nominal values ``0..num_categories - 1``; every
      other value is a candidate) or ``ORDINAL`` (integers in ``[lower, upper]``; candidates
      in a window around the current value).
    - **num_categories** - ``K`` of a categorical site (2 for binary, unused for ordinal).
    - **lower**, **upper** - integer bounds of an ordinal site (scalars or arrays
      broadcastable to the site's shape); ``upper=None`` for no upper bound.

    Build them with :meth:`binary`, :meth:`categorical` and :meth:`ordinal`; with
    ``potential_fn``, pass them to the kernel as ``supports={"site": ...}``.
    """

    kind: SupportKind
    num_categories: int = 0
    lower: Any = 0
    upper: Any = None

    @classmethod
    def binary(cls) -> "SiteSupport":
        """Values ``{0, 1}``."""
        return cls(SupportKind.BINARY, num_categories=2, lower=0, upper=1)

    @classmethod
    def categorical(cls, num_categories: int) -> "SiteSupport":
        """Nominal values ``0..num_categories - 1`` (unordered)."""
        if not isinstance(num_categories, (int, np.integer)) or num_categories < 2:
            raise ValueError(
                f"SiteSupport.categorical needs an integer `num_categories >= 2`, got "
                f"{num_categories!r}."
            )
        return cls(
            SupportKind.CATEGORICAL,
            num_categories=int(num_categories),
            lower=0,
            upper=int(num_categories) - 1,
        )

    @classmethod
    def ordinal(cls, lower: Any = 0, upper: Any = None) -> "SiteSupport":
        """Ordered integers in ``[lower, upper]`` (``upper=None``: unbounded above)."""
        lower_arr = np.asarray(lower)
        upper_arr = None if upper is None else np.asarray(upper)
        if lower_arr.dtype.kind not in "iu" or (
            upper_arr is not None and upper_arr.dtype.kind not in "iu"
        ):
            raise ValueError(
                f"SiteSupport.ordinal needs integer bounds, got lower={lower!r}, upper={upper!r}."
            )
        if upper_arr is not None and np.any(upper_arr < lower_arr):
            raise ValueError(f"SiteSupport.ordinal: `upper={upper!r}` is below `lower={lower!r}`.")
        return cls(SupportKind.ORDINAL, lower=lower_arr, upper=upper_arr)

    def __str__(self) -> str:
        if self.kind != SupportKind.ORDINAL:
            return f"{self.kind.name.lower()}({self.num_categories} values)"
        lower = self.lower if np.ndim(self.lower) == 0 else "per-element"
        upper = "inf" if self.upper is None else self.upper
        upper = upper if np.ndim(upper) == 0 else "per-element"
        return f"ordinal[{lower}, {upper}]"

    def bounds(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds broadcast to `shape` (``UNBOUNDED`` for no upper bound)."""
        upper = UNBOUNDED if self.upper is None else self.upper
        lower = np.broadcast_to(np.asarray(self.lower, np.int64), shape)
        upper = np.broadcast_to(np.minimum(np.asarray(upper, np.int64), UNBOUNDED), shape)
        return lower.astype(np.int32), upper.astype(np.int32)


@dataclass(frozen=True)
class SiteLayout:
    """
    The flat layout of a set of discrete sites, in the given site order.

    - **names** - site names.
    - **shapes** - site shapes.
    - **dtypes** - the dtypes the model produces for each site (samples keep them).
    - **supports** - each site's :class:`SiteSupport`.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype, ...]
    supports: tuple[SiteSupport, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(math.prod(shape) for shape in self.shapes)

    @property
    def num_coords(self) -> int:
        """``N``, the number of flat coordinates."""
        return sum(self.sizes)

    def site_coords(self, name: str) -> np.ndarray:
        """The flat coordinates of site `name`."""
        start = sum(self.sizes[: self.names.index(name)])
        return np.arange(start, start + self.sizes[self.names.index(name)])

    def coordinate_supports(self) -> CoordinateSupports:
        """The supports of the flat coordinates, as ``(N,)`` numpy arrays."""
        kind, num_categories, lower, upper = [], [], [], []
        for shape, size, support in zip(self.shapes, self.sizes, self.supports, strict=True):
            site_lower, site_upper = support.bounds(shape)
            kind.append(np.full(size, support.kind, np.int32))
            num_categories.append(np.full(size, support.num_categories, np.int32))
            lower.append(site_lower.reshape(-1))
            upper.append(site_upper.reshape(-1))
        return CoordinateSupports(
            *(np.concatenate(a) for a in (kind, num_categories, lower, upper))
        )

    def coordinate_name(self, coord: int) -> tuple[str, str]:
        """The site of flat coordinate `coord` and its index there, e.g. ``("x", "[2, 0]")``
        (``""`` for a scalar site)."""
        starts = np.cumsum((0,) + tuple(self.sizes))
        k = int(np.searchsorted(starts, coord, side="right")) - 1
        shape = self.shapes[k]
        index = np.unravel_index(coord - starts[k], shape) if shape else ()
        return self.names[k], f"[{', '.join(str(int(i)) for i in index)}]" if shape else ""

    def flatten(self, values: Mapping[str, jax.Array]) -> jax.Array:
        """Site dict to the flat ``int32`` vector (site order, row-major within a site)."""
        return jnp.concatenate(
            [jnp.ravel(jnp.asarray(values[name])).astype(jnp.int32) for name in self.names]
        )

    def unflatten(self, flat: jax.Array, float_sites: Collection[str] = ()) -> dict[str, jax.Array]:
        """
        Flat vector to a site dict, each site cast to its model dtype, except `float_sites`,
        which get the default float dtype (values a relaxed potential differentiates in).
        """
        out = {}
        start = 0
        float_dtype = jnp.result_type(float)
        for name, shape, size, site_dtype in zip(
            self.names, self.shapes, self.sizes, self.dtypes, strict=True
        ):
            value = flat[start : start + size].reshape(shape)
            out[name] = value.astype(float_dtype if name in float_sites else site_dtype)
            start += size
        return out

    def out_of_support(self, values: Mapping[str, Any]) -> list[str]:
        """Sites among concrete `values` with a value outside their support, each as
        ``'name' (support)``."""
        bad = []
        for name, shape, support in zip(self.names, self.shapes, self.supports, strict=True):
            if name not in values or isinstance(values[name], jax.core.Tracer):
                continue
            value = np.asarray(values[name])
            if value.shape[value.ndim - len(shape) :] != shape:
                continue  # a shape error, reported by the caller
            lower, upper = support.bounds(shape)
            if np.any((value < lower) | (value > upper) | (value != np.round(value))):
                bad.append(f"{name!r} ({support})")
        return bad


def is_binary_support(support: constraints.Constraint) -> bool:
    """Whether `support` is ``{0, 1}``: ``boolean`` or a concrete integer interval [0, 1]."""
    if support is constraints.boolean:
        return True
    if isinstance(support, constraints.integer_interval):
        try:
            lower = np.asarray(support.lower_bound)
            upper = np.asarray(support.upper_bound)
        except jax.errors.TracerArrayConversionError:
            return False
        return bool(np.all(lower == 0) and np.all(upper == 1))
    return False


def discrete_sites(model_trace: Mapping[str, Any]) -> tuple[str, ...]:
    """
    Latent sample sites with a discrete support (finite or not: numpyro's own
    ``discrete_latent_sites`` skips Poisson-like sites, which have no enumerate support),
    except those marked ``infer={"enumerate": "parallel"}``, which are summed out.
    """
    return tuple(
        name
        for name, site in model_trace.items()
        if site["type"] == "sample"
        and not site["is_observed"]
        and site["fn"].support.is_discrete
        and site["infer"].get("enumerate", "") != "parallel"
    )


def _describe(site: Mapping[str, Any]) -> str:
    return f"{type(site['fn']).__name__} with support {site['fn'].support}"


def _base_distribution(fn: Any) -> Any:
    """The distribution under ``expand``/``to_event``/``mask`` wrappers."""
    while isinstance(fn, (ExpandedDistribution, Independent, MaskedDistribution)):
        fn = fn.base_dist
    return fn


def _site_support(
    site: Mapping[str, Any], name: str, support: constraints.Constraint
) -> SiteSupport:
    fn = site["fn"]
    if _base_distribution(fn).event_shape:
        raise ModelError(
            f"site {name!r} ({_describe(site)}) is a multivariate discrete distribution "
            f"(event shape {_base_distribution(fn).event_shape}); the kernel samples "
            "univariate discrete "
            "sites (Bernoulli, Categorical, Binomial, Poisson, ...). Rewrite it as "
            "univariate sites, or marginalise it with `infer={'enumerate': 'parallel'}`."
        )
    if is_binary_support(support):
        return SiteSupport.binary()
    if isinstance(support, constraints.integer_interval):
        lower, upper = np.asarray(support.lower_bound), np.asarray(support.upper_bound)
        if isinstance(_base_distribution(fn), (CategoricalProbs, CategoricalLogits)):
            return SiteSupport.categorical(int(np.max(upper)) + 1)
        return SiteSupport.ordinal(lower.astype(np.int64), upper.astype(np.int64))
    if isinstance(support, constraints.integer_greater_than):
        lower = np.asarray(support.lower_bound)
        return SiteSupport.ordinal(lower.astype(np.int64), None)
    raise ModelError(
        f"site {name!r} ({_describe(site)}) has a discrete support that the kernel cannot "
        "sample: supported are binary, categorical and integer (bounded or not) supports. "
        "Marginalise it with `infer={'enumerate': 'parallel'}`, or sample it with numpyro's "
        "DiscreteGibbs."
    )


def layout_from_trace(
    model_trace: Mapping[str, Any],
    sites: Sequence[str],
    supports: Mapping[str, constraints.Constraint],
) -> SiteLayout:
    """
    Layout of the discrete `sites` of a model trace, given their `supports` with concrete
    bounds (:func:`~numpyro_discrete.model.bounds.concrete_supports`; a site's support
    under ``to_event`` is that of one element, which moves alone). Raises for supports that
    cannot be sampled, naming the site and its distribution.
    """
    site_supports = tuple(_site_support(model_trace[name], name, supports[name]) for name in sites)
    return SiteLayout(
        names=tuple(sites),
        shapes=tuple(tuple(np.shape(model_trace[name]["value"])) for name in sites),
        dtypes=tuple(np.dtype(jnp.asarray(model_trace[name]["value"]).dtype) for name in sites),
        supports=site_supports,
    )


def layout_from_params(
    init_params: Mapping[str, jax.Array],
    batch_ndims: int = 0,
    supports: Mapping[str, SiteSupport] | None = None,
) -> SiteLayout:
    """
    Layout of a dict of discrete arrays (the ``potential_fn`` mode): binary unless
    `supports` says otherwise. `batch_ndims` leading axes (chains) are not part of the
    sites.
    """
    if not isinstance(init_params, Mapping) or not init_params:
        raise ModelError(
            "with `potential_fn`, the kernel needs `init_params`: a non-empty dict mapping "
            "each site name to its initial array (with a leading chain axis when "
            "num_chains > 1), e.g. `mcmc.run(key, init_params={'x': jnp.zeros(100, int)})`."
        )
    supports = dict(supports or {})
    unknown = sorted(set(supports) - set(init_params))
    if unknown:
        raise ModelError(
            f"`supports` names sites {unknown} that are not in `init_params` "
            f"(sites: {list(init_params)})."
        )
    names = tuple(init_params)
    shapes = tuple(tuple(np.shape(init_params[name]))[batch_ndims:] for name in names)
    dtypes = tuple(
        np.dtype(jnp.asarray(init_params[name]).dtype)
        if jnp.issubdtype(jnp.asarray(init_params[name]).dtype, jnp.integer)
        else np.dtype(jnp.int32)
        for name in names
    )
    layout = SiteLayout(
        names,
        shapes,
        dtypes,
        tuple(supports.get(name, SiteSupport.binary()) for name in names),
    )
    return layout
