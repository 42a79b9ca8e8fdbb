"""Benchmark targets from Sun, Dai and Schuurmans (2022, Appendix D), as numpyro models.

Each builder returns a :class:`Target`: a model without arguments whose only latent site
is the binary (Potts: categorical) site ``"x"``, so that :class:`~numpyro_discrete.LBP`,
:class:`~numpyro_discrete.ALBP` and numpyro's :class:`~numpyro.infer.DiscreteGibbs` all run
it unchanged. Parameters are drawn once from a fixed numpy seed, so a target is the same
in every process.

- **Bernoulli** (``bernoulli``): ``x_i ~ Bernoulli(p_i)`` independently, ``N`` coordinates,
  ``p_i ~ U[0.25, 0.75]`` (C1), ``U[0.15, 0.85]`` (C2) or ``U[0.05, 0.95]`` (C3).
- **FHMM** (``fhmm_*``): a Bayesian factorial HMM, ``K`` binary chains over ``L`` steps,
  ``x_{0,k} ~ Bern(0.1)``, each chain keeps its value with probability 0.8 per step,
  ``y_l ~ N(w . x_l + b, sigma^2)``, ``w ~ N(w_loc, w_scale^2)^K``, ``b ~ N(0, 1)``,
  ``sigma ~ HalfNormal(1)``; data simulated at ``sigma^2 = 2, 1, 0.5`` (C1..C3). Two
  forms of the same model: ``X`` as one ``(L, K)`` Bernoulli site with the Markov prior
  added as a factor (for the discrete samplers; ``fhmm_elementwise_model`` writes that
  factor elementwise, one term per transition, so that structure detection sees the
  chains), and ``X`` summed out by numpyro's enumeration over the ``2^K`` joint states of
  a time step (for NUTS alone).
- **Ising** (``ising``): ``x`` of shape ``(p, p)`` on an open lattice, spins
  ``s = 2 x - 1``, ``log pi(x) = sum_i a_i s_i - lambda sum_<ij> s_i s_j + const``,
  where ``<ij>`` runs over the unordered horizontal and vertical neighbour pairs (each
  pair counted once). The field is ``a_i ~ U(-c, 2c)`` inside the disc
  ``(v1 - p/2)^2 + (v2 - p/2)^2 <= p^2/2`` (``v1, v2 = 0..p-1`` the row and column of
  site ``i``) and ``a_i ~ U(-2c, c)`` outside it; ``(c, lambda) = (0.2, 0.1),
  (0.3, 0.15), (0.4, 0.2)`` for C1..C3. The energy is computed with array shifts, ``O(N)``
  per evaluation. ``elementwise=True`` writes the same log density as three elementwise
  factors (the field, the horizontal and the vertical pairs, one term per site or pair)
  instead of one scalar factor, so that structure detection sees a lattice (2 colours).
- **Potts** (``potts``): ``x`` of shape ``(p, p)``, 3 colours, ``x_i ~ Categorical(logits=h_i)``
  with fields ``h_i ~ N(0, 0.5^2)^3`` and ``beta sum_<ij> J[x_i, x_j]`` with ``J`` the
  identity (each unordered neighbour pair once, ``beta = 0.6``), the colours used as
  indices into the tables (the target of ``benchmarks/bench_supports.py``, same field for
  the same seed). ``elementwise=True`` writes the pair terms as two elementwise factors
  (horizontal, vertical) instead of one sum.

.. note:: The paper writes the pair sum over the directed edge set (both orientations of
    each pair), which read literally doubles ``lambda``; here each pair is counted once, as
    in ``examples/ising.py``. As specified, the disc contains the whole lattice (its
    farthest sites, the corners, lie exactly on its boundary), so every ``a_i`` is drawn
    from ``U(-c, 2c)``; the outer branch is kept for fidelity to the definition.

The FHMM models, the Ising field, energy and elementwise model and the RBM's parameters and
log density are the gallery's (:mod:`numpyro_discrete.gallery`), imported here: one copy
for the benchmarks, the tests and the examples.

The same targets (and a random RBM) also come as flat binary log densities
(:class:`BinaryTarget`, ``*_binary`` builders) for benchmarks that drive the pure cores
directly: ``log pi`` of a flat vector ``x`` of ``N`` coordinates, valid for integer and
float-relaxed ``x`` (so that gradient local ratios apply), equal to the numpyro model's log
joint up to a constant. The FHMM one is the posterior of ``X`` alone, with ``w``, ``b`` and
``sigma`` fixed at the values that simulated the data.

- **RBM** (``rbm_binary``): ``log pi(v) = b . v + sum_h softplus(W_h . v + c_h)`` (``h``
  summed out) with random parameters ``W ~ N(0, weight_scale^2 / h)``,
  ``b ~ N(bias_loc, 1)``, ``c ~ N(0, 1)`` from a fixed numpy seed: Sun, Dai and Schuurmans
  train theirs on MNIST, which is not available offline here. The defaults (scale 5, visible
  biases around -1) make it about as sharp as theirs for random-walk Metropolis: RWM-1
  accepts about 20% of its proposals (theirs 17%), LBP-1 about 92% (theirs 98%).
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist

# the models shared with the tests and the examples live in the gallery
from numpyro_discrete.gallery.fhmm import (
    FHMM_INIT_PROB,
    FHMM_NOISE_SCALES,
    FHMM_STAY_PROB,
    FHMMData,
    fhmm_data,
    fhmm_elementwise_model,
    fhmm_enumerated_model,
    fhmm_joint_states,
    fhmm_markov_log_prior,
    fhmm_model,
)
from numpyro_discrete.gallery.lattices import ISING_CONFIGS, ising_energy, ising_field, ising_model
from numpyro_discrete.gallery.networks import rbm_log_density, rbm_parameters

__all__ = [
    "BERNOULLI_CONFIGS",
    "ISING_CONFIGS",
    "Target",
    "bernoulli_target",
    "ising_energy",
    "ising_field",
    "ising_target",
    "POTTS_BETA",
    "POTTS_COLOURS",
    "potts_target",
    "FHMM_NOISE_SCALES",
    "FHMMData",
    "fhmm_data",
    "fhmm_enumerated_model",
    "fhmm_joint_states",
    "fhmm_markov_log_prior",
    "fhmm_model",
    "fhmm_elementwise_model",
    "BinaryTarget",
    "bernoulli_binary",
    "fhmm_binary",
    "ising_binary",
    "rbm_binary",
    "rbm_log_density",
]

#: ``(low, high)`` of ``p_i ~ U[low, high]`` for the Bernoulli configurations.
BERNOULLI_CONFIGS: dict[str, tuple[float, float]] = {
    "C1": (0.25, 0.75),
    "C2": (0.15, 0.85),
    "C3": (0.05, 0.95),
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


def _lattice_target(
    name: str, model: Callable[[], None], p: int, elementwise: bool, params: dict[str, object]
) -> Target:
    """The target of `model`, whose site ``"x"`` is the ``p x p`` lattice: `name` gets
    ``-ew`` for the elementwise form, which `params` record."""
    return Target(
        name=name + ("-ew" if elementwise else ""),
        model=model,
        num_coords=p * p,
        shape=(p, p),
        params={**params, "elementwise": elementwise},
    )


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


def ising_target(
    p: int = 50, config: str = "C2", seed: int = 0, *, elementwise: bool = False
) -> Target:
    """Ising model on a ``p x p`` open lattice with the ``(c, lambda)`` of `config`.

    :param elementwise: write ``log pi`` as the elementwise factors ``"field"``
        (``a_i s_i``), ``"right"`` and ``"down"`` (``-lambda s_i s_j`` of each horizontal and
        vertical pair) instead of the one scalar factor ``"ising"``: the same log density,
        whose structure (a lattice, 2 colours) the kernels detect. The name gets ``-ew``.
    """
    c, lam = ISING_CONFIGS[config]
    field_np = ising_field(p, c, seed)
    field_jnp = jnp.asarray(field_np)

    def model() -> None:
        x = numpyro.sample("x", dist.Bernoulli(0.5).expand([p, p]))
        numpyro.factor("ising", ising_energy(x, field_jnp, lam))

    def elementwise_model() -> None:
        ising_model(field_jnp, -lam)

    params = {"config": config, "c": c, "lambda": lam, "field": field_np}
    return _lattice_target(
        f"ising-{p}-{config}", elementwise_model if elementwise else model, p, elementwise, params
    )


#: Colours and coupling of the Potts target.
POTTS_COLOURS = 3
POTTS_BETA = 0.6


def potts_target(
    p: int = 30, seed: int = 0, *, beta: float = POTTS_BETA, elementwise: bool = False
) -> Target:
    """The 3-state Potts model on a ``p x p`` open lattice, colours used as table indices
    (``benchmarks/bench_supports.py``'s target, the same field for the same seed).

    :param elementwise: the pair terms as the elementwise factors ``"down"`` and
        ``"right"`` (one term per neighbour pair) instead of one scalar factor ``"pairs"``:
        the same log density, whose structure (a lattice, 2 colours) the kernels detect.
        The name gets ``-ew``.
    """
    field_np = np.random.default_rng(seed).normal(0.0, 0.5, (p, p, POTTS_COLOURS))
    field_jnp = jnp.asarray(field_np)
    interaction = beta * jnp.eye(POTTS_COLOURS)

    def model() -> None:
        x = numpyro.sample("x", dist.Categorical(logits=field_jnp))
        vertical = interaction[x[1:, :], x[:-1, :]]
        horizontal = interaction[x[:, 1:], x[:, :-1]]
        if elementwise:
            numpyro.factor("down", vertical)
            numpyro.factor("right", horizontal)
        else:
            numpyro.factor("pairs", jnp.sum(vertical) + jnp.sum(horizontal))

    params = {"colours": POTTS_COLOURS, "beta": beta, "field": field_np}
    return _lattice_target(f"potts-{p}", model, p, elementwise, params)


def fhmm_ffbs_gibbs_fn(y: jax.Array, num_chains: int) -> Callable:
    """The hand-written anchor for :func:`fhmm_model`: a ``gibbs_fn`` for numpyro's
    ``HMCGibbs(NUTS(fhmm_model), gibbs_fn, gibbs_sites=["x"])`` drawing each hidden chain in
    turn from its exact conditional given ``w, b, sigma`` and the other chains, by forward
    filtering, backward sampling (Carter and Kohn 1994; Ghahramani and Jordan 1997): two
    sequential scans of ``L`` steps per chain, written directly from the model's transition
    matrix (independent of the library's chain blocks)."""
    y = jnp.asarray(y)
    log_init = jnp.log(jnp.array([1.0 - FHMM_INIT_PROB, FHMM_INIT_PROB]))
    stay, switch = np.log(FHMM_STAY_PROB), np.log1p(-FHMM_STAY_PROB)
    log_trans = jnp.array([[stay, switch], [switch, stay]])

    def draw_chain(gumbels: jax.Array, log_emission: jax.Array) -> jax.Array:
        def forward(alpha: jax.Array, emission: jax.Array) -> tuple[jax.Array, jax.Array]:
            alpha = jax.nn.logsumexp(alpha[:, None] + log_trans, axis=0) + emission
            alpha = alpha - jax.nn.logsumexp(alpha)
            return alpha, alpha

        first = log_init + log_emission[0]
        first = first - jax.nn.logsumexp(first)
        _, alphas = lax.scan(forward, first, log_emission[1:])
        alphas = jnp.concatenate([first[None], alphas])
        last = jnp.argmax(alphas[-1] + gumbels[-1])

        def backward(following: jax.Array, inputs: tuple) -> tuple[jax.Array, jax.Array]:
            alpha, noise = inputs
            state = jnp.argmax(alpha + log_trans[:, following] + noise)
            return state, state

        _, states = lax.scan(backward, last, (alphas[:-1], gumbels[:-1]), reverse=True)
        return jnp.concatenate([states, last[None]])

    def gibbs_fn(rng_key: jax.Array, gibbs_sites: dict, hmc_sites: dict) -> dict:
        w, b, sigma = hmc_sites["w"], hmc_sites["b"], hmc_sites["sigma"]
        x = gibbs_sites["x"]

        def one_chain(x: jax.Array, inputs: tuple) -> tuple[jax.Array, None]:
            k, gumbels = inputs
            others = x.astype(w.dtype) @ w - x[:, k].astype(w.dtype) * w[k] + b
            means = others[:, None] + jnp.array([0.0, 1.0]) * w[k]
            log_emission = jax.scipy.stats.norm.logpdf(y[:, None], means, sigma)
            return x.at[:, k].set(draw_chain(gumbels, log_emission).astype(x.dtype)), None

        # the Gumbel noise of every backward draw of the sweep in one batch: a key split and
        # a generator call per step cost more than the step's arithmetic (a sequential
        # sampler of three binary chains of 200 took 0.26 ms so, 0.02 ms with the noise drawn
        # beforehand)
        gumbels = random.gumbel(rng_key, (num_chains, *x.shape[:1], 2), w.dtype)
        x, _ = lax.scan(one_chain, x, (jnp.arange(num_chains), gumbels))
        return {"x": x}

    return gibbs_fn


# --- flat binary log densities ------------------------------------------------------------


@dataclass(frozen=True)
class BinaryTarget:
    """
    A target over ``{0, 1}^N`` as a flat log density.

    - **name** - short label, e.g. ``"bernoulli-800-C2"``.
    - **num_coords** - ``N``.
    - **log_density** - ``log pi`` (up to a constant) of a flat ``(N,)`` vector, integer or
      float-relaxed.
    - **params** - the drawn parameters and settings, for reports.
    """

    name: str
    num_coords: int
    log_density: Callable[[jax.Array], jax.Array]
    params: dict[str, object] = field(default_factory=dict)


def bernoulli_binary(num_coords: int = 800, config: str = "C2", seed: int = 0) -> BinaryTarget:
    """:func:`bernoulli_target` (the same ``p_i``) as a flat log density."""
    target = bernoulli_target(num_coords, config, seed)
    probs = np.asarray(target.params["probs"])
    log_p, log_q = jnp.asarray(np.log(probs)), jnp.asarray(np.log1p(-probs))

    def log_density(x: jax.Array) -> jax.Array:
        return jnp.sum(x * log_p + (1 - x) * log_q)

    return BinaryTarget(target.name, num_coords, log_density, target.params)


def ising_binary(p: int = 50, config: str = "C2", seed: int = 0) -> BinaryTarget:
    """:func:`ising_target` (the same field) as a flat log density of ``p * p`` spins."""
    target = ising_target(p, config, seed)
    field_jnp = jnp.asarray(target.params["field"])
    lam = float(target.params["lambda"])

    def log_density(x: jax.Array) -> jax.Array:
        return ising_energy(x.reshape(p, p), field_jnp, lam)

    return BinaryTarget(target.name, p * p, log_density, target.params)


def fhmm_binary(
    num_steps: int = 1000, num_chains: int = 5, config: str = "C2", seed: int = 0
) -> BinaryTarget:
    """The posterior of the ``(L, K)`` hidden chains of :func:`fhmm_model` given data from
    :func:`fhmm_data`, with ``w``, ``b`` and ``sigma`` fixed at their true values; ``x`` is
    the row-major flattening of ``X``."""
    data = fhmm_data(num_steps, num_chains, config, seed)
    y, w = jnp.asarray(data.y), jnp.asarray(data.w)

    def log_density(x: jax.Array) -> jax.Array:
        x = x.reshape(num_steps, num_chains)
        mean = x @ w + data.b
        log_lik = -0.5 * jnp.sum(((y - mean) / data.sigma) ** 2)
        return fhmm_markov_log_prior(x) + log_lik

    params = {"config": config, "L": num_steps, "K": num_chains, "sigma": data.sigma}
    return BinaryTarget(f"fhmm-{num_steps}x{num_chains}-{config}", num_steps * num_chains,
                        log_density, params)  # fmt: skip


def rbm_binary(
    num_visible: int = 784,
    num_hidden: int = 400,
    weight_scale: float = 5.0,
    bias_loc: float = -1.0,
    seed: int = 0,
) -> BinaryTarget:
    """An RBM with random parameters: ``W ~ N(0, weight_scale^2 / num_hidden)`` of shape
    ``(num_hidden, num_visible)``, visible biases ``b ~ N(bias_loc, 1)``, hidden biases
    ``c ~ N(0, 1)``."""
    weights, b, c = rbm_parameters(num_visible, num_hidden, weight_scale, bias_loc, seed)
    w_jnp, b_jnp, c_jnp = (jnp.asarray(a, jnp.float32) for a in (weights, b, c))

    def log_density(v: jax.Array) -> jax.Array:
        return rbm_log_density(v, w_jnp, b_jnp, c_jnp)

    params = {"h": num_hidden, "weight_scale": weight_scale, "bias_loc": bias_loc}
    return BinaryTarget(f"rbm-{num_visible}-h{num_hidden}", num_visible, log_density, params)
