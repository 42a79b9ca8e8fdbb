"""The discrete kernel chosen from the model's structure, :class:`AutoDiscrete` (the default
of :class:`~numpyro_discrete.LBPGibbs`): at ``init`` it reads the structure once and runs

0. inside :class:`~numpyro_discrete.LBPGibbs`, :class:`~numpyro_discrete.CollapsedDraw`
   where the discrete coordinates are independent given the continuous sites (mixture
   labels, occupancy indicators, abundances) or form chains that share no term (an HMM's
   states, coordinates of at most :data:`~numpyro_discrete.core.collapse.MAX_CHAIN_VALUES`
   values): the inner kernel moves the continuous sites with the discrete ones summed
   out, which no ridge between the two can slow down. Not for one coordinate: its exact
   Gibbs draw mixes as well, and the marginal costs ``M`` evaluations per gradient (the
   gallery's change point, 112 values: 1446 ESS/s summed out against 13208 by a Gibbs
   draw);
1. :class:`~numpyro_discrete.BlockGibbs` where a site's coordinates form coupled chains
   along one axis (an HMM's states in time, each chain of a factorial HMM): a joint draw
   of each chain from its exact conditional crosses what one-site moves cannot;
2. :class:`~numpyro_discrete.ChromaticGibbs` where a sweep of exact conditionals costs at
   most :data:`SWEEP_BUDGET` evaluations of the model's terms (colour classes times
   candidate values): mixtures given their parameters (one class), lattices (two), block
   models and small dense models (one class per coordinate: a systematic-scan Gibbs), and
   pairwise models whose pair tables (:mod:`~numpyro_discrete.core.pair_tables`)
   take at most as many batched evaluations (a 150-node block model: 51 evaluations
   against 300 for the scan by ``log pi``; a first run of 45 s against ALBP's 289 s, and
   5.8 times its min ESS per second of a later run);
3. :class:`~numpyro_discrete.ALBP` elsewhere: large dense models, where a sweep would cost
   too many evaluations and locally balanced path moves change many coordinates per step.

Lattices have chains along two axes; they stay with chromatic sweeps, whose two classes
cost fewer evaluations than row blocks (``M^2`` per class) and mix well on them (the
segmentation example converges with them).
"""

from collections.abc import Callable, Collection, Mapping
import logging
from typing import Any, NamedTuple

import numpy as np

import jax

from numpyro.infer.mcmc import MCMCKernel

from numpyro_discrete.core.block_gibbs import MAX_BLOCK_VALUES, block_plan, value_counts
from numpyro_discrete.core.collapse import MAX_SUMMED_VALUES
from numpyro_discrete.core.neighbourhood import SupportKind
from numpyro_discrete.core.pair_tables import pair_tables
from numpyro_discrete.kernels.arguments import one_eager_chain
from numpyro_discrete.kernels.base import DiscreteKernel
from numpyro_discrete.kernels.block_gibbs import BlockGibbs
from numpyro_discrete.kernels.chromatic import (
    ChromaticGibbs,
    sweep_target,
    windowed_coordinates,
)
from numpyro_discrete.kernels.collapsed import CollapsedDraw, chain_problem, independence_problem
from numpyro_discrete.kernels.lbp import ALBP
from numpyro_discrete.model.errors import named_model_errors
from numpyro_discrete.model.layout import SiteLayout
from numpyro_discrete.model.move_scales import support_spans
from numpyro_discrete.model.sites import same_objects
from numpyro_discrete.model.target import DiscreteTarget, model_target
from numpyro_discrete.structure.chain_blocks import chain_axes, find_chain_blocks

__all__ = ["SWEEP_BUDGET", "AutoDiscrete", "KernelChoice", "choose_discrete_kernel"]

logger = logging.getLogger("numpyro_discrete")

SWEEP_BUDGET = 256
"""The most evaluations of the model's terms (colour classes times candidate values) a
chromatic sweep may cost to be chosen over ALBP."""


class KernelChoice(NamedTuple):
    """
    - **kernel** - the chosen kernel's class.
    - **reason** - why, in words naming the structure found.
    """

    kernel: type[DiscreteKernel]
    reason: str


def choose_discrete_kernel(target: DiscreteTarget, summable: bool = False) -> KernelChoice:
    """The discrete kernel for `target`, by the rule of this module's docstring; with
    `summable` (continuous sites beside, in :class:`~numpyro_discrete.LBPGibbs`), the
    discrete sites may be summed out (:class:`~numpyro_discrete.CollapsedDraw`)."""
    structure, layout = target.structure, target.layout
    if target.structure_note:
        return KernelChoice(ALBP, f"no structure could be read ({target.structure_note})")
    supports = layout.coordinate_supports()
    if summable and layout.num_coords > 1 and not independence_problem(target):
        spans = support_spans(layout)
        # a count unbounded above is summed to a truncation the draws watch; a bounded
        # support too large to enumerate is not truncated
        if np.all((spans < MAX_SUMMED_VALUES) | np.isinf(spans)):
            return KernelChoice(
                CollapsedDraw,
                "the discrete coordinates are independent given the continuous sites: "
                "summed out of the continuous sites' target, then drawn exactly",
            )
    if summable and layout.num_coords > 1 and not chain_problem(target):
        return KernelChoice(
            CollapsedDraw,
            "the discrete coordinates form chains that share no term: summed out of the "
            "continuous sites' target by the forward algorithm, then drawn jointly",
        )
    counts = value_counts(supports)
    if not structure.dense_terms.size and counts.max() <= MAX_BLOCK_VALUES:
        axes = chain_axes(structure, layout.names, layout.shapes)
        chained = [name for name, found in axes.items() if len(found) == 1]
        if chained and not any(len(found) > 1 for found in axes.values()):
            blocks = find_chain_blocks(structure, layout.names, layout.shapes)
            if block_plan(blocks, structure, supports).pair_terms.size:
                return KernelChoice(
                    BlockGibbs,
                    f"coupled chains in {chained} ({blocks.num_classes} classes of blocks)",
                )
    if structure.num_colours == structure.num_coords:
        # the kernel's own rule: tables where they take fewer evaluations than the scan
        tables = pair_tables(structure, supports.lower, supports.upper)
        if tables is not None and tables.cheaper_than_scan and tables.num_states <= SWEEP_BUDGET:
            fill = (
                f"{tables.num_states} batched evaluations per sweep (at most {SWEEP_BUDGET})"
                if summable
                else f"{tables.num_states} batched evaluations once for the run"
            )
            return KernelChoice(
                ChromaticGibbs,
                f"{structure.num_coords} coordinates that all interact, by terms of two "
                f"coordinates at most: a systematic scan reading its conditionals from pair "
                f"tables, {fill}",
            )
    # the candidates the chromatic sweep would draw from (whole small supports)
    x = np.asarray(supports.lower)
    neighbourhood = sweep_target(target, ordinal_window=None).neighbourhood
    num_candidates = jax.eval_shape(neighbourhood.candidates, x).shape[1]
    cost = structure.num_colours * num_candidates
    windowed = windowed_coordinates(supports, ordinal_window=None)
    candidates = (
        f"{num_candidates} candidate values (sites {_sites_of(layout, windowed)} moved within "
        "their support by distances from 1 to twice their scale, not over all of it)"
        if windowed.any()
        else f"{num_candidates} candidate values (whole supports)"
    )
    if cost <= SWEEP_BUDGET:
        return KernelChoice(
            ChromaticGibbs,
            f"{structure.num_colours} colour classes x {candidates} = "
            f"{cost} evaluations per sweep (at most {SWEEP_BUDGET})",
        )
    # small bounded ordinal supports (a change point's) are drawn whole, each coordinate's
    # exact conditional, for at most WHOLE_SUPPORT_SPAN + 1 evaluations per class: budgeted
    # as the moves by distance that ALBP would make instead
    moves = jax.eval_shape(target.neighbourhood.candidates, x).shape[1]
    if structure.num_colours * moves <= SWEEP_BUDGET:
        whole = (supports.kind == SupportKind.ORDINAL) & ~windowed
        return KernelChoice(
            ChromaticGibbs,
            f"{structure.num_colours} colour classes x {candidates} = {cost} evaluations per "
            f"sweep: the whole supports of ordinal sites {_sites_of(layout, whole)} "
            f"({num_candidates + 1} values at most) drawn exactly, where moves by distance "
            f"would cost {structure.num_colours * moves} (at most {SWEEP_BUDGET})",
        )
    return KernelChoice(
        ALBP,
        f"{structure.num_colours} colour classes x {candidates} = "
        f"{cost} evaluations per sweep (more than {SWEEP_BUDGET})",
    )


def _sites_of(layout: SiteLayout, coordinates: np.ndarray) -> list[str]:
    """The sites holding any of the `coordinates` (a ``(N,)`` mask)."""
    return [name for name in layout.names if coordinates[layout.site_coords(name)].any()]


class AutoDiscrete(MCMCKernel):
    """
    The discrete kernel chosen from the model's structure at ``init``
    (:func:`choose_discrete_kernel`): :class:`~numpyro_discrete.BlockGibbs` for coupled
    chains, :class:`~numpyro_discrete.ChromaticGibbs` where a sweep of exact conditionals
    is cheap, :class:`~numpyro_discrete.ALBP` otherwise. It is the default discrete kernel
    of :class:`~numpyro_discrete.LBPGibbs`; after ``init``, :attr:`chosen` is the kernel it
    runs (its state, fields and diagnostics are that kernel's), :attr:`reason` says why,
    and the choice is logged (logger ``"numpyro_discrete"``, level ``INFO``).

    :param model: Python callable containing numpyro primitives.

    **Example**

    .. doctest::

        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import AutoDiscrete
        ...
        >>> def model():  # a sticky binary chain: coupled neighbours along one axis
        ...     x = numpyro.sample("x", dist.Bernoulli(0.5).expand([50]))
        ...     numpyro.factor("stick", 2.0 * (x[1:] == x[:-1]))
        ...
        >>> kernel = AutoDiscrete(model)
        >>> mcmc = MCMC(kernel, num_warmup=100, num_samples=500, progress_bar=False)
        >>> mcmc.run(jax.random.key(0))
        >>> type(kernel.chosen).__name__
        'BlockGibbs'
        >>> assert abs(mcmc.get_samples()["x"].mean() - 0.5) < 0.15
    """

    sample_field = "z"

    def __init__(self, model: Callable) -> None:
        if not callable(model):
            raise TypeError(
                f"AutoDiscrete: `model` must be a numpyro model function, got "
                f"{type(model).__name__}."
            )
        self._model = model
        self.chosen: DiscreteKernel | None = None
        self.reason = ""
        self._given_sites: frozenset[str] | None = None
        # whether `choose` ran for the next `init`
        self._chosen_for_init = False
        # the model arguments of the last choice (see `init`)
        self._chosen_for: tuple | None = None

    @property
    def model(self) -> Callable:
        return self._model

    @property
    def default_fields(self) -> tuple[str, ...]:
        return ("z",) if self.chosen is None else self.chosen.default_fields

    def choose(
        self,
        rng_key: jax.Array,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
        summable: bool = False,
    ) -> DiscreteKernel:
        """Read the model, choose the kernel (:func:`choose_discrete_kernel`) and return it;
        the next ``init`` initialises it without reading the model again.
        :class:`~numpyro_discrete.LBPGibbs` chooses before its blocks are initialised, with
        `summable`: the inner kernel's model depends on the choice."""
        kwargs = {} if model_kwargs is None else dict(model_kwargs)
        # the target the Gibbs kernels build (exact weights, the same key)
        with named_model_errors(type(self).__name__):
            target = model_target(
                self._model, rng_key, model_args, kwargs, weights="exact", ordinal_window=None
            )
        choice = choose_discrete_kernel(target, summable)
        self.chosen, self.reason = choice.kernel(self._model), choice.reason
        logger.info("discrete kernel %s: %s", choice.kernel.__name__, choice.reason)
        if choice.kernel is not ALBP:
            # ALBP resolves its own ratio modes (gradient or exact)
            self.chosen.hand_target(target)
        if choice.kernel is ChromaticGibbs:
            # a dense model chosen for its cheap sweep: no advice to expose its structure
            self.chosen._dense_chosen = bool(target.structure.dense_terms.size)
        self._chosen_for_init = True
        self._chosen_for = (model_args, kwargs)
        return self.chosen

    def init(
        self,
        rng_key: jax.Array,
        num_warmup: int,
        init_params: Mapping[str, jax.Array] | None,
        model_args: tuple,
        model_kwargs: Mapping[str, Any] | None,
    ) -> NamedTuple:
        # numpyro's next sequential chain, or a later run, with the same argument objects:
        # the same choice (the model is read at one point whatever the chain), and the
        # chosen kernel keeps its target
        kwargs = {} if model_kwargs is None else dict(model_kwargs)
        again = one_eager_chain(rng_key) and same_objects(self._chosen_for, (model_args, kwargs))
        if not (self._chosen_for_init or again):
            self.choose(rng_key, model_args, model_kwargs)
        self._chosen_for_init = False
        if self._given_sites is not None:
            self.chosen.given_init_sites(self._given_sites)
            self._given_sites = None
        return self.chosen.init(rng_key, num_warmup, init_params, model_args, model_kwargs)

    def given_init_sites(self, sites: Collection[str]) -> None:
        """See :meth:`DiscreteKernel.given_init_sites
        <numpyro_discrete.kernels.base.DiscreteKernel.given_init_sites>`."""
        self._given_sites = frozenset(sites)

    def _running(self) -> DiscreteKernel:
        if self.chosen is None:
            raise RuntimeError("AutoDiscrete: call `init` first (MCMC.run does).")
        return self.chosen

    def sample(self, state: Any, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self._running().sample(state, model_args, model_kwargs)

    def refresh(self, state: Any, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self._running().refresh(state, model_args, model_kwargs)

    def wrap_model(self, wrapper: Callable[[Callable], Callable]) -> "AutoDiscrete":
        return AutoDiscrete(wrapper(self._model))

    def get_constrain_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self._running().get_constrain_fn(model_args, model_kwargs)

    def postprocess_fn(self, model_args: tuple, model_kwargs: Mapping[str, Any] | None) -> Any:
        return self._running().postprocess_fn(model_args, model_kwargs)

    def get_diagnostics_str(self, state: Any) -> str:
        kernel = self._running()
        return f"{type(kernel).__name__}: {kernel.get_diagnostics_str(state)}"

    def __getstate__(self) -> dict[str, Any]:
        # the chosen kernel holds compiled functions; `init` chooses again after unpickling
        return {
            **self.__dict__,
            "chosen": None,
            "reason": "",
            "_chosen_for_init": False,
            "_chosen_for": None,
        }
