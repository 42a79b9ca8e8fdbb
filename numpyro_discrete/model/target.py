"""The discrete target: everything a kernel needs to know about a numpyro model (with its
arguments and conditioning) or a ``potential_fn``, built once at ``init``. The only module of
the package that reads numpyro models; kernels see a flat integer vector, its log density and
its local log-ratio function.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import conditioned, latent_sample_sites, prototype_trace

from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import (
    CoordinateSupports,
    Neighbourhood,
    SupportKind,
    coordinate_neighbourhood,
)
from numpyro_discrete.model.layout import (
    SiteLayout,
    SiteSupport,
    discrete_sites,
    layout_from_params,
    layout_from_trace,
)
from numpyro_discrete.model.potential import (
    FlatLogDensity,
    SiteLogJoint,
    flat_log_density,
    gradient_is_available,
    local_fn_for,
    model_log_joint,
    potential_log_joint,
)
from numpyro_discrete.numpyro_internals import prepare_model_for_potential

__all__ = ["DiscreteTarget", "ModelSites", "model_sites"]

WeightsArgument = str | Mapping[str, str]


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
    model_trace = prototype_trace(conditioned(model), rng_key, model_args, dict(model_kwargs))
    discrete = discrete_sites(model_trace)
    latent = latent_sample_sites(model_trace)
    enumerated = tuple(
        name for name in latent if model_trace[name]["infer"].get("enumerate", "") == "parallel"
    )
    continuous = tuple(name for name in latent if name not in discrete and name not in enumerated)
    return ModelSites(discrete, enumerated, continuous, model_trace)


def _site_summary(model_trace: Mapping[str, Any], names: tuple[str, ...]) -> str:
    return ", ".join(f"{name!r} ({type(model_trace[name]['fn']).__name__})" for name in names)


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
    - **kernel_name** - the kernel that built it, for error messages.
    """

    layout: SiteLayout
    weights_mode: Mapping[str, str]
    neighbourhood: Neighbourhood
    kernel_name: str
    _log_joint_fn: Callable[[tuple, Mapping[str, Any]], SiteLogJoint]
    _model: Callable | None = None
    _has_deterministic: bool = False

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
        ordinal_window: int = 1,
        kernel_name: str = "kernel",
    ) -> "DiscreteTarget":
        """
        The target of the discrete latent sites of `model` given its arguments and any
        conditioning in `model_kwargs` (numpyro's ``Gibbs`` passes the other blocks' values
        there). Raises, naming the sites and the fix, for a model without discrete sites,
        with continuous latent sites, or with supports the kernels cannot move in.
        """
        sites = model_sites(model, rng_key, model_args, model_kwargs)
        if not sites.discrete:
            raise ValueError(
                f"{kernel_name} found no discrete latent sites in the model (sites marked "
                "`infer={'enumerate': 'parallel'}` are summed out, not sampled). Use NUTS "
                "for models without discrete latent variables."
            )
        if sites.continuous:
            raise ValueError(
                f"{kernel_name} samples discrete sites only, but the model has continuous "
                f"latent sites {_site_summary(sites.trace, sites.continuous)}. Sample them "
                f"beside {kernel_name} with numpyro's Gibbs: `Gibbs([({kernel_name}(model), "
                "discrete_latent_sites), (NUTS(model), None)])` (from numpyro.infer and "
                "numpyro.infer.gibbs), or condition the model on them."
            )
        layout = layout_from_trace(sites.trace, sites.discrete, kernel_name)
        enum = bool(sites.enumerated)
        conditioned_model = conditioned(model)
        prepared = prepare_model_for_potential(conditioned_model, sites.trace, enum=enum)

        def log_joint_fn(args: tuple, kwargs: Mapping[str, Any]) -> SiteLogJoint:
            return model_log_joint(prepared, args, kwargs, enum)

        has_deterministic = any(site["type"] == "deterministic" for site in sites.trace.values())
        return cls._resolve(
            layout,
            log_joint_fn(model_args, model_kwargs),
            log_joint_fn,
            weights,
            ordinal_window,
            kernel_name,
            conditioned_model,
            has_deterministic,
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
        ordinal_window: int = 1,
        kernel_name: str = "kernel",
    ) -> "DiscreteTarget":
        """
        The target ``log pi = -potential_fn(values)`` of the sites of `init_params` (their
        shapes after `batch_ndims` leading chain axes): binary unless `supports` says
        otherwise.
        """
        layout = layout_from_params(init_params, kernel_name, batch_ndims, supports)
        log_joint = potential_log_joint(potential_fn)

        def log_joint_fn(args: tuple, kwargs: Mapping[str, Any]) -> SiteLogJoint:
            return log_joint

        _check_scalar_potential(log_joint, layout, kernel_name)
        return cls._resolve(layout, log_joint, log_joint_fn, weights, ordinal_window, kernel_name)

    @classmethod
    def _resolve(
        cls,
        layout: SiteLayout,
        log_joint: SiteLogJoint,
        log_joint_fn: Callable[[tuple, Mapping[str, Any]], SiteLogJoint],
        weights: WeightsArgument,
        ordinal_window: int,
        kernel_name: str,
        model: Callable | None = None,
        has_deterministic: bool = False,
    ) -> "DiscreteTarget":
        if layout.num_coords == 0:
            shapes = dict(zip(layout.names, layout.shapes, strict=True))
            raise ValueError(
                f"{kernel_name}: the discrete sites have no coordinates (site shapes "
                f"{shapes}), so there is nothing to sample. Give a site a non-empty shape."
            )
        return cls(
            layout=layout,
            weights_mode=_resolve_weights(weights, log_joint, layout, kernel_name),
            neighbourhood=coordinate_neighbourhood(
                layout.coordinate_supports(), window=ordinal_window
            ),
            kernel_name=kernel_name,
            _log_joint_fn=log_joint_fn,
            _model=model,
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

    def log_density(
        self, model_args: tuple = (), model_kwargs: Mapping[str, Any] | None = None
    ) -> FlatLogDensity:
        """``log pi`` of the flat vector, under the arguments and conditioning given."""
        return flat_log_density(self._log_joint(model_args, model_kwargs), self.layout)

    def local_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> LocalFn:
        """``x -> (log pi(x), d)``: the local log-ratios by :attr:`weights_mode`."""
        return local_fn_for(
            self.weights_mode,
            self._log_joint(model_args, model_kwargs),
            self.layout,
            self.neighbourhood,
        )

    def _log_joint(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> SiteLogJoint:
        return self._log_joint_fn(model_args, {} if model_kwargs is None else model_kwargs)

    # --- initial values -------------------------------------------------------------------

    def check_init_params(self, init_params: Mapping[str, Any] | None) -> None:
        """Raise, naming the sites, when concrete `init_params` lie outside their supports."""
        outside = self.layout.out_of_support(init_params or {})
        if not outside:
            return
        if self._model is not None:
            raise ValueError(
                f"`init_params` has values outside the support of sites {', '.join(outside)}; "
                "give each site values its distribution can produce."
            )
        raise ValueError(
            f"`init_params` has values outside the support of sites {', '.join(outside)}. With "
            f"`potential_fn`, {self.kernel_name} treats sites as binary unless `supports` says "
            "otherwise, e.g. `supports={'s': SiteSupport.categorical(3)}`."
        )

    def initial_position(
        self,
        rng_key: jax.Array,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> jax.Array:
        """One chain's flat initial vector: `init_params` where given, a prior draw (with
        `rng_key`) elsewhere."""
        layout = self.layout
        values = dict(init_params or {})
        unknown = sorted(set(values) - set(layout.names))
        if unknown:
            raise ValueError(
                f"`init_params` has sites {unknown} that {self.kernel_name} does not "
                f"sample; its sites are {list(layout.names)}."
            )
        for name, shape in zip(layout.names, layout.shapes, strict=True):
            if name in values and tuple(jnp.shape(values[name])) != shape:
                raise ValueError(
                    f"`init_params[{name!r}]` has shape {tuple(jnp.shape(values[name]))}, "
                    f"but site {name!r} has shape {shape}."
                )
        missing = [name for name in layout.names if name not in values]
        if missing:
            kwargs = {} if model_kwargs is None else dict(model_kwargs)
            model_trace = prototype_trace(self._model, rng_key, model_args, kwargs)
            values.update({name: model_trace[name]["value"] for name in missing})
        return layout.flatten(values)

    def check_initial_log_density(self, log_density: jax.Array) -> None:
        """Raise when ``log pi`` is not finite at the initial values of a chain."""
        if isinstance(log_density, jax.core.Tracer) or np.all(np.isfinite(log_density)):
            return
        raise ValueError(
            f"{self.kernel_name}: the potential energy is "
            f"{np.ravel(-np.asarray(log_density)).tolist()} at the initial values of sites "
            f"{list(self.layout.names)}, so the chain cannot start there. Pass "
            "`init_params` (to `MCMC.run`) with values of positive probability."
        )

    # --- samples --------------------------------------------------------------------------

    def postprocess_fn(
        self, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> Callable[[Mapping[str, jax.Array]], dict[str, jax.Array]] | None:
        """The site dict plus the model's deterministic sites; ``None`` when there are none
        to add (identity)."""
        if self._model is None or not self._has_deterministic:
            return None
        kwargs = {} if model_kwargs is None else dict(model_kwargs)
        model = self._model

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


def _check_scalar_potential(log_joint: SiteLogJoint, layout: SiteLayout, kernel_name: str) -> None:
    try:
        log_p = jax.eval_shape(
            flat_log_density(log_joint, layout),
            jax.ShapeDtypeStruct((layout.num_coords,), jnp.int32),
        )
    except (TypeError, IndexError):
        return  # integer values do not trace here; the first evaluation will tell
    if log_p.shape != ():
        raise ValueError(
            f"{kernel_name}: `potential_fn` must return a scalar (the potential energy of one "
            f"state of sites {list(layout.names)}), but it returns shape {log_p.shape}; sum "
            "over the sites' elements, e.g. `jnp.sum(...)`."
        )


def _resolve_weights(
    weights: WeightsArgument, log_joint: SiteLogJoint, layout: SiteLayout, kernel_name: str
) -> dict[str, str]:
    """Per site, ``"gradient"`` or ``"exact"``: ``"auto"`` is exact for categorical sites
    (unordered values: a gradient in the value means nothing) and for sites the log density
    cannot be differentiated in (a value used as an index), the gradient otherwise."""
    if isinstance(weights, Mapping):
        unknown = sorted(set(weights) - set(layout.names))
        if unknown:
            raise ValueError(
                f"{kernel_name}: `weights` names sites {unknown} that it does not sample; its "
                f"sites are {list(layout.names)}."
            )
        requested = {site: weights.get(site, "auto") for site in layout.names}
    else:
        requested = dict.fromkeys(layout.names, weights)
    modes = {}
    for site, support in zip(layout.names, layout.supports, strict=True):
        mode = requested[site]
        if mode == "auto" and support.kind == SupportKind.CATEGORICAL:
            mode = "exact"
        elif mode != "exact":
            available = gradient_is_available(log_joint, layout, site)
            if mode == "gradient" and not available:
                raise ValueError(
                    f"{kernel_name}: the log density cannot be differentiated in the values "
                    f"of site {site!r} (a value used as an index, e.g. `locs[{site}]`, or in "
                    f"an integer-only operation). Use `weights='exact'` or "
                    f"`weights='auto'` (or `weights={{{site!r}: 'exact'}}`)."
                )
            mode = "gradient" if available else "exact"
        modes[site] = mode
    return modes
