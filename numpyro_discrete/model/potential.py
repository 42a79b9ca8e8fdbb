"""The target: ``log pi`` of the flat discrete vector, from a numpyro model (given its
arguments and any conditioning) or from a user ``potential_fn``, and the local log-ratio
function the kernels use (gradient or exact, see :mod:`numpyro_discrete.core.local_ratios`).
"""

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from numpyro.infer.gibbs import with_conditioning
from numpyro.infer.util import log_density

from numpyro_discrete.core.local_ratios import (
    LocalFn,
    Neighbourhood,
    exact_local_fn,
    gradient_local_fn,
)
from numpyro_discrete.model.layout import SiteLayout

__all__ = [
    "WEIGHT_MODES",
    "FlatLogDensity",
    "flat_log_density",
    "gradient_is_available",
    "local_fn_for",
    "model_log_joint",
    "potential_log_joint",
]

WEIGHT_MODES = ("auto", "gradient", "exact")

SiteLogJoint = Callable[[Mapping[str, jax.Array]], jax.Array]
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


def potential_log_joint(potential_fn: Callable) -> SiteLogJoint:
    """``log pi = -potential_fn(values)`` for the ``potential_fn`` mode."""

    def log_joint(values: Mapping[str, jax.Array]) -> jax.Array:
        return -potential_fn(dict(values))

    return log_joint


def flat_log_density(log_joint: SiteLogJoint, layout: SiteLayout, relaxed: bool) -> FlatLogDensity:
    """
    ``log pi`` of the flat vector. `relaxed` casts the values to float first, so that the
    density can be differentiated in them; otherwise they keep the model's dtypes.
    """

    def fn(flat: jax.Array) -> jax.Array:
        dtype = jnp.result_type(float) if relaxed else None
        return jnp.asarray(log_joint(layout.unflatten(flat, dtype)), jnp.result_type(float))

    return fn


def gradient_is_available(log_joint: SiteLogJoint, layout: SiteLayout) -> bool:
    """
    Whether the log joint can be differentiated in float-cast site values. It cannot when a
    value is used as an index (``locs[z]``) or in integer-only operations, which raise at
    trace time; only shapes are traced here, nothing is computed.
    """
    relaxed = flat_log_density(log_joint, layout, relaxed=True)
    probe = jax.ShapeDtypeStruct((layout.num_coords,), jnp.result_type(float))
    try:
        jax.eval_shape(jax.grad(relaxed), probe)
    except (TypeError, IndexError):
        return False
    return True


def local_fn_for(
    weights: str,
    log_joint: SiteLogJoint,
    layout: SiteLayout,
    neighbourhood: Neighbourhood,
) -> LocalFn:
    """The local log-ratio function for a resolved weight mode (``"gradient"``/``"exact"``)."""
    if weights == "gradient":
        return gradient_local_fn(flat_log_density(log_joint, layout, relaxed=True), neighbourhood)
    return exact_local_fn(flat_log_density(log_joint, layout, relaxed=False), neighbourhood)
