"""Sequence models: a Gaussian HMM written with numpyro's ``scan`` and a Poisson change
point (the factorial HMM is in :mod:`numpyro_discrete.gallery.fhmm`).

**References:**

1. *A tutorial on hidden Markov models and selected applications in speech recognition*,
   Lawrence R. Rabiner (1989)
2. *Hierarchical Bayesian analysis of changepoint problems*, Bradley P. Carlin, Alan E.
   Gelfand, Adrian F. M. Smith (1992)
3. *A note on the intervals between coal-mining disasters*, R. G. Jarrett (1979)
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.special import gammaln

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

import numpyro
from numpyro.contrib.control_flow import scan
from numpyro.contrib.funsor import config_enumerate
import numpyro.distributions as dist

from numpyro_discrete.gallery.base import (
    Dataset,
    GalleryModel,
    Reference,
    check_size,
    enumerated_nuts_reference,
    exact_reference,
)

__all__ = [
    "CHANGE_POINT",
    "HMM",
    "change_point_data",
    "change_point_model",
    "change_point_reference",
    "hmm_data",
    "hmm_model",
    "hmm_reference",
    "simulate_hmm",
]

# --- HMM ----------------------------------------------------------------------------------

#: ``(T, K)`` of the two sizes.
HMM_SIZES = {"example": (1000, 4), "exact": (30, 2)}


def hmm_model(y: jax.Array, num_states: int, enumerate_states: bool = False) -> None:
    """A Gaussian HMM with its states sampled inside numpyro's ``scan``: ``x_t ~
    Categorical(P[x_{t-1}])`` (``x_{-1} = 0``), ``y_t ~ N(locs[x_t], sigma^2)``, ``P_k ~
    Dirichlet(1 + 8 e_k)``, ``locs`` ordered ``N(0, 5^2)^K``, ``sigma ~ HalfNormal(2)``.

    :param y: ``(T,)`` observations.
    :param int num_states: ``K``.
    :param bool enumerate_states: mark the states ``infer={"enumerate": "parallel"}``, so
        that NUTS sums them out (numpyro's enumeration): the reference.
    """
    concentration = jnp.ones((num_states, num_states)) + 8.0 * jnp.eye(num_states)
    trans = numpyro.sample("trans", dist.Dirichlet(concentration).to_event(1))
    locs = numpyro.sample(
        "locs",
        dist.TransformedDistribution(
            dist.Normal(0.0, 5.0).expand([num_states]), dist.transforms.OrderedTransform()
        ),
    )
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    infer = {"enumerate": "parallel"} if enumerate_states else {}

    def step(previous: jax.Array, y_t: jax.Array) -> tuple[jax.Array, None]:
        x = numpyro.sample("x", dist.Categorical(trans[previous]), infer=dict(infer))
        numpyro.sample("y", dist.Normal(locs[x], sigma), obs=y_t)
        return x, None

    scan(step, 0, y)


def simulate_hmm(rng: np.random.Generator, num_steps: int, num_states: int) -> dict[str, Any]:
    """True states and observations: sticky transitions (stay with probability 0.9), means
    ``0, 2, 4, ...``, noise scale 0.7. Returns ``x``, ``y``, ``locs``, ``sigma``."""
    trans = np.full((num_states, num_states), 0.1 / (num_states - 1)) + 0.9 * np.eye(num_states)
    trans /= trans.sum(1, keepdims=True)
    locs = 2.0 * np.arange(num_states)
    sigma = 0.7
    x = np.zeros(num_steps, np.int32)
    previous = 0
    for t in range(num_steps):
        previous = x[t] = rng.choice(num_states, p=trans[previous])
    return {"x": x, "y": locs[x] + sigma * rng.normal(size=num_steps), "locs": locs, "sigma": sigma}


def hmm_data(seed: int = 0, size: str = "example") -> Dataset:
    """:func:`simulate_hmm` at ``T = 1000, K = 4`` (``"example"``, as ``examples/hmm.py``)
    or ``T = 30, K = 2`` (``"exact"``).

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    num_steps, num_states = HMM_SIZES[size]
    truth = simulate_hmm(np.random.default_rng(seed), num_steps, num_states)
    return Dataset((jnp.asarray(truth["y"]), num_states), {}, truth)


def hmm_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The mean signal ``locs[x_t]`` at every step and ``sigma``: unchanged by relabelling,
    and unlike the means of ``locs`` finite (the mean of an unused state follows the
    ordered prior, whose gaps ``exp(N(0, 5^2))`` have a mean of about ``3 10^5``)."""
    del data
    locs = np.asarray(samples["locs"], np.float64)
    x = np.asarray(samples["x"])
    if x.ndim == 3:  # (draws, T, K) state probabilities, from the reference
        signal = np.einsum("stk,sk->st", x, locs)
    else:
        signal = np.take_along_axis(locs, x, axis=-1)
    return {"signal": signal, "sigma": np.asarray(samples["sigma"], np.float64)}


def hmm_smoothed_marginals(
    y: jax.Array, trans: jax.Array, locs: jax.Array, sigma: jax.Array
) -> jax.Array:
    """``(T, K)``: ``P(x_t = k | y, P, locs, sigma)`` of :func:`hmm_model`, exact, by
    forward-backward."""
    log_trans = jnp.log(trans)
    log_emit = dist.Normal(locs, sigma).log_prob(y[:, None])

    def forward(alpha: jax.Array, emit: jax.Array) -> tuple[jax.Array, jax.Array]:
        alpha = logsumexp(alpha[:, None] + log_trans, axis=0) + emit
        return alpha, alpha

    def backward(beta: jax.Array, emit: jax.Array) -> tuple[jax.Array, jax.Array]:
        beta = logsumexp(log_trans + (emit + beta)[None, :], axis=1)
        return beta, beta

    alpha0 = log_trans[0] + log_emit[0]  # x_{-1} = 0
    _, alphas = jax.lax.scan(forward, alpha0, log_emit[1:])
    alphas = jnp.concatenate([alpha0[None], alphas])
    _, betas = jax.lax.scan(backward, jnp.zeros_like(alpha0), log_emit[1:], reverse=True)
    betas = jnp.concatenate([betas, jnp.zeros_like(alpha0)[None]])
    log_post = alphas + betas
    return jnp.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))


def _hmm_enumerated(y: jax.Array, num_states: int) -> None:
    hmm_model(y, num_states, enumerate_states=True)


def _hmm_reference_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """:func:`hmm_summaries` of NUTS draws of ``P, locs, sigma``, the states replaced by
    their exact smoothed marginals."""
    y = data.args[0]
    params = [jnp.asarray(samples[k]) for k in ("trans", "locs", "sigma")]
    marginals = jax.vmap(hmm_smoothed_marginals, in_axes=(None, 0, 0, 0))(y, *params)
    return hmm_summaries({**samples, "x": np.asarray(marginals)}, data)


def hmm_reference(data: Dataset) -> Reference:
    """NUTS on :func:`hmm_model` with the states summed out by numpyro's enumeration
    (exact in the states, Monte Carlo in ``P, locs, sigma``); the mean signal of each draw
    from the exact smoothed marginals of the states given it."""
    return enumerated_nuts_reference(_hmm_enumerated, data, _hmm_reference_summaries)


HMM = GalleryModel(
    name="hmm",
    model=hmm_model,
    simulate=hmm_data,
    summaries=hmm_summaries,
    reference=hmm_reference,
    reference_kind="enumerated NUTS",
    description=(
        "Gaussian HMM, K categorical states over T steps, written with numpyro's scan; "
        "Dirichlet transition rows, ordered means, HalfNormal noise. Reference (T = 30, "
        "K = 2): NUTS on the same model with the states marked for numpyro's enumeration, "
        "the mean signal from the exact smoothed marginals; summaries: the mean signal "
        "locs[x_t] and sigma."
    ),
    citations=("Rabiner (1989)",),
    enumerated=(_hmm_enumerated, _hmm_reference_summaries),
)

# --- change point -------------------------------------------------------------------------

#: Gamma(shape, rate) prior of both rates: ``Exponential(1)``.
RATE_SHAPE, RATE_RATE = 1.0, 1.0
#: ``(T, true change point, early rate, late rate)`` of the two sizes (the example: the
#: shape of the British coal-mining disasters 1851-1962, about 3 a year, then 1).
CHANGE_POINT_SIZES = {"example": (112, 40, 3.0, 1.0), "exact": (20, 8, 3.0, 1.0)}


def change_point_model(counts: jax.Array) -> None:
    """Counts whose Poisson rate changes once: ``tau ~ DiscreteUniform(0, T - 1)``, ``counts_t
    ~ Poisson(early_rate if t < tau else late_rate)``, both rates ``Exponential(1)``.

    :param counts: ``(T,)`` observed counts.
    """
    num_steps = counts.shape[0]
    tau = numpyro.sample("tau", dist.DiscreteUniform(0, num_steps - 1))
    early_rate = numpyro.sample("early_rate", dist.Exponential(RATE_RATE))
    late_rate = numpyro.sample("late_rate", dist.Exponential(RATE_RATE))
    rate = jnp.where(jnp.arange(num_steps) < tau, early_rate, late_rate)
    with numpyro.plate("steps", num_steps):
        numpyro.sample("counts", dist.Poisson(rate), obs=counts)


def change_point_data(seed: int = 0, size: str = "example") -> Dataset:
    """Counts with one change of rate: ``T = 112`` with the change after step 40
    (``"example"``), ``T = 20`` with the change after step 8 (``"exact"``), rates 3 then 1.

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    num_steps, tau, early, late = CHANGE_POINT_SIZES[size]
    rate = np.where(np.arange(num_steps) < tau, early, late)
    counts = np.random.default_rng(seed).poisson(rate)
    truth = {"tau": tau, "early_rate": early, "late_rate": late}
    return Dataset((jnp.asarray(counts, jnp.float32),), {}, truth)


def change_point_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """``tau`` and both rates (identified by the order in time: label-invariant)."""
    del data
    return {k: np.asarray(samples[k], np.float64) for k in ("tau", "early_rate", "late_rate")}


def _change_point_enumerated(counts: jax.Array) -> None:
    config_enumerate(change_point_model)(counts)


def _change_point_enumerated_summaries(
    samples: Mapping[str, Any], data: Dataset
) -> dict[str, np.ndarray]:
    """:func:`change_point_summaries` of draws of the rates, ``tau`` replaced by its exact
    conditional mean given them (``p(tau | rates, counts)`` over every ``tau``)."""
    counts = np.asarray(data.args[0], np.float64)
    early = np.asarray(samples["early_rate"], np.float64)[:, None]
    late = np.asarray(samples["late_rate"], np.float64)[:, None]
    # log p(counts | tau, rates) up to a constant: steps t < tau at the early rate
    early_ll = np.concatenate(
        [np.zeros_like(early), np.cumsum(counts * np.log(early) - early, axis=1)], axis=1
    )[:, :-1]
    late_ll = np.cumsum((counts * np.log(late) - late)[:, ::-1], axis=1)[:, ::-1]
    log_p = early_ll + late_ll  # (draws, T): tau = 0 .. T - 1
    probs = np.exp(log_p - log_p.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    tau = probs @ np.arange(counts.shape[0], dtype=np.float64)
    return change_point_summaries({**samples, "tau": tau}, data)


def change_point_reference(data: Dataset) -> Reference:
    """Closed form: given ``tau`` each rate is conjugate (Gamma prior, Poisson counts), so
    ``p(tau | counts)`` is a product of two Gamma-Poisson marginals, evaluated for every
    ``tau``, and ``E[rate | tau, counts]`` is the Gamma posterior mean. Exact."""
    (counts,) = data.args
    counts = np.asarray(counts, np.float64)
    num_steps = counts.shape[0]
    tau = np.arange(num_steps)
    cumulative = np.concatenate([[0.0], np.cumsum(counts)])
    early_sum, early_len = cumulative[tau], tau.astype(np.float64)
    late_sum, late_len = cumulative[-1] - early_sum, num_steps - early_len

    def log_marginal(total, length):
        a, b = RATE_SHAPE, RATE_RATE
        return a * np.log(b) - gammaln(a) + gammaln(a + total) - (a + total) * np.log(b + length)

    log_post = log_marginal(early_sum, early_len) + log_marginal(late_sum, late_len)
    values = {
        "tau": tau.astype(np.float64),
        "early_rate": (RATE_SHAPE + early_sum) / (RATE_RATE + early_len),
        "late_rate": (RATE_SHAPE + late_sum) / (RATE_RATE + late_len),
    }
    return exact_reference(values, log_post, f"closed form over the {num_steps} change points")


CHANGE_POINT = GalleryModel(
    name="change_point",
    model=change_point_model,
    simulate=change_point_data,
    summaries=change_point_summaries,
    reference=change_point_reference,
    reference_kind="closed form",
    description=(
        "Poisson counts whose rate changes once, at a DiscreteUniform change point used in "
        "a comparison (t < tau); Exponential(1) rates. Reference (any size): the rates are "
        "conjugate given tau, so p(tau | counts) and the rates' posterior means are closed "
        "forms summed over every tau; summaries: tau and both rates."
    ),
    citations=("Carlin, Gelfand and Smith (1992)", "Jarrett (1979)"),
    enumerated=(_change_point_enumerated, _change_point_enumerated_summaries),
)
