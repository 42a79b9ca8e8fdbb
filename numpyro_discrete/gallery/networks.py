"""Network models: a stochastic block model (labels used as indices into a block matrix)
and a restricted Boltzmann machine (visible and hidden binary units).

**References:**

1. *Estimation and prediction for stochastic blockstructures*, Krzysztof Nowicki, Tom A. B.
   Snijders (2001)
2. *Training products of experts by minimizing contrastive divergence*, Geoffrey E. Hinton
   (2002)
3. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
   Hanjun Dai, Dale Schuurmans (2022)
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.special import betaln, gammaln

import jax
import jax.numpy as jnp

import numpyro
from numpyro import handlers
import numpyro.distributions as dist

from numpyro_discrete.gallery.base import (
    Dataset,
    GalleryModel,
    Reference,
    check_size,
    enumerate_sites,
    exact_reference,
)

__all__ = [
    "RBM",
    "SBM",
    "rbm_data",
    "rbm_log_density",
    "rbm_model",
    "rbm_parameters",
    "sbm_data",
    "sbm_model",
]

# --- stochastic block model -----------------------------------------------------------------

#: ``(nodes, blocks, within, between)`` edge probabilities of the two sizes.
SBM_SIZES = {"example": (60, 3, 0.5, 0.05), "exact": (8, 2, 0.8, 0.1)}


def sbm_model(adjacency: jax.Array, num_blocks: int) -> None:
    """An undirected graph whose edge ``(i, j)``, ``i < j``, is present with probability
    ``B[z_i, z_j]``: ``z_i ~ Categorical(weights)``, ``weights ~ Dirichlet(1)``, ``B_ab ~
    Beta(1, 1)``.

    :param adjacency: ``(n, n)`` 0/1 adjacency matrix (only ``i < j`` is read).
    :param int num_blocks: ``K``.
    """
    num_nodes = adjacency.shape[0]
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(num_blocks)))
    with numpyro.plate("rows", num_blocks, dim=-2), numpyro.plate("cols", num_blocks, dim=-1):
        block = numpyro.sample("block", dist.Beta(1.0, 1.0))
    with numpyro.plate("nodes", num_nodes):
        z = numpyro.sample("z", dist.Categorical(weights))
    upper = jnp.triu(jnp.ones((num_nodes, num_nodes), bool), 1)
    with handlers.mask(mask=upper):
        numpyro.sample("edges", dist.Bernoulli(block[z[:, None], z[None, :]]), obs=adjacency)


def sbm_data(seed: int = 0, size: str = "example") -> Dataset:
    """60 nodes in 3 equal blocks, edge probabilities 0.5 within and 0.05 between
    (``"example"``); 8 nodes in 2 blocks, 0.8 and 0.1 (``"exact"``).

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    num_nodes, num_blocks, within, between = SBM_SIZES[size]
    z = np.arange(num_nodes) * num_blocks // num_nodes
    probs = np.where(z[:, None] == z[None, :], within, between)
    upper = np.triu(np.random.default_rng(seed).random((num_nodes, num_nodes)) < probs, 1)
    adjacency = (upper | upper.T).astype(np.float32)
    return Dataset((jnp.asarray(adjacency), num_blocks), {}, {"z": z})


def sbm_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """Co-clustering of every pair ``i < j`` (``z_i == z_j``) and the number of occupied
    blocks: both unchanged by relabelling."""
    del data
    z = np.asarray(samples["z"])
    rows, cols = np.triu_indices(z.shape[-1], 1)
    occupied = np.stack([(z == k).any(-1) for k in range(z.max() + 1)], -1).sum(-1)
    return {
        "co_clustering": (z[:, rows] == z[:, cols]).astype(np.float64),
        "num_occupied": occupied.astype(np.float64),
    }


def sbm_reference(data: Dataset) -> Reference:
    """Exact: every labelling enumerated (``K^n``), the weights (Dirichlet-multinomial) and
    the block matrix (Beta-Bernoulli, per ordered block pair) summed out in closed form."""
    adjacency, num_blocks = data.args
    adjacency = np.asarray(adjacency, np.float64)
    num_nodes = adjacency.shape[0]
    states, _ = enumerate_sites(
        lambda: numpyro.sample("z", dist.Categorical(jnp.ones(num_blocks)).expand([num_nodes])),
        (),
        {},
        {"z": ((num_nodes,), num_blocks)},
    )
    z = states["z"]
    one_hot = (z[..., None] == np.arange(num_blocks)).astype(np.float64)  # (S, n, K)
    upper = np.triu(np.ones((num_nodes, num_nodes)), 1)
    pairs = np.einsum("sia,ij,sjb->sab", one_hot, upper, one_hot)
    edges = np.einsum("sia,ij,sjb->sab", one_hot, upper * adjacency, one_hot)
    counts = one_hot.sum(1)
    log_post = (
        gammaln(counts + 1).sum(-1)
        - gammaln(num_nodes + num_blocks)
        + betaln(edges + 1, pairs - edges + 1).sum((1, 2))
    )
    values = sbm_summaries({"z": z}, data)
    method = f"exact: {z.shape[0]} labellings, weights and block matrix summed out"
    return exact_reference(values, log_post, method)


SBM = GalleryModel(
    name="sbm",
    model=sbm_model,
    simulate=sbm_data,
    summaries=sbm_summaries,
    reference=sbm_reference,
    reference_kind="enumeration",
    description=(
        "Stochastic block model: node labels z_i used as indices into a K x K matrix of "
        "edge probabilities, Dirichlet block weights, Beta(1, 1) block matrix. Reference "
        "(8 nodes, K = 2): every labelling enumerated with the weights and the block matrix "
        "summed out in closed form; summaries: pairwise co-clustering and occupied blocks."
    ),
    citations=("Nowicki and Snijders (2001)",),
)

# --- restricted Boltzmann machine -------------------------------------------------------------

#: ``(visible, hidden)`` units of the two sizes.
RBM_SIZES = {"example": (100, 50), "exact": (10, 4)}


def rbm_parameters(
    num_visible: int,
    num_hidden: int,
    weight_scale: float = 5.0,
    bias_loc: float = -1.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random RBM parameters from a numpy seed: weights ``W ~ N(0, weight_scale^2 /
    num_hidden)`` of shape ``(num_hidden, num_visible)``, visible biases ``b ~ N(bias_loc,
    1)``, hidden biases ``c ~ N(0, 1)`` (the benchmarks' RBM: about as sharp as one trained
    on MNIST for random-walk Metropolis)."""
    rng = np.random.default_rng(seed)
    weights = weight_scale / np.sqrt(num_hidden) * rng.normal(size=(num_hidden, num_visible))
    b = bias_loc + rng.normal(size=num_visible)
    c = rng.normal(size=num_hidden)
    return weights, b, c


def rbm_log_density(v: jax.Array, weights: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """``b . v + sum_h softplus(W_h . v + c_h)``: ``log pi(v)`` of an RBM up to a constant,
    hidden units summed out (Sun, Dai and Schuurmans 2022, eq. 187)."""
    return v @ b + jnp.sum(jax.nn.softplus(weights @ v + c))


def rbm_model(weights: jax.Array, visible_bias: jax.Array, hidden_bias: jax.Array) -> None:
    """``p(v, h) propto exp(b . v + c . h + h^T W v)`` over binary visible ``v`` and hidden
    ``h`` units: the biases as Bernoulli logits, the interaction as one factor.

    :param weights: ``(hidden, visible)`` interaction ``W``.
    :param visible_bias: ``(visible,)`` ``b``.
    :param hidden_bias: ``(hidden,)`` ``c``.
    """
    v = numpyro.sample("v", dist.Bernoulli(logits=visible_bias))
    h = numpyro.sample("h", dist.Bernoulli(logits=hidden_bias))
    numpyro.factor("interaction", h @ weights @ v)


def rbm_data(seed: int = 0, size: str = "example") -> Dataset:
    """:func:`rbm_parameters` with 100 visible and 50 hidden units (``"example"``) or 10 and
    4 (``"exact"``).

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    num_visible, num_hidden = RBM_SIZES[size]
    params = rbm_parameters(num_visible, num_hidden, seed=seed)
    return Dataset(tuple(jnp.asarray(a, jnp.float32) for a in params), {}, {})


def rbm_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The mean activation of each visible and each hidden unit."""
    del data
    return {k: np.asarray(samples[k], np.float64) for k in ("v", "h")}


def rbm_reference(data: Dataset) -> Reference:
    """Exact: every visible vector enumerated (``2^visible``), the hidden units summed out
    in closed form (:func:`rbm_log_density`, ``E[h | v] = sigmoid(W v + c)``)."""
    weights, b, c = (np.asarray(a, np.float64) for a in data.args)
    num_visible = b.shape[0]
    states, _ = enumerate_sites(
        lambda: numpyro.sample("v", dist.Bernoulli(0.5).expand([num_visible])),
        (),
        {},
        {"v": ((num_visible,), 2)},
    )
    v = states["v"].astype(np.float64)
    activation = v @ weights.T + c
    log_post = v @ b + np.logaddexp(0.0, activation).sum(-1)
    values = {"v": v, "h": 1.0 / (1.0 + np.exp(-activation))}
    method = f"exact: {v.shape[0]} visible states enumerated, hidden units summed out"
    return exact_reference(values, log_post, method)


RBM = GalleryModel(
    name="rbm",
    model=rbm_model,
    simulate=rbm_data,
    summaries=rbm_summaries,
    reference=rbm_reference,
    reference_kind="enumeration",
    description=(
        "Restricted Boltzmann machine with random parameters (the benchmarks' sharp RBM), "
        "visible and hidden units both sampled. Reference (10 visible, 4 hidden): every "
        "visible vector enumerated with the hidden units summed out in closed form; "
        "summaries: the mean activation of every unit."
    ),
    citations=("Hinton (2002)", "Sun, Dai and Schuurmans (2022), App. D"),
)
