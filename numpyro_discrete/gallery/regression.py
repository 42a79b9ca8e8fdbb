"""Regression models: Bayesian variable selection with a spike-and-slab prior on correlated
predictors.

**References:**

1. *Variable selection via Gibbs sampling*, Edward I. George, Robert E. McCulloch (1993)
2. *Variable selection for regression models*, Lynn Kuo, Bani Mallick (1998)
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist

from numpyro_discrete.gallery.base import (
    Dataset,
    GalleryModel,
    Reference,
    check_size,
    enumerate_sites,
    exact_reference,
    half_normal_log_grid,
)

__all__ = [
    "VARIABLE_SELECTION",
    "spike_and_slab",
    "variable_selection_data",
    "variable_selection_reference",
]

#: Prior inclusion probability, slab scale and noise prior scale.
INCLUSION_PROB, SLAB_SCALE, NOISE_PRIOR = 0.5, 2.0, 1.0
#: ``(n, p, predictor correlation, true nonzero coefficients)`` of the two sizes.
SELECTION_SIZES = {
    "example": (100, 12, 0.6, (1.0, -0.8, 0.0, 0.0, 0.5)),
    "exact": (20, 4, 0.7, (1.0, 0.0, -0.6)),
}
#: The noise scale is integrated on this log-spaced grid (trapezoid rule in ``log sigma``).
SIGMA_GRID = np.exp(np.linspace(np.log(0.05), np.log(10.0), 801))


def spike_and_slab(X: jax.Array, y: jax.Array) -> None:
    """``y ~ N(X (beta * gamma), sigma^2 I)``, ``gamma_j ~ Bernoulli(0.5)``, ``beta_j ~
    N(0, 2^2)`` (the slab; drawn from its prior when excluded: Kuo and Mallick's form),
    ``sigma ~ HalfNormal(1)``.

    :param X: ``(n, p)`` predictors.
    :param y: ``(n,)`` responses.
    """
    sigma = numpyro.sample("sigma", dist.HalfNormal(NOISE_PRIOR))
    with numpyro.plate("predictors", X.shape[1]):
        gamma = numpyro.sample("gamma", dist.Bernoulli(INCLUSION_PROB))
        beta = numpyro.sample("beta", dist.Normal(0.0, SLAB_SCALE))
    numpyro.sample("y", dist.Normal(X @ (beta * gamma), sigma), obs=y)


def variable_selection_data(seed: int = 0, size: str = "example") -> Dataset:
    """Equicorrelated Gaussian predictors and a sparse linear response with unit noise:
    ``n = 100, p = 12``, correlation 0.6 (``"example"``), ``n = 20, p = 4``, correlation 0.7
    (``"exact"``); the first coefficients as in :data:`SELECTION_SIZES`, the rest zero.

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    num, num_predictors, corr, nonzero = SELECTION_SIZES[size]
    rng = np.random.default_rng(seed)
    cov = np.full((num_predictors, num_predictors), corr) + (1 - corr) * np.eye(num_predictors)
    X = rng.normal(size=(num, num_predictors)) @ np.linalg.cholesky(cov).T
    beta = np.zeros(num_predictors)
    beta[: len(nonzero)] = nonzero
    y = X @ beta + rng.normal(size=num)
    truth = {"beta": beta, "gamma": (beta != 0).astype(np.int32), "sigma": 1.0}
    return Dataset((jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)), {}, truth)


def variable_selection_summaries(
    samples: Mapping[str, Any], data: Dataset
) -> dict[str, np.ndarray]:
    """Inclusion indicators ``gamma`` (their means: inclusion probabilities), effects
    ``beta * gamma`` and ``sigma``."""
    del data
    gamma = np.asarray(samples["gamma"], np.float64)
    return {
        "inclusion": gamma,
        "effect": gamma * np.asarray(samples["beta"], np.float64),
        "sigma": np.asarray(samples["sigma"], np.float64),
    }


def variable_selection_reference(data: Dataset) -> Reference:
    """Exact posterior means for every ``gamma`` (``2^p``): the included coefficients summed
    out in closed form (``y | gamma, sigma ~ N(0, sigma^2 I + 2^2 X_g X_g^T)``, their
    posterior mean ``2^2 X_g^T (sigma^2 I + 2^2 X_g X_g^T)^{-1} y``), ``sigma`` on
    :data:`SIGMA_GRID`. The only approximation is the trapezoid rule in ``log sigma``."""
    X, y = (np.asarray(a, np.float64) for a in data.args)
    num, num_predictors = X.shape
    states, log_prior = enumerate_sites(
        lambda: numpyro.sample("gamma", dist.Bernoulli(INCLUSION_PROB).expand([num_predictors])),
        (),
        {},
        {"gamma": ((num_predictors,), 2)},
    )
    gamma = states["gamma"].astype(np.float64)  # (S, p)
    slab = SLAB_SCALE**2
    # covariances sigma^2 I + s^2 X diag(gamma) X^T for every (grid point, state)
    gram = np.einsum("ij,sj,kj->sik", X, gamma, X)  # (S, n, n)
    var = SIGMA_GRID[:, None, None, None] ** 2
    cov = var * np.eye(num) + slab * gram[None]  # (G, S, n, n)
    sign, log_det = np.linalg.slogdet(cov)
    solved = np.linalg.solve(cov, np.broadcast_to(y, cov.shape[:-1])[..., None])[..., 0]
    log_lik = -0.5 * (log_det + np.einsum("gsi,i->gs", solved, y) + num * np.log(2 * np.pi))
    sigma = SIGMA_GRID
    log_joint = log_lik + log_prior[None] + half_normal_log_grid(sigma, NOISE_PRIOR)[:, None]
    effect = slab * gamma[None] * np.einsum("ij,gsi->gsj", X, solved)  # (G, S, p)
    shape = log_joint.shape
    values = {
        "inclusion": np.broadcast_to(gamma[None], shape + (num_predictors,)),
        "effect": effect,
        "sigma": np.broadcast_to(sigma[:, None], shape),
    }
    values = {k: v.reshape((-1,) + v.shape[2:]) for k, v in values.items()}
    method = (
        f"exact: {gamma.shape[0]} inclusion patterns enumerated, coefficients summed out in "
        f"closed form, sigma on {sigma.size} log-spaced points"
    )
    # the grid's error: a grid of 3201 points on (0.02, 20) moves the means by < 1e-14
    return exact_reference(values, log_joint.reshape(-1), method, error=1e-10)


VARIABLE_SELECTION = GalleryModel(
    name="variable_selection",
    model=spike_and_slab,
    simulate=variable_selection_data,
    summaries=variable_selection_summaries,
    reference=variable_selection_reference,
    reference_kind="enumeration",
    description=(
        "Bayesian variable selection, spike and slab: y ~ N(X (beta * gamma), sigma^2) with "
        "Bernoulli inclusion indicators gamma, Normal slabs beta and correlated predictors. "
        "Reference (n = 20, p = 4): every gamma enumerated, the coefficients summed out in "
        "closed form, sigma on a fine grid; summaries: inclusion probabilities, effects "
        "beta * gamma, sigma."
    ),
    citations=("George and McCulloch (1993)", "Kuo and Mallick (1998)"),
)
