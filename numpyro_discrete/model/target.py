"""The discrete target: everything a kernel needs to know about a numpyro model (with its
arguments and conditioning) or a ``potential_fn``, built once at ``init``. The only module of
the package that reads numpyro models; kernels see a flat integer vector, its log density and
its local log-ratio function.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import conditioned
from numpyro.util import is_prng_key

from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import (
    CoordinateSupports,
    Neighbourhood,
    coordinate_neighbourhood,
    ladder_offsets,
)
from numpyro_discrete.model.bounds import concrete_supports
from numpyro_discrete.model.detection import (
    SiteFunctions,
    detect_structure,
    with_summands_as_terms,
)
from numpyro_discrete.model.errors import ModelError
from numpyro_discrete.model.hoisting import hoist_constants
from numpyro_discrete.model.layout import (
    SiteLayout,
    SiteSupport,
    layout_from_params,
    layout_from_trace,
)
from numpyro_discrete.model.move_scales import move_scales, support_spans
from numpyro_discrete.model.potential import (
    FlatLogDensity,
    SiteLogJoint,
    flat_log_density,
    local_fn_for,
    model_log_joint,
    model_log_terms,
    potential_log_joint,
    potential_log_terms,
)
from numpyro_discrete.model.ratio_modes import (
    WeightsArgument,
    reading_point,
    resolve_weights,
)
from numpyro_discrete.model.sites import kept_for, model_sites, site_summary
from numpyro_discrete.numpyro_internals import prepare_model_for_potential
from numpyro_discrete.structure.colouring import TermStructure

__all__ = ["DiscreteTarget", "model_target"]


@dataclass(frozen=True, eq=False)
class DiscreteTarget:
    """
    The discrete latent sites of a model (or the sites of a ``potential_fn``) as one flat
    integer vector of ``N`` coordinates. Build it with :meth:`from_model` or
    :meth:`from_potential`.

    - **layout** - the :class:`~numpyro_discrete.model.layout.SiteLayout`: site names,
      shapes, dtypes, supports, and the map between site dicts and the flat vector.
    - **weights_mode** - per site, how local ratios are computed: ``"gradient"`` or
      ``"exact"`` (``"auto"`` resolved).
    - **neighbourhood** - the candidate values of each coordinate.
    - **move_scales** - ``(N,)`` scale of the moves of each coordinate, in its values
      (:mod:`~numpyro_discrete.model.move_scales`): it sets the ladder of move distances
      of ordinal coordinates and the unit of ACS's step size; 1 for binary and categorical
      coordinates, and for all of them when an ``ordinal_window`` is given.
    - **structure** - the :class:`~numpyro_discrete.structure.colouring.TermStructure` of
      the terms of ``log pi``: which coordinates each term depends on and a colouring of
      the coordinates; dense (every term on every coordinate) when it could not be
      detected (:attr:`structure_note`).
    - **structure_note** - why the structure could not be detected (empty otherwise).
    - **model** - the numpyro model it was read from (``None`` for a ``potential_fn``).

    A chain's initial values are in :mod:`~numpyro_discrete.model.initial_values`.
    """

    layout: SiteLayout
    weights_mode: Mapping[str, str]
    neighbourhood: Neighbourhood
    move_scales: np.ndarray
    structure: TermStructure
    structure_note: str
    _site_functions: SiteFunctions
    model: Callable | None = None
    _has_deterministic: bool = False
    # the constant parts of the site functions' programs (:mod:`~numpyro_discrete.model.
    # hoisting`), computed once per program and constants
    _constant_parts: dict = field(default_factory=dict)
    # the last `log_terms` built outside a trace, with its arguments
    _kept_log_terms: dict = field(default_factory=dict)

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def from_model(
        cls,
        model: Callable,
        rng_key: jax.Array,
        model_args: tuple,
        model_kwargs: Mapping[str, Any],
        *,
        weights: WeightsArgument = "auto",
        ordinal_window: int | None = None,
    ) -> "DiscreteTarget":
        """
        The target of the discrete latent sites of `model` given its arguments and any
        conditioning in `model_kwargs` (numpyro's ``Gibbs`` passes the other blocks' values
        there). Raises a :class:`~numpyro_discrete.model.errors.ModelError`, naming the
        sites and the fix, for a model without discrete sites, with continuous latent
        sites, or with supports the kernels cannot move in.
        """
        if isinstance(rng_key, jax.core.Tracer):
            # a traced chain key (`pmap` traces `init`): read the model at a concrete draw and
            # eagerly, so that what is read from it (scales, ratio modes, structure) is what a
            # sequential chain reads; staged reads fail and fell back to weaker defaults
            # (gradient ratios, span-based scales), which froze coordinates
            with jax.ensure_compile_time_eval():
                return cls.from_model(
                    model,
                    random.key(0),
                    model_args,
                    model_kwargs,
                    weights=weights,
                    ordinal_window=ordinal_window,
                )
        sites = model_sites(model, rng_key, model_args, model_kwargs)
        if not sites.discrete:
            raise ModelError(
                "found no discrete latent sites in the model (sites marked "
                "`infer={'enumerate': 'parallel'}` are summed out, not sampled). Use NUTS "
                "for models without discrete latent variables."
            )
        if sites.continuous:
            raise ModelError(
                "the kernel samples discrete sites only, but the model has continuous "
                f"latent sites {site_summary(sites.trace, sites.continuous)}. Sample them "
                "with NUTS beside a discrete kernel: `MCMC(LBPGibbs(NUTS(model)))` (from "
                "numpyro_discrete and numpyro.infer), or condition the model on them."
            )
        supports = concrete_supports(model, sites.trace, sites.discrete, model_args, model_kwargs)
        layout = layout_from_trace(sites.trace, sites.discrete, supports)
        enum = bool(sites.enumerated)
        conditioned_model = conditioned(model)
        prepared = prepare_model_for_potential(conditioned_model, sites.trace, enum=enum)

        def site_functions(args: tuple, kwargs: Mapping[str, Any]):
            return (
                model_log_joint(prepared, args, kwargs, enum),
                model_log_terms(prepared, args, kwargs, enum),
            )

        has_deterministic = any(site["type"] == "deterministic" for site in sites.trace.values())
        # the structure, the scales and the ratio modes are read at one point with a fixed
        # key (`reading_trace`), not at the chain's own draw: every chain (and
        # every chain method) then builds the same target, with the same candidate tables
        reading = reading_point(
            model, sites.discrete, layout, site_functions, model_args, model_kwargs
        )
        concrete_trace, initial = reading.trace, reading.x
        return cls._resolve(
            layout,
            site_functions(model_args, model_kwargs),
            site_functions,
            (model_args, reading.kwargs),
            initial,
            weights,
            ordinal_window,
            conditioned_model,
            has_deterministic,
            concrete_trace,
            (reading.log_joint, reading.x),
        )

    @classmethod
    def from_potential(
        cls,
        potential_fn: Callable,
        init_params: Mapping[str, jax.Array],
        *,
        batch_ndims: int = 0,
        supports: Mapping[str, SiteSupport] | None = None,
        weights: WeightsArgument = "auto",
        ordinal_window: int | None = None,
    ) -> "DiscreteTarget":
        """
        The target ``log pi = -potential_fn(values)`` of the sites of `init_params` (their
        shapes after `batch_ndims` leading chain axes): binary unless `supports` says
        otherwise.
        """
        layout = layout_from_params(init_params, batch_ndims, supports)
        functions = (potential_log_joint(potential_fn), potential_log_terms(potential_fn))
        first_chain = {
            name: jnp.asarray(init_params[name])[(0,) * batch_ndims] for name in layout.names
        }
        return cls._resolve(
            layout,
            functions,
            lambda args, kwargs: functions,
            ((), {}),
            layout.flatten(first_chain),
            weights,
            ordinal_window,
        )

    @classmethod
    def _resolve(
        cls,
        layout: SiteLayout,
        functions: tuple[SiteLogJoint, SiteLogJoint],
        site_functions: SiteFunctions,
        inputs: tuple[tuple, Mapping[str, Any]],
        initial: jax.Array,
        weights: WeightsArgument,
        ordinal_window: int | None,
        model: Callable | None = None,
        has_deterministic: bool = False,
        model_trace: Mapping[str, Any] | None = None,
        check_point: tuple[SiteLogJoint, jax.Array] | None = None,
    ) -> "DiscreteTarget":
        if layout.num_coords == 0:
            shapes = dict(zip(layout.names, layout.shapes, strict=True))
            raise ModelError(
                "the discrete sites have no coordinates (site shapes "
                f"{shapes}), so there is nothing to sample. Give a site a non-empty shape."
            )
        if isinstance(initial, jax.core.Tracer):
            initial = layout.coordinate_supports().lower  # any point: the structure is read
        functions, site_functions = with_summands_as_terms(
            functions, site_functions, layout, initial
        )
        log_joint, log_terms = functions
        if ordinal_window is None:
            scales = move_scales(layout, np.asarray(initial), model_trace)
            window = ladder_offsets(scales, support_spans(layout))
        else:
            scales, window = np.ones(layout.num_coords), ordinal_window
        neighbourhood = coordinate_neighbourhood(layout.coordinate_supports(), window=window)
        structure, note = detect_structure(site_functions, inputs, layout, initial)
        return cls(
            layout=layout,
            weights_mode=resolve_weights(
                weights,
                log_joint,
                log_terms,
                layout,
                initial,
                structure,
                neighbourhood,
                check_point,
            ),
            neighbourhood=neighbourhood,
            move_scales=scales,
            structure=structure,
            structure_note=note,
            _site_functions=site_functions,
            model=model,
            _has_deterministic=has_deterministic,
        )

    # --- the flat target ------------------------------------------------------------------

    @property
    def num_coords(self) -> int:
        """``N``, the number of flat coordinates."""
        return self.layout.num_coords

    @property
    def supports(self) -> CoordinateSupports:
        """The supports of the flat coordinates."""
        return self.layout.coordinate_supports()

    def flatten(self, values: Mapping[str, jax.Array]) -> jax.Array:
        """Site dict to the flat integer vector."""
        return self.layout.flatten(values)

    def unflatten(self, flat: jax.Array) -> dict[str, jax.Array]:
        """Flat integer vector to a site dict in the model's dtypes."""
        return self.layout.unflatten(flat)

    @property
    def num_colours(self) -> int:
        """``C``, the number of colour classes of the coordinates (``N`` for a dense model,
        or when the structure could not be detected)."""
        return self.structure.num_colours

    def log_density(
        self, model_args: tuple = (), model_kwargs: Mapping[str, Any] | None = None
    ) -> FlatLogDensity:
        """``log pi`` of the flat vector, under the arguments and conditioning given."""
        return flat_log_density(self._functions(model_args, model_kwargs)[0], self.layout)

    def log_terms(
        self, model_args: tuple = (), model_kwargs: Mapping[str, Any] | None = None
    ) -> FlatLogDensity:
        """The 1-D array of terms of ``log pi`` (their sum) of the flat vector: the same
        function again for the same argument objects, outside any trace, so that a program
        compiled for it (a chain's start check) serves a later chain too."""
        return kept_for(
            self._kept_log_terms,
            (model_args, {} if model_kwargs is None else dict(model_kwargs)),
            lambda: flat_log_density(self._functions(model_args, model_kwargs)[1], self.layout),
        )

    def local_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> LocalFn:
        """``x -> (log pi(x), d)``: the local log-ratios by :attr:`weights_mode`, exact ones
        colour-batched where the structure is sparse."""
        log_joint, log_terms = self._functions(model_args, model_kwargs)
        sparse = not self.structure.dense_terms.size
        return local_fn_for(
            self.weights_mode,
            log_joint,
            self.layout,
            self.neighbourhood,
            (log_terms, self.structure) if sparse else None,
        )

    def _functions(
        self, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> tuple[SiteLogJoint, SiteLogJoint]:
        functions = self._site_functions(model_args, {} if model_kwargs is None else model_kwargs)
        return tuple(hoist_constants(fn, self._constant_parts) for fn in functions)

    # --- samples --------------------------------------------------------------------------

    def postprocess_fn(
        self, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> Callable[[Mapping[str, jax.Array]], dict[str, jax.Array]] | None:
        """The site dict plus the model's deterministic sites; ``None`` when there are none
        to add (identity)."""
        if self.model is None or not self._has_deterministic:
            return None
        kwargs = {} if model_kwargs is None else dict(model_kwargs)
        model = self.model

        def fn(z: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
            replay = substitute(seed(model, random.key(0)), data=dict(z))
            model_trace = trace(replay).get_trace(*model_args, **kwargs)
            deterministic = {
                name: site["value"]
                for name, site in model_trace.items()
                if site["type"] == "deterministic"
            }
            return {**z, **deterministic}

        return fn


def model_target(
    model: Callable,
    rng_key: jax.Array,
    model_args: tuple,
    model_kwargs: Mapping[str, Any],
    *,
    weights: str | Mapping[str, str],
    ordinal_window: int | None,
) -> DiscreteTarget:
    """The target of `model` a kernel builds at ``init`` from its chain key (the first of a
    batch of keys), so that every kernel given the same key reads the same draw."""
    key_trace = rng_key if is_prng_key(rng_key) else rng_key[0]
    return DiscreteTarget.from_model(
        model,
        random.fold_in(key_trace, 1),
        model_args,
        model_kwargs,
        weights=weights,
        ordinal_window=ordinal_window,
    )
