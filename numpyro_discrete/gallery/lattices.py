"""Lattice models: the Ising model of Sun, Dai and Schuurmans (2022, Appendix D) and Potts
image denoising, both with discrete sites only.

**References:**

1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
   Hanjun Dai, Dale Schuurmans (2022)
2. *Stochastic relaxation, Gibbs distributions, and the Bayesian restoration of images*,
   Stuart Geman, Donald Geman (1984)
3. *On the statistical analysis of dirty pictures*, Julian Besag (1986)
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
)

__all__ = [
    "ISING",
    "ISING_CONFIGS",
    "POTTS_DENOISING",
    "ising_data",
    "ising_energy",
    "ising_field",
    "ising_model",
    "potts_denoising_data",
    "potts_denoising_model",
]

# --- Ising ----------------------------------------------------------------------------------

#: ``(c, lambda)`` for the Ising configurations C1..C3 of Sun, Dai and Schuurmans.
ISING_CONFIGS: dict[str, tuple[float, float]] = {
    "C1": (0.2, 0.1),
    "C2": (0.3, 0.15),
    "C3": (0.4, 0.2),
}
#: ``(p, configuration)`` of the two sizes.
ISING_SIZES = {"example": (50, "C2"), "exact": (4, "C3")}


def ising_field(p: int, c: float, seed: int = 0) -> np.ndarray:
    """The external field ``a`` of shape ``(p, p)``: ``U(-c, 2c)`` inside the disc
    ``(v1 - p/2)^2 + (v2 - p/2)^2 <= p^2/2``, ``U(-2c, c)`` outside it."""
    v1, v2 = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    inside = (v1 - p / 2) ** 2 + (v2 - p / 2) ** 2 <= p**2 / 2
    u = np.random.default_rng(seed).uniform(-c, 2 * c, size=(p, p))
    # U(-2c, c) is U(-c, 2c) shifted by -c
    return np.where(inside, u, u - c)


def ising_energy(x: jax.Array, field: jax.Array, lam: float) -> jax.Array:
    """``sum_i a_i s_i - lambda sum_<ij> s_i s_j`` for ``s = 2 x - 1`` on an open lattice
    (each unordered neighbour pair once). Works for integer and float-relaxed `x`."""
    s = 2 * x - 1
    pairs = jnp.sum(s[1:, :] * s[:-1, :]) + jnp.sum(s[:, 1:] * s[:, :-1])
    return jnp.sum(field * s) - lam * pairs


def ising_model(field: jax.Array, coupling: float) -> None:
    """``log pi(x) = sum_i a_i s_i + coupling sum_<ij> s_i s_j + const``, ``s = 2 x - 1``,
    on an open ``(p, p)`` lattice, written as the elementwise factors ``"field"``,
    ``"right"`` and ``"down"`` (one term per site or neighbour pair).

    :param field: ``(p, p)`` external field ``a``.
    :param float coupling: the pair coupling (Sun et al.'s ``-lambda``).
    """
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand(field.shape))
    s = 2 * x - 1
    numpyro.factor("field", field * s)
    # open lattice: slices, not rolls, so that the energy is that of `ising_energy`
    numpyro.factor("right", coupling * (s[:, :-1] * s[:, 1:]))
    numpyro.factor("down", coupling * (s[:-1, :] * s[1:, :]))


def ising_data(seed: int = 0, size: str = "example") -> Dataset:
    """The field of Sun et al.'s configuration C2 on a 50 x 50 lattice (``"example"``) or
    C3 on a 4 x 4 lattice (``"exact"``).

    :param int seed: numpy seed of the field.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    p, config = ISING_SIZES[size]
    c, lam = ISING_CONFIGS[config]
    field = ising_field(p, c, seed)
    return Dataset((jnp.asarray(field, jnp.float32), -lam), {}, {"config": config})


def ising_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The magnetisation (mean spin) and the mean product of neighbouring spins."""
    del data
    s = 2 * np.asarray(samples["x"], np.float64) - 1
    pairs = _neighbour_pairs(s, np.multiply)
    return {"magnetisation": s.mean((1, 2)), "neighbour_correlation": pairs.mean(1)}


def _neighbour_pairs(x: np.ndarray, op: Any) -> np.ndarray:
    """``op`` of every vertical and horizontal neighbour pair of ``(draws, p, p)`` lattices,
    as ``(draws, pairs)``."""
    vertical = op(x[:, 1:, :], x[:, :-1, :]).reshape(len(x), -1)
    horizontal = op(x[:, :, 1:], x[:, :, :-1]).reshape(len(x), -1)
    return np.concatenate([vertical, horizontal], axis=1)


def _enumerated_reference(entry: GalleryModel, data: Dataset, num_values: int) -> Reference:
    """Exact enumeration of the site ``"x"`` with numpyro's ``log_density``."""
    shape = tuple(np.shape(data.args[0]))  # the field or the image: the shape of x
    states, log_joint = enumerate_sites(
        entry.model, data.args, data.kwargs, {"x": (shape, num_values)}
    )
    values = entry.summaries(states, data)
    method = f"exact enumeration of {log_joint.size} states with numpyro's log_density"
    return exact_reference(values, log_joint, method)


def ising_reference(data: Dataset) -> Reference:
    """Exact: every one of the ``2^(p p)`` states enumerated with numpyro's
    ``log_density``."""
    return _enumerated_reference(ISING, data, 2)


ISING = GalleryModel(
    name="ising",
    model=ising_model,
    simulate=ising_data,
    summaries=ising_summaries,
    reference=ising_reference,
    reference_kind="enumeration",
    description=(
        "Ising model on an open p x p lattice with the external field and coupling of Sun, "
        "Dai and Schuurmans (2022, App. D), written as elementwise factors. Reference "
        "(4 x 4, configuration C3): the 65536 states enumerated with numpyro's "
        "log_density; summaries: magnetisation and neighbour correlation."
    ),
    citations=("Sun, Dai and Schuurmans (2022), App. D",),
)

# --- Potts image denoising --------------------------------------------------------------------

#: ``(p, colours, coupling, noise scale)`` of the two sizes.
POTTS_SIZES = {"example": (32, 3, 1.0, 0.6), "exact": (3, 3, 0.8, 0.6)}


def potts_denoising_model(y: jax.Array, locs: jax.Array, coupling: float, scale: float) -> None:
    """A noisy image of ``K`` grey levels: colours ``x_ij`` under a Potts prior
    ``coupling * #{neighbour pairs of equal colour}`` (one summed factor, as users write a
    Markov random field prior), ``y_ij ~ N(locs[x_ij], scale^2)``.

    :param y: ``(p, p)`` observed image.
    :param locs: ``(K,)`` grey level of each colour.
    :param float coupling: the Potts coupling.
    :param float scale: the noise scale.
    """
    num_colours = locs.shape[0]
    x = numpyro.sample("x", dist.Categorical(jnp.ones(num_colours) / num_colours).expand(y.shape))
    agree = jnp.sum(x[1:, :] == x[:-1, :]) + jnp.sum(x[:, 1:] == x[:, :-1])
    numpyro.factor("potts", coupling * agree)
    numpyro.sample("y", dist.Normal(locs[x], scale), obs=y)


def potts_denoising_data(seed: int = 0, size: str = "example") -> Dataset:
    """A 32 x 32 image of 3 colours in vertical bands (``"example"``) or a 3 x 3 one
    (``"exact"``), grey levels ``0, 1, 2``, noise scale 0.6.

    :param int seed: numpy seed of the noise.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    p, num_colours, coupling, scale = POTTS_SIZES[size]
    truth = np.broadcast_to((np.arange(p) * num_colours // p)[None, :], (p, p)).copy()
    locs = np.arange(num_colours, dtype=np.float64)
    y = locs[truth] + scale * np.random.default_rng(seed).normal(size=(p, p))
    args = (jnp.asarray(y, jnp.float32), jnp.asarray(locs, jnp.float32), coupling, scale)
    return Dataset(args, {}, {"x": truth})


def potts_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The fraction of pixels of each colour and of neighbour pairs that agree."""
    x = np.asarray(samples["x"])
    num_colours = np.shape(data.args[1])[0]
    fractions = np.stack([(x == k).mean((1, 2)) for k in range(num_colours)], axis=-1)
    agree = _neighbour_pairs(x, np.equal)
    return {"colour_fractions": fractions.astype(np.float64), "agreement": agree.mean(1)}


def potts_reference(data: Dataset) -> Reference:
    """Exact: every one of the ``K^(p p)`` images enumerated with numpyro's
    ``log_density``."""
    return _enumerated_reference(POTTS_DENOISING, data, np.shape(data.args[1])[0])


POTTS_DENOISING = GalleryModel(
    name="potts_denoising",
    model=potts_denoising_model,
    simulate=potts_denoising_data,
    summaries=potts_summaries,
    reference=potts_reference,
    reference_kind="enumeration",
    description=(
        "Potts image denoising: K colours used as indices into known grey levels, a Potts "
        "prior written as one summed factor, Gaussian noise. Reference (3 x 3, K = 3): the "
        "19683 images enumerated with numpyro's log_density; summaries: the colour "
        "fractions and the fraction of agreeing neighbour pairs."
    ),
    citations=("Geman and Geman (1984)", "Besag (1986)"),
)
