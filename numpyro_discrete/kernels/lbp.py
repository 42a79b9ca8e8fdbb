"""numpyro kernels for the locally balanced path proposal: :class:`LBP` (fixed path length)
and :class:`ALBP` (path length adapted during warmup)."""

from collections.abc import Callable, Mapping
import copy
from numbers import Real
from typing import Any, NamedTuple
import warnings

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro.handlers import seed, substitute, trace
from numpyro.infer.gibbs import conditioned, latent_sample_sites, prototype_trace
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import _prepare_model_for_potential
from numpyro.util import identity, is_prng_key

from numpyro_discrete.core import adaptation, path
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.core.local_ratios import Neighbourhood, coordinate_neighbourhood
from numpyro_discrete.model.layout import (
    SiteLayout,
    SiteSupport,
    discrete_sites,
    layout_from_params,
    layout_from_trace,
)
from numpyro_discrete.model.potential import (
    WEIGHT_MODES,
    flat_log_density,
    gradient_is_available,
    local_fn_for,
    model_log_joint,
    potential_log_joint,
)

__all__ = ["ALBP", "LBP", "LBPState"]


class LBPState(NamedTuple):
    """
    State of :class:`LBP` and :class:`ALBP`.

    - **i** - iteration. Not reset after warmup: adaptation runs while ``i < num_warmup``.
    - **z** - dict of the current values of the discrete sites, in the model's dtypes.
    - **potential_energy** - potential energy ``-log pi(z)`` under the current conditioning.
    - **log_ratios** - cached ``(N, M)`` table of local log-ratios at ``z`` (gradient or
      exact, see ``weights``); ``N`` flat coordinates, ``M`` candidate values each.
    - **accept_prob** - acceptance probability ``min(1, A)`` of this step's proposal.
    - **mean_accept_prob** - mean acceptance probability, restarted after warmup.
    - **num_flips** - the real path-length scale ``R_t``; each step uses its probabilistic
      rounding (mean ``R_t``). Constant for :class:`LBP`, adapted during warmup and frozen
      after it for :class:`ALBP`.
    - **mean_num_flips** - average of ``R_t`` over the second half of warmup, the value
      :class:`ALBP` freezes ``R_t`` at when warmup ends (equal to ``num_flips`` for LBP).
    - **num_changed** - number of coordinates this step changed (0 when rejected).
    - **rng_key** - random key for the next step.
    """

    i: jax.Array
    z: dict[str, jax.Array]
    potential_energy: jax.Array
    log_ratios: jax.Array
    accept_prob: jax.Array
    mean_accept_prob: jax.Array
    num_flips: jax.Array
    mean_num_flips: jax.Array
    num_changed: jax.Array
    rng_key: jax.Array


def _site_summary(model_trace: Mapping[str, Any], names: list[str]) -> str:
    return ", ".join(f"{name!r} ({type(model_trace[name]['fn']).__name__})" for name in names)


class LBP(MCMCKernel):
    """
    Locally balanced proposal with an auxiliary path of ``R`` distinct coordinates (LBP-R)
    for the discrete latent sites of a model [1, 2]: binary, categorical and integer-valued
    (ordinal) sites, in any mix of shapes. Each step draws ``R`` coordinates without
    replacement with probability proportional to their locally balanced weights
    ``sum_v g(pi(x^{j<-v}) / pi(x))`` (estimated from one gradient, or computed exactly),
    moves each to a new value ``v`` drawn in proportion to its own weight, and applies a
    Metropolis-Hastings correction over the path. ``R = 1`` is Gibbs-with-Gradients [3].
    New values: a binary coordinate flips; a categorical one takes any other category; an
    ordinal one moves within ``ordinal_window`` of its value, inside its support. Each step
    costs two evaluations of the log density with its gradient (plus, for sites with exact
    weights, one batched evaluation per neighbour). For ``R`` tuned automatically, use
    :class:`ALBP`.

    **References:**

    1. *Path Auxiliary Proposal for MCMC in Discrete Space*, Haoran Sun, Hanjun Dai, Wei Xia,
       Arun Ramamurthy (2021)
    2. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
       Hanjun Dai, Dale Schuurmans (2022)
    3. *Oops I Took A Gradient: Scalable Sampling for Discrete Distributions*, Will
       Grathwohl, Kevin Swersky, Milad Hashemi, David Duvenaud, Chris J. Maddison (2021)

    :param model: Python callable containing numpyro primitives; all its latent sample
        sites must be discrete and univariate (``Bernoulli``, ``Categorical``,
        ``Binomial``, ``DiscreteUniform``, ``Poisson``, ``Geometric``, ...), except those
        marked ``infer={"enumerate": "parallel"}``, which are summed out.
    :param potential_fn: instead of `model`, a callable returning the potential energy
        (minus the log density) of a dict of integer arrays; ``init_params`` of
        :meth:`~numpyro.infer.MCMC.run` gives their shapes and initial values. Sites are
        binary unless `supports` says otherwise. It receives float-cast values for the
        sites whose weights come from the gradient.
    :param int num_flips: path length ``R``, the number of coordinates changed per step.
    :param str balancing: ``"sqrt"`` (``g(t) = sqrt(t)``) or ``"barker"``
        (``g(t) = t / (1 + t)``).
    :param weights: how local ratios are computed: ``"gradient"`` (first-order Taylor
        expansion of the float-relaxed log density, one gradient per state), ``"exact"``
        (every single-coordinate change evaluated, ``sum_j (|S_j| - 1)`` batched
        evaluations per state) or ``"auto"``; one mode for all sites or a dict per site
        name. ``"auto"`` decides per site at ``init``: exact for categorical sites (their
        values are unordered, so a gradient in the value means nothing) and for sites the
        model cannot be differentiated in (a value used as an index, ``locs[z]``), the
        gradient otherwise. The choice is reported by :attr:`weights_mode` (a dict
        ``{site: "gradient" | "exact"}``) after ``init``. A binary or ordinal site used only
        through comparisons (``z == 1``) has a zero gradient: give it ``"exact"``.
    :param int ordinal_window: half-width of the window of new values around the current
        value of an ordinal coordinate.
    :param dict supports: with `potential_fn` only, the :class:`SiteSupport` of sites that
        are not binary, e.g. ``{"s": SiteSupport.categorical(3)}``.

    **Example**

    .. doctest::

        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import LBP
        ...
        >>> def model():
        ...     numpyro.sample("x", dist.Bernoulli(0.3).expand([50]))
        ...
        >>> mcmc = MCMC(LBP(model, num_flips=5), num_warmup=200, num_samples=2000,
        ...             progress_bar=False)
        >>> mcmc.run(jax.random.key(0))
        >>> x = mcmc.get_samples()["x"]
        >>> x.dtype.kind
        'i'
        >>> assert abs(x.mean() - 0.3) < 0.02
    """

    sample_field = "z"

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        num_flips: int = 1,
        balancing: str = "sqrt",
        weights: str | Mapping[str, str] = "auto",
        ordinal_window: int = 1,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        name = type(self).__name__
        if (model is None) == (potential_fn is None):
            raise ValueError(f"{name} needs exactly one of `model` or `potential_fn`.")
        expected = {
            "model": "a numpyro model function",
            "potential_fn": "a function of a dict of site values returning the potential energy",
        }
        for arg, value in (("model", model), ("potential_fn", potential_fn)):
            if value is not None and not callable(value):
                raise TypeError(
                    f"{name}: `{arg}` must be {expected[arg]}, got {type(value).__name__} "
                    f"{value!r}."
                )
        if supports is not None and model is not None:
            raise ValueError(
                f"{name}: `supports` is for `potential_fn` only; with a model, supports "
                "are read from the distributions of its sites."
            )
        if supports is not None and not all(
            isinstance(support, SiteSupport) for support in dict(supports).values()
        ):
            raise ValueError(
                f"{name}: `supports` must map site names to `SiteSupport` objects, e.g. "
                "`{'s': SiteSupport.categorical(3), 'n': SiteSupport.ordinal(0, None)}`."
            )
        if not isinstance(ordinal_window, (int, np.integer)) or ordinal_window < 1:
            raise ValueError(
                f"{name}: `ordinal_window` must be an integer >= 1 (the largest change of an "
                f"ordinal coordinate in one move), got {ordinal_window!r}."
            )
        if not isinstance(num_flips, (int, np.integer)) or num_flips < 1:
            raise ValueError(
                f"{name}: `num_flips` must be an integer >= 1 (the number of coordinates "
                f"changed per step), got {num_flips!r}."
            )
        get_balancing(balancing)
        modes = weights.values() if isinstance(weights, Mapping) else [weights]
        if not all(isinstance(mode, str) and mode in WEIGHT_MODES for mode in modes):
            raise ValueError(
                f"{name}: unknown `weights={weights!r}`; choose one of {list(WEIGHT_MODES)}, "
                "or a dict mapping site names to them."
            )
        self._model = model
        self._potential_fn = potential_fn
        self._num_flips = int(num_flips)
        self._balancing = balancing
        self._weights = dict(weights) if isinstance(weights, Mapping) else weights
        self._ordinal_window = int(ordinal_window)
        self._supports = None if supports is None else dict(supports)
        self._reset_init()

    def _reset_init(self) -> None:
        # static metadata resolved at `init`
        self._layout: SiteLayout | None = None
        self._enum = False
        self._has_deterministic = False
        self._num_warmup = 0
        self.weights_mode: dict[str, str] | None = None
        # closures rebuilt at every `init` (dropped when pickling)
        self._neighbourhood: Neighbourhood | None = None
        self._prepared_model: Callable | None = None
        self._step: Callable | None = None
        self._sample_fn: Callable | None = None

    # --- hooks that ALBP overrides ------------------------------------------------------

    def _max_path_length(self, layout: SiteLayout) -> int:
        num_coords = layout.num_coords
        if self._num_flips > num_coords:
            raise ValueError(
                f"LBP: `num_flips={self._num_flips}` exceeds the number of discrete "
                f"coordinates ({num_coords}); use `num_flips <= {num_coords}`."
            )
        unit_steps = all(
            support.kind == "binary" or (support.kind == "ordinal" and self._ordinal_window == 1)
            for support in layout.supports
        )
        if self._num_flips % 2 == 0 and unit_steps:
            # every step moves exactly R coordinates by +-1, so sum(x) mod 2 never changes
            warnings.warn(
                f"LBP with an even `num_flips={self._num_flips}` on binary sites (or ordinal "
                "sites with `ordinal_window=1`) never changes the parity of the sum of the "
                "values, so the chain cannot leave the half of the state space it starts "
                "in. Use an odd `num_flips`, a larger `ordinal_window`, or ALBP.",
                stacklevel=2,
            )
        return self._num_flips

    def _build_step(self) -> Callable:
        """The core transition kernel, built at ``init`` once the layout is known."""
        buckets = path.path_size_buckets(self._max_path_length(self._layout))
        return path.build_kernel(get_balancing(self._balancing), self._neighbourhood, buckets)

    def _initial_scale(self) -> float:
        return float(self._num_flips)

    def _adapt_scale(
        self, state: "LBPState", accept_prob: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        return state.num_flips, state.mean_num_flips

    # --- numpyro protocol ---------------------------------------------------------------

    @property
    def model(self) -> Callable | None:
        return self._model

    @property
    def default_fields(self) -> tuple[str, ...]:
        return ("z",)

    def get_diagnostics_str(self, state: LBPState) -> str:
        return f"acc. prob={float(state.mean_accept_prob):.2f}, R={float(state.num_flips):.1f}"

    def _log_joint(self, model_args: tuple, model_kwargs: Mapping | None) -> Callable:
        if self._model is None:
            return potential_log_joint(self._potential_fn)
        return model_log_joint(self._prepared_model, model_args, model_kwargs, self._enum)

    def _local_fn(self, model_args: tuple, model_kwargs: Mapping | None) -> Callable:
        return local_fn_for(
            self.weights_mode,
            self._log_joint(model_args, model_kwargs),
            self._layout,
            self._neighbourhood,
        )

    def _setup_model(
        self, rng_key: jax.Array, model_args: tuple, model_kwargs: dict
    ) -> Mapping[str, Any]:
        name = type(self).__name__
        model = conditioned(self._model)
        model_trace = prototype_trace(model, rng_key, model_args, model_kwargs)
        sites = discrete_sites(model_trace)
        enumerated = [
            site
            for site in latent_sample_sites(model_trace)
            if model_trace[site]["infer"].get("enumerate", "") == "parallel"
        ]
        continuous = [
            site
            for site in latent_sample_sites(model_trace)
            if site not in sites and site not in enumerated
        ]
        if not sites:
            raise ValueError(
                f"{name} found no discrete latent sites in the model (sites marked "
                "`infer={'enumerate': 'parallel'}` are summed out, not sampled). Use NUTS "
                "for models without discrete latent variables."
            )
        if continuous:
            raise ValueError(
                f"{name} samples discrete sites only, but the model has continuous latent "
                f"sites {_site_summary(model_trace, continuous)}. Sample them beside "
                f"{name} with numpyro's Gibbs: `Gibbs([({name}(model), "
                "discrete_latent_sites), (NUTS(model), None)])` (from numpyro.infer and "
                "numpyro.infer.gibbs), or condition the model on them."
            )
        self._layout = layout_from_trace(model_trace, sites, name)
        self._enum = bool(enumerated)
        self._has_deterministic = any(
            site["type"] == "deterministic" for site in model_trace.values()
        )
        self._prepared_model = _prepare_model_for_potential(model, model_trace, enum=self._enum)
        return model_trace

    def _resolve_weights(self, model_args: tuple, model_kwargs: Mapping | None) -> None:
        name = type(self).__name__
        layout = self._layout
        requested = self._weights
        if isinstance(requested, dict):
            unknown = sorted(set(requested) - set(layout.names))
            if unknown:
                raise ValueError(
                    f"{name}: `weights` names sites {unknown} that it does not sample; its "
                    f"sites are {list(layout.names)}."
                )
            requested = {site: requested.get(site, "auto") for site in layout.names}
        else:
            requested = dict.fromkeys(layout.names, requested)
        log_joint = self._log_joint(model_args, model_kwargs)
        modes = {}
        for site, support in zip(layout.names, layout.supports, strict=True):
            mode = requested[site]
            if mode == "auto" and support.kind == "categorical":
                mode = "exact"
            elif mode != "exact":
                available = gradient_is_available(log_joint, layout, site)
                if mode == "gradient" and not available:
                    raise ValueError(
                        f"{name}: the log density cannot be differentiated in the values of "
                        f"site {site!r} (a value used as an index, e.g. `locs[{site}]`, or in "
                        f"an integer-only operation). Use `weights='exact'` or "
                        f"`weights='auto'` (or `weights={{{site!r}: 'exact'}}`)."
                    )
                mode = "gradient" if available else "exact"
            modes[site] = mode
        self.weights_mode = modes

    def _initial_values(
        self,
        rng_key: jax.Array,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: dict,
    ) -> jax.Array:
        """Flat initial vector: `init_params` where given, a prior draw elsewhere."""
        layout = self._layout
        values = dict(init_params or {})
        unknown = sorted(set(values) - set(layout.names))
        if unknown:
            raise ValueError(
                f"`init_params` has sites {unknown} that {type(self).__name__} does not "
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
            model_trace = prototype_trace(
                conditioned(self._model), rng_key, model_args, model_kwargs
            )
            values.update({name: model_trace[name]["value"] for name in missing})
        return layout.flatten(values)

    def _init_one(
        self,
        rng_key: jax.Array,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: dict,
    ) -> LBPState:
        key_values, key_chain = random.split(rng_key)
        position = self._initial_values(key_values, init_params, model_args, model_kwargs)
        local_fn = self._local_fn(model_args, model_kwargs)
        # one compiled program: run eagerly, the model's log density and its gradient (or
        # the vmapped exact ratios) would compile hundreds of small ops one by one
        core = jax.jit(lambda x: path.init(x, local_fn))(position)
        float_dtype = jnp.result_type(float)
        return LBPState(
            i=jnp.array(0),
            z=self._layout.unflatten(core.position),
            potential_energy=-core.log_density,
            log_ratios=core.log_ratios,
            accept_prob=jnp.zeros((), float_dtype),
            mean_accept_prob=jnp.zeros((), float_dtype),
            num_flips=jnp.asarray(self._initial_scale(), float_dtype),
            mean_num_flips=jnp.asarray(self._initial_scale(), float_dtype),
            num_changed=jnp.array(0),
            rng_key=key_chain,
        )

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> LBPState:
        self._num_warmup = num_warmup
        model_kwargs = {} if model_kwargs is None else dict(model_kwargs)
        batched = not is_prng_key(rng_key)
        if self._model is not None:
            key_trace = rng_key[0] if batched else rng_key
            self._setup_model(random.fold_in(key_trace, 1), model_args, model_kwargs)
        else:
            self._layout = layout_from_params(
                init_params, type(self).__name__, int(batched), self._supports
            )
            self._check_potential_shape()
        if self._layout.num_coords == 0:
            shapes = dict(zip(self._layout.names, self._layout.shapes, strict=True))
            raise ValueError(
                f"{type(self).__name__}: the discrete sites have no coordinates (site shapes "
                f"{shapes}), so there is nothing to sample. Give a site a non-empty shape."
            )
        outside = self._layout.out_of_support(init_params or {})
        if outside:
            raise ValueError(
                f"`init_params` has values outside the support of sites "
                f"{', '.join(outside)}; give each site values its distribution can produce."
            )
        self._neighbourhood = coordinate_neighbourhood(
            *self._layout.coordinate_supports(), window=self._ordinal_window
        )
        self._resolve_weights(model_args, model_kwargs)
        self._step = self._build_step()
        if batched:
            state = jax.vmap(self._init_one, in_axes=(0, 0, None, None))(
                rng_key, init_params, model_args, model_kwargs
            )
            self._sample_fn = jax.vmap(self._sample_one, in_axes=(0, None, None))
        else:
            state = self._init_one(rng_key, init_params, model_args, model_kwargs)
            self._sample_fn = self._sample_one
        self._check_initial_state(state)
        return state

    def _check_potential_shape(self) -> None:
        try:
            log_p = jax.eval_shape(
                flat_log_density(self._log_joint((), None), self._layout),
                jax.ShapeDtypeStruct((self._layout.num_coords,), jnp.int32),
            )
        except (TypeError, IndexError):
            return  # integer values do not trace here; the first evaluation will tell
        if log_p.shape != ():
            raise ValueError(
                f"{type(self).__name__}: `potential_fn` must return a scalar (the potential "
                f"energy of one state of sites {list(self._layout.names)}), but it returns "
                f"shape {log_p.shape}; sum over the sites' elements, e.g. `jnp.sum(...)`."
            )

    def _check_initial_state(self, state: LBPState) -> None:
        potential = state.potential_energy
        if isinstance(potential, jax.core.Tracer) or np.all(np.isfinite(potential)):
            return
        raise ValueError(
            f"{type(self).__name__}: the potential energy is "
            f"{np.ravel(np.asarray(potential)).tolist()} at the initial values of sites "
            f"{list(self._layout.names)}, so the chain cannot start there. Pass "
            "`init_params` (to `MCMC.run`) with values of positive probability."
        )

    def _sample_one(
        self,
        state: LBPState,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> LBPState:
        key_next, key_round, key_step = random.split(state.rng_key, 3)
        path_length = adaptation.round_path_length(key_round, state.num_flips)
        core = path.PathState(
            self._layout.flatten(state.z), -state.potential_energy, state.log_ratios
        )
        core, info = self._step(
            key_step, core, self._local_fn(model_args, model_kwargs), path_length
        )
        num_flips, mean_num_flips = self._adapt_scale(state, info.acceptance_rate)
        itr = state.i + 1
        mean_accept_prob = self._mean_accept_prob(state, info.acceptance_rate)
        return LBPState(
            i=itr,
            z=self._layout.unflatten(core.position),
            potential_energy=-core.log_density,
            log_ratios=core.log_ratios,
            accept_prob=info.acceptance_rate,
            mean_accept_prob=mean_accept_prob,
            num_flips=num_flips,
            mean_num_flips=mean_num_flips,
            num_changed=info.num_changed,
            rng_key=key_next,
        )

    def _mean_accept_prob(self, state: Any, accept_prob: jax.Array) -> jax.Array:
        """Running mean of the acceptance, restarted when warmup ends."""
        itr = state.i + 1
        n = jnp.where(state.i < self._num_warmup, itr, itr - self._num_warmup)
        return state.mean_accept_prob + (accept_prob - state.mean_accept_prob) / n

    def sample(
        self,
        state: LBPState,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> LBPState:
        """One LBP-R step (and, for :class:`ALBP` during warmup, one update of ``R_t``)."""
        if self._sample_fn is None:
            raise RuntimeError(f"{type(self).__name__}: call `init` before `sample`.")
        return self._sample_fn(state, model_args, model_kwargs)

    def refresh(
        self,
        state: LBPState,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> LBPState:
        """Recompute the potential energy and local log-ratios at ``state.z`` under the
        conditioning in `model_kwargs` (one evaluation with gradient, or ``N`` exact ones)."""
        log_p, log_ratios = self._local_fn(model_args, model_kwargs)(self._layout.flatten(state.z))
        return state._replace(potential_energy=-log_p, log_ratios=log_ratios)

    def wrap_model(self, wrapper: Callable[[Callable], Callable]) -> "LBP":
        """A copy of this kernel on ``wrapper(model)``; static metadata is resolved again."""
        if self._model is None:
            raise ValueError(
                f"{type(self).__name__} built from `potential_fn` has no model to wrap; "
                "build it from a model to use it as a block of numpyro's Gibbs."
            )
        kernel = copy.copy(self)
        kernel._model = wrapper(self._model)
        kernel._reset_init()
        return kernel

    def get_constrain_fn(
        self, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> Callable:
        """Identity: discrete values are already constrained."""
        return identity

    def postprocess_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Callable:
        """Identity on the discrete sites, plus the model's deterministic sites if any."""
        if self._model is None or not self._has_deterministic:
            return identity
        model_kwargs = {} if model_kwargs is None else model_kwargs
        model = conditioned(self._model)

        def fn(z: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
            replay = substitute(seed(model, random.key(0)), data=dict(z))
            model_trace = trace(replay).get_trace(*model_args, **model_kwargs)
            deterministic = {
                name: site["value"]
                for name, site in model_trace.items()
                if site["type"] == "deterministic"
            }
            return {**z, **deterministic}

        return fn

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_prepared_model"] = None
        state["_neighbourhood"] = None
        state["_step"] = None
        state["_sample_fn"] = None
        return state


class ALBP(LBP):
    """
    Adaptive locally balanced proposal [1]: :class:`LBP` whose path length is tuned during
    warmup so that the acceptance rate reaches `target_accept_prob` (0.574 is optimal for
    locally balanced proposals: the optimal ``R`` then grows like ``N^(2/3)``). The
    real-valued scale ``R_t`` follows ``R_{t+1} = clip(R_t + a_t - target, 1, R_max)``
    during warmup (Alg. 2) and is frozen after it, at its average over the second half of
    warmup (the recursion's gain is constant, so the last iterate alone is noisy); every
    step uses the path length ``floor(R_t) + Bernoulli(R_t - floor(R_t))``, so that each
    post-warmup step is an exact mixture of LBP-R kernels.

    **References:**

    1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
       Hanjun Dai, Dale Schuurmans (2022)
    2. *Path Auxiliary Proposal for MCMC in Discrete Space*, Haoran Sun, Hanjun Dai, Wei Xia,
       Arun Ramamurthy (2021)

    :param model: as in :class:`LBP`.
    :param potential_fn: as in :class:`LBP`.
    :param float target_accept_prob: target acceptance rate of the adaptation, in (0, 1).
    :param float init_num_flips: initial scale ``R_1 >= 1``.
    :param int max_num_flips: upper bound ``R_max`` of the scale; defaults to the number of
        discrete coordinates. It is also the static bound of the path sampler.
    :param str balancing: as in :class:`LBP`.
    :param weights: as in :class:`LBP`.
    :param int ordinal_window: as in :class:`LBP`.
    :param dict supports: as in :class:`LBP`.

    **Example**

    .. doctest::

        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import ALBP
        ...
        >>> def model():
        ...     numpyro.sample("x", dist.Bernoulli(0.3).expand([400]))
        ...
        >>> mcmc = MCMC(ALBP(model), num_warmup=500, num_samples=1000, progress_bar=False)
        >>> mcmc.run(jax.random.key(0), extra_fields=("accept_prob", "num_flips"))
        >>> extra = mcmc.get_extra_fields()
        >>> assert 0.45 < extra["accept_prob"].mean() < 0.7
        >>> assert extra["num_flips"].min() == extra["num_flips"].max() > 5  # frozen
        >>> assert abs(mcmc.get_samples()["x"].mean() - 0.3) < 0.01
    """

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        target_accept_prob: float = 0.574,
        init_num_flips: float = 1.0,
        max_num_flips: int | None = None,
        balancing: str = "sqrt",
        weights: str | Mapping[str, str] = "auto",
        ordinal_window: int = 1,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        if not isinstance(target_accept_prob, Real) or not 0.0 < target_accept_prob < 1.0:
            raise ValueError(
                f"ALBP: `target_accept_prob` must lie in (0, 1), got {target_accept_prob!r}."
            )
        if not isinstance(init_num_flips, Real) or not init_num_flips >= 1.0:
            raise ValueError(f"ALBP: `init_num_flips` must be >= 1, got {init_num_flips!r}.")
        if max_num_flips is not None and (
            not isinstance(max_num_flips, (int, np.integer)) or max_num_flips < 1
        ):
            raise ValueError(
                f"ALBP: `max_num_flips` must be None or an integer >= 1, got {max_num_flips!r}."
            )
        if max_num_flips is not None and init_num_flips > max_num_flips:
            raise ValueError(
                f"ALBP: `init_num_flips={init_num_flips}` exceeds `max_num_flips={max_num_flips}`."
            )
        super().__init__(
            model,
            potential_fn,
            balancing=balancing,
            weights=weights,
            ordinal_window=ordinal_window,
            supports=supports,
        )
        self._target_accept_prob = float(target_accept_prob)
        self._init_num_flips = float(init_num_flips)
        self._max_num_flips = None if max_num_flips is None else int(max_num_flips)
        self._max_scale = 1

    def _max_path_length(self, layout: SiteLayout) -> int:
        num_coords = layout.num_coords
        bound = num_coords if self._max_num_flips is None else self._max_num_flips
        self._max_scale = min(bound, num_coords)
        return self._max_scale

    def _initial_scale(self) -> float:
        return min(self._init_num_flips, self._max_scale)

    def _adapt_scale(self, state: LBPState, accept_prob: jax.Array) -> tuple[jax.Array, jax.Array]:
        # Alg. 2: Robbins-Monro on R_t during warmup only; frozen afterwards (a select of
        # scalars: cheaper than a branch)
        adapted = adaptation.adapt_scale(
            state.i,
            state.num_flips,
            state.mean_num_flips,
            accept_prob,
            self._num_warmup,
            self._target_accept_prob,
            self._max_scale,
        )
        in_warmup = state.i < self._num_warmup
        return (
            jnp.where(in_warmup, adapted[0], state.num_flips),
            jnp.where(in_warmup, adapted[1], state.mean_num_flips),
        )
