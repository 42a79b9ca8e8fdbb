"""Mixture models: a one-dimensional Gaussian mixture with its labels used as indices.

**References:**

1. *Pattern Recognition and Machine Learning*, Christopher M. Bishop (2006), chapter 9
2. *Finite Mixture and Markov Switching Models*, Sylvia Frühwirth-Schnatter (2006)
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.special import gammaln, log_ndtr

import jax
import jax.numpy as jnp

import numpyro
from numpyro.contrib.funsor import config_enumerate
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

__all__ = ["MIXTURE", "gaussian_mixture", "mixture_data", "mixture_reference"]

#: Prior scale of the component means, ``locs_k ~ N(0, 3^2)``.
LOC_PRIOR_SCALE = 3.0
#: Prior scale of the common noise scale, ``sigma ~ HalfNormal(2)``.
SCALE_PRIOR = 2.0
#: ``(n, true locs, true weights, sigma)`` of the two sizes.
MIXTURE_SIZES = {
    "example": (300, (-2.0, 0.0, 3.0), (0.3, 0.4, 0.3), 0.8),
    "exact": (8, (-1.5, 1.5), (0.5, 0.5), 1.0),
}
#: The noise scale is integrated on this log-spaced grid (trapezoid rule in ``log sigma``).
SIGMA_GRID = np.exp(np.linspace(np.log(0.05), np.log(20.0), 801))


def gaussian_mixture(y: jax.Array, num_components: int) -> None:
    """``y_i ~ N(locs[z_i], sigma^2)``, ``z_i ~ Categorical(weights)``, ``weights ~
    Dirichlet(1)``, ``locs_k ~ N(0, 3^2)``, ``sigma ~ HalfNormal(2)``.

    :param y: ``(n,)`` observations.
    :param int num_components: ``K``.
    """
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(num_components)))
    with numpyro.plate("components", num_components):
        locs = numpyro.sample("locs", dist.Normal(0.0, LOC_PRIOR_SCALE))
    sigma = numpyro.sample("sigma", dist.HalfNormal(SCALE_PRIOR))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(weights))
        numpyro.sample("y", dist.Normal(locs[z], sigma), obs=y)


def _mixture_enumerated(y: jax.Array, num_components: int) -> None:
    config_enumerate(gaussian_mixture)(y, num_components)


def mixture_data(seed: int = 0, size: str = "example") -> Dataset:
    """Simulated mixture data: ``"example"`` is 300 points of 3 components (means -2, 0, 3,
    sigma 0.8), ``"exact"`` 8 points of 2 components (means -1.5, 1.5, sigma 1).

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    num, locs, weights, sigma = MIXTURE_SIZES[size]
    rng = np.random.default_rng(seed)
    z = rng.choice(len(locs), size=num, p=weights)
    y = np.asarray(locs)[z] + sigma * rng.normal(size=num)
    truth = {"z": z, "locs": np.asarray(locs), "weights": np.asarray(weights), "sigma": sigma}
    return Dataset((jnp.asarray(y, jnp.float32), len(locs)), {}, truth)


def mixture_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The component means sorted (``sorted_locs``, invariant under relabelling) and
    ``sigma``."""
    del data
    return {
        "sorted_locs": np.sort(np.asarray(samples["locs"], np.float64), axis=-1),
        "sigma": np.asarray(samples["sigma"], np.float64),
    }


def _cluster_log_marginal(count, total, squares, var):
    """``log N(y_k; 0, var I + tau^2 1 1^T)`` of a cluster of `count` points with sum `total`
    and sum of squares `squares`, under noise variance `var` (broadcasting)."""
    tau2 = LOC_PRIOR_SCALE**2
    denom = var + count * tau2
    quad = (squares - tau2 * total**2 / denom) / var
    log_det = (count - 1) * np.log(var) + np.log(denom)
    return -0.5 * (count * np.log(2 * np.pi) + log_det + quad)


def _expected_max(m1, m2, v1, v2):
    """``E[max(a, b)]`` of independent ``a ~ N(m1, v1)``, ``b ~ N(m2, v2)`` (Clark 1961)."""
    s = np.sqrt(v1 + v2)
    d = (m1 - m2) / s
    return (
        m1 * np.exp(log_ndtr(d))
        + m2 * np.exp(log_ndtr(-d))
        + s * np.exp(-0.5 * d**2) / (np.sqrt(2 * np.pi))
    )


def mixture_reference(data: Dataset) -> Reference:
    """Exact posterior means of the sorted component means and of ``sigma`` for ``K = 2``:
    every labelling ``z`` enumerated (``2^n``), the weights summed out in closed form
    (Dirichlet-multinomial), the means in closed form (normal-normal), ``sigma`` on
    :data:`SIGMA_GRID`; ``E[max]``/``E[min]`` of the two normal means given ``z, sigma`` in
    closed form. The only approximation is the trapezoid rule in ``log sigma``."""
    y, num_components = data.args
    if num_components != 2:
        raise ValueError("mixture_reference is exact for 2 components only")
    y = np.asarray(y, np.float64)
    states, log_prior_z = enumerate_sites(
        lambda: numpyro.sample("z", dist.Categorical(jnp.ones(2) / 2).expand([y.shape[0]])),
        (),
        {},
        {"z": ((y.shape[0],), 2)},
    )
    del log_prior_z  # uniform: the Dirichlet(1) weights are summed out below
    z = states["z"]  # (S, n)
    member = np.stack([z == 0, z == 1], axis=-1).astype(np.float64)  # (S, n, 2)
    count = member.sum(1)  # (S, 2)
    total = np.einsum("snk,n->sk", member, y)
    squares = np.einsum("snk,n->sk", member, y**2)
    # Dirichlet(1, 1)-multinomial: B(n_0 + 1, n_1 + 1) / B(1, 1)
    log_weights_z = gammaln(count + 1).sum(-1) - gammaln(count.sum(-1) + 2)
    var = SIGMA_GRID[:, None, None] ** 2  # (G, 1, 1)
    log_lik = _cluster_log_marginal(count, total, squares, var).sum(-1)  # (G, S)
    sigma = SIGMA_GRID
    log_joint = log_lik + log_weights_z + half_normal_log_grid(sigma, SCALE_PRIOR)[:, None]
    tau2 = LOC_PRIOR_SCALE**2
    post_var = var * tau2 / (var + count * tau2)  # (G, S, 2)
    post_mean = tau2 * total / (var + count * tau2)
    high = _expected_max(post_mean[..., 0], post_mean[..., 1], post_var[..., 0], post_var[..., 1])
    low = post_mean.sum(-1) - high
    values = {
        "sorted_locs": np.stack([low, high], -1).reshape(-1, 2),
        "sigma": np.broadcast_to(sigma[:, None], log_joint.shape).reshape(-1),
    }
    method = (
        f"exact: {z.shape[0]} labellings enumerated, weights and means summed out in closed "
        f"form, sigma on {sigma.size} log-spaced points"
    )
    # the grid's error: a grid of 3201 points on (0.02, 40) moves the means by < 1e-13
    return exact_reference(values, log_joint.reshape(-1), method, error=1e-10)


MIXTURE = GalleryModel(
    name="mixture",
    model=gaussian_mixture,
    simulate=mixture_data,
    summaries=mixture_summaries,
    reference=mixture_reference,
    reference_kind="enumeration",
    description=(
        "One-dimensional Gaussian mixture, K components, labels z_i used as indices into "
        "the component means, Dirichlet weights, a common unknown noise scale. Reference "
        "(n = 8, K = 2): every labelling enumerated with weights and means summed out in "
        "closed form and sigma on a fine grid; summaries: the sorted means and sigma."
    ),
    citations=("Bishop (2006), ch. 9", "Frühwirth-Schnatter (2006)"),
    # the summaries read the continuous sites only
    enumerated=(_mixture_enumerated, mixture_summaries),
)
