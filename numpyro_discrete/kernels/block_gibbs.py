"""The numpyro kernel of block Gibbs by chain blocks, :class:`BlockGibbs`: each chain of
coupled coordinates (an HMM's states in time, each chain of a factorial HMM, a lattice's
rows) drawn jointly from its exact conditional (:mod:`numpyro_discrete.core.block_gibbs`)."""

from collections.abc import Callable, Mapping
import warnings

from numpyro_discrete.core import block_gibbs
from numpyro_discrete.core.neighbourhood import UNBOUNDED
from numpyro_discrete.kernels.exact_sweep import ExactSweepKernel, ExactSweepState
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.target import DiscreteTarget
from numpyro_discrete.structure.chain_blocks import NotAChainError, find_chain_blocks

__all__ = ["BlockGibbs", "BlockGibbsState"]


class BlockGibbsState(ExactSweepState):
    """State of :class:`BlockGibbs`, its fields those of
    :class:`~numpyro_discrete.kernels.exact_sweep.ExactSweepState` (classes: the classes of
    chain blocks that share no term)."""

    __slots__ = ()


class BlockGibbs(ExactSweepKernel):
    """
    Block Gibbs sampling by chain blocks [1, 2] of the discrete latent sites of a model: at
    ``init`` the kernel reads from the model's program which coordinates each term of the
    log joint depends on, and finds, per site, the axis along which the site's coordinates
    form chains (each term depends on at most two coordinates of a line, and only on
    neighbours): an HMM's states in time, each chain of a factorial HMM, a lattice's rows.
    Each step is a sweep over classes of blocks that share no term; every block of a class
    is drawn jointly from its exact conditional given everything else by forward
    filtering, backward sampling (sequential scans on CPU, where they measured faster;
    associative scans of ``O(log L)`` depth on accelerators), its potentials read from
    ``M^2`` batched evaluations of
    the model (``M`` values per coordinate, at most 64). Where detection is proven
    (it read no index or mask computed from the model's arguments or the values it is
    conditioned on), every draw is taken; elsewhere a Metropolis-Hastings test keeps the
    sweep exact even if detection missed a dependency (for chains of the model it accepts
    with probability 1). Coordinates of sites without a chain axis are blocks of
    one coordinate (chromatic Gibbs).

    Where strongly coupled coordinates lie along a chain, one joint draw replaces the many
    single-coordinate moves that :class:`ChromaticGibbs` or :class:`ALBP` need to cross
    between configurations. :attr:`blocks` reports what was found.

    **References:**

    1. *On Gibbs sampling for state space models*, C. K. Carter, R. Kohn (1994)
    2. *Factorial hidden Markov models*, Zoubin Ghahramani, Michael I. Jordan (1997)

    :param model: Python callable containing numpyro primitives; all its latent sample
        sites must be discrete with at most 64 values per coordinate (binary, categorical,
        bounded ordinal).
    :param potential_fn: instead of `model`, a callable returning the potential energy of a
        dict of integer arrays, as an array of terms; ``init_params`` of
        :meth:`~numpyro.infer.MCMC.run` gives their shapes and initial values.
    :param dict blocks: per site, the axis its chains run along, for sites where detection
        chose another axis or none; checked against the model's structure (a
        ``ValueError`` if the lines along it are not chains).
    :param dict supports: with `potential_fn` only, the :class:`SiteSupport` of sites that
        are not binary.

    **Example**

    .. doctest::

        >>> import jax
        >>> import jax.numpy as jnp
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import BlockGibbs
        ...
        >>> def model():  # a strongly coupled binary chain, its prior written as one sum
        ...     x = numpyro.sample("x", dist.Bernoulli(0.5).expand([100]))
        ...     s = 2.0 * x - 1.0
        ...     numpyro.factor("coupling", 2.0 * jnp.sum(s[1:] * s[:-1]))
        ...
        >>> kernel = BlockGibbs(model)
        >>> mcmc = MCMC(kernel, num_warmup=100, num_samples=1000, progress_bar=False)
        >>> mcmc.run(jax.random.key(0))
        >>> kernel.blocks
        {'x': '1 chain(s) of 100 along axis 0'}
        >>> x = mcmc.get_samples()["x"]
        >>> assert abs(x.mean() - 0.5) < 0.15
    """

    state_type = BlockGibbsState

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        blocks: Mapping[str, int] | None = None,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        super().__init__(model, potential_fn, weights="exact", supports=supports)
        if blocks is not None and not isinstance(blocks, Mapping):
            raise TypeError(
                "BlockGibbs: `blocks` maps site names to the axis their chains run along, "
                f"e.g. {{'x': 0}}; got {blocks!r}."
            )
        self._stated_blocks = None if blocks is None else dict(blocks)
        self._blocks_found: dict[str, str] | None = None

    @property
    def blocks(self) -> dict[str, str] | None:
        """Per site, its blocks in words (found at ``init``; ``None`` before)."""
        return None if self._blocks_found is None else dict(self._blocks_found)

    def _setup(self, target: DiscreteTarget) -> None:
        layout = target.layout
        counts = block_gibbs.value_counts(layout.coordinate_supports())
        for name in layout.names:
            largest = int(counts[layout.site_coords(name)].max())
            if largest > block_gibbs.MAX_BLOCK_VALUES:
                values = "an unbounded number of" if largest >= UNBOUNDED else f"{largest}"
                raise ValueError(
                    f"BlockGibbs: site {name!r} has coordinates with {values} values "
                    f"(support {layout.supports[layout.names.index(name)]}); chain blocks "
                    f"draw from at most {block_gibbs.MAX_BLOCK_VALUES} values per "
                    "coordinate. Use ChromaticGibbs or ALBP for this site."
                )
        if target.structure_note:
            warnings.warn(
                f"BlockGibbs could not detect the structure of the model: "
                f"{target.structure_note}. It samples one coordinate at a time; use "
                "`chain_method='sequential'` or 'vectorized'.",
                UserWarning,
                stacklevel=4,
            )
        try:
            found = find_chain_blocks(
                target.structure, layout.names, layout.shapes, self._stated_blocks
            )
        except NotAChainError as error:
            raise ValueError(f"BlockGibbs: {error}") from None
        self._blocks_found = found.describe(dict(zip(layout.names, layout.shapes, strict=True)))
        plan = block_gibbs.block_plan(found, target.structure, layout.coordinate_supports())
        # the draws are exact conditionals where the structure is proven: no MH test
        self._mh_test = not target.structure.exact
        sweep = block_gibbs.build_kernel(plan, mh_test=self._mh_test)
        self._transition = lambda rng_key, position, log_terms, step: sweep(
            rng_key, position, log_terms
        )

    def _stuck_advice(self, site: str) -> str:
        return "Its draws are exact conditionals: try a longer run."
