"""The base of every discrete kernel: what :class:`~numpyro_discrete.LBP`,
:class:`~numpyro_discrete.ALBP`, :class:`~numpyro_discrete.ACS` and
:class:`~numpyro_discrete.DMALA` share as numpyro ``MCMCKernel``s. It checks the common
arguments, builds the :class:`~numpyro_discrete.model.target.DiscreteTarget` at ``init``,
initialises one chain or a batch of them (``vmap``), and implements numpyro's protocol
(``sample``, ``refresh`` and ``wrap_model`` for Gibbs blocks, ``postprocess_fn``, pickling).
A kernel adds three things, where its paper differs: :meth:`DiscreteKernel._setup` (its core
transition), :meth:`DiscreteKernel._init_state` and :meth:`DiscreteKernel._step`; a kernel that
evaluates something else than local ratios (the terms of ``log pi``) also overrides
:meth:`DiscreteKernel._density` and :meth:`DiscreteKernel._core_init`.
"""

from collections.abc import Callable, Collection, Mapping
import copy
from typing import Any, NamedTuple

import jax
from jax import random
import jax.numpy as jnp

from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity, is_prng_key

from numpyro_discrete.core import state as core_state
from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.kernels.arguments import (
    check_kernel_arguments,
    one_eager_chain,
)
from numpyro_discrete.kernels.loop_checks import loop_checks_enabled
from numpyro_discrete.kernels.stuck_coordinates import StuckCoordinateWatch
from numpyro_discrete.model.errors import named_model_errors
from numpyro_discrete.model.initial_values import (
    check_init_params,
    check_initial_log_density,
    initial_position,
)
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.sites import kept_for, same_objects
from numpyro_discrete.model.target import DiscreteTarget, model_target
from numpyro_discrete.numpyro_internals import SAMPLE_FN_ATTRIBUTE

__all__ = ["DiscreteKernel"]


class DiscreteKernel(MCMCKernel):
    """
    Base of the discrete kernels (not a kernel itself).

    :param model: Python callable containing numpyro primitives.
    :param potential_fn: instead of `model`, the potential energy of a dict of integer arrays.
    :param weights: ``"gradient"``, ``"exact"`` or ``"auto"``, or a dict per site.
    :param int ordinal_window: half-width of the window of new values of ordinal
        coordinates; ``None`` for moves in the units of each site (a ladder of distances
        from 1 to twice the site's scale, see :mod:`~numpyro_discrete.model.move_scales`).
    :param dict supports: with `potential_fn` only, the :class:`SiteSupport` of sites that
        are not binary.
    """

    sample_field = "z"
    # the core state the transition carries; its fields after `position` and `log_density`
    # are the kernel state's fields of the same names
    core_state_type: type[NamedTuple] = core_state.State
    # whether a step draws every coordinate once from an exact conditional, its own or its
    # block's (a Gibbs sweep: the stuck-coordinate check bounds a coordinate's expected
    # changes by its own rate)
    _sweeps = False

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        weights: str | Mapping[str, str] = "auto",
        ordinal_window: int | None = None,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        check_kernel_arguments(
            type(self).__name__, model, potential_fn, weights, ordinal_window, supports
        )
        self._model = model
        self._potential_fn = potential_fn
        self._weights = dict(weights) if isinstance(weights, Mapping) else weights
        self._ordinal_window = None if ordinal_window is None else int(ordinal_window)
        self._supports = None if supports is None else dict(supports)
        self._reset_init()

    def _reset_init(self) -> None:
        """Forget what ``init`` resolved (a new model, or an unpickled kernel)."""
        self._target: DiscreteTarget | None = None
        self._handed_target: DiscreteTarget | None = None
        self._given_sites: frozenset[str] | None = None
        self._num_warmup = 0
        # the core transition, built by `_setup`
        self._transition: Callable | None = None
        # the stuck-coordinate check, and whether `sample` runs it (not when `init` ran
        # under `vmap`: a callable chain method, vectorized LBPGibbs)
        self._watch: StuckCoordinateWatch | None = None
        self._check_in_sample = True
        self._batched = False
        # what the target and transition were last set up for (`_set_up_arguments`), and
        # the last compiled core init with its arguments and transition (`kept_for`)
        self._set_up_for: tuple | None = None
        self._core_init_program: dict = {}
        setattr(self, SAMPLE_FN_ATTRIBUTE, None)

    # --- what a kernel adds ---------------------------------------------------------------

    def _setup(self, target: DiscreteTarget) -> None:
        """Check the kernel's arguments against `target` and build its core transition,
        ``self._transition`` (``self._num_warmup`` is set)."""
        raise NotImplementedError

    def _init_state(self, rng_key: jax.Array, state: core_state.State) -> NamedTuple:
        """The kernel's state at the core `state`, with `rng_key` for its next step."""
        raise NotImplementedError

    def _step(self, state: NamedTuple, position: core_state.State, local_fn: LocalFn) -> NamedTuple:
        """One step from `state`, whose core state is `position`; `local_fn` is what
        :meth:`_density` returns."""
        raise NotImplementedError

    def _stuck_advice(self, site: str) -> str:
        """What to try for a stuck coordinate of `site` (the warning's last sentence)."""
        if self._target.weights_mode.get(site) == "gradient":
            return (
                f"Its moves are ranked by gradient ratios, which can be far from the exact "
                f"ones on this site: try `weights={{{site!r}: 'exact'}}` or ChromaticGibbs."
            )
        return "Try ChromaticGibbs (exact conditionals), or a longer run."

    def _density(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Callable:
        """What the step evaluates under the arguments and conditioning given: the local
        log-ratio function."""
        return self._target.local_fn(model_args, model_kwargs)

    def _core_init(self, position: jax.Array, density: Callable) -> core_state.State:
        """The core state at `position`, from what :meth:`_density` returns."""
        return core_state.init(position, density)

    def _compiled_core_init(
        self, position: jax.Array, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> core_state.State:
        """:meth:`_core_init` as one compiled program: run eagerly (at ``init``, and in
        ``refresh``, which numpyro's Gibbs calls at its ``init``), the model's log density and
        its gradient (or the vmapped exact ratios) would compile hundreds of small ops one by
        one."""

        # the same program for the same argument objects and transition (a later chain or
        # run): a new one would compile again, 0.2-0.4 s on a 50 x 50 lattice
        def program() -> Callable:
            density = self._density(model_args, model_kwargs)
            return jax.jit(lambda x: self._core_init(x, density))

        arguments = (model_args, model_kwargs, self._transition)
        return kept_for(self._core_init_program, arguments, program)(position)

    # --- numpyro protocol -----------------------------------------------------------------

    @property
    def model(self) -> Callable | None:
        return self._model

    @property
    def default_fields(self) -> tuple[str, ...]:
        return ("z",)

    @property
    def num_colours(self) -> int | None:
        """The number of colour classes of the model's interaction graph, detected at
        ``init`` (``N`` when every coordinate interacts with every other, or when the
        structure could not be detected); ``None`` before ``init``."""
        return None if self._target is None else self._target.num_colours

    @property
    def weights_mode(self) -> dict[str, str] | None:
        """Per site, ``"gradient"`` or ``"exact"``: how the local ratios are computed
        (``"auto"`` resolved at ``init``); ``None`` before ``init``."""
        return None if self._target is None else dict(self._target.weights_mode)

    def hand_target(self, target: DiscreteTarget) -> None:
        """Use `target`, built for the same model, arguments and weights by a caller that
        already read it (:class:`~numpyro_discrete.kernels.auto.AutoDiscrete`), at the next
        ``init`` instead of reading the model again."""
        self._handed_target = target

    def given_init_sites(self, sites: Collection[str]) -> None:
        """At the next ``init``, only `sites` of its ``init_params`` were given by the user;
        the others were drawn by the caller (numpyro's ``Gibbs`` passes a prior draw of
        every site) and are moved where their density is zero
        (:func:`~numpyro_discrete.model.feasible_start.feasible_start`), as sites missing
        from ``init_params`` are."""
        self._given_sites = frozenset(sites)

    def _build_target(
        self,
        rng_key: jax.Array,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: dict,
    ) -> DiscreteTarget:
        batched = not is_prng_key(rng_key)
        if self._model is not None:
            return model_target(
                self._model,
                rng_key,
                model_args,
                model_kwargs,
                weights=self._weights,
                ordinal_window=self._ordinal_window,
            )
        return DiscreteTarget.from_potential(
            self._potential_fn,
            init_params,
            batch_ndims=int(batched),
            supports=self._supports,
            weights=self._weights,
            ordinal_window=self._ordinal_window,
        )

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> NamedTuple:
        """Read the model (or ``potential_fn``) into the kernel's target and build the
        initial state of one chain, or of a batch of chains for a batch of keys; a
        :class:`~numpyro_discrete.model.errors.ModelError` names the kernel."""
        with named_model_errors(type(self).__name__):
            self._num_warmup = num_warmup
            model_kwargs = {} if model_kwargs is None else dict(model_kwargs)
            arguments = self._set_up_arguments(rng_key, (num_warmup, model_args, model_kwargs))
            set_up = (
                arguments is not None
                and self._handed_target is None
                and same_objects(self._set_up_for, arguments)
            )
            target = self._target if set_up else self._handed_target
            if target is None:
                target = self._build_target(rng_key, init_params, model_args, model_kwargs)
            self._handed_target = None
            self._init_given = self._given_sites
            self._given_sites = None
            check_init_params(target, init_params)
            if not set_up:
                self._target = target
                self._setup(target)
                self._watch = StuckCoordinateWatch(
                    target, num_warmup, type(self).__name__, self._stuck_advice, self._sweeps
                )
                self._set_up_for = arguments
            # under `vmap` the check's `lax.cond` would run at every step (its predicate is
            # batched); its name is the only way to tell a batching tracer
            self._check_in_sample = type(rng_key).__name__ != "BatchTracer"
            self._batched = not is_prng_key(rng_key)
            if is_prng_key(rng_key):
                state = self._init_one(rng_key, init_params, model_args, model_kwargs)
                sample_fn = self._sample_one
            else:
                # the batch's start as one compiled program: under `vmap` alone each of the
                # model's operations ran eagerly, batched, and compiled on its own
                state = jax.jit(
                    jax.vmap(
                        lambda key, params: self._init_one(key, params, model_args, model_kwargs)
                    )
                )(rng_key, init_params)
                sample_fn = jax.vmap(self._sample_one, in_axes=(0, None, None))
            check_initial_log_density(target.layout.names, -state.potential_energy)
            setattr(self, SAMPLE_FN_ATTRIBUTE, sample_fn)
            return state

    def _set_up_arguments(self, rng_key: jax.Array, arguments: tuple) -> tuple | None:
        """`arguments` (``num_warmup`` and the model's arguments) where a later ``init`` with
        the same objects can keep this one's target and transition, else ``None``. A model's
        target is read at one point whatever the chain
        (:func:`~numpyro_discrete.model.ratio_modes.reading_point`), so numpyro's next
        sequential chain, or a later run, would read the same target again (about a second
        for ``ALBP`` on a 50 x 50 lattice, its programs compiled again); not for a batch of
        chains or a traced key (``pmap``)."""
        return arguments if self._model is not None and one_eager_chain(rng_key) else None

    def _init_one(
        self,
        rng_key: jax.Array,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: dict,
    ) -> NamedTuple:
        key_values, key_chain = random.split(rng_key)
        target = self._target
        position = initial_position(
            target, key_values, init_params, model_args, model_kwargs, given=self._init_given
        )
        state = self._compiled_core_init(position, model_args, model_kwargs)
        return self._init_state(key_chain, state)

    def _core_state(self, state: NamedTuple) -> NamedTuple:
        """The core state of `state`: its flat position, ``log pi`` and whatever else the
        core state caches (the local-ratio table of the path and coordinate-wise kernels),
        held in the kernel's state under the same name."""
        core_type = self.core_state_type
        cached = {name: getattr(state, name) for name in core_type._fields[2:]}
        return core_type(self._target.flatten(state.z), -state.potential_energy, **cached)

    def _core_fields(self, core: NamedTuple) -> dict[str, Any]:
        """The kernel-state fields of the core state `core` (the inverse of
        :meth:`_core_state`)."""
        position, log_density, *cached = core
        return dict(
            z=self._target.unflatten(position),
            potential_energy=-log_density,
            **dict(zip(core._fields[2:], cached, strict=True)),
        )

    def _sample_one(
        self, state: NamedTuple, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> NamedTuple:
        density = self._density(model_args, model_kwargs)
        return self._step(state, self._core_state(state), density)

    def _initial_fields(self, rng_key: jax.Array, state: core_state.State) -> dict[str, Any]:
        """The fields every kernel state shares, at the start of a chain (with the core
        state's, see :meth:`_core_fields`)."""
        float_dtype = jnp.result_type(float)
        # strongly typed, as every step's fields are: a weakly typed initial state would make
        # the first step a program of its own (numpyro's progress-bar loop compiles its
        # step once per input type)
        return dict(
            i=jnp.zeros((), jnp.int32),
            **self._core_fields(state),
            accept_prob=jnp.zeros((), float_dtype),
            mean_accept_prob=jnp.zeros((), float_dtype),
            num_changed=jnp.zeros((), jnp.int32),
            mean_num_changed=jnp.zeros((), float_dtype),
            coordinates_changed=jnp.zeros(self._target.num_coords, bool),
            rng_key=rng_key,
        )

    def _step_fields(
        self,
        state: NamedTuple,
        new: core_state.State,
        info: core_state.Info,
        rng_key: jax.Array,
    ) -> dict[str, Any]:
        """The fields every kernel state shares, after a step from `state` to `new`."""
        # running means of the acceptance and of the coordinates changed, restarted when
        # warmup ends (n = 1 at the first sampling step)
        itr = state.i + 1
        n = jnp.where(state.i < self._num_warmup, itr, itr - self._num_warmup)
        mean_accept_prob = state.mean_accept_prob + (info.accept_prob - state.mean_accept_prob) / n
        # int32 as in the initial state, also where a count is int64 (64-bit mode)
        num_changed = jnp.asarray(info.num_changed, jnp.int32)
        mean_num_changed = state.mean_num_changed + (num_changed - state.mean_num_changed) / n
        return dict(
            i=itr,
            **self._core_fields(new),
            accept_prob=info.accept_prob,
            mean_accept_prob=mean_accept_prob,
            num_changed=num_changed,
            mean_num_changed=mean_num_changed,
            coordinates_changed=self._watch.coordinates_changed(state, new.position),
            rng_key=rng_key,
        )

    def sample(
        self, state: NamedTuple, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> NamedTuple:
        """One step of the kernel (adapting its parameters while ``i < num_warmup``)."""
        sample_fn = getattr(self, SAMPLE_FN_ATTRIBUTE)
        if sample_fn is None:
            raise RuntimeError(f"{type(self).__name__}: call `init` before `sample`.")
        state = sample_fn(state, model_args, model_kwargs)
        if self._checks_in_step():
            state = self._watch.check(state, model_args, model_kwargs, batched=self._batched)
            state = self._check_warmup_end(state)
        return state

    def _checks_in_step(self) -> bool:
        """Whether the step being traced compiles the in-run checks: not where ``init`` ran
        under ``vmap``, nor where :func:`~numpyro_discrete.kernels.loop_checks.enable_loop_checks`
        turned them off."""
        return self._check_in_sample and loop_checks_enabled()

    def _check_warmup_end(self, state: NamedTuple) -> NamedTuple:
        """`state` unchanged, after the kernel's own checks of its adaptation at the end of
        warmup (compiled in the step like the stuck-coordinate check)."""
        return state

    def refresh(
        self, state: NamedTuple, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> NamedTuple:
        """Recompute the potential energy (and the cached local log-ratios, if any) at
        ``state.z`` under the conditioning in `model_kwargs`."""
        new = self._compiled_core_init(self._target.flatten(state.z), model_args, model_kwargs)
        fields = self._core_fields(new)
        del fields["z"]
        return state._replace(**fields)

    def wrap_model(self, wrapper: Callable[[Callable], Callable]) -> "DiscreteKernel":
        """A copy of this kernel on ``wrapper(model)``; the target is built again at ``init``."""
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
        fn = None if self._target is None else self._target.postprocess_fn(model_args, model_kwargs)
        return identity if fn is None else fn

    def __getstate__(self) -> dict[str, Any]:
        # the target and the compiled step hold closures: rebuilt at the next `init`
        state = self.__dict__.copy()
        state["_target"] = None
        state[SAMPLE_FN_ATTRIBUTE] = None
        state["_transition"] = None
        state["_watch"] = None
        state["_set_up_for"] = None
        state["_core_init_program"] = {}
        return state
