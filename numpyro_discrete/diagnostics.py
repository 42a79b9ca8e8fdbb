"""What a run's chains say about its discrete sites, :func:`diagnose`: per site, the split
R-hat and effective sample size of its summaries and the chains that never moved it, with a
warning naming the sites where the chains disagree or carry little information.

numpyro's ``MCMC`` prints nothing when chains disagree; Stan and PyMC warn after sampling
when R-hat exceeds 1.01. A discrete site's draws are integers, often of a few values, so
its summaries are chosen to make R-hat meaningful:

- a site of at most :data:`MAX_COORDINATES_BY_VALUE` coordinates: each coordinate's value;
- a larger one: the model's log joint at each draw (Stan's ``lp__``), one summary that does
  not change when chains label a mixture's components differently (a label switch is not a
  disagreement), and whose disagreement between chains a max over hundreds of coordinates
  would drown in chance; where the model cannot be evaluated at the draws (a kernel given a
  ``potential_fn``, samples passed without their run), the mean of the site's values.
"""

from collections.abc import Mapping
import dataclasses
import warnings

import numpy as np

import jax

from numpyro import handlers
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from numpyro.infer import MCMC
from numpyro.infer.util import log_density

from numpyro_discrete.numpyro_internals import run_arguments

__all__ = [
    "MAX_COORDINATES_BY_VALUE",
    "MAX_R_HAT",
    "MIN_ESS",
    "Diagnosis",
    "SiteDiagnosis",
    "diagnose",
]

MAX_R_HAT = 1.01
"""The largest split R-hat of a site's summaries without a warning (Vehtari et al. 2021)."""

MIN_ESS = 100.0
"""The smallest effective sample size of a site's summaries without a warning."""

MAX_COORDINATES_BY_VALUE = 16
"""A site of at most this many coordinates is summarised by each coordinate's value; a
larger one by the model's log joint (or, without the model, the mean of its values)."""


@dataclasses.dataclass(frozen=True)
class SiteDiagnosis:
    """
    One discrete site's diagnosis.

    - **site** - the site's name.
    - **summary** - ``"values"`` (each coordinate's value), ``"log joint"`` (the model's log
      joint at each draw) or ``"mean"`` (the mean of its values over the coordinates).
    - **r_hat** - the largest split R-hat of the summaries (1 where every chain holds one
      and the same value throughout; ``inf`` where chains hold different constant values).
    - **ess** - the smallest effective sample size of the summaries that vary.
    - **stuck_chains** - the chains in which the site never changed, where another chain
      changed it.
    """

    site: str
    summary: str
    r_hat: float
    ess: float
    stuck_chains: tuple[int, ...]

    def problems(self, max_r_hat: float = MAX_R_HAT, min_ess: float = MIN_ESS) -> list[str]:
        """What is wrong, in words; empty where nothing is."""
        found = []
        if self.r_hat > max_r_hat:
            found.append(f"split R-hat {self.r_hat:.4g} > {max_r_hat}")
        if self.ess < min_ess:
            found.append(f"ESS {self.ess:.3g} < {min_ess:g}")
        if self.stuck_chains:
            found.append(f"chains {list(self.stuck_chains)} never moved it")
        return found


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """
    :func:`diagnose`'s result: one :class:`SiteDiagnosis` per discrete site, and the
    thresholds it was judged by; ``str`` gives a table.
    """

    sites: tuple[SiteDiagnosis, ...]
    num_chains: int
    num_samples: int
    max_r_hat: float = MAX_R_HAT
    min_ess: float = MIN_ESS

    @property
    def ok(self) -> bool:
        """Whether no site has a problem."""
        return not self.flagged

    @property
    def flagged(self) -> dict[str, list[str]]:
        """The sites with problems, each with their descriptions."""
        found = {row.site: row.problems(self.max_r_hat, self.min_ess) for row in self.sites}
        return {site: problems for site, problems in found.items() if problems}

    def __str__(self) -> str:
        header = f"{'site':>16} {'summary':>8} {'r_hat':>8} {'ess':>9}  problems"
        lines = [f"{self.num_chains} chains x {self.num_samples} draws", header]
        for row in self.sites:
            problems = "; ".join(row.problems(self.max_r_hat, self.min_ess)) or "-"
            lines.append(
                f"{row.site:>16} {row.summary:>8} {row.r_hat:>8.3f} {row.ess:>9.1f}  {problems}"
            )
        return "\n".join(lines)


def diagnose(
    mcmc: MCMC | Mapping[str, np.ndarray],
    *,
    max_r_hat: float = MAX_R_HAT,
    min_ess: float = MIN_ESS,
    warn: bool = True,
) -> Diagnosis:
    """
    Diagnose the discrete sites of a finished run: per site, the split R-hat and the
    effective sample size of its summaries (see this module's docstring) and the chains that
    never moved it. With `warn`, a ``UserWarning`` names every site above `max_r_hat`,
    below `min_ess`, or left where it started by some chain while another chain moved it.

    R-hat needs several chains to compare (``num_chains`` of 4 is Stan's default); with one
    chain, its two halves are compared.

    :param mcmc: a ``numpyro.infer.MCMC`` after ``run``, or its samples grouped by chain
        (``mcmc.get_samples(group_by_chain=True)``); the discrete sites are those of integer
        or boolean dtype. Only a run gives the model's log joint for the larger sites.
    :param float max_r_hat: the largest split R-hat without a warning.
    :param float min_ess: the smallest effective sample size without a warning.
    :param bool warn: whether to warn of the problems found.
    :return: a :class:`Diagnosis`; ``print`` it for a table.

    **Example**

    .. doctest::

        >>> import jax
        >>> import numpyro
        >>> import numpyro.distributions as dist
        >>> from numpyro.infer import MCMC
        >>> from numpyro_discrete import ChromaticGibbs, diagnose
        ...
        >>> def model():
        ...     numpyro.sample("x", dist.Bernoulli(0.3).expand([3]))
        ...
        >>> mcmc = MCMC(ChromaticGibbs(model), num_warmup=100, num_samples=1000,
        ...             num_chains=2, chain_method="sequential", progress_bar=False)
        >>> mcmc.run(jax.random.key(0))
        >>> diagnosis = diagnose(mcmc)
        >>> diagnosis.ok
        True
        >>> [(row.site, row.summary) for row in diagnosis.sites]
        [('x', 'values')]
    """
    samples = mcmc.get_samples(group_by_chain=True) if isinstance(mcmc, MCMC) else mcmc
    arrays = {name: np.asarray(value) for name, value in samples.items()}
    discrete = {
        name: value
        for name, value in arrays.items()
        if np.issubdtype(value.dtype, np.integer) or value.dtype == bool
    }
    if not discrete:
        raise ValueError(
            f"diagnose: no discrete sites among the samples {sorted(samples)} (a discrete site's "
            "samples are integers)."
        )
    shapes = {np.shape(value)[:2] for value in discrete.values()}
    num_chains, num_samples = shapes.pop()
    if num_samples < 4:
        raise ValueError(f"diagnose: {num_samples} draws per chain; at least 4 are needed.")
    large = any(v[0, 0].size > MAX_COORDINATES_BY_VALUE for v in discrete.values())
    log_joint = _log_joint(mcmc, samples) if large and isinstance(mcmc, MCMC) else None
    rows = tuple(_site_diagnosis(name, value, log_joint) for name, value in discrete.items())
    diagnosis = Diagnosis(rows, num_chains, num_samples, max_r_hat, min_ess)
    flagged = diagnosis.flagged
    if warn and flagged:
        found = "; ".join(f"{site!r}: {', '.join(problems)}" for site, problems in flagged.items())
        warnings.warn(
            f"The chains of {num_chains} x {num_samples} draws disagree or carry little "
            f"information on discrete sites {list(flagged)} ({found}). Their estimates are "
            "not to be trusted yet: run longer or more chains, and see the troubleshooting "
            "page of the documentation for a kernel that moves such sites better.",
            UserWarning,
            stacklevel=2,
        )
    return diagnosis


def _log_joint(mcmc: MCMC, samples: dict) -> np.ndarray | None:
    """The model's log joint at each draw, ``(chains, samples)``; ``None`` where the kernel
    has no model, numpyro no longer keeps the run's arguments, or the model cannot be
    evaluated at the draws. Sites the samples lack (marked for enumeration) are drawn from
    the model, which adds noise the same in every chain."""
    model = getattr(mcmc.sampler, "model", None)
    arguments = run_arguments(mcmc)
    if model is None or arguments is None:
        return None
    args, kwargs = arguments
    num_chains, num_samples = np.shape(next(iter(samples.values())))[:2]
    flat = jax.tree.map(lambda v: v.reshape((num_chains * num_samples,) + v.shape[2:]), samples)

    def one(draw: dict) -> jax.Array:
        seeded = handlers.seed(model, rng_seed=0)
        return log_density(seeded, args, kwargs, draw)[0]

    try:
        values = jax.jit(lambda draws: jax.lax.map(one, draws, batch_size=64))(flat)
    except Exception:  # any model that cannot be evaluated at the draws: do without
        return None
    values = np.asarray(values, np.float64).reshape(num_chains, num_samples)
    return values if np.all(np.isfinite(values)) else None


def _site_diagnosis(name: str, draws: np.ndarray, log_joint: np.ndarray | None) -> SiteDiagnosis:
    """`draws` ``(chains, samples, ...)`` of one site, summarised and diagnosed."""
    num_chains, num_samples = draws.shape[:2]
    flat = draws.reshape(num_chains, num_samples, -1).astype(np.float64)
    if flat.shape[-1] <= MAX_COORDINATES_BY_VALUE:
        summary, summaries = "values", flat
    elif log_joint is not None:
        summary, summaries = "log joint", log_joint[..., None]
    else:
        summary, summaries = "mean", flat.mean(-1, keepdims=True)
    moved = np.any(flat != flat[:, :1], axis=(1, 2))
    # chains that never moved it while another chain did (where none moved, R-hat of the
    # summaries tells whether they disagree)
    stuck = tuple(int(c) for c in np.flatnonzero(~moved)) if moved.any() else ()
    return SiteDiagnosis(name, summary, _r_hat(summaries), _ess(summaries), stuck)


def _r_hat(summaries: np.ndarray) -> float:
    """The largest split R-hat over the columns of ``(chains, samples, K)``: 1 for a column
    constant over every chain, ``inf`` for one constant within each chain but not across."""
    within = summaries.var(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.asarray(split_gelman_rubin(summaries), np.float64)
    constant = np.all(within == 0, axis=0)
    across = np.ptp(summaries.mean(axis=1), axis=0) > 0
    values = np.where(constant, np.where(across, np.inf, 1.0), values)
    # a column that varies in only one half of a chain: split R-hat's variance ratio is inf
    return float(np.max(np.where(np.isnan(values), np.inf, values)))


def _ess(summaries: np.ndarray) -> float:
    """The smallest effective sample size over the columns that vary (``inf`` if none)."""
    varies = np.any(summaries != summaries[:1, :1], axis=(0, 1))
    if not np.any(varies):
        return float("inf")
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.asarray(effective_sample_size(summaries[..., varies]), np.float64)
    return float(np.min(np.where(np.isnan(ess), 0.0, ess)))
