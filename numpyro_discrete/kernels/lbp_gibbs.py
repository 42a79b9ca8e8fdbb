"""numpyro kernel for mixed discrete / continuous models: :class:`LBPGibbs`, the discrete
sites moved by a locally balanced kernel (:class:`~numpyro_discrete.ALBP` by default) and the
continuous ones by an inner ``HMC``/``NUTS``, one sweep of each per step, as a two-block
instance of numpyro's composable :class:`~numpyro.infer.gibbs.Gibbs`."""

from collections.abc import Callable, Mapping
from typing import Any

import jax
from jax import lax, random

from numpyro.infer.gibbs import Gibbs, GibbsState
from numpyro.infer.hmc import HMC, HMCState
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from numpyro_discrete.kernels.base import renamed_field
from numpyro_discrete.kernels.lbp import ALBP
from numpyro_discrete.model.layout import discrete_sites
from numpyro_discrete.model.target import model_sites
from numpyro_discrete.numpyro_internals import use_gibbs_state_class

__all__ = ["LBPGibbs", "LBPGibbsState"]


class LBPGibbsState(GibbsState):
    """
    State of :class:`LBPGibbs`: numpyro's :class:`~numpyro.infer.gibbs.GibbsState` with two
    blocks, the discrete kernel's state first and the inner HMC/NUTS state second.

    - **z** - dict of the current values of all latent sites: discrete sites as the model
      draws them (integers), continuous sites in the inner kernel's unconstrained space
      (``MCMC.get_samples`` returns them constrained).
    - **block_states** - ``(discrete_state, hmc_state)``.
    - **rng_key** - random key for the next step.

    Properties, usable as ``extra_fields`` of :meth:`~numpyro.infer.MCMC.run`:

    - **discrete_state** - the discrete kernel's state (``LBPState`` for ``LBP``/``ALBP``),
      so ``"discrete_state.<field>"`` reaches any of its fields.
    - **hmc_state** - the inner kernel's :data:`~numpyro.infer.hmc.HMCState`, so
      ``"hmc_state.<field>"`` reaches any of its fields, e.g. ``"hmc_state.accept_prob"``,
      ``"hmc_state.num_steps"``, ``"hmc_state.adapt_state.step_size"``.
    - **accept_prob**, **mean_accept_prob**, **path_length**, **num_changed** - shortcuts to
      the fields of the same names of the *discrete* state (the names of the standalone
      kernels); a shortcut the discrete kernel's state lacks (``path_length`` of
      :class:`~numpyro_discrete.ACS`) raises a ``ValueError`` naming the fields it has.
      ``num_flips`` is a deprecated alias of ``path_length``.
    - **diverging** - shortcut to ``hmc_state.diverging`` (collected by default, as for
      ``NUTS``, so that :meth:`~numpyro.infer.MCMC.print_summary` counts divergences).
    """

    __slots__ = ()

    @property
    def discrete_state(self) -> Any:
        return self.block_states[0]

    @property
    def hmc_state(self) -> HMCState:
        return self.block_states[1]

    def _discrete_field(self, name: str) -> jax.Array:
        state = self.discrete_state
        if name not in state._fields:
            # not an AttributeError: numpyro's field getter catches those and falls back to
            # indexing, which would replace this message with an unrelated TypeError
            fields = [f for f in state._fields if f not in ("z", "rng_key")]
            raise ValueError(
                f"LBPGibbsState.{name}: the discrete kernel's state ({type(state).__name__}) "
                f"has no field `{name}`; collect one of its own fields instead, e.g. "
                f"{['discrete_state.' + f for f in fields]}."
            )
        return getattr(state, name)

    @property
    def accept_prob(self) -> jax.Array:
        return self._discrete_field("accept_prob")

    @property
    def mean_accept_prob(self) -> jax.Array:
        return self._discrete_field("mean_accept_prob")

    @property
    def path_length(self) -> jax.Array:
        return self._discrete_field("path_length")

    @property
    def num_flips(self) -> jax.Array:
        return renamed_field(self, "num_flips", "path_length")

    @property
    def num_changed(self) -> jax.Array:
        return self._discrete_field("num_changed")

    @property
    def diverging(self) -> jax.Array:
        return self.hmc_state.diverging


class _RepeatedKernel(MCMCKernel):
    """`kernel` applied `num_steps` times per :meth:`sample`, as one block of a Gibbs sweep.

    Its state is the wrapped kernel's state after the last move. The wrapped kernel is
    initialised with ``num_steps * num_warmup`` warmup steps, so that its own adaptation
    (ALBP's ``R``) runs over the whole warmup of the sweep and is frozen after it.
    """

    def __init__(self, kernel: MCMCKernel, num_steps: int) -> None:
        self.kernel = kernel
        self.num_steps = num_steps

    @property
    def model(self) -> Callable | None:
        return self.kernel.model

    @property
    def sample_field(self) -> str:
        return self.kernel.sample_field

    @property
    def default_fields(self) -> tuple[str, ...]:
        return self.kernel.default_fields

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Any,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> Any:
        return self.kernel.init(
            rng_key, self.num_steps * num_warmup, init_params, model_args, model_kwargs
        )

    def sample(self, state: Any, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return lax.fori_loop(
            0,
            self.num_steps,
            lambda _, s: self.kernel.sample(s, model_args, model_kwargs),
            state,
        )

    def refresh(self, state: Any, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self.kernel.refresh(state, model_args, model_kwargs)

    def wrap_model(self, wrapper: Callable[[Callable], Callable]) -> "_RepeatedKernel":
        return _RepeatedKernel(self.kernel.wrap_model(wrapper), self.num_steps)

    def get_constrain_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self.kernel.get_constrain_fn(model_args, model_kwargs)

    def postprocess_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self.kernel.postprocess_fn(model_args, model_kwargs)

    def get_diagnostics_str(self, state: Any) -> str:
        return self.kernel.get_diagnostics_str(state)


class LBPGibbs(Gibbs):
    """
    Locally balanced proposals within Gibbs, for models with both discrete and continuous
    latent sites. Each step runs one step of a discrete kernel (by default :class:`ALBP`, the
    locally balanced path proposal whose length ``R`` is adapted during warmup [1, 2]) on the
    discrete sites given the continuous ones, then one step of the inner ``HMC``/``NUTS`` on
    the continuous sites given the discrete ones. Each block's cached potential and gradient
    (or local log-ratios) are recomputed when the other block has moved, so both are exact
    Metropolis-Hastings (or HMC) moves on their conditional and the sweep leaves the joint
    posterior invariant. Warmup adapts both: ``R`` of the discrete kernel, the step size and
    mass matrix of the inner kernel (each on its own conditional).

    It is the two-block composite
    ``Gibbs([(discrete_kernel, discrete_sites), (inner_kernel, None)])`` of numpyro's
    :class:`~numpyro.infer.gibbs.Gibbs`, like numpyro's
    :class:`~numpyro.infer.hmc_gibbs.DiscreteHMCGibbs` with its one-coordinate-at-a-time
    Gibbs sweep replaced by a gradient-informed multi-coordinate move, plus checks of the
    model at ``init`` and a state whose fields reach both blocks (see
    :class:`LBPGibbsState`). The progress bar shows both kernels' diagnostics. Sites marked
    ``infer={"enumerate": "parallel"}`` are summed out by both blocks.

    .. note:: ``chain_method="vectorized"`` is not supported (numpyro's ``Gibbs`` takes one
        random key); use ``"parallel"`` or ``"sequential"``. Leave the inner kernel's
        ``find_heuristic_step_size=False`` (its default): the heuristic would tune the step
        size to the initial discrete values only.

    **References:**

    1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
       Hanjun Dai, Dale Schuurmans (2022)
    2. *Path Auxiliary Proposal for MCMC in Discrete Space*, Haoran Sun, Hanjun Dai, Wei Xia,
       Arun Ramamurthy (2021)
    3. *The No-U-Turn Sampler: Adaptively Setting Path Lengths in Hamiltonian Monte Carlo*,
       Matthew D. Hoffman, Andrew Gelman (2014)

    :param inner_kernel: a :class:`~numpyro.infer.hmc.HMC` or :class:`~numpyro.infer.hmc.NUTS`
        built from the model; it samples every latent site that is not discrete.
    :param discrete_kernel: the kernel of the discrete sites, built on the same model
        callable (e.g. ``LBP(model, path_length=3)`` or ``ALBP(model, balancing="barker")``);
        any :class:`~numpyro.infer.mcmc.MCMCKernel` that implements ``refresh`` and
        ``wrap_model``. Defaults to ``ALBP(inner_kernel.model)``.
    :param int num_discrete_steps: moves of the discrete kernel per step, before the one
        move of the inner kernel (default 1). A discrete move costs two model evaluations
        (with ``weights="gradient"``), a NUTS move tens of them, so several discrete moves
        per step are nearly free and let the discrete sites travel further between updates
        of the continuous ones, which is what limits the mixing of models whose discrete
        and continuous sites are strongly coupled (e.g. the factorial HMM). The fields of
        the discrete state are those of the last move; its adaptation counts every move.

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
        discrete_kernel: MCMCKernel | None = None,
        num_discrete_steps: int = 1,
    ) -> None:
        if isinstance(num_discrete_steps, bool) or not isinstance(num_discrete_steps, int):
            raise TypeError(
                f"LBPGibbs: `num_discrete_steps` must be a positive int, got "
                f"{type(num_discrete_steps).__name__}."
            )
        if num_discrete_steps < 1:
            raise ValueError(
                f"LBPGibbs: `num_discrete_steps` must be >= 1 (moves of the discrete sites "
                f"per step), got {num_discrete_steps}."
            )
        if not isinstance(inner_kernel, HMC):
            raise ValueError(
                f"LBPGibbs: `inner_kernel` must be numpyro's HMC or NUTS (it samples the "
                f"continuous sites), got {type(inner_kernel).__name__}. For a model with "
                "discrete sites only, use ALBP(model) instead of LBPGibbs."
            )
        model = inner_kernel.model
        if model is None:
            raise ValueError(
                "LBPGibbs: `inner_kernel` was built from `potential_fn`; LBPGibbs needs a "
                "model to tell discrete sites from continuous ones. Build it as NUTS(model)."
            )
        if discrete_kernel is None:
            discrete_kernel = ALBP(model)
        else:
            name = type(discrete_kernel).__name__
            if not isinstance(discrete_kernel, MCMCKernel) or isinstance(discrete_kernel, HMC):
                raise ValueError(
                    f"LBPGibbs: `discrete_kernel` must be a discrete MCMCKernel such as "
                    f"LBP(model) or ALBP(model), got {name}."
                )
            if getattr(discrete_kernel, "model", None) is not model:
                raise ValueError(
                    f"LBPGibbs: `discrete_kernel` ({name}) must be built on the same model "
                    "callable as `inner_kernel`, e.g. "
                    f"LBPGibbs(NUTS(model), discrete_kernel={name}(model))."
                )
        self.num_discrete_steps = num_discrete_steps
        if num_discrete_steps > 1:
            discrete_kernel = _RepeatedKernel(discrete_kernel, num_discrete_steps)
        super().__init__([(discrete_kernel, discrete_sites), (inner_kernel, None)])
        (self.discrete_kernel, _), (self.inner_kernel, _) = self.blocks

    @property
    def default_fields(self) -> tuple[str, ...]:
        return ("z", "diverging")

    def _check_model(self, rng_key: jax.Array, model_args: tuple, model_kwargs: dict) -> None:
        """Errors that name the sites and the fix, before numpyro's generic ones."""
        sites = model_sites(self.model, rng_key, model_args, model_kwargs)
        discrete, continuous = sites.discrete, list(sites.continuous)
        if not discrete:
            raise ValueError(
                f"LBPGibbs found no discrete latent sites to sample (continuous latent sites: "
                f"{continuous}; sites marked `infer={{'enumerate': 'parallel'}}` are summed "
                "out, not sampled). Use NUTS(model) alone for this model."
            )
        if not continuous:
            raise ValueError(
                f"LBPGibbs found no continuous latent sites for its inner "
                f"{type(self.inner_kernel).__name__} (discrete latent sites: "
                f"{list(discrete)}). Use ALBP(model) alone for this model."
            )

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> LBPGibbsState:
        """Check the model (discrete and continuous sites present), then numpyro's
        :meth:`Gibbs.init <numpyro.infer.gibbs.Gibbs.init>`: the discrete kernel is
        initialised on the model conditioned on the continuous sites and vice versa.
        ``init_params`` takes constrained values for discrete sites and unconstrained ones for
        continuous sites, as numpyro's ``Gibbs`` does."""
        kwargs = {} if model_kwargs is None else dict(model_kwargs)
        # several keys (chain_method="vectorized") are refused by Gibbs.init, with its message
        if is_prng_key(rng_key):
            self._check_model(random.fold_in(rng_key, 2), model_args, kwargs)
        return super().init(rng_key, num_warmup, init_params, model_args, kwargs)


use_gibbs_state_class(LBPGibbs, LBPGibbsState)
