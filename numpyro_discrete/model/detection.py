"""The structure of a target's terms as the model is written: sums split into their summands,
then the dependencies detected with the model's arguments and conditioning as the analysis's
varying inputs, so that the structure says whether it is proven
(:attr:`~numpyro_discrete.structure.colouring.TermStructure.exact`)."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp

from numpyro import validation_enabled

from numpyro_discrete.model.layout import SiteLayout
from numpyro_discrete.model.potential import SiteLogJoint, flat_log_density
from numpyro_discrete.structure.colouring import TermStructure, dense_structure, term_structure
from numpyro_discrete.structure.dependencies import TermDependencies, detect_dependencies
from numpyro_discrete.structure.lazy_values import staged
from numpyro_discrete.structure.sums import split_sums

__all__ = ["SiteFunctions", "detect_structure", "read_dependencies", "with_summands_as_terms"]

SiteFunctions = Callable[[tuple, Mapping[str, Any]], tuple[SiteLogJoint, SiteLogJoint]]
"""``(model_args, model_kwargs) -> (log joint, log terms)`` of the target's sites."""


def with_summands_as_terms(
    functions: tuple[SiteLogJoint, SiteLogJoint],
    site_functions: SiteFunctions,
    layout: SiteLayout,
    initial: jax.Array,
) -> tuple[tuple[SiteLogJoint, SiteLogJoint], SiteFunctions]:
    """The functions with terms that are sums split into their summands
    (:func:`~numpyro_discrete.structure.sums.split_sums`), where the model has such sums;
    unchanged otherwise."""
    log_joint, log_terms = functions
    split = split_sums(log_terms)

    def num_terms(fn: SiteLogJoint) -> int:
        # numpyro validates a distribution's arguments where they are concrete (here, the
        # values the model is conditioned on at init), each check a small program compiled
        # on its own (seven on the gallery's mixture); the shapes are the same without, and
        # the model's constant arguments are still checked when the step is traced
        with staged(), validation_enabled(False):
            return jax.eval_shape(flat_log_density(fn, layout), initial).shape[0]

    if num_terms(split) == num_terms(log_terms):
        return functions, site_functions

    def split_site_functions(args: tuple, kwargs: Mapping[str, Any]):
        joint, terms = site_functions(args, kwargs)
        return joint, split_sums(terms)

    return (log_joint, split), split_site_functions


def detect_structure(
    site_functions: SiteFunctions,
    inputs: tuple[tuple, Mapping[str, Any]],
    layout: SiteLayout,
    initial: jax.Array,
) -> tuple[TermStructure, str]:
    """The structure of the terms read at the point `initial` (the dependencies do not
    depend on it), or a dense one and why. The array leaves of `inputs` (the model's
    arguments and conditioning) are the analysis's varying inputs, so that the structure is
    :attr:`~TermStructure.exact` when it holds whatever their values."""
    leaves, treedef = jax.tree.flatten(inputs)
    positions = [i for i, leaf in enumerate(leaves) if _is_plain_array(leaf)]

    def terms_of_inputs(x: jax.Array, *arrays: jax.Array) -> jax.Array:
        new_leaves = list(leaves)
        for i, array in zip(positions, arrays, strict=True):
            new_leaves[i] = array
        args, kwargs = jax.tree.unflatten(treedef, new_leaves)
        return flat_log_density(site_functions(args, kwargs)[1], layout)(x)

    arrays = [leaves[i] for i in positions]
    try:
        dependencies = read_dependencies(terms_of_inputs, initial, inputs=arrays)
    except Exception:
        # the model computes with its arguments outside jax (numpy, Python branches), so
        # they cannot be abstract inputs: read them as constants, without the proof
        dependencies = None
    flat_log_terms = flat_log_density(site_functions(*inputs)[1], layout)
    if dependencies is None and arrays:
        dependencies = read_dependencies(flat_log_terms, initial)
        if dependencies is not None:
            dependencies = dependencies._replace(exact=False)
    if dependencies is None:
        num_terms = jax.eval_shape(flat_log_terms, initial).shape[0]
        return dense_structure(layout.num_coords, num_terms), (
            "the model's arguments are traced, so its program cannot be evaluated"
        )
    return term_structure(dependencies), ""


def _is_plain_array(leaf: Any) -> bool:
    """An array leaf of the model's inputs that may take other values (not a PRNG key)."""
    return isinstance(leaf, np.ndarray | jax.Array) and not jnp.issubdtype(
        leaf.dtype, jax.dtypes.extended
    )


def read_dependencies(
    fn: Callable[..., jax.Array],
    point: np.ndarray | jax.Array,
    smooth_only: bool = False,
    inputs: Sequence[jax.Array] = (),
) -> TermDependencies | None:
    """:func:`detect_dependencies` of `fn` at `point` (it reads the values it needs eagerly,
    even inside a trace: ``pmap``/``vmap`` of ``init``); ``None`` when the model's arguments
    are traced and the indices it needs cannot be read."""
    try:
        return detect_dependencies(fn, point, inputs=inputs, smooth_only=smooth_only)
    except (
        jax.errors.ConcretizationTypeError,
        jax.errors.TracerArrayConversionError,
        jax.errors.TracerIntegerConversionError,
    ):
        return None
