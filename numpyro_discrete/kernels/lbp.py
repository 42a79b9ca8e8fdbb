"""numpyro kernels for the locally balanced path proposal: :class:`LBP` (fixed path length)
and :class:`ALBP` (path length adapted during warmup). Both run the core ALBP step
(:func:`numpyro_discrete.core.path_length.build_kernel`, through
:mod:`~numpyro_discrete.kernels.path_kernel`); they differ in how the path length is chosen,
as their papers do."""

from collections.abc import Callable, Mapping
import warnings

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core import path_length
from numpyro_discrete.core.local_ratios import LocalFn
from numpyro_discrete.core.neighbourhood import SupportKind
from numpyro_discrete.core.state import State, select
from numpyro_discrete.kernels.arguments import is_integer, is_number
from numpyro_discrete.kernels.path_kernel import ALBPState, LBPState, PathKernel
from numpyro_discrete.model.layout import SiteSupport
from numpyro_discrete.model.target import DiscreteTarget

__all__ = ["ALBP", "ALBPState", "LBP", "LBPState"]


# ALBP warns when R ends near 1 and the acceptance rate is below the target by more than
# this margin
LOW_ACCEPTANCE_MARGIN = 0.15


def _adaptation(state: ALBPState) -> path_length.PathLengthState:
    return path_length.PathLengthState(
        state.path_length, state.mean_path_length, state.window_accept_prob
    )


class LBP(PathKernel):
    """
    Locally balanced proposal with an auxiliary path of ``R`` distinct coordinates (LBP-R)
    for the discrete latent sites of a model [1, 2]: binary, categorical and integer-valued
    (ordinal) sites, in any mix of shapes. Each step draws ``R`` coordinates without
    replacement with probability proportional to their locally balanced weights
    ``sum_v g(pi(x^{j<-v}) / pi(x))`` (estimated from one gradient, or computed exactly),
    moves each to a new value ``v`` drawn in proportion to its own weight, and applies a
    Metropolis-Hastings correction over the path. ``R = 1`` is Gibbs-with-Gradients [3].
    New values: a binary coordinate flips; a categorical one takes any other category; an
    ordinal one moves by one of the distances of its ladder (1 up to twice the site's scale,
    its standard deviation under the model at ``init``: the weights choose the distance),
    or within ``ordinal_window`` of its value when one is given, inside its support. Each step
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
    :param int path_length: ``R``, the number of coordinates changed per step.
    :param str balancing: ``"sqrt"`` (``g(t) = sqrt(t)``) or ``"barker"``
        (``g(t) = t / (1 + t)``).
    :param weights: how local ratios are computed: ``"gradient"`` (first-order Taylor
        expansion of the float-relaxed log density, one gradient per state), ``"exact"``
        (every single-coordinate change evaluated, ``sum_j (|S_j| - 1)`` batched
        evaluations per state) or ``"auto"``; one mode for all sites or a dict per site
        name. ``"auto"`` decides per site at ``init``: exact for categorical sites (their
        values are unordered, so a gradient in the value means nothing) and for sites the
        model cannot be differentiated in (a value used as an index, ``locs[z]``) or whose
        gradient is zero everywhere (used only in comparisons), exact where the structure
        makes exact ratios cheap and the site is not affine, exact where the gradient
        ratios of moves of one unit are off by more than 1 nat (median over 16
        coordinates at a prior draw), the gradient otherwise (``docs/guide/structure.md``).
        The choice is reported by :attr:`weights_mode` (a dict ``{site: "gradient" |
        "exact"}``) after ``init``.
    :param int ordinal_window: ``None`` (default) for moves in the units of each ordinal site
        (:mod:`~numpyro_discrete.model.move_scales`: distances ``1`` and ``s/8 .. 2s`` for a
        site of scale ``s``), or the half-width of a window of new values around the current
        value, the same for every ordinal site.
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
        >>> mcmc = MCMC(LBP(model, path_length=5), num_warmup=200, num_samples=2000,
        ...             progress_bar=False)
        >>> mcmc.run(jax.random.key(0))
        >>> x = mcmc.get_samples()["x"]
        >>> x.dtype.kind
        'i'
        >>> assert abs(x.mean() - 0.3) < 0.02
    """

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        path_length: int | None = None,
        balancing: str = "sqrt",
        weights: str | Mapping[str, str] = "auto",
        ordinal_window: int | None = None,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        length = 1 if path_length is None else path_length
        if not (is_integer(length) and length >= 1):
            raise ValueError(
                f"LBP: `path_length` must be an integer >= 1 (the number of coordinates "
                f"changed per step), got {length!r}."
            )
        super().__init__(
            model,
            potential_fn,
            balancing=balancing,
            weights=weights,
            ordinal_window=ordinal_window,
            supports=supports,
        )
        self._path_length = int(length)

    def _path_length_bound(self, target: DiscreteTarget) -> int:
        num_coords = target.num_coords
        if self._path_length > num_coords:
            raise ValueError(
                f"LBP: `path_length={self._path_length}` exceeds the number of discrete "
                f"coordinates ({num_coords}); use `path_length <= {num_coords}`."
            )
        with jax.ensure_compile_time_eval():  # init may run under jit or pmap
            offsets = np.asarray(target.neighbourhood.candidates(jnp.zeros(num_coords, int)))
        kind = np.asarray(target.supports.kind)
        unit_steps = np.all(
            (kind == SupportKind.BINARY)
            | ((kind == SupportKind.ORDINAL) & (np.max(np.abs(offsets), axis=1) == 1))
        )
        if self._path_length % 2 == 0 and unit_steps:
            # every step moves exactly R coordinates by +-1, so sum(x) mod 2 never changes
            warnings.warn(
                f"LBP with an even `path_length={self._path_length}` on binary sites (or "
                "ordinal sites moved by 1) never changes the parity of the sum "
                "of the values, so the chain cannot leave the half of the state space it "
                "starts in. Use an odd `path_length`, a larger `ordinal_window`, or ALBP.",
                stacklevel=4,
            )
        return self._path_length

    def _init_state(self, rng_key: jax.Array, state: State) -> LBPState:
        length = jnp.asarray(float(self._path_length), jnp.result_type(float))
        return LBPState(**self._initial_fields(rng_key, state), path_length=length)

    def _step(self, state: LBPState, position: State, local_fn: LocalFn) -> LBPState:
        key_next, key_step = random.split(state.rng_key)
        new, info, _ = self._transition(key_step, position, local_fn, state.path_length)
        return LBPState(
            **self._step_fields(state, new, info, key_next), path_length=state.path_length
        )


class ALBP(PathKernel):
    """
    Adaptive locally balanced proposal [1]: :class:`LBP` whose path length is tuned during
    warmup so that the acceptance rate reaches `target_accept_prob` (0.574 is optimal for
    locally balanced proposals: the optimal ``R`` then grows like ``N^(2/3)``). The
    real-valued path length ``R_t`` follows ``R_{t+1} = clip(R_t + a_t - target, 1, R_max)``
    during warmup (Alg. 2) and is frozen after it, at its average over the second half of
    warmup (the recursion's gain is constant, so the last iterate alone is noisy); every
    step uses the path length ``floor(R_t) + Bernoulli(R_t - floor(R_t))``, so that each
    post-warmup step is an exact mixture of LBP-R kernels. When warmup has ended with ``R``
    near 1 and an acceptance rate far below the target (a longer path cannot help: the
    proposal itself is poor), a ``RuntimeWarning`` names the sites whose weights come from
    the gradient and suggests exact weights. The check runs at the end of warmup, inside
    the compiled step (a host callback), under every chain method and with numpyro's
    progress bar on or off.

    **References:**

    1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
       Hanjun Dai, Dale Schuurmans (2022)
    2. *Path Auxiliary Proposal for MCMC in Discrete Space*, Haoran Sun, Hanjun Dai, Wei Xia,
       Arun Ramamurthy (2021)

    :param model: as in :class:`LBP`.
    :param potential_fn: as in :class:`LBP`.
    :param float target_accept_prob: target acceptance rate of the adaptation, in (0, 1).
    :param float init_path_length: initial path length ``R_1 >= 1``.
    :param int max_path_length: upper bound ``R_max`` of the path length; defaults to the
        number of discrete coordinates. It is also the static bound of the path sampler.
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
        >>> mcmc.run(jax.random.key(0), extra_fields=("accept_prob", "path_length"))
        >>> extra = mcmc.get_extra_fields()
        >>> assert 0.45 < extra["accept_prob"].mean() < 0.7
        >>> assert extra["path_length"].min() == extra["path_length"].max() > 5  # frozen
        >>> assert abs(mcmc.get_samples()["x"].mean() - 0.3) < 0.01
    """

    def __init__(
        self,
        model: Callable | None = None,
        potential_fn: Callable | None = None,
        *,
        target_accept_prob: float = 0.574,
        init_path_length: float | None = None,
        max_path_length: int | None = None,
        balancing: str = "sqrt",
        weights: str | Mapping[str, str] = "auto",
        ordinal_window: int | None = None,
        supports: Mapping[str, SiteSupport] | None = None,
    ) -> None:
        init_length = 1.0 if init_path_length is None else init_path_length
        max_length = max_path_length
        if not (is_number(target_accept_prob) and 0.0 < target_accept_prob < 1.0):
            raise ValueError(
                f"ALBP: `target_accept_prob` must lie in (0, 1), got {target_accept_prob!r}."
            )
        if not (is_number(init_length) and init_length >= 1.0):
            raise ValueError(f"ALBP: `init_path_length` must be >= 1, got {init_length!r}.")
        if max_length is not None and not (is_integer(max_length) and max_length >= 1):
            raise ValueError(
                f"ALBP: `max_path_length` must be None or an integer >= 1, got {max_length!r}."
            )
        if max_length is not None and init_length > max_length:
            raise ValueError(
                f"ALBP: `init_path_length={init_length}` exceeds `max_path_length={max_length}`."
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
        self._init_path_length = float(init_length)
        self._max_path_length_argument = None if max_length is None else int(max_length)

    def _reset_init(self) -> None:
        super()._reset_init()
        self._warned_low_acceptance = False

    def _path_length_bound(self, target: DiscreteTarget) -> int:
        bound = self._max_path_length_argument
        return target.num_coords if bound is None else min(bound, target.num_coords)

    def _init_state(self, rng_key: jax.Array, state: State) -> ALBPState:
        adaptation = path_length.init(min(self._init_path_length, self._max_path_length))
        return ALBPState(**self._initial_fields(rng_key, state), **adaptation._asdict())

    def _step(self, state: ALBPState, position: State, local_fn: LocalFn) -> ALBPState:
        key_next, key_step = random.split(state.rng_key)
        new, info, _ = self._transition(key_step, position, local_fn, state.path_length)
        # Alg. 2: Robbins-Monro on R_t during warmup only; frozen afterwards
        current = _adaptation(state)
        adapted = path_length.update(
            current,
            state.i,
            info.accept_prob,
            self._num_warmup,
            self._target_accept_prob,
            self._max_path_length,
        )
        adapted = select(state.i < self._num_warmup, adapted, current)
        return ALBPState(**self._step_fields(state, new, info, key_next), **adapted._asdict())

    def _check_warmup_end(self, state: LBPState) -> LBPState:
        # in the compiled step, under a `lax.cond` false but at the end of warmup, reporting
        # by `pure_callback` (the stuck-coordinate check's way): it warns with the progress
        # bar off too (scripts, CI, vectorized chains), and keeps JAX's fast dispatch, which
        # a `jax.debug.callback` here lost (progress-bar steps 3x slower, measured)
        if self._num_warmup == 0:
            return state
        step = state.i[0] if self._batched else state.i

        def report(state: LBPState) -> LBPState:
            flag = jax.pure_callback(
                self._check_adaptation,
                jax.ShapeDtypeStruct((), jnp.int32),
                state.mean_path_length,
                state.window_accept_prob,
                vmap_method="sequential",
            )
            # the callback's result (always 0) is used, so that it is never elided
            return state._replace(coordinates_changed=state.coordinates_changed | (flag != 0))

        return lax.cond(step == self._num_warmup, report, lambda s: s, state)

    def _check_adaptation(self, mean_path_length: np.ndarray, accept_prob: np.ndarray) -> np.int32:
        """Warn, once per run (``init`` resets it), when warmup ends at ``R`` near 1 with
        an acceptance rate far below the target in some chain: a longer path cannot help,
        the proposal itself is poor."""
        low = [
            (float(r), float(a))
            for r, a in zip(np.ravel(mean_path_length), np.ravel(accept_prob), strict=True)
            if r < 1.5 and a < self._target_accept_prob - LOW_ACCEPTANCE_MARGIN
        ]
        if self._warned_low_acceptance or not low:
            return np.int32(0)
        self._warned_low_acceptance = True
        mean_path_length, accept_prob = low[0]
        modes = self._target.weights_mode
        gradient_sites = [name for name, mode in modes.items() if mode == "gradient"]
        exact = {name: "exact" for name in gradient_sites}
        advice = (
            f"The gradient ranks the moves of sites {gradient_sites} poorly here: pass "
            f"`weights={exact}` (exact local ratios) to ALBP."
            if gradient_sites
            else "Every site already has exact weights: the conditional is sharply peaked "
            "(its values are strongly coupled); a block or structure-aware kernel "
            "(ChromaticGibbs) may mix better."
        )
        warnings.warn(
            f"ALBP: warmup ended at path length R = {float(mean_path_length):.2f} (its "
            f"minimum is 1) with acceptance {float(accept_prob):.2f}, far below the target "
            f"{self._target_accept_prob}. {advice}",
            RuntimeWarning,
            stacklevel=1,
        )
        return np.int32(0)
