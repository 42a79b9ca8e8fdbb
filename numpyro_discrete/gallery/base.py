"""The types of the gallery and the reference computations its entries share.

An entry (:class:`GalleryModel`) is a numpyro model as users write it, a data simulator,
label-invariant summaries of posterior draws and a reference for those summaries
(:class:`Reference`). The references are computed by :func:`enumerate_sites` (exact
enumeration of a few discrete sites with numpyro's own ``log_density``), by closed forms in
the model modules, or by :func:`enumerated_nuts_reference` (NUTS with the discrete sites
summed out by numpyro's enumeration: exact in the discrete sites, Monte Carlo in the rest).
"""

from collections.abc import Callable, Mapping
import itertools
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro import handlers
from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import log_density

__all__ = [
    "SIZES",
    "Dataset",
    "GalleryModel",
    "Reference",
    "batch_summaries",
    "enumerate_sites",
    "enumerated_nuts_reference",
    "exact_reference",
    "half_normal_log_grid",
    "mcse",
]

#: The two sizes of every simulator: what a user would run, and the size of the reference.
SIZES = ("example", "exact")

Summaries = dict[str, np.ndarray]


class Dataset(NamedTuple):
    """Simulated data for one gallery model.

    - **args** - positional arguments of the model (observations first).
    - **kwargs** - keyword arguments of the model.
    - **truth** - the values that simulated the data (for plots and reports only).
    """

    args: tuple
    kwargs: dict[str, Any]
    truth: dict[str, Any]


class Reference(NamedTuple):
    """The posterior means of an entry's summaries, from a method a skeptic accepts.

    - **mean** - summary name to its posterior mean (numpy arrays).
    - **se** - summary name to the standard error of ``mean``: zero for exact references,
      the Monte Carlo standard error (from the effective sample size) for sampled ones.
    - **method** - how it was computed, in words.
    - **error** - a bound on the deterministic error of ``mean`` (quadrature, truncation),
      in the units of the summaries; zero where there is none.
    - **probs** - the normalised probabilities of the enumerated states or grid points the
      reference sums over, or ``None`` for sampled references.
    """

    mean: Summaries
    se: Summaries
    method: str
    error: float = 0.0
    probs: np.ndarray | None = None


class GalleryModel(NamedTuple):
    """One model of the gallery.

    - **name** - short name, the key of :data:`numpyro_discrete.gallery.GALLERY`.
    - **model** - the numpyro model, called as ``model(*data.args, **data.kwargs)``.
    - **simulate** - ``simulate(seed, size) -> Dataset``, `size` one of :data:`SIZES`:
      ``"example"`` (what a user would run) or ``"exact"`` (small enough for the reference).
    - **summaries** - ``summaries(samples, data) -> {name: array}``: label-invariant
      functions of a batch of posterior draws (a dict of arrays with one leading draw
      axis), each with the draw axis first.
    - **reference** - ``reference(data) -> Reference`` for the ``"exact"`` size.
    - **reference_kind** - ``"enumeration"``, ``"closed form"`` or ``"enumerated NUTS"``.
    - **description** - one paragraph: the model and what its reference computes.
    - **citations** - the papers or books the model comes from.
    - **enumerated** - ``(model, summaries)`` where numpyro's enumeration can sum every
      discrete site out (``NUTS`` on the model runs; same arguments as **model**), and the
      summaries of its draws (of the continuous sites only, or with the discrete sites
      replaced by their exact conditional expectations); ``None`` where it cannot (infinite
      supports, sites coupled outside plates).
    """

    name: str
    model: Callable[..., None]
    simulate: Callable[[int, str], Dataset]
    summaries: Callable[[Mapping[str, Any], Dataset], Summaries]
    reference: Callable[[Dataset], Reference]
    reference_kind: str
    description: str
    citations: tuple[str, ...] = ()
    enumerated: (
        tuple[Callable[..., None], Callable[[Mapping[str, Any], Dataset], Summaries]] | None
    ) = None


def check_size(size: str) -> None:
    """Raise a ``ValueError`` naming :data:`SIZES` when `size` is not one of them."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")


def batch_summaries(
    entry: GalleryModel, samples: Mapping[str, Any], data: Dataset, batch_ndim: int = 1
) -> Summaries:
    """``entry.summaries`` of draws with `batch_ndim` leading axes (e.g. 2 for numpyro's
    ``group_by_chain=True``): the batch axes are flattened for the summaries and restored."""
    samples = {k: np.asarray(v) for k, v in samples.items()}
    batch = next(iter(samples.values())).shape[:batch_ndim]
    flat = {k: v.reshape((-1,) + v.shape[batch_ndim:]) for k, v in samples.items()}
    out = entry.summaries(flat, data)
    return {k: np.asarray(v).reshape(batch + np.shape(v)[1:]) for k, v in out.items()}


def mcse(draws: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of the mean of each coordinate of ``(chains, draws, ...)``
    draws, from numpyro's effective sample size; ``0`` where the draws are constant."""
    draws = np.asarray(draws, np.float64)
    flat = draws.reshape((-1,) + draws.shape[2:])
    var = flat.var(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.asarray(effective_sample_size(draws))
        return np.where(var > 0, np.sqrt(var / ess), 0.0)


def exact_reference(
    values: Summaries, log_weights: np.ndarray, method: str, error: float = 0.0
) -> Reference:
    """The :class:`Reference` of summaries ``values[name][s]`` at states (or grid points)
    ``s`` of unnormalised log probability ``log_weights[s]``."""
    log_weights = np.asarray(log_weights, np.float64)
    probs = np.exp(log_weights - log_weights.max())
    probs /= probs.sum()
    mean = {k: np.tensordot(probs, np.asarray(v, np.float64), axes=1) for k, v in values.items()}
    se = {k: np.zeros_like(v) for k, v in mean.items()}
    return Reference(mean, se, method, error, probs)


def half_normal_log_grid(grid: np.ndarray, scale: float) -> np.ndarray:
    """Log integration weights of a ``HalfNormal(scale)`` noise scale on the log-spaced
    `grid`: the unnormalised density, the Jacobian of ``log sigma`` and the trapezoid rule's
    end weights, for references that integrate the noise scale numerically."""
    trapezoid = np.ones(grid.shape)
    trapezoid[[0, -1]] = 0.5
    return -0.5 * (grid / scale) ** 2 + np.log(grid) + np.log(trapezoid)


def enumerate_sites(
    model: Callable[..., None],
    args: tuple,
    kwargs: Mapping[str, Any],
    supports: Mapping[str, tuple[tuple[int, ...], int]],
    fixed: Mapping[str, Any] | None = None,
    chunk: int = 8192,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every joint value of the discrete sites and its log joint density, by brute force.

    :param model: a numpyro model whose latent sites are those of `supports` and `fixed`.
    :param tuple args: the model's positional arguments.
    :param dict kwargs: its keyword arguments.
    :param dict supports: site name to ``(shape, num_values)``: each element takes the values
        ``0 .. num_values - 1``.
    :param dict fixed: values of the model's other latent sites (conditioned on).
    :param int chunk: states evaluated per batch.
    :return: ``(states, log_joint)``: site name to ``(S,) + shape`` integer arrays over all
        ``S`` joint values, and their log joint densities from numpyro's ``log_density``
        (``float64`` numpy).
    """
    names = list(supports)
    sizes = [int(np.prod(supports[n][0], dtype=int)) for n in names]
    values = [supports[n][1] for n in names]
    columns = [v for v, size in zip(values, sizes, strict=True) for _ in range(size)]
    flat = np.array(list(itertools.product(*[range(v) for v in columns])), np.int32)
    flat = flat.reshape(-1, len(columns))
    states, start = {}, 0
    for name, size in zip(names, sizes, strict=True):
        states[name] = flat[:, start : start + size].reshape((-1,) + tuple(supports[name][0]))
        start += size
    conditioned = handlers.condition(model, dict(fixed or {}))

    @jax.jit
    def log_joint(batch: dict[str, jax.Array]) -> jax.Array:
        return jax.vmap(lambda one: log_density(conditioned, args, dict(kwargs), one)[0])(batch)

    out = []
    for begin in range(0, flat.shape[0], chunk):
        batch = {k: jnp.asarray(v[begin : begin + chunk]) for k, v in states.items()}
        out.append(np.asarray(log_joint(batch), np.float64))
    return states, np.concatenate(out)


def enumerated_nuts_reference(
    model: Callable[..., None],
    data: Dataset,
    summaries: Callable[[Mapping[str, Any], Dataset], Summaries],
    *,
    seed: int = 0,
    num_warmup: int = 500,
    num_samples: int = 2000,
    num_chains: int = 2,
) -> Reference:
    """NUTS on `model` with its discrete sites summed out by numpyro's enumeration (the
    model must mark them ``infer={"enumerate": "parallel"}``); `summaries` must read only
    the continuous sites. Exact in the discrete sites; the Monte Carlo standard error of
    each mean is reported in ``se``."""
    mcmc = MCMC(
        NUTS(model),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(random.key(seed), *data.args, **data.kwargs)
    draws = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in draws.items()}
    values = summaries(flat, data)
    mean, se = {}, {}
    for name, value in values.items():
        value = np.asarray(value, np.float64).reshape((num_chains, num_samples) + value.shape[1:])
        mean[name] = value.mean((0, 1))
        se[name] = mcse(value)
    method = (
        f"NUTS with the discrete sites enumerated, {num_chains} chains x "
        f"({num_warmup} + {num_samples}), seed {seed}"
    )
    return Reference(mean, se, method)
