"""The discrete block of a partially collapsed Gibbs sampler, :class:`CollapsedDraw`: where the
discrete coordinates are independent given the continuous sites, or form chains that share
no term, :class:`~numpyro_discrete.LBPGibbs` moves the continuous sites on their marginal,
the discrete ones summed out (:func:`summed_out_model`), and then draws the discrete ones
from their exact conditional (:mod:`numpyro_discrete.core.collapse`)."""

from collections.abc import Callable, Mapping
from typing import Any
import warnings

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

import numpyro
from numpyro import handlers
from numpyro.infer.gibbs import GibbsState, with_conditioning
from numpyro.primitives import Messenger

from numpyro_discrete.core import block_gibbs, collapse
from numpyro_discrete.core.neighbourhood import UNBOUNDED
from numpyro_discrete.core.state import Info, SweepState
from numpyro_discrete.kernels.exact_sweep import ExactSweepKernel, ExactSweepState
from numpyro_discrete.model.errors import ModelError
from numpyro_discrete.model.target import DiscreteTarget
from numpyro_discrete.structure.chain_blocks import find_chain_blocks

__all__ = [
    "SUMMED_OUT_FACTOR",
    "TRUNCATION_TOLERANCE",
    "CollapsedDraw",
    "CollapsedDrawState",
    "chain_problem",
    "collapsed_sweep",
    "independence_problem",
    "summed_out_model",
]

TRUNCATION_TOLERANCE = 1e-6
"""The largest conditional probability of a truncated coordinate's last option a sampling
step may give without a warning (the mass beyond it is of that order)."""

SUMMED_OUT_FACTOR = "_discrete_summed_out"
"""The name of the factor :func:`summed_out_model` adds to the model."""


class CollapsedDrawState(ExactSweepState):
    """State of :class:`CollapsedDraw`, its fields those of
    :class:`~numpyro_discrete.kernels.exact_sweep.ExactSweepState` (one class: every
    coordinate drawn at once; ``accept_prob`` is 1)."""

    __slots__ = ()


class CollapsedDraw(ExactSweepKernel):
    """
    Draws every discrete coordinate at once from its exact conditional, for models whose
    discrete coordinates are independent given the continuous sites (mixture labels,
    occupancy and capture indicators, abundances of independent sites: each term of the
    log joint depends on at most one of them, one colour class, detection proven), or form
    chains that share no term (an HMM's states in time, one chain per independent
    sequence: one class of :class:`BlockGibbs`'s chain blocks holding every coordinate,
    each term on one coordinate or two neighbours of a chain).

    As the discrete kernel of :class:`~numpyro_discrete.LBPGibbs` (chosen by default where
    it applies), it is the second half of a partially collapsed Gibbs sampler [1]: the
    inner ``HMC``/``NUTS`` moves the continuous sites on their marginal, the discrete
    coordinates summed out (``sum_j logsumexp_v`` of each coordinate's terms, from ``M``
    batched evaluations of the model; for chains, each chain's normaliser by the forward
    algorithm, from ``M^2`` evaluations; differentiable), and the coordinates are then
    drawn given the new continuous values (chains by forward filtering, backward sampling).
    The continuous sites never wait for the discrete ones: a ridge between them (an
    N-mixture's abundances and detection probability, a mixture's labels and locations, an
    HMM's states and state means) costs nothing. Alone, on a model without continuous
    sites, it draws independent exact samples.

    A coordinate's options are its support's first ``max_values`` values: a larger support
    (a Poisson count) is truncated there, which samples the posterior conditioned on every
    coordinate staying below. A ``RuntimeWarning`` names the site when a sampling step
    gives the last option a conditional probability above :data:`TRUNCATION_TOLERANCE`.

    **References:**

    1. *Partially Collapsed Gibbs Samplers: Theory and Methods*, David A. van Dyk, Taeyoung
       Park (2008)

    :param model: Python callable containing numpyro primitives.
    :param int max_values: the most options of an independent coordinate (default
        :data:`~numpyro_discrete.core.collapse.MAX_SUMMED_VALUES`); each costs one batched
        evaluation of the model's terms per draw, and per gradient of the marginal. A
        coordinate of a chain has at most
        :data:`~numpyro_discrete.core.collapse.MAX_CHAIN_VALUES` values, never truncated.

    **Example**

    .. doctest::

        >>> import jax
        >>> import jax.numpy as jnp
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC, NUTS
        >>> from numpyro_discrete import CollapsedDraw, LBPGibbs
        ...
        >>> def model(y):  # two-component mixture, labels as indices
        ...     locs = numpyro.sample("locs", dist.Normal(0.0, 5.0).expand([2]))
        ...     with numpyro.plate("data", y.shape[0]):
        ...         z = numpyro.sample("z", dist.Bernoulli(0.5))
        ...         numpyro.sample("y", dist.Normal(locs[z], 1.0), obs=y)
        ...
        >>> y = jnp.concatenate([jnp.full(20, -2.0), jnp.full(20, 2.0)])
        >>> kernel = LBPGibbs(NUTS(model), discrete_kernel=CollapsedDraw(model))
        >>> mcmc = MCMC(kernel, num_warmup=300, num_samples=1000, progress_bar=False)
        >>> mcmc.run(jax.random.key(0), y)
        >>> locs = jnp.sort(mcmc.get_samples()["locs"], axis=-1)
        >>> assert jnp.allclose(locs.mean(0), jnp.array([-2.0, 2.0]), atol=0.4)
    """

    state_type = CollapsedDrawState
    _mh_test = False

    def __init__(self, model: Callable, *, max_values: int = collapse.MAX_SUMMED_VALUES) -> None:
        if not callable(model):
            raise TypeError(
                f"CollapsedDraw: `model` must be a numpyro model function, got "
                f"{type(model).__name__}."
            )
        if int(max_values) < 2:
            raise ValueError(f"CollapsedDraw: `max_values` must be at least 2, got {max_values}.")
        self._max_values = int(max_values)
        super().__init__(model, weights="exact")

    @property
    def table(self) -> collapse.OptionTable | None:
        """The options of every coordinate and the terms of each (after ``init``; ``None``
        for chains)."""
        return self._table

    @property
    def chains(self) -> collapse.ChainTable | None:
        """The chain blocks summed out (after ``init``; ``None`` for independent
        coordinates)."""
        return self._chains

    @property
    def blocks(self) -> dict[str, str] | None:
        """Per site, what is summed out, in words (after ``init``; ``None`` before)."""
        return None if self._blocks is None else dict(self._blocks)

    def _reset_init(self) -> None:
        super()._reset_init()
        self._table: collapse.OptionTable | None = None
        self._chains: collapse.ChainTable | None = None
        self._blocks: dict[str, str] | None = None
        self._warned_truncation = False

    def get_diagnostics_str(self, state: CollapsedDrawState) -> str:
        if self._chains is not None:
            return f"exact draws of chains of {self._chains.plan.max_values} values"
        return f"exact draws, {self._table.values.shape[1]} options"

    def _setup(self, target: DiscreteTarget) -> None:
        problem = independence_problem(target)
        if problem:
            along_chains = chain_problem(target)
            if along_chains:
                raise ModelError(
                    f"CollapsedDraw needs discrete coordinates that are independent given the "
                    f"continuous sites, or chains of them that share no term; but {problem}, "
                    f"and {along_chains}. Use BlockGibbs, ChromaticGibbs or the default "
                    "discrete kernel of LBPGibbs."
                )
            self._setup_chains(target)
            return
        structure = target.structure
        layout = target.layout
        self._blocks = {
            name: f"{layout.site_coords(name).size} independent coordinate(s)"
            for name in layout.names
        }
        self._table = table = collapse.option_table(
            target.supports,
            structure.pair_terms,
            structure.pair_coords,
            structure.num_terms,
            self._max_values,
        )
        self._warned_truncation = False

        def transition(
            rng_key: jax.Array, state: SweepState, log_terms: Callable, step: jax.Array
        ) -> tuple[SweepState, tuple[Info, jax.Array]]:
            free, s = collapse.log_potentials(log_terms, table)
            x, log_p, top = collapse.draw(rng_key, table, s)
            info = Info(
                jnp.ones((), s.dtype),
                jnp.array(True),
                jnp.sum(x != state.position, dtype=jnp.int32),
            )
            return SweepState(x, free + log_p), (info, top)

        self._transition = transition

    def _setup_chains(self, target: DiscreteTarget) -> None:
        layout = target.layout
        blocks = find_chain_blocks(target.structure, layout.names, layout.shapes)
        self._chains = collapse.chain_table(blocks, target.structure, layout.coordinate_supports())
        self._blocks = blocks.describe(dict(zip(layout.names, layout.shapes, strict=True)))
        # every draw is the chains' exact conditional: BlockGibbs's sweep of one class
        sweep = block_gibbs.build_kernel(self._chains.plan, mh_test=False)

        def transition(
            rng_key: jax.Array, state: SweepState, log_terms: Callable, step: jax.Array
        ) -> tuple[SweepState, tuple[Info, jax.Array]]:
            new, info = sweep(rng_key, state, log_terms)
            return new, (info, jnp.zeros((), new.log_density.dtype))

        self._transition = transition

    def _step(
        self, state: CollapsedDrawState, position: SweepState, log_terms: Callable
    ) -> CollapsedDrawState:
        key_next, key_step = random.split(state.rng_key)
        new, (info, top) = self._transition(key_step, position, log_terms, state.i)
        state = self.state_type(**self._step_fields(state, new, info, key_next))
        if self._checks_in_step() and self._table is not None and np.any(self._table.truncated):
            state = self._check_truncation(state, top)
        return state

    def _check_truncation(self, state: CollapsedDrawState, top: jax.Array) -> CollapsedDrawState:
        # gated like the stuck-coordinate check: a `pure_callback` under a `lax.cond` that
        # is false unless a sampling step put mass on a truncated coordinate's last option
        step = state.i[0] if self._batched else state.i
        top = jnp.max(top)

        def report(state: CollapsedDrawState) -> CollapsedDrawState:
            flag = jax.pure_callback(
                self._warn_truncation,
                jax.ShapeDtypeStruct((), jnp.int32),
                top,
                vmap_method="sequential",
            )
            return state._replace(num_changed=state.num_changed + flag)

        late = (step > self._num_warmup) & (top > TRUNCATION_TOLERANCE)
        return lax.cond(late, report, lambda s: s, state)

    def _warn_truncation(self, top: np.ndarray) -> np.int32:
        if not self._warned_truncation:
            self._warned_truncation = True
            sites = sorted(
                {
                    self._target.layout.coordinate_name(j)[0]
                    for j in np.flatnonzero(self._table.truncated)
                }
            )
            last = self._table.values.shape[1]
            warnings.warn(
                f"CollapsedDraw: sites {sites} are summed over their first {last} values, but "
                f"a sampling step gave the last of them a conditional probability of "
                f"{float(top):.2g} (more than {TRUNCATION_TOLERANCE}): the truncation cuts "
                f"posterior mass. Pass `CollapsedDraw(model, max_values=...)` with more "
                f"values, or use ChromaticGibbs.",
                RuntimeWarning,
                stacklevel=1,
            )
        return np.int32(0)

    def read_model(
        self, rng_key: jax.Array, model_args: tuple, model_kwargs: Mapping[str, Any]
    ) -> None:
        """Read the model (or take the target handed to the kernel) and set the summation
        up now, before ``init``, so that :meth:`log_marginal` can be evaluated where
        :class:`~numpyro_discrete.LBPGibbs` chooses a chain's start; ``init`` then uses the
        same target."""
        if self._handed_target is None:
            self._handed_target = self._build_target(rng_key, None, model_args, dict(model_kwargs))
        self._target = self._handed_target
        self._setup(self._target)

    def log_marginal(self, model_args: tuple, model_kwargs: Mapping[str, Any]) -> jax.Array:
        """``log p(theta) = f(theta) + sum_j logsumexp_v s_j(v; theta)``, the continuous
        sites' marginal at the values ``theta`` the model is conditioned on in
        `model_kwargs`, from ``M`` batched evaluations of the model's terms (for chains
        ``f(theta) + sum_b log Z_b(theta)``, from ``M^2``)."""
        log_terms = self._target.log_terms(model_args, model_kwargs)
        if self._chains is not None:
            return collapse.chain_log_marginal(log_terms, self._chains)
        return collapse.log_marginal(*collapse.log_potentials(log_terms, self._table))


def independence_problem(target: DiscreteTarget) -> str:
    """Why the coordinates of `target` cannot be summed out one by one (empty if they can)."""
    structure = target.structure
    if target.structure_note:
        return f"the structure could not be read ({target.structure_note})"
    if structure.dense_terms.size or structure.num_colours != 1:
        return f"they interact ({structure.num_colours} colour classes)"
    if not structure.exact:
        return "the detection read values that may change, so independence is not proven"
    if np.any(target.supports.lower <= -UNBOUNDED):
        return "a site's support is unbounded below"
    return ""


def chain_problem(target: DiscreteTarget) -> str:
    """Why the coordinates of `target` cannot be summed out as chains that share no term
    (empty if they can)."""
    structure, layout = target.structure, target.layout
    if target.structure_note:
        return f"the structure could not be read ({target.structure_note})"
    if not structure.exact:
        return "the detection read values that may change, so the chains are not proven"
    counts = block_gibbs.value_counts(layout.coordinate_supports())
    if counts.max() > collapse.MAX_CHAIN_VALUES:
        return (
            f"a coordinate has more than {collapse.MAX_CHAIN_VALUES} values (at most "
            f"{collapse.MAX_CHAIN_VALUES} are summed over along a chain)"
        )
    if structure.dense_terms.size:
        return "a term depends on every coordinate"
    try:
        # each site's longest axis whose lines are chains: independent sequences (S, T)
        # are chains along both axes, and run along T
        collapse.chain_table(
            find_chain_blocks(structure, layout.names, layout.shapes),
            structure,
            layout.coordinate_supports(),
        )
    except ValueError as error:
        return str(error)
    return ""


def summed_out_model(model: Callable, draw: CollapsedDraw) -> Callable:
    """`model` (conditioned: it reads the discrete values from its Gibbs keyword argument)
    with the discrete sites summed out: its sites' log-probabilities are masked and one
    factor adds ``draw``'s :meth:`~CollapsedDraw.log_marginal` at the continuous values it
    drew, so that its log density is the continuous sites' marginal (their priors are
    terms of it) and does not depend on the discrete values at all."""
    return _SummedOut(model, draw)


class _SummedOut:
    # a class, not a closure: numpyro's MCMC pickles kernels, with their models
    def __init__(self, model: Callable, draw: CollapsedDraw) -> None:
        self.model, self.draw = model, draw

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        # the sites are still sampled (the inner kernel reads its sites and their transforms
        # from them), their densities counted by the factor alone
        with handlers.trace() as model_trace, _MaskModelSites():
            self.model(*args, **kwargs)
        theta = {
            name: site["value"]
            for name, site in model_trace.items()
            if site["type"] == "sample" and not site["is_observed"]
        }
        # the model evaluated again inside, hidden from the handlers of the caller (whose
        # trace would see its sites twice)
        with handlers.block():
            log_marginal = self.draw.log_marginal(args, with_conditioning(kwargs, theta))
        numpyro.factor(SUMMED_OUT_FACTOR, log_marginal)


class _MaskModelSites(Messenger):
    """Masks the model's own sample sites, not those a handler below emits while it
    processes one: the log-Jacobian factor numpyro's potential adds for each constrained
    site when it substitutes the site's value (masked, the inner kernel would sample the
    continuous sites in the wrong space)."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0

    def process_message(self, msg: dict) -> None:
        if self._depth == 0 and msg["type"] == "sample":
            if msg["infer"].get("enumerate") == "parallel" and not msg["is_observed"]:
                # a site the user marked for enumeration is summed out by the factor too: held
                # at its first value as an observed site, so that the inner kernel neither
                # samples it (no key here) nor enumerates it again
                fn = msg["fn"]
                first = fn.enumerate_support(expand=False)[0]
                shape = tuple(msg["kwargs"].get("sample_shape", ())) + fn.shape()
                msg["value"] = jnp.broadcast_to(first, shape)
                msg["is_observed"] = True
                msg["infer"] = {k: v for k, v in msg["infer"].items() if k != "enumerate"}
            # as numpyro's `mask` handler does
            msg["fn"] = msg["fn"].mask(False)
        self._depth += 1

    def postprocess_message(self, msg: dict) -> None:
        self._depth -= 1


def collapsed_sweep(
    blocks: tuple, state: GibbsState, model_args: tuple, model_kwargs: Mapping[str, Any] | None
) -> GibbsState:
    """One sweep of the partially collapsed sampler over numpyro ``Gibbs`` blocks ``((draw,
    discrete sites), (inner, continuous sites))``, the inner kernel on
    :func:`summed_out_model`: the inner kernel moves the continuous sites on their
    marginal, then the discrete sites are drawn from their exact conditional given the new
    continuous values. In this order: drawn before, they would be paired with stale
    continuous values."""
    model_kwargs = {} if model_kwargs is None else model_kwargs
    (draw, _), (inner, _) = blocks
    discrete_state, inner_state = state.block_states
    x = discrete_state.z
    # the inner model reads the discrete values it is conditioned on, but its density does
    # not depend on them: its cached potential and gradient stay valid after the draw
    kwargs_inner = with_conditioning(model_kwargs, x)
    inner_state = inner.sample(inner_state, model_args, kwargs_inner)
    constrained = inner.get_constrain_fn(model_args, kwargs_inner)(inner_state.z)
    theta = {name: value for name, value in constrained.items() if name not in x}
    discrete_state = draw.sample(discrete_state, model_args, with_conditioning(model_kwargs, theta))
    rng_key, _ = random.split(state.rng_key)
    return state._replace(
        z={**inner_state.z, **discrete_state.z},
        block_states=(discrete_state, inner_state),
        rng_key=rng_key,
    )
