"""Benchmark targets from Sun, Dai and Schuurmans (2022, Appendix D), as numpyro models.

Each builder returns a :class:`Target`: a model without arguments whose only latent site
is the binary site ``"x"``, so that :class:`~numpyro_discrete.LBP`,
:class:`~numpyro_discrete.ALBP` and numpyro's :class:`~numpyro.infer.DiscreteGibbs` all run
it unchanged. Parameters are drawn once from a fixed numpy seed, so a target is the same
in every process.

- **Bernoulli** (``bernoulli``): ``x_i ~ Bernoulli(p_i)`` independently, ``N`` coordinates,
  ``p_i ~ U[0.25, 0.75]`` (C1), ``U[0.15, 0.85]`` (C2) or ``U[0.05, 0.95]`` (C3).
- **Ising** (``ising``): ``x`` of shape ``(p, p)`` on an open lattice, spins
  ``s = 2 x - 1``, ``log pi(x) = sum_i a_i s_i - lambda sum_<ij> s_i s_j + const``,
  where ``<ij>`` runs over the unordered horizontal and vertical neighbour pairs (each
  pair counted once). The field is ``a_i ~ U(-c, 2c)`` inside the disc
  ``(v1 - p/2)^2 + (v2 - p/2)^2 <= p^2/2`` (``v1, v2 = 0..p-1`` the row and column of
  site ``i``) and ``a_i ~ U(-2c, c)`` outside it; ``(c, lambda) = (0.2, 0.1),
  (0.3, 0.15), (0.4, 0.2)`` for C1..C3. The energy is computed with array shifts, ``O(N)``
  per evaluation.

.. note:: The paper writes the pair sum over the directed edge set (both orientations of
    each pair), which read literally doubles ``lambda``; here each pair is counted once, as
    in ``examples/ising.py``. As specified, the disc contains the whole lattice (its
    farthest sites, the corners, lie exactly on its boundary), so every ``a_i`` is drawn
    from ``U(-c, 2c)``; the outer branch is kept for fidelity to the definition.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import jax
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist

__all__ = [
    "BERNOULLI_CONFIGS",
    "ISING_CONFIGS",
    "Target",
    "bernoulli_target",
    "ising_energy",
    "ising_field",
    "ising_target",
]

#: ``(low, high)`` of ``p_i ~ U[low, high]`` for the Bernoulli configurations.
BERNOULLI_CONFIGS: dict[str, tuple[float, float]] = {
    "C1": (0.25, 0.75),
    "C2": (0.15, 0.85),
    "C3": (0.05, 0.95),
}

#: ``(c, lambda)`` for the Ising configurations.
ISING_CONFIGS: dict[str, tuple[float, float]] = {
    "C1": (0.2, 0.1),
    "C2": (0.3, 0.15),
    "C3": (0.4, 0.2),
}


@dataclass(frozen=True)
class Target:
    """
    A benchmark target.

    - **name** - short label, e.g. ``"bernoulli-800-C2"``.
    - **model** - numpyro model without arguments; its one latent site is ``"x"``.
    - **num_coords** - number of binary coordinates ``N``.
    - **shape** - shape of the site ``"x"``.
    - **params** - the drawn parameters (``probs`` or ``field``) and settings, for reports.
    """

    name: str
    model: Callable[[], None]
    num_coords: int
    shape: tuple[int, ...]
    params: dict[str, object] = field(default_factory=dict)


def bernoulli_target(num_coords: int = 800, config: str = "C2", seed: int = 0) -> Target:
    """Independent Bernoulli coordinates with ``p_i ~ U[low, high]`` of `config`."""
    low, high = BERNOULLI_CONFIGS[config]
    probs_np = np.random.default_rng(seed).uniform(low, high, size=num_coords)
    probs = jnp.asarray(probs_np)

    def model() -> None:
        numpyro.sample("x", dist.Bernoulli(probs=probs))

    return Target(
        name=f"bernoulli-{num_coords}-{config}",
        model=model,
        num_coords=num_coords,
        shape=(num_coords,),
        params={"config": config, "low": low, "high": high, "probs": probs_np},
    )


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


def ising_target(p: int = 50, config: str = "C2", seed: int = 0) -> Target:
    """Ising model on a ``p x p`` open lattice with the ``(c, lambda)`` of `config`."""
    c, lam = ISING_CONFIGS[config]
    field_np = ising_field(p, c, seed)
    field_jnp = jnp.asarray(field_np)

    def model() -> None:
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([p, p]))
        numpyro.factor("ising", ising_energy(x, field_jnp, lam))

    return Target(
        name=f"ising-{p}-{config}",
        model=model,
        num_coords=p * p,
        shape=(p, p),
        params={"config": config, "c": c, "lambda": lam, "field": field_np},
    )
