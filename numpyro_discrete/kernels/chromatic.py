"""The numpyro kernel of chromatic Gibbs, :class:`ChromaticGibbs`: block Gibbs by the colour
classes of the model's interaction graph, detected at ``init``
(:mod:`numpyro_discrete.core.chromatic`)."""

from collections.abc import Callable, Mapping
import dataclasses
import functools
import warnings

import numpy as np

import jax
import jax.numpy as jnp

from numpyro_discrete.core import chromatic, offset_sweep, site_scan, table_sweep
from numpyro_discrete.core.neighbourhood import (
    CoordinateSupports,
    SupportKind,
    coordinate_neighbourhood,
    ladder_offsets,
)
from numpyro_discrete.core.pair_tables import MAX_TABLE_ENTRIES, pair_tables
from numpyro_discrete.core.state import Info, SweepState
from numpyro_discrete.kernels.exact_sweep import ExactSweepKernel, ExactSweepState
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.move_scales import support_spans
from numpyro_discrete.model.target import DiscreteTarget

__all__ = [
    "WHOLE_SUPPORT_SPAN",
    "ChromaticGibbs",
    "ChromaticGibbsState",
    "sweep_target",
    "windowed_coordinates",
]

WHOLE_SUPPORT_SPAN = 128
"""Without an ``ordinal_window``, a bounded ordinal coordinate whose support spans at most
this many steps is drawn from its exact conditional over its whole support (one evaluation
of the terms per value), as binary and categorical coordinates are."""


def windowed_coordinates(supports: CoordinateSupports, ordinal_window: int | None) -> np.ndarray:
    """The ``(N,)`` mask of the coordinates whose new values lie in a window around the
    current value instead of the whole support: every ordinal one with an
    `ordinal_window`, else those spanning more than :data:`WHOLE_SUPPORT_SPAN` steps."""
    ordinal = supports.kind == SupportKind.ORDINAL
    if ordinal_window is not None:
        return ordinal
    span = supports.upper.astype(np.int64) - supports.lower
    return ordinal & (span > WHOLE_SUPPORT_SPAN)


def sweep_target(target: DiscreteTarget, ordinal_window: int | None) -> DiscreteTarget:
    """`target` with the neighbourhood an exact sweep draws from: without an
    `ordinal_window`, small bounded ordinal supports whole, so that each draw is the
    coordinate's exact conditional (a change point's ``DiscreteUniform`` moved by windows
    mixes several times slower), larger ones by the ladder of
    :func:`~numpyro_discrete.core.neighbourhood.ladder_offsets`."""
    if ordinal_window is not None:
        return target
    window = ladder_offsets(target.move_scales, support_spans(target.layout))
    neighbourhood = coordinate_neighbourhood(
        target.supports, window, whole_support_span=WHOLE_SUPPORT_SPAN
    )
    return dataclasses.replace(target, neighbourhood=neighbourhood)


class ChromaticGibbsState(ExactSweepState):
    """State of :class:`ChromaticGibbs`, its fields those of
    :class:`~numpyro_discrete.kernels.exact_sweep.ExactSweepState` (classes: the colour
    classes)."""

    __slots__ = ()


class ChromaticGibbs(ExactSweepKernel):
    """
    Chromatic Gibbs sampling [1] of the discrete latent sites of a model: at ``init`` the
    kernel reads from the model's program which coordinates each term of the log joint
    depends on (every site's elementwise log-probability and every factor's array), and
    colours the coordinates so that no two coordinates of a class share a term. Each step
    is a sweep over the classes; in a class, every coordinate draws its new value at once
    from its conditional given the others, all conditionals of the class coming from ``M``
    batched evaluations of the model (``M`` the number of candidate values). Where
    detection is proven (it read no index or mask computed from the model's arguments or
    the values it is conditioned on) and every coordinate draws from its whole support,
    every draw is taken; elsewhere a Metropolis-Hastings test of each class's joint move keeps the
    sampler exact even if the detection missed a dependency (with a valid colouring it
    accepts with probability 1).

    It is the sampler of choice for sparse models: lattices (2 classes), mixtures given
    their parameters (1 class), hidden Markov and factorial models, block models. A sweep
    moves all ``N`` coordinates for about ``2 C M`` model evaluations, so it loses to
    :class:`ALBP` where the colour count ``C`` (:attr:`num_colours`) is large: a factor
    that depends on many coordinates at once and is not a sum of their terms (a
    ``logsumexp``, a square of a sum) couples them all; sums (``jnp.sum(...)``, ``.sum()``)
    are split into their summands before detection.

    Where every term depends on two coordinates at most (proven) and every coordinate has
    at most 16 values, each class's conditionals are read from tables of the terms' values
    at every pair of values of their coordinates (:mod:`~numpyro_discrete.core.table_sweep`):
    filled once for the run where the model reads no traced value (a discrete-only model:
    a sweep then carries ``log pi`` forward by its draws' changes, and evaluates the model
    every 16 sweeps), or at every sweep beside
    continuous sites where that takes fewer evaluations than the sweep by ``log pi``
    (:attr:`by_pair_tables` says whether the last compiled sweep did). Where the tables are
    filled once and the coordinates that share a term lie at a few fixed differences of
    index (a lattice, a chain: at most 8, in at most 4 colour classes), they are summed by
    offset, and each class's conditionals are computed for every coordinate by shifts of
    the state, as a hand-written checkerboard sampler computes them
    (:mod:`~numpyro_discrete.core.offset_sweep`, :attr:`by_offsets`).

    New values: a binary coordinate is drawn from both values; a categorical one from all
    categories; a bounded ordinal one spanning at most :data:`WHOLE_SUPPORT_SPAN` steps (a
    change point's ``DiscreteUniform``, a ``Binomial`` of a small total) from its whole
    support; any other ordinal one from the values at the distances of its ladder (1 up to
    twice the site's scale), or within ``ordinal_window`` of its current value (then for
    every ordinal site), inside its support (the offsets are symmetric, so the reverse move
    is always possible).

    **References:**

    1. *Parallel Gibbs Sampling: From Colored Fields to Thin Junction Trees*, Joseph
       Gonzalez, Yucheng Low, Arthur Gretton, Carlos Guestrin (2011)

    :param model: Python callable containing numpyro primitives; all its latent sample
        sites must be discrete and univariate, except those marked
        ``infer={"enumerate": "parallel"}``, which are summed out (and couple the sites
        they touch).
    :param potential_fn: instead of `model`, a callable returning the potential energy of
        a dict of integer arrays, as an array of terms (its sum is the potential energy)
        for the structure to be found; ``init_params`` of :meth:`~numpyro.infer.MCMC.run`
        gives their shapes and initial values. Sites are binary unless `supports` says
        otherwise.
    :param int ordinal_window: ``None`` (default) for whole small supports and moves in the
        units of each larger ordinal site, or the half-width of a window of new values
        around the current value of every ordinal site.
    :param dict supports: with `potential_fn` only, the :class:`SiteSupport` of sites that
        are not binary, e.g. ``{"s": SiteSupport.categorical(3)}``.

    **Example**

    .. doctest::

        >>> import jax
        >>> import jax.numpy as jnp
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import ChromaticGibbs
        ...
        >>> def model():  # a 10 x 10 ferromagnetic Ising model on a torus
        ...     x = numpyro.sample("x", dist.Bernoulli(0.5).expand([10, 10]))
        ...     s = 2.0 * x - 1.0
        ...     numpyro.factor("right", 0.2 * s * jnp.roll(s, 1, axis=1))
        ...     numpyro.factor("down", 0.2 * s * jnp.roll(s, 1, axis=0))
        ...
        >>> kernel = ChromaticGibbs(model)
        >>> mcmc = MCMC(kernel, num_warmup=100, num_samples=1000, progress_bar=False)
        >>> mcmc.run(jax.random.key(0))
        >>> kernel.num_colours
        2
        >>> x = mcmc.get_samples()["x"]
        >>> assert abs(x.mean() - 0.5) < 0.05
    """

    state_type = ChromaticGibbsState
    # set by AutoDiscrete when it chose this kernel for a small dense model (one class per
    # coordinate is then the intended systematic-scan Gibbs, not a structure to expose)
    _dense_chosen = False
    _sweep_by: str | None = None

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        ordinal_window: int | None = None,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        super().__init__(
            model, potential_fn, weights="exact", ordinal_window=ordinal_window, supports=supports
        )

    @property
    def by_pair_tables(self) -> bool:
        """Whether the sweep last compiled (after a ``run``) read each coordinate's
        conditional from tables of the model's pairwise terms
        (:mod:`~numpyro_discrete.core.table_sweep`) instead of evaluating the model at its
        options: where detection proved every term to depend on two coordinates at most
        and every coordinate has at most 16 values, with the tables filled once for the
        run where the model reads no traced value (a discrete-only model), or at every
        sweep where that takes fewer evaluations of the model than the sweep by
        ``log pi`` (a mixed model, whose continuous sites move); summed by offset where
        :attr:`by_offsets`."""
        return self._sweep_by is not None

    @property
    def by_offsets(self) -> bool:
        """Whether the sweep last compiled read the pair tables summed by offset
        (:mod:`~numpyro_discrete.core.offset_sweep`): a discrete-only model whose coupled
        coordinates lie at a few differences of index (lattices, chains), each class's
        conditionals computed for every coordinate by shifts of the state, no gather."""
        return self._sweep_by == "offsets"

    def get_diagnostics_str(self, state: ChromaticGibbsState) -> str:
        return f"acc. prob={float(state.mean_accept_prob):.2f}, {self.num_colours} colours"

    def _setup(self, target: DiscreteTarget) -> None:
        structure = target.structure
        if target.structure_note:
            warnings.warn(
                f"ChromaticGibbs could not detect the structure of the model: "
                f"{target.structure_note}. It samples one coordinate at a time (one class per "
                "coordinate); use `chain_method='sequential'` or 'vectorized', or ALBP.",
                UserWarning,
                stacklevel=4,
            )
        elif structure.dense_terms.size and target.num_coords > 1 and not self._dense_chosen:
            warnings.warn(
                f"ChromaticGibbs: every coordinate of sites {list(target.layout.names)} "
                "interacts with every other (a term of the log joint depends on all of them "
                "and is not a sum of their terms, e.g. a logsumexp or a square of a sum), so "
                "each sweep visits one coordinate at a time, at the cost of M model "
                "evaluations each (2M+1 for an ordinal window). Write such a factor as an "
                "array or a sum of terms (`numpyro.factor('f', J * s[:-1] * s[1:])`) to "
                "expose the structure, or use ALBP.",
                UserWarning,
                stacklevel=4,
            )
        # the kernel's target holds the neighbourhood it runs
        target = self._target = sweep_target(target, self._ordinal_window)
        windowed = windowed_coordinates(target.supports, self._ordinal_window)
        # a proven colouring draws exact conditionals where each coordinate's options are its
        # whole support (an ordinal window moves with the value): no MH test there
        whole_supports = not np.any(windowed)
        self._mh_test = not (structure.exact and whole_supports)
        scan = whole_supports and structure.num_colours == structure.num_coords
        if scan:
            # one coordinate per class: its conditional is log pi at each of its options,
            # exact whatever the structure, so the sweep is a systematic scan
            self._mh_test = False

        @functools.cache
        def log_pi_sweep() -> Callable:
            """The sweep by log pi, built where a step is traced that takes it (a sweep by
            tables does not need its stencil)."""
            if scan:
                order = chromatic.class_members(structure)[0][: structure.num_coords]
                return site_scan.build_kernel(target.neighbourhood, order)
            # proven but with ordinal windows: each coordinate tested on its own (a joint
            # test of a large class of counts accepts almost never)
            return chromatic.build_kernel(
                target.neighbourhood,
                structure,
                mh_test=self._mh_test,
                coordinate_test=structure.exact,
            )

        # a pairwise model with small supports: the conditionals read from tables of its
        # terms, filled once where the terms read nothing traced (a discrete-only model),
        # else every sweep where that takes fewer evaluations than the sweep by log pi;
        # summed by offset where the coupled coordinates lie at a few offsets (lattices,
        # chains), beyond the bound on tables compiled into the sweep
        supports = target.supports
        # tables beyond the compiled ones' bound only where a sweep by offsets may read them
        few_classes = structure.num_colours <= offset_sweep.MAX_CLASSES
        max_entries = offset_sweep.MAX_ENTRIES if few_classes else MAX_TABLE_ENTRIES
        layout = (
            pair_tables(structure, supports.lower, supports.upper, max_entries=max_entries)
            if whole_supports
            else None
        )
        offsets = None if layout is None else offset_sweep.offset_layout(layout, structure)
        full_layout = layout
        if layout is not None and layout.state_of.size > MAX_TABLE_ENTRIES:
            layout = None  # only the sweep by offsets reads tables this large
        if layout is None and offsets is None:
            self._transition = lambda rng_key, state, log_terms, step: log_pi_sweep()(
                rng_key, state, log_terms
            )
            return
        offset_kernel = None if offsets is None else offset_sweep.build_kernel(offsets)
        table_kernel = None if layout is None else table_sweep.build_kernel(layout, structure)
        if layout is None:
            every_sweep = False
        elif structure.num_colours == structure.num_coords:
            every_sweep = layout.cheaper_than_scan  # the rule AutoDiscrete reads
        else:
            # each class: M evaluations for its conditionals, one for its new terms
            position = jax.ShapeDtypeStruct((structure.num_coords,), np.int32)
            num_candidates = jax.eval_shape(target.neighbourhood.candidates, position).shape[1]
            every_sweep = layout.num_states < structure.num_colours * (num_candidates + 1) + 1

        def sweep(
            rng_key: jax.Array, state: SweepState, log_terms: chromatic.LogTerms, step: jax.Array
        ) -> tuple[SweepState, Info]:
            # decided where the step is traced: whether the terms read a traced value (then
            # the tables, if read, are filled at every sweep)
            exact = step % table_sweep.EXACT_LOG_DENSITY_EVERY == 0
            oriented = table_sweep.constant_tables(full_layout, log_terms)
            self._sweep_by = None
            if oriented is not None and offset_kernel is not None:
                self._sweep_by = "offsets"
                values = offset_sweep.offset_tables(offsets, oriented)
                return offset_kernel(
                    rng_key, state, table_sweep.SweepTables(values, log_terms, exact)
                )
            if table_kernel is None or (oriented is None and not every_sweep):
                return log_pi_sweep()(rng_key, state, log_terms)
            self._sweep_by = "pair tables"
            if oriented is None:
                values = table_sweep.sweep_tables(layout, log_terms)
            else:
                values = jnp.asarray(table_sweep.sweep_values(oriented))  # program constants
            return table_kernel(rng_key, state, table_sweep.SweepTables(values, log_terms, exact))

        self._transition = sweep

    def _stuck_advice(self, site: str) -> str:
        if not self._mh_test:
            return (
                "Its draws are exact conditionals, one class at a time: the coordinate is "
                "strongly coupled to others. Try a longer run, or BlockGibbs where the coupled "
                "coordinates form chains."
            )
        return "Try a longer run, or ALBP (its moves change several coordinates at once)."
