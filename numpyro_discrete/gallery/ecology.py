"""Ecological models with integer or indicator latents: the N-mixture model of repeated
counts (a Poisson latent abundance per site) and closed-population capture-recapture with
an unknown population size (model M0, written with data augmentation).

**References:**

1. *N-mixture models for estimating population size from spatially replicated counts*,
   J. Andrew Royle (2004)
2. *Analysis of capture-recapture models with individual covariates using data
   augmentation*, J. Andrew Royle (2009); *Hierarchical Modeling and Inference in
   Ecology*, J. Andrew Royle, Robert M. Dorazio (2008), chapter 5
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.special import betaln, gammaln, logsumexp

import jax
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist

from numpyro_discrete.gallery.base import (
    Dataset,
    GalleryModel,
    Reference,
    check_size,
    exact_reference,
)

__all__ = [
    "CAPTURE_RECAPTURE",
    "N_MIXTURE",
    "capture_recapture_data",
    "capture_recapture_model",
    "capture_recapture_reference",
    "n_mixture_data",
    "n_mixture_model",
    "n_mixture_reference",
]

# --- N-mixture ------------------------------------------------------------------------------

#: Prior rate of the abundance rate, ``lambda ~ Exponential(0.1)``; detection ``Beta(2, 2)``.
ABUNDANCE_PRIOR_RATE = 0.1
DETECTION_PRIOR = (2.0, 2.0)
#: ``(sites, visits, lambda, p)`` of the two sizes.
N_MIXTURE_SIZES = {"example": (50, 4, 8.0, 0.5), "exact": (4, 3, 8.0, 0.5)}


def n_mixture_model(counts: jax.Array) -> None:
    """Repeated counts of a closed population: ``N_i ~ Poisson(lambda)`` animals at site
    ``i``, each visit ``j`` counts ``counts_ij ~ Binomial(N_i, p)``; ``lambda ~
    Exponential(0.1)``, ``p ~ Beta(2, 2)``.

    :param counts: ``(sites, visits)`` observed counts.
    """
    num_sites, num_visits = counts.shape
    rate = numpyro.sample("rate", dist.Exponential(ABUNDANCE_PRIOR_RATE))
    detection = numpyro.sample("detection", dist.Beta(*DETECTION_PRIOR))
    with numpyro.plate("sites", num_sites):
        abundance = numpyro.sample("N", dist.Poisson(rate))
        with numpyro.plate("visits", num_visits, dim=-2):
            numpyro.sample("counts", dist.Binomial(abundance, detection), obs=counts.T)


def n_mixture_data(seed: int = 0, size: str = "example") -> Dataset:
    """Counts at 50 sites over 4 visits (``"example"``) or 4 sites over 3 visits
    (``"exact"``), ``lambda = 8``, ``p = 0.5``.

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    num_sites, num_visits, rate, detection = N_MIXTURE_SIZES[size]
    rng = np.random.default_rng(seed)
    abundance = rng.poisson(rate, size=num_sites)
    counts = rng.binomial(abundance[:, None], detection, size=(num_sites, num_visits))
    truth = {"N": abundance, "rate": rate, "detection": detection}
    return Dataset((jnp.asarray(counts, jnp.float32),), {}, truth)


def n_mixture_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The total abundance ``sum_i N_i``, ``lambda`` and ``p``."""
    del data
    return {
        "total_N": np.asarray(samples["N"], np.float64).sum(-1),
        "rate": np.asarray(samples["rate"], np.float64),
        "detection": np.asarray(samples["detection"], np.float64),
    }


def _n_mixture_on_grid(counts, num_rates, num_probs, max_rate, max_abundance):
    """Posterior means on a ``(num_rates, num_probs)`` grid of ``(lambda, p)`` (log-spaced
    ``lambda`` up to `max_rate`, midpoints in ``p``), each ``N_i`` summed to
    `max_abundance`. Returns the summaries, the log weights and the Poisson tail beyond
    `max_abundance` at the grid's largest ``lambda``."""
    log_rate = np.linspace(np.log(0.05), np.log(max_rate), num_rates)
    rate = np.exp(log_rate)[:, None, None]
    prob = ((np.arange(num_probs) + 0.5) / num_probs)[None, :, None]
    abundance = np.arange(max_abundance + 1)[None, None, :]
    log_pois = abundance * np.log(rate) - rate - gammaln(abundance + 1)
    log_weight = (
        np.log(ABUNDANCE_PRIOR_RATE) - ABUNDANCE_PRIOR_RATE * rate[..., 0] + np.log(rate[..., 0])
    ) + ((DETECTION_PRIOR[0] - 1) * np.log(prob) + (DETECTION_PRIOR[1] - 1) * np.log1p(-prob))[
        ..., 0
    ]  # prior density times the Jacobian of log lambda (uniform cells in log lambda and p)
    expected_n = np.zeros(log_weight.shape)
    for site_counts in counts:
        log_site = log_pois.copy()
        for count in site_counts:
            log_bin = (
                gammaln(abundance + 1)
                - gammaln(count + 1)
                - gammaln(np.maximum(abundance - count, 0) + 1)
                + count * np.log(prob)
                + (abundance - count) * np.log1p(-prob)
            )
            log_site = log_site + np.where(abundance >= count, log_bin, -np.inf)
        site_total = logsumexp(log_site, axis=-1)
        log_weight = log_weight + site_total
        expected_n = expected_n + np.sum(abundance * np.exp(log_site - site_total[..., None]), -1)
    shape = log_weight.shape
    values = {
        "total_N": expected_n.reshape(-1),
        "rate": np.broadcast_to(rate[..., 0], shape).reshape(-1),
        "detection": np.broadcast_to(prob[..., 0], shape).reshape(-1),
    }
    return values, log_weight.reshape(-1)


def n_mixture_reference(data: Dataset) -> Reference:
    """Each ``N_i`` summed out by hand up to 400 (the Poisson tail beyond it is below
    ``1e-63`` for every ``lambda`` on the grid), ``(lambda, p)`` on a 240 x 120 grid
    (log-spaced ``lambda`` in ``[0.05, 150]``). The error bound is measured: the largest
    change of a mean when the grid is coarsened to 160 x 80, cut at ``lambda = 100`` and
    the sums truncated at 300."""
    counts = np.asarray(data.args[0], np.int64)
    fine = exact_reference(*_n_mixture_on_grid(counts, 240, 120, 150.0, 400), "")
    coarse = exact_reference(*_n_mixture_on_grid(counts, 160, 80, 100.0, 300), "")
    error = max(float(np.max(np.abs(fine.mean[k] - coarse.mean[k]))) for k in fine.mean)
    method = (
        "each N_i summed out by hand (truncated at 400), (lambda, p) on a 240 x 120 grid, "
        f"error measured against a coarser grid: {error:.1e}"
    )
    return fine._replace(method=method, error=error)


N_MIXTURE = GalleryModel(
    name="n_mixture",
    model=n_mixture_model,
    simulate=n_mixture_data,
    summaries=n_mixture_summaries,
    reference=n_mixture_reference,
    reference_kind="closed form",
    description=(
        "N-mixture model: a Poisson latent abundance N_i per site, Binomial(N_i, p) counts "
        "on repeated visits, Exponential(0.1) abundance rate, Beta(2, 2) detection. "
        "Reference (4 sites, 3 visits): each N_i summed out by hand (truncated at 400, tail "
        "< 1e-63), (lambda, p) on a grid, the error measured against a coarser grid; "
        "summaries: the total abundance, lambda, p."
    ),
    citations=("Royle (2004)",),
)

# --- capture-recapture ------------------------------------------------------------------------

#: ``(true N, occasions, p, augmented size M)`` of the two sizes.
CAPTURE_SIZES = {"example": (100, 5, 0.3, 250), "exact": (15, 4, 0.35, 30)}


def capture_recapture_model(histories: jax.Array) -> None:
    """Model M0 by data augmentation: ``M`` rows of capture histories, the first ``n``
    those of the animals caught, the rest zeros; ``z_i ~ Bernoulli(psi)`` says whether row
    ``i`` is a member of the population, ``y_it ~ Bernoulli(z_i p)``; ``psi, p ~
    Uniform(0, 1)``. The population size is ``N = sum_i z_i``.

    :param histories: ``(M, T)`` binary capture histories, zero rows appended.
    """
    num_rows, num_occasions = histories.shape
    psi = numpyro.sample("psi", dist.Beta(1.0, 1.0))
    p = numpyro.sample("p", dist.Beta(1.0, 1.0))
    with numpyro.plate("rows", num_rows):
        z = numpyro.sample("z", dist.Bernoulli(psi))
        with numpyro.plate("occasions", num_occasions, dim=-2):
            numpyro.sample("y", dist.Bernoulli(z * p), obs=histories.T)


def capture_recapture_data(seed: int = 0, size: str = "example") -> Dataset:
    """``N = 100`` animals, 5 occasions, ``p = 0.3``, augmented to ``M = 250``
    (``"example"``); ``N = 15``, 4 occasions, ``p = 0.35``, ``M = 30`` (``"exact"``).

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    population, num_occasions, p, num_rows = CAPTURE_SIZES[size]
    rng = np.random.default_rng(seed)
    caught = rng.random((population, num_occasions)) < p
    seen = caught[caught.any(1)]
    histories = np.zeros((num_rows, num_occasions), np.float32)
    histories[: seen.shape[0]] = seen
    truth = {"N": population, "p": p, "num_seen": int(seen.shape[0])}
    return Dataset((jnp.asarray(histories),), {}, truth)


def capture_recapture_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The population size ``N = sum_i z_i``, ``p`` and ``psi``."""
    del data
    return {
        "N": np.asarray(samples["z"], np.float64).sum(-1),
        "p": np.asarray(samples["p"], np.float64),
        "psi": np.asarray(samples["psi"], np.float64),
    }


def capture_recapture_reference(data: Dataset) -> Reference:
    """Closed form: with ``n`` animals seen and ``C`` captures in all, ``p(N | y) propto
    binom(M - n, N - n) B(N + 1, M - N + 1) B(C + 1, N T - C + 1)`` for ``N = n .. M``
    (``psi`` and ``p`` summed out: Beta integrals), ``E[p | N, y] = (C + 1) / (N T + 2)``,
    ``E[psi | N, y] = (N + 1) / (M + 2)``. Exact."""
    histories = np.asarray(data.args[0])
    num_rows, num_occasions = histories.shape
    seen = int(histories.any(1).sum())
    captures = float(histories.sum())
    population = np.arange(seen, num_rows + 1, dtype=np.float64)
    log_post = (
        gammaln(num_rows - seen + 1)
        - gammaln(population - seen + 1)
        - gammaln(num_rows - population + 1)
        + betaln(population + 1, num_rows - population + 1)
        + betaln(captures + 1, population * num_occasions - captures + 1)
    )
    values = {
        "N": population,
        "p": (captures + 1) / (population * num_occasions + 2),
        "psi": (population + 1) / (num_rows + 2),
    }
    method = f"closed form over N = {seen} .. {num_rows}"
    return exact_reference(values, log_post, method)


CAPTURE_RECAPTURE = GalleryModel(
    name="capture_recapture",
    model=capture_recapture_model,
    simulate=capture_recapture_data,
    summaries=capture_recapture_summaries,
    reference=capture_recapture_reference,
    reference_kind="closed form",
    description=(
        "Closed-population capture-recapture (model M0) with unknown population size, "
        "written with data augmentation: M rows of capture histories, membership "
        "indicators z_i ~ Bernoulli(psi), captures y_it ~ Bernoulli(z_i p). Reference (any "
        "size): psi and p summed out as Beta integrals, p(N | y) in closed form over "
        "N = n .. M; summaries: N, p, psi."
    ),
    citations=("Royle (2009)", "Royle and Dorazio (2008), ch. 5"),
)
