"""Site layout: which sites are discrete, their supports and shapes, and the map between a
dict of site values and one flat integer vector. Static numpy metadata only, resolved once at
``init`` (it must stay concrete under ``pmap``/``vmap``, so it is read from shapes and support
constraints, never from traced values).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
import math
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp

from numpyro.distributions import constraints

__all__ = [
    "SiteLayout",
    "is_binary_support",
    "layout_from_params",
    "layout_from_trace",
]


@dataclass(frozen=True)
class SiteLayout:
    """
    The flat layout of a set of discrete sites, in the given site order.

    - **names** - site names.
    - **shapes** - site shapes.
    - **dtypes** - the dtypes the model produces for each site (samples keep them).
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(math.prod(shape) for shape in self.shapes)

    @property
    def num_coords(self) -> int:
        """``N``, the number of flat coordinates."""
        return sum(self.sizes)

    def flatten(self, values: Mapping[str, jax.Array]) -> jax.Array:
        """Site dict to the flat ``int32`` vector (site order, row-major within a site)."""
        return jnp.concatenate(
            [jnp.ravel(jnp.asarray(values[name])).astype(jnp.int32) for name in self.names]
        )

    def unflatten(self, flat: jax.Array, dtype: Any = None) -> dict[str, jax.Array]:
        """
        Flat vector to a site dict, each site cast to its model dtype, or to `dtype` if given
        (float values for a relaxed potential).
        """
        out = {}
        start = 0
        for name, shape, size, site_dtype in zip(
            self.names, self.shapes, self.sizes, self.dtypes, strict=True
        ):
            value = flat[start : start + size].reshape(shape)
            out[name] = value.astype(site_dtype if dtype is None else dtype)
            start += size
        return out


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


def _describe(site: Mapping[str, Any]) -> str:
    return f"{type(site['fn']).__name__} with support {site['fn'].support}"


def layout_from_trace(
    model_trace: Mapping[str, Any], sites: Sequence[str], kernel_name: str
) -> SiteLayout:
    """
    Layout of the discrete `sites` of a model trace. Raises for supports that cannot be
    sampled yet, naming the site and its distribution.
    """
    for name in sites:
        site = model_trace[name]
        if not is_binary_support(site["fn"].support):
            raise ValueError(
                f"Site {name!r} ({_describe(site)}) is not binary. {kernel_name} currently "
                "samples binary discrete sites (Bernoulli, or any support {0, 1}); "
                "categorical and integer-valued sites are not supported yet. Marginalise "
                f"{name!r} with `infer={{'enumerate': 'parallel'}}`, or sample it with "
                "numpyro's DiscreteGibbs."
            )
    return SiteLayout(
        names=tuple(sites),
        shapes=tuple(tuple(np.shape(model_trace[name]["value"])) for name in sites),
        dtypes=tuple(np.dtype(jnp.asarray(model_trace[name]["value"]).dtype) for name in sites),
    )


def layout_from_params(
    init_params: Mapping[str, jax.Array], kernel_name: str, batch_ndims: int = 0
) -> SiteLayout:
    """
    Layout of a dict of binary arrays (the ``potential_fn`` mode). `batch_ndims` leading
    axes (chains) are not part of the sites. Values are checked to be 0 or 1 when concrete.
    """
    if not isinstance(init_params, Mapping) or not init_params:
        raise ValueError(
            f"{kernel_name} with `potential_fn` needs `init_params`: a non-empty dict mapping "
            "each site name to its initial binary array (with a leading chain axis when "
            "num_chains > 1), e.g. `mcmc.run(key, init_params={'x': jnp.zeros(100, int)})`."
        )
    names = tuple(init_params)
    for name in names:
        value = init_params[name]
        if isinstance(value, jax.core.Tracer):
            continue
        value = np.asarray(value)
        if not np.all((value == 0) | (value == 1)):
            raise ValueError(
                f"`init_params[{name!r}]` has values outside {{0, 1}}; with `potential_fn`, "
                f"{kernel_name} samples binary arrays: pass 0/1 initial values."
            )
    shapes = tuple(tuple(np.shape(init_params[name]))[batch_ndims:] for name in names)
    dtypes = tuple(
        np.dtype(jnp.asarray(init_params[name]).dtype)
        if jnp.issubdtype(jnp.asarray(init_params[name]).dtype, jnp.integer)
        else np.dtype(jnp.int32)
        for name in names
    )
    return SiteLayout(names, shapes, dtypes)
