"""numpyro kernel for models with discrete latent sites, continuous ones or not:
:class:`LBPGibbs`, the discrete sites moved by a discrete kernel (by default
:class:`~numpyro_discrete.AutoDiscrete`'s choice from the model's structure) and the
continuous ones by an inner ``HMC``/``NUTS``, one sweep of each per step, as a two-block
instance of numpyro's composable :class:`~numpyro.infer.gibbs.Gibbs`; a drop-in replacement
for numpyro's ``DiscreteHMCGibbs`` and ``MixedHMC``."""

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import jax
from jax import random

from numpyro.infer.gibbs import Gibbs, GibbsState, conditioned, with_conditioning
from numpyro.infer.hmc import HMC
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from numpyro_discrete.kernels.auto import AutoDiscrete
from numpyro_discrete.kernels.collapsed import CollapsedDraw, collapsed_sweep, summed_out_model
from numpyro_discrete.kernels.lbp import ALBP
from numpyro_discrete.kernels.lbp_gibbs_checks import check_arguments, check_model_sites
from numpyro_discrete.kernels.lbp_gibbs_state import LBPGibbsState
from numpyro_discrete.kernels.repeated import RepeatedKernel
from numpyro_discrete.model.chain_start import chain_start, compiled_once
from numpyro_discrete.model.initial_values import check_initial_log_density
from numpyro_discrete.model.layout import discrete_sites
from numpyro_discrete.model.sites import ModelSites, kept_for, same_objects
from numpyro_discrete.numpyro_internals import (
    SAMPLE_FN_ATTRIBUTE,
    set_block_kernel,
    use_gibbs_state_class,
)

__all__ = ["LBPGibbs", "LBPGibbsState"]


class LBPGibbs(Gibbs):
    """
    Locally balanced proposals within Gibbs, for models with discrete latent sites, with or
    without continuous ones. Each step runs one step of a discrete kernel on the discrete
    sites given the continuous ones, then one step of the inner ``HMC``/``NUTS`` [3] on the
    continuous sites given the discrete ones. By default the discrete kernel is chosen from
    the model's structure at ``init`` (:class:`~numpyro_discrete.kernels.auto.AutoDiscrete`):
    :class:`CollapsedDraw` where the discrete coordinates are independent given the
    continuous ones or form chains that share no term, such as an HMM's states (the sweep
    is then reversed: the inner kernel moves the continuous sites on their marginal, the
    discrete sites summed out, and the discrete sites are drawn exactly given the new
    values [5]), :class:`BlockGibbs` for chains that interact,
    :class:`ChromaticGibbs` where a sweep of exact conditionals is cheap, :class:`ALBP`
    (locally balanced path proposals whose length ``R`` is adapted during warmup [1, 2])
    for large dense models; :attr:`discrete_kernel` is the one chosen. Each block's cached
    potential and gradient (or local log-ratios) are recomputed when the other block
    has moved, so both are exact Metropolis-Hastings (or HMC) moves on their conditional and
    the sweep leaves the joint posterior invariant. Warmup adapts both: ``R`` of the discrete
    kernel, the step size and mass matrix of the inner kernel (each on its own conditional).

    It is the two-block composite
    ``Gibbs([(discrete_kernel, discrete_sites), (inner_kernel, None)])`` of numpyro's
    :class:`~numpyro.infer.gibbs.Gibbs`, like numpyro's
    :class:`~numpyro.infer.hmc_gibbs.DiscreteHMCGibbs` with its one-coordinate-at-a-time
    Gibbs sweep replaced by a gradient-informed multi-coordinate move, plus checks of the
    model at ``init`` and a state whose fields reach both blocks (see
    :class:`LBPGibbsState`). The progress bar shows both kernels' diagnostics. Sites marked
    ``infer={"enumerate": "parallel"}`` are summed out by both blocks.

    It accepts the models and the arguments of numpyro's ``DiscreteHMCGibbs(inner_kernel,
    random_walk=False, modified=False)`` and ``MixedHMC(inner_kernel,
    num_discrete_updates=None, random_walk=False, modified=False)``, so that either can be
    replaced by ``LBPGibbs(inner_kernel)`` in the same script; an argument that asks for
    something LBPGibbs does not do raises a ``ValueError`` that says what to use instead.
    A model whose latent sites are all discrete runs the discrete kernel alone: the inner
    kernel is neither initialised nor run (numpyro's kernels run it on no sites), the state
    has one block and ``diverging`` is always ``False``.

    .. note:: Every ``chain_method`` is supported. Under ``"vectorized"`` (and a callable
        such as ``jax.vmap``) each chain is initialised as one chain and the two-block
        sweep is batched with ``vmap``: each chain adapts its own ``R``, step size and mass
        matrix and draws what the sequential chain of the same key draws (up to the last
        bits of batched floating-point functions, which warmup's adaptation amplifies). A
        batched NUTS step lasts as long as the longest trajectory among the chains. Leave
        the inner kernel's ``find_heuristic_step_size=False``
        (its default): the heuristic would tune the step size to the initial discrete
        values only. Data subsampling (``numpyro.plate(..., subsample_size=...)``, numpyro's
        ``HMCECS``) is not supported: the moves need the full likelihood.

    **References:**

    1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
       Hanjun Dai, Dale Schuurmans (2022)
    2. *Path Auxiliary Proposal for MCMC in Discrete Space*, Haoran Sun, Hanjun Dai, Wei Xia,
       Arun Ramamurthy (2021)
    3. *The No-U-Turn Sampler: Adaptively Setting Path Lengths in Hamiltonian Monte Carlo*,
       Matthew D. Hoffman, Andrew Gelman (2014)
    4. *Peskun's theorem and a modified discrete-state Gibbs sampler*, Jun S. Liu (1996)
    5. *Partially Collapsed Gibbs Samplers: Theory and Methods*, David A. van Dyk,
       Taeyoung Park (2008)

    :param inner_kernel: a :class:`~numpyro.infer.hmc.HMC` or :class:`~numpyro.infer.hmc.NUTS`
        built from the model; it samples every latent site that is not discrete.
    :param discrete_kernel: ``"auto"`` (default; ``None`` means the same) to choose from the
        model's structure, or the kernel of the discrete sites, built on the same model
        callable (e.g. ``BlockGibbs(model)`` or ``ALBP(model, balancing="barker")``); any
        :class:`~numpyro.infer.mcmc.MCMCKernel` that implements ``refresh`` and
        ``wrap_model``.
    :param int num_discrete_steps: moves of the discrete kernel per step, before the one
        move of the inner kernel (default 1). A discrete move costs two model evaluations
        (with ``weights="gradient"``), a NUTS move tens of them, so several discrete moves
        per step are nearly free and let the discrete sites travel further between updates
        of the continuous ones, which is what limits the mixing of models whose discrete
        and continuous sites are strongly coupled (e.g. the factorial HMM). The fields of
        the discrete state are those of the last move; its adaptation counts every move.
    :param bool random_walk: numpyro's choice of uniform proposals over a site's values
        (``True``) instead of draws informed by its conditional. Only ``False`` is accepted:
        LBPGibbs's discrete moves are informed proposals.
    :param bool modified: numpyro's choice of the "modified" (Metropolised) Gibbs proposal,
        which never proposes a site's current value [4]. The moves of :class:`ALBP` never
        do either, so ``True`` makes :class:`ALBP` the discrete kernel (instead of the one
        chosen from the structure); with a `discrete_kernel` given, only ``False`` is
        accepted.
    :param num_discrete_updates: ``MixedHMC``'s number of one-site updates inside each HMC
        trajectory. Only ``None`` is accepted: LBPGibbs alternates whole moves; use
        `num_discrete_steps` for more discrete moves per step.
    :param int num_starts: where the discrete sites are summed out (:class:`CollapsedDraw`)
        and the inner kernel starts by ``init_to_uniform`` (its default), each chain draws
        this many such starts, descends each by 100 steps of Adam on the continuous sites'
        marginal and starts at the lowest (default 4; 1 starts where ``init_to_uniform``
        puts the chain). A marginal with local modes (mixtures, HMMs) traps a chain that
        starts in one: on the gallery's HMM 1 to 4 starts in 64 do, none of 16 bests
        of 4 did (:mod:`~numpyro_discrete.model.chain_start`).

    **Example**

    .. doctest::

        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC, NUTS
        >>> from numpyro_discrete import LBPGibbs
        ...
        >>> def model():
        ...     c = numpyro.sample("c", dist.Bernoulli(0.3))
        ...     numpyro.sample("x", dist.Normal(2.0 * c, 1.0))
        ...
        >>> mcmc = MCMC(LBPGibbs(NUTS(model)), num_warmup=500, num_samples=4000,
        ...             progress_bar=False)
        >>> mcmc.run(jax.random.key(0), extra_fields=("accept_prob", "hmc_state.num_steps"))
        >>> x = mcmc.get_samples()["x"]
        >>> # x is the mixture 0.7 N(0, 1) + 0.3 N(2, 1): mean 0.6, variance 1.84
        >>> assert abs(x.mean() - 0.6) < 0.15 and abs(x.var() - 1.84) < 0.3
        >>> sorted(mcmc.get_extra_fields())
        ['accept_prob', 'diverging', 'hmc_state.num_steps']
    """

    def __init__(
        self,
        inner_kernel: HMC,
        *,
        discrete_kernel: MCMCKernel | str | None = "auto",
        num_discrete_steps: int = 1,
        random_walk: bool = False,
        modified: bool = False,
        num_discrete_updates: int | None = None,
        num_starts: int = 4,
    ) -> None:
        model = check_arguments(
            inner_kernel,
            discrete_kernel,
            num_discrete_steps,
            random_walk,
            modified,
            num_discrete_updates,
            num_starts,
        )
        if discrete_kernel is None or discrete_kernel == "auto":
            # numpyro's `modified` Gibbs never proposes the current value: ALBP's moves
            discrete_kernel = ALBP(model) if modified else AutoDiscrete(model)
        self.num_discrete_steps = num_discrete_steps
        self.num_starts = num_starts
        if num_discrete_steps > 1:
            discrete_kernel = RepeatedKernel(discrete_kernel, num_discrete_steps)
        super().__init__([(discrete_kernel, discrete_sites), (inner_kernel, None)])
        # the inner kernel as given: at `init`, on the model conditioned on the discrete
        # sites, or with them summed out (`CollapsedDraw`)
        self._inner_source = inner_kernel
        # set at `init`: the discrete block when it is a CollapsedDraw (the sweep then runs
        # the inner kernel on the summed-out model first, and the draw after it)
        self._collapsed: CollapsedDraw | None = None
        # set at `init`: True when the model has no continuous latent sites
        self._discrete_only = False
        # `(arguments, jitted init)` of the last one-chain `init` (see `_init_chains`)
        self._compiled_init: tuple[tuple, Callable] | None = None
        self._compiled_postprocess: dict = {}  # the compiled postprocessing, see `kept_for`

    @property
    def discrete_kernel(self) -> MCMCKernel:
        """The kernel of the discrete block (on the conditioned model): the kernel
        :class:`~numpyro_discrete.kernels.auto.AutoDiscrete` chose, once ``init`` ran, where
        none was given."""
        block = self._discrete_block
        if isinstance(block, AutoDiscrete) and block.chosen is not None:
            return block.chosen
        return block

    @property
    def _discrete_block(self) -> MCMCKernel:
        return self.blocks[0][0]

    @property
    def inner_kernel(self) -> HMC:
        """The HMC/NUTS block (on the conditioned model)."""
        return self.blocks[1][0]

    @property
    def default_fields(self) -> tuple[str, ...]:
        return ("z", "diverging")

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> LBPGibbsState:
        """Check the model (discrete sites present, no subsampling), then numpyro's
        :meth:`Gibbs.init <numpyro.infer.gibbs.Gibbs.init>`: the discrete kernel is
        initialised on the model conditioned on the continuous sites and vice versa.
        ``init_params`` takes constrained values for discrete sites and unconstrained ones for
        continuous sites, as numpyro's ``Gibbs`` does. Without continuous sites, the discrete
        kernel alone is initialised."""
        kwargs = {} if model_kwargs is None else dict(model_kwargs)
        one_chain = is_prng_key(rng_key)
        key_check = rng_key if one_chain else rng_key[0]
        sites = check_model_sites(self.model, random.fold_in(key_check, 2), model_args, kwargs)
        self._discrete_only = not sites.continuous
        # numpyro's Gibbs passes the discrete block a prior draw of the sites the user left
        # out of `init_params`: the block may move those to a state of positive probability
        given = getattr(self._discrete_block, "given_init_sites", None)
        if given is not None:
            given(set(init_params or {}) & set(sites.discrete))
        if not self._discrete_only:
            return self._init_chains(rng_key, num_warmup, init_params, sites, model_args, kwargs)
        state = self._discrete_block.init(rng_key, num_warmup, init_params, model_args, kwargs)
        setattr(self, SAMPLE_FN_ATTRIBUTE, self._sample_discrete)
        return self._state_cls(state.z, (state,), state.rng_key)

    def _init_chains(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Mapping[str, jax.Array] | None,
        sites: ModelSites,
        model_args: tuple,
        model_kwargs: dict,
    ) -> LBPGibbsState:
        """One chain's start (:meth:`_start`) and numpyro's ``Gibbs.init``, traced and
        compiled as one program: run eagerly, its model traces, the inner kernel's search
        for a valid start and the discrete target's set-up dispatch hundreds of small
        operations, each compiled on first use (about 0.05 s each on a CPU core), which made
        ``init`` most of a first run. The program is traced as the sampling step is (a model
        that cannot be traced cannot be sampled either); the discrete target still reads the
        model at a concrete draw (:func:`~numpyro_discrete.model.ratio_modes.reading_point`).

        For a batch of keys (``chain_method="vectorized"``): numpyro's ``Gibbs`` takes one
        key, so each chain is started and initialised by the one-key ``init`` under ``vmap``
        (each block kernel then holds its one-chain step), as one compiled program, and the
        sweep over both blocks is ``vmap``-ed, so that every chain adapts its own ``R``,
        step size and mass matrix and draws what a sequential run with the same chain key
        draws."""

        def init(key: jax.Array, params: Mapping[str, jax.Array] | None) -> GibbsState:
            params = self._start(key, params, sites, model_args, model_kwargs)
            return Gibbs.init(self, key, num_warmup, params, model_args, model_kwargs)

        if not is_prng_key(rng_key):
            self._collapsed = self._prepare_blocks(rng_key[0], sites, model_args, model_kwargs)
            state = compiled_once(jax.vmap(init), rng_key)(rng_key, init_params)
            _check_start(state, sites)
            setattr(self, SAMPLE_FN_ATTRIBUTE, jax.vmap(self._sweep(), in_axes=(0, None, None)))
            return state
        # the arguments are the program's constants, so a later run (or chain) with the
        # same argument objects reuses the compiled program
        arguments = (num_warmup, model_args, model_kwargs)
        cached = self._compiled_init
        if cached is None or not same_objects(cached[0], arguments):
            # (the blocks a compiled init was traced with stay those of its later runs)
            self._collapsed = self._prepare_blocks(rng_key, sites, model_args, model_kwargs)
            cached = self._compiled_init = (arguments, compiled_once(init, rng_key))
        state = cached[1](rng_key, init_params)
        _check_start(state, sites)
        setattr(self, SAMPLE_FN_ATTRIBUTE, self._sweep())
        return state

    def _sweep(self) -> Callable:
        """One chain's sweep: numpyro's Gibbs sweep, or the collapsed one."""
        if self._collapsed is None:
            return self._sample_one
        return partial(collapsed_sweep, self.blocks)

    def _prepare_blocks(
        self, rng_key: jax.Array, sites: ModelSites, model_args: tuple, model_kwargs: dict
    ) -> CollapsedDraw | None:
        """Choose the discrete kernel now where it is chosen from the structure (the inner
        kernel's model depends on it) and set the inner block: on the model conditioned on
        the discrete sites, or with them summed out when the discrete kernel is a
        :class:`CollapsedDraw`, which this returns."""
        block = self._discrete_block
        prototype = {name: sites.trace[name]["value"] for name in sites.continuous}
        key, kwargs = random.fold_in(rng_key, 4), with_conditioning(model_kwargs, prototype)
        if isinstance(block, AutoDiscrete):
            block = block.choose(key, model_args, kwargs, summable=True)
        draw = block if isinstance(block, CollapsedDraw) else None
        if draw is None:
            inner = self._inner_source.wrap_model(conditioned)
        else:
            draw.read_model(key, model_args, kwargs)  # the start's descent needs its marginal
            inner = self._inner_source.wrap_model(
                lambda model: summed_out_model(conditioned(model), draw)
            )
        set_block_kernel(self, 1, inner)
        return draw

    def _start(
        self,
        rng_key: jax.Array,
        init_params: Mapping[str, jax.Array] | None,
        sites: ModelSites,
        model_args: tuple,
        model_kwargs: dict,
    ) -> Mapping[str, jax.Array]:
        """`init_params` as given, or (none given) every site at one coherent point: the
        continuous ones where the inner kernel's ``init_strategy`` puts them (the best of
        `num_starts` short descents where the discrete sites are summed out) and the
        discrete ones drawn given those (:mod:`~numpyro_discrete.model.chain_start`)."""
        if init_params is not None:
            return init_params
        return chain_start(
            self.model,
            random.fold_in(rng_key, 3),
            self.inner_kernel._init_strategy,
            sites,
            model_args,
            model_kwargs,
            marginal=None if self._collapsed is None else self.inner_kernel.model,
            num_starts=self.num_starts,
        )

    def _sample_discrete(
        self, state: LBPGibbsState, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> LBPGibbsState:
        # the state's key drives the move, so that a new key set on it (a run resumed from
        # `post_warmup_state`) is the one used
        block = state.block_states[0]._replace(rng_key=state.rng_key)
        block = self._discrete_block.sample(block, model_args, model_kwargs)
        return state._replace(z=block.z, block_states=(block,), rng_key=block.rng_key)

    def sample(
        self, state: LBPGibbsState, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> LBPGibbsState:
        """One sweep: the discrete move, then the inner kernel's (the discrete move alone
        without continuous sites)."""
        if self._discrete_only:
            return self._sample_discrete(state, model_args, model_kwargs)
        return super().sample(state, model_args, model_kwargs)

    def refresh(
        self, state: LBPGibbsState, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> LBPGibbsState:
        """Identity (:meth:`sample` refreshes each block), but the discrete kernel's
        refresh when it runs alone (LBPGibbs as a block of a larger ``Gibbs``)."""
        if not self._discrete_only:
            return super().refresh(state, model_args, model_kwargs)
        block = self._discrete_block.refresh(state.block_states[0], model_args, model_kwargs)
        return state._replace(block_states=(block,))

    def get_constrain_fn(
        self, model_args: tuple, model_kwargs: Mapping[str, Any] | None
    ) -> Callable:
        if self._discrete_only:
            return self._discrete_block.get_constrain_fn(model_args, model_kwargs)
        return super().get_constrain_fn(model_args, model_kwargs)

    def postprocess_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Callable:
        """numpyro's ``Gibbs`` postprocessing (each block's constrain function), compiled:
        numpyro applies it to a chain's first state outside its loop, where the continuous
        sites' transforms ran op by op (12 programs, 0.45 s, on the gallery's mixture). The
        compiled function is kept for the same argument objects."""
        if self._discrete_only:
            return self._discrete_block.postprocess_fn(model_args, model_kwargs)
        return kept_for(
            self._compiled_postprocess,
            (model_args, model_kwargs),
            lambda: jax.jit(super(LBPGibbs, self).postprocess_fn(model_args, model_kwargs)),
        )

    def wrap_model(self, wrapper: Callable[[Callable], Callable]) -> "LBPGibbs":
        """numpyro's :meth:`Gibbs.wrap_model <numpyro.infer.gibbs.Gibbs.wrap_model>` (LBPGibbs
        as a block of a larger ``Gibbs``), the inner kernel as given wrapped too (``init``
        sets the inner block from it)."""
        kernel = super().wrap_model(wrapper)
        kernel._inner_source = self._inner_source.wrap_model(wrapper)
        kernel._compiled_init, kernel._compiled_postprocess = None, {}
        return kernel

    def __getstate__(self) -> dict[str, Any]:
        # the compiled programs close over the model's arguments: compiled again after
        # unpickling
        state = super().__getstate__()
        return {**state, "_compiled_init": None, "_compiled_postprocess": {}}


use_gibbs_state_class(LBPGibbs, LBPGibbsState)


def _check_start(state: GibbsState, sites: ModelSites) -> None:
    """The discrete block's start has positive probability (a kernel given by the user may
    keep no potential energy in its state: then nothing to check)."""
    energy = getattr(state.block_states[0], "potential_energy", None)
    if energy is not None:
        check_initial_log_density(sites.discrete, -energy)
