"""The Bayesian factorial HMM (Ghahramani and Jordan 1997) of the benchmarks, the tests and
``examples/fhmm.py``: ``K`` binary chains over ``L`` steps, ``x_{0,k} ~ Bern(0.1)``, each
chain keeps its value with probability 0.8 per step, ``y_l ~ N(w . x_l + b, sigma^2)``,
``w ~ N(w_loc, w_scale^2)^K`` (or ``HalfNormal(w_scale)^K``), ``b ~ N(0, 1)``,
``sigma ~ HalfNormal(1)``; data simulated at ``sigma^2 = 2, 1, 0.5`` (configurations C1..C3
of Sun, Dai and Schuurmans 2022, Appendix D).

Three forms of the same model: ``X`` as one ``(L, K)`` Bernoulli site with the Markov prior
added as one summed factor, as users write it (:func:`fhmm_model`); the same factor written
elementwise, one term per transition (:func:`fhmm_elementwise_model`); and ``X`` summed out
by numpyro's enumeration over the ``2^K`` joint states of a time step
(:func:`fhmm_enumerated_model`, for NUTS alone: the reference).

**References:**

1. *Factorial Hidden Markov Models*, Zoubin Ghahramani, Michael I. Jordan (1997)
2. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
   Hanjun Dai, Dale Schuurmans (2022)
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

import numpyro
import numpyro.distributions as dist

from numpyro_discrete.gallery.base import (
    Dataset,
    GalleryModel,
    Reference,
    check_size,
    enumerated_nuts_reference,
)

__all__ = [
    "FHMM",
    "FHMM_INIT_PROB",
    "FHMM_NOISE_SCALES",
    "FHMM_STAY_PROB",
    "FHMMData",
    "fhmm_data",
    "fhmm_dataset",
    "fhmm_elementwise_model",
    "fhmm_enumerated_model",
    "fhmm_joint_states",
    "fhmm_markov_log_prior",
    "fhmm_model",
    "fhmm_parameters",
    "fhmm_smoothed_marginals",
]

#: Observation noise variance ``sigma^2`` of the simulated FHMM data for C1..C3.
FHMM_NOISE_SCALES: dict[str, float] = {"C1": 2.0, "C2": 1.0, "C3": 0.5}
FHMM_INIT_PROB = 0.1
FHMM_STAY_PROB = 0.8


@dataclass(frozen=True)
class FHMMData:
    """
    Simulated factorial-HMM data.

    - **y** - ``(L,)`` observations.
    - **x** - ``(L, K)`` true hidden states (int32).
    - **w** - ``(K,)`` true weights; **b** - true offset; **sigma** - true noise scale.
    """

    y: np.ndarray
    x: np.ndarray
    w: np.ndarray
    b: float
    sigma: float


def fhmm_data(
    num_steps: int,
    num_chains: int,
    config: str = "C2",
    seed: int = 0,
    w: np.ndarray | None = None,
    b: float | None = None,
) -> FHMMData:
    """Simulate ``L = num_steps`` observations of ``K = num_chains`` chains; ``w`` and ``b``
    drawn from ``N(0, 1)`` unless given, ``sigma^2`` from `config`."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=num_chains) if w is None else np.asarray(w, dtype=float)
    b = float(rng.normal()) if b is None else float(b)
    sigma = float(np.sqrt(FHMM_NOISE_SCALES[config]))
    x = np.empty((num_steps, num_chains), dtype=np.int32)
    x[0] = rng.random(num_chains) < FHMM_INIT_PROB
    for step in range(1, num_steps):
        switch = rng.random(num_chains) >= FHMM_STAY_PROB
        x[step] = np.where(switch, 1 - x[step - 1], x[step - 1])
    y = x @ w + b + sigma * rng.normal(size=num_steps)
    return FHMMData(y=y, x=x, w=w, b=b, sigma=sigma)


def fhmm_markov_log_prior(x: jax.Array) -> jax.Array:
    """Log prior of the ``(L, K)`` chains, in vectorised form and polynomial in ``x`` (so that
    a float-relaxed ``x`` has a gradient): ``x_{0,k} ~ Bern(0.1)``, then each chain keeps its
    value with probability 0.8."""
    x = jnp.asarray(x, jnp.result_type(float))
    first = x[0] * np.log(FHMM_INIT_PROB) + (1 - x[0]) * np.log1p(-FHMM_INIT_PROB)
    same = x[1:] * x[:-1] + (1 - x[1:]) * (1 - x[:-1])
    stay = same * np.log(FHMM_STAY_PROB) + (1 - same) * np.log1p(-FHMM_STAY_PROB)
    return jnp.sum(first) + jnp.sum(stay)


def fhmm_parameters(
    num_chains: int, w_loc: Any, w_scale: Any, positive_weights: bool = False
) -> tuple[jax.Array, ...]:
    """The continuous sites ``w``, ``b``, ``sigma`` of every form of the model; with
    `positive_weights`, ``w ~ HalfNormal(w_scale)^K`` (the ``N(0, w_scale^2)`` prior folded
    onto ``w > 0``, `w_loc` unused), which removes the flipped mirror modes (see
    :func:`fhmm_model`)."""
    if positive_weights:
        prior = dist.HalfNormal(jnp.broadcast_to(w_scale, (num_chains,)))
    else:
        prior = dist.Normal(jnp.broadcast_to(w_loc, (num_chains,)), w_scale)
    w = numpyro.sample("w", prior.to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    return w, b, sigma


def fhmm_model(
    y: jax.Array,
    num_chains: int,
    w_loc: Any = 0.0,
    w_scale: Any = 1.0,
    positive_weights: bool = False,
) -> None:
    """The FHMM with ``X`` as one ``(L, K)`` binary site ``"x"``: a uniform Bernoulli site
    whose log probability (``-L K log 2``) the factor ``"x_markov"`` replaces by the Markov
    prior.

    With weights of either sign, a chain flipped (``x_k -> 1 - x_k``, ``w_k -> -w_k``,
    ``b -> b + w_k``) explains the data as well, but its mode is not the same posterior: the
    priors of ``b`` and of the first state ``x_{0,k}`` change under the flip, so the mean
    signal's distribution differs between these mirror modes (most at the first step), and
    a chain crosses from one to another only when its ``w_k`` passes through 0. Chains of
    any local sampler (NUTS with ``X`` enumerated too) then disagree by which modes they
    visited. `positive_weights` removes those modes (the chains permuted remain, and they
    are exact symmetries of the posterior) but adds a trap of its own: a chain whose weight
    falls near 0 stays there (NUTS moves ``log w``, and a chain with no effect leaves the
    weight nothing to climb back on). Measured on the example's data with 4 sequential
    chains: max R-hat of the label-invariant summaries 1.41 (500 + 1000 draws) and 1.05
    (1500 + 3000), against 1.03 and 1.014 with weights of either sign.

    :param y: ``(L,)`` observations.
    :param int num_chains: ``K``.
    :param w_loc: prior mean of the weights (scalar or ``(K,)``).
    :param w_scale: prior scale of the weights.
    :param bool positive_weights: ``w ~ HalfNormal(w_scale)`` instead of
        ``N(w_loc, w_scale^2)``.
    """
    num_steps = y.shape[0]
    w, b, sigma = fhmm_parameters(num_chains, w_loc, w_scale, positive_weights)
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([num_steps, num_chains]))
    numpyro.factor("x_markov", fhmm_markov_log_prior(x) + num_steps * num_chains * np.log(2.0))
    numpyro.sample("y", dist.Normal(x @ w + b, sigma), obs=y)


def fhmm_elementwise_model(
    y: jax.Array, num_chains: int, w_loc: Any = 0.0, w_scale: Any = 1.0
) -> None:
    """:func:`fhmm_model` with the Markov prior written elementwise: the factors
    ``"x_init"`` (``(K,)``, the first step) and ``"x_markov"`` (``(L - 1, K)``, one term per
    transition), each term plus ``log 2`` to replace the uniform prior of its coordinate.
    The same log density; structure detection sees each ``x_{l,k}`` interact with
    ``x_{l +- 1,k}`` and with the ``x_{l,k'}`` of its observation (``K`` colours)."""
    num_steps = y.shape[0]
    w, b, sigma = fhmm_parameters(num_chains, w_loc, w_scale)
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand([num_steps, num_chains]))
    xf = jnp.asarray(x, jnp.result_type(float))
    first = xf[0] * np.log(FHMM_INIT_PROB) + (1 - xf[0]) * np.log1p(-FHMM_INIT_PROB)
    same = xf[1:] * xf[:-1] + (1 - xf[1:]) * (1 - xf[:-1])
    stay = same * np.log(FHMM_STAY_PROB) + (1 - same) * np.log1p(-FHMM_STAY_PROB)
    numpyro.factor("x_init", first + np.log(2.0))
    numpyro.factor("x_markov", stay + np.log(2.0))
    numpyro.sample("y", dist.Normal(x @ w + b, sigma), obs=y)


def fhmm_joint_states(num_chains: int) -> np.ndarray:
    """The ``(2^K, K)`` binary vectors, state ``s`` having bits ``x_k = (s >> k) & 1``."""
    states = np.arange(2**num_chains)[:, None]
    return ((states >> np.arange(num_chains)) & 1).astype(np.int32)


def _joint_log_init_trans(num_chains: int) -> tuple[np.ndarray, np.ndarray]:
    """Log prior of the first joint state and the ``2^K x 2^K`` log transition matrix."""
    states = fhmm_joint_states(num_chains)
    same = states[:, None, :] == states[None, :, :]
    log_stay, log_switch = np.log(FHMM_STAY_PROB), np.log1p(-FHMM_STAY_PROB)
    log_trans = np.where(same, log_stay, log_switch).sum(-1)
    log_init = (states * np.log(FHMM_INIT_PROB) + (1 - states) * np.log1p(-FHMM_INIT_PROB)).sum(-1)
    return log_init, log_trans


def fhmm_enumerated_model(
    y: jax.Array, num_chains: int, w_loc: Any = 0.0, w_scale: Any = 1.0
) -> None:
    """The same FHMM with ``X`` summed out: one categorical joint state per time step over the
    ``2^K`` values of ``x_l`` (transition matrix ``2^K x 2^K``), marked
    ``infer={"enumerate": "parallel"}`` inside numpyro's ``scan``. Memory and time grow like
    ``L 4^K``."""
    from numpyro.contrib.control_flow import scan

    w, b, sigma = fhmm_parameters(num_chains, w_loc, w_scale)
    states = fhmm_joint_states(num_chains)
    log_init, log_trans = (jnp.asarray(a) for a in _joint_log_init_trans(num_chains))
    means = jnp.asarray(states, jnp.result_type(float)) @ w + b
    # a fresh `infer` dict per site: numpyro's enumeration writes into it
    s0 = numpyro.sample(
        "state_init", dist.Categorical(logits=log_init), infer={"enumerate": "parallel"}
    )
    numpyro.sample("y_init", dist.Normal(means[s0], sigma), obs=y[0])

    def transition(s_prev: jax.Array, y_l: jax.Array) -> tuple[jax.Array, None]:
        s = numpyro.sample(
            "state", dist.Categorical(logits=log_trans[s_prev]), infer={"enumerate": "parallel"}
        )
        numpyro.sample("y_step", dist.Normal(means[s], sigma), obs=y_l)
        return s, None

    scan(transition, s0, y[1:])


def fhmm_smoothed_marginals(
    y: jax.Array, w: jax.Array, b: jax.Array, sigma: jax.Array, num_chains: int
) -> jax.Array:
    """``(L, K)``: ``P(x_{l,k} = 1 | y, w, b, sigma)``, exact, by forward-backward over the
    ``2^K`` joint states."""
    states = fhmm_joint_states(num_chains)
    log_init, log_trans = _joint_log_init_trans(num_chains)
    log_init, log_trans = jnp.asarray(log_init, w.dtype), jnp.asarray(log_trans, w.dtype)
    log_emit = dist.Normal(jnp.asarray(states, w.dtype) @ w + b, sigma).log_prob(y[:, None])

    def forward(alpha: jax.Array, emit: jax.Array) -> tuple[jax.Array, jax.Array]:
        alpha = logsumexp(alpha[:, None] + log_trans, axis=0) + emit
        return alpha, alpha

    def backward(beta: jax.Array, emit: jax.Array) -> tuple[jax.Array, jax.Array]:
        beta = logsumexp(log_trans + (emit + beta)[None, :], axis=1)
        return beta, beta

    alpha0 = log_init + log_emit[0]
    _, alphas = jax.lax.scan(forward, alpha0, log_emit[1:])
    alphas = jnp.concatenate([alpha0[None], alphas])
    _, betas = jax.lax.scan(backward, jnp.zeros(len(states), w.dtype), log_emit[1:], reverse=True)
    betas = jnp.concatenate([betas, jnp.zeros((1, len(states)), w.dtype)])
    log_post = alphas + betas
    post = jnp.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))
    return post @ jnp.asarray(states, post.dtype)


# --- the gallery entry ----------------------------------------------------------------------

#: The exact size: ``L = 40``, ``K = 2``, well separated weights and an informative prior
#: around them (``w_k ~ N(w_true_k, 0.3^2)``), which keeps the mirror modes (chains
#: permuted or flipped) several prior standard deviations away: enumerated NUTS, which
#: cannot cross between them, is then a reference for ``w`` and ``b`` too.
FHMM_EXACT = {"num_steps": 40, "w": (1.5, 3.0), "config": "C1", "w_scale": 0.3}


def fhmm_dataset(seed: int = 0, size: str = "example") -> Dataset:
    """``"example"``: the data of ``examples/fhmm.py`` (``L = 200``, ``K = 3``, C3,
    weights doubling from chain to chain, ``b = 0.3``, prior ``w ~ N(0, 1)``);
    ``"exact"``: :data:`FHMM_EXACT`.

    :param int seed: numpy seed.
    :param str size: ``"example"`` or ``"exact"``.
    """
    check_size(size)
    if size == "example":
        num_steps, num_chains = 200, 3
        w = 2.0 ** np.arange(num_chains) / 2.0 ** (num_chains / 2 - 1)
        data = fhmm_data(num_steps, num_chains, "C3", seed, w=w, b=0.3)
        kwargs = {}
    else:
        w = np.asarray(FHMM_EXACT["w"])
        data = fhmm_data(FHMM_EXACT["num_steps"], len(w), FHMM_EXACT["config"], seed, w=w, b=0.0)
        kwargs = {"w_loc": jnp.asarray(w), "w_scale": FHMM_EXACT["w_scale"]}
    truth = {"x": data.x, "w": data.w, "b": data.b, "sigma": data.sigma}
    return Dataset((jnp.asarray(data.y), len(data.w)), kwargs, truth)


def fhmm_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """The label-invariant summaries: the mean signal ``w . x_l + b`` at every step, the
    sorted ``|w|`` and ``sigma``, the same whichever way the chains are permuted (with
    weights of either sign, a flipped chain changes their distribution: see
    :func:`fhmm_model`). ``w`` and ``b`` themselves only where the prior pins them
    (``w_loc`` given, as at the exact size): elsewhere chains in different mirror modes
    disagree on them while agreeing on the posterior."""
    w = np.asarray(samples["w"], np.float64)
    b = np.asarray(samples["b"], np.float64)
    signal = np.einsum("slk,sk->sl", np.asarray(samples["x"], np.float64), w) + b[:, None]
    out = {
        "signal": signal,
        "abs_w_sorted": np.sort(np.abs(w), axis=-1),
        "sigma": np.asarray(samples["sigma"], np.float64),
    }
    if "w_loc" in data.kwargs:
        out.update(w=w, b=b)
    return out


def _reference_summaries(samples: Mapping[str, Any], data: Dataset) -> dict[str, np.ndarray]:
    """:func:`fhmm_summaries` of NUTS draws of the continuous sites, the signal's ``x``
    replaced by its exact smoothed marginals."""
    y, num_chains = data.args
    w, b, sigma = (jnp.asarray(samples[k]) for k in ("w", "b", "sigma"))
    marginals = jax.vmap(fhmm_smoothed_marginals, in_axes=(None, 0, 0, 0, None))(
        y, w, b, sigma, num_chains
    )
    return fhmm_summaries({"x": marginals, "w": w, "b": b, "sigma": sigma}, data)


def fhmm_reference(data: Dataset) -> Reference:
    """NUTS on :func:`fhmm_enumerated_model` (``X`` summed out by numpyro's enumeration);
    the mean signal of each draw from the exact smoothed marginals of ``X`` given it."""
    return enumerated_nuts_reference(fhmm_enumerated_model, data, _reference_summaries)


FHMM = GalleryModel(
    name="fhmm",
    model=fhmm_model,
    simulate=fhmm_dataset,
    summaries=fhmm_summaries,
    reference=fhmm_reference,
    reference_kind="enumerated NUTS",
    description=(
        "Bayesian factorial HMM: K binary Markov chains as one (L, K) Bernoulli site, the "
        "Markov prior one summed factor, y_l ~ N(w . x_l + b, sigma^2). Reference (L = 40, "
        "K = 2): NUTS with X summed out by numpyro's enumeration over the 2^K joint states, "
        "the mean signal from the exact smoothed marginals; summaries: the mean signal, "
        "sorted |w|, sigma (and w, b where the prior identifies them)."
    ),
    citations=("Ghahramani and Jordan (1997)", "Sun, Dai and Schuurmans (2022), App. D"),
    enumerated=(fhmm_enumerated_model, _reference_summaries),
)
