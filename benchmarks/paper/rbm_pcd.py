"""
Paper reproduction: MH steps per iteration that PCD training of an RBM needs, LBP-1 vs ALBP
==========================================================================================

Sun, Dai and Schuurmans (2022), Sec. 6.3 and Table 2, train deep energy-based models by
persistent contrastive divergence (PCD) and report, per sampler, the smallest number of
Metropolis-Hastings (MH) steps per training iteration with which the model still trains
well: the adaptive sampler ALBP needs 2-6x fewer than the single-flip LBP-1. This script
repeats that measurement on a model whose log-likelihood is exact, so that "trains well"
is a number rather than a judgement of samples.

**Model.** A binary RBM with ``V = 64`` visible units (the 8 x 8 images of scikit-learn's
``load_digits``, which ship with the package, binarised at half intensity) and ``H``
hidden units (16 by default). With the hidden units summed out, the sampler's target is

    log pi(v) = b . v + sum_h softplus(W_h . v + c_h) - log Z,

and, summing out the visible units instead, ``log Z = logsumexp_h [c . h + sum_v
softplus(b_v + W_v . h)]`` over the ``2^H`` hidden states: exact for small ``H``
(:func:`log_partition`). The images are split once (fixed seed) into a training and a
held-out test set.

**Training (PCD, Tieleman 2008).** Each iteration takes a minibatch of ``--batch-size``
training images, advances ``--batch-size`` persistent fantasy chains by ``k`` MH steps of
the sampler on the current model, and moves the parameters along ``E_data[grad log
pi~(v)] - E_chains[grad log pi~(v)]`` (``pi~`` the unnormalised density) with Adam. Every
run shares the seed: the same initial parameters, fantasy chains, minibatch order and
optimiser; only the sampler and ``k`` differ. Samplers (the library's pure cores,
:mod:`numpyro_discrete.core.path` and, for ALBP's rounding and Robbins-Monro step,
:mod:`numpyro_discrete.core.path_length`; gradient local ratios, vectorised over the chains
and compiled in one loop per sampler):

- ``LBP-1``: the locally balanced path proposal with ``R = 1`` (Gibbs-with-Gradients);
- ``ALBP``: the same proposal with an adapted real scale ``R_t`` (Alg. 2), one for all
  chains, updated after every MH step by the chains' mean acceptance towards 0.574; the
  path length is ``R_t`` rounded at random, once per step for all chains.
  The target changes at every iteration, so the adaptation never stops (Alg. 2 freezes
  ``R_t`` after warmup, which only makes sense for a fixed target);
- ``Gibbs`` (reference): one block-Gibbs sweep (``h | v`` then ``v | h``, both exact) per
  step, which updates all 64 visible units at once.

``--balancing`` selects the weight function: ``sqrt`` (``g(t) = sqrt(t)``, the paper's
LBP_s) and/or ``barker`` (``g(t) = t/(1+t)``, LBP_b).

**Measurement.** Every ``--eval-every`` iterations the exact average log-likelihood (nats
per image) of the training and the test set. The *final* log-likelihood of a run is the
mean test log-likelihood over its last ``--final-window`` evaluations (one evaluation is
noisy: the parameters follow the fantasy chains). The threshold is a fraction of what
block-Gibbs PCD gains over the initial model:

    threshold = LL_init + --threshold-fraction * (LL_gibbs - LL_init),

with ``LL_init`` the test log-likelihood of the initial parameters and ``LL_gibbs`` the
final test log-likelihood of block-Gibbs PCD with the largest ``k`` of the grid. For each
sampler the script reports the smallest ``k`` of the grid whose run ends above the
threshold, and the ratio ``k(LBP-1) / k(ALBP)`` (the paper: 2-6). Time per MH step is
reported too: both samplers evaluate the gradient twice per step, and ALBP also samples a
path of ``R`` coordinates, a large share of a step on a model as cheap as this one.

Usage (from the repository root)::

    python -m benchmarks.paper.rbm_pcd            # reduced setting, about 4 min on 2 cores
    python -m benchmarks.paper.rbm_pcd --full     # finer grid, both weights, 2 seeds (~1 h)
    python -m benchmarks.paper.rbm_pcd --quick    # smoke test, tiny sizes

Outputs in ``--out-dir`` (default ``docs/benchmarks/paper``, and its ``full/`` or ``quick/``
folder for those settings, as in the rest of the suite): ``rbm_pcd.json`` (every
curve and number, with versions and machine), ``rbm_pcd.md`` (the tables, also printed)
and ``rbm_pcd.png`` (log-likelihood against iteration per ``k`` and sampler, and the ``k``
each sampler needs).

**References:**

1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
   Hanjun Dai, Dale Schuurmans (2022), Sec. 6.3, Table 2
2. *Training Restricted Boltzmann Machines using Approximations to the Likelihood
   Gradient*, Tijmen Tieleman (2008)
3. *Oops I Took A Gradient: Scalable Sampling for Discrete Distributions*, Will Grathwohl,
   Kevin Swersky, Milad Hashemi, David Duvenaud, Chris Maddison (2021)
"""

import argparse
from collections.abc import Callable, Sequence
import json
from pathlib import Path
import time
from typing import Any, NamedTuple

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

import jax
from jax import lax, random
from jax.example_libraries import optimizers
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from numpyro_discrete.core import path, path_length
from numpyro_discrete.core import state as core_state
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.core.local_ratios import gradient_local_fn
from numpyro_discrete.core.neighbourhood import binary_neighbourhood

from benchmarks.measurement import environment, json_ready

matplotlib.use("Agg")

DEFAULT_OUT_DIR = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "paper"
TARGET_ACCEPT_PROB = 0.574  # Sec. 4: the optimal acceptance rate of LBP
GIBBS = "Gibbs"
# Table 2 of the paper: minimum MH steps per PCD iteration, deep EBMs on four datasets,
# columns LBP_b-1, ALBP_b, LBP_s-1, ALBP_s (b: g(t) = t/(1+t), s: g(t) = sqrt(t))
PAPER_TABLE_2 = {
    "Static MNIST": (90, 20, 40, 15),
    "Dynamic MNIST": (100, 20, 40, 15),
    "Omniglot": (100, 60, 30, 5),
    "Caltech": (100, 60, 80, 30),
}

REDUCED = {
    "hidden": 16,
    "num_iterations": 1000,
    "eval_every": 50,
    "steps": (1, 2, 4, 8, 16, 32, 64),
    "gibbs_steps": (1, 64),
    "balancing": ("sqrt",),
    "seeds": (0,),
}
FULL = {
    "hidden": 16,
    "num_iterations": 2000,
    "eval_every": 50,
    "steps": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
    "gibbs_steps": (1, 2, 4, 8, 16, 32, 64),
    "balancing": ("sqrt", "barker"),
    "seeds": (0, 1),
}
QUICK = {
    "hidden": 4,
    "num_iterations": 20,
    "eval_every": 10,
    "steps": (1, 2),
    "gibbs_steps": (2,),
    "balancing": ("sqrt",),
    "seeds": (0,),
}


class Rbm(NamedTuple):
    """
    - **weights** - ``W``, shape ``(H, V)``.
    - **visible_bias** - ``b``, shape ``(V,)``.
    - **hidden_bias** - ``c``, shape ``(H,)``.
    """

    weights: jax.Array
    visible_bias: jax.Array
    hidden_bias: jax.Array


class Chains(NamedTuple):
    """
    The persistent fantasy chains of PCD.

    - **position** - visible states, integer, shape ``(B, V)``.
    - **log_density** - cached ``log pi~`` of each chain (path samplers), shape ``(B,)``.
    - **log_ratios** - cached local log-ratios (path samplers), shape ``(B, V, 1)``.
    - **scale** - ALBP's real scale ``R_t``, shared by the chains (1 for the others).
    """

    position: jax.Array
    log_density: jax.Array
    log_ratios: jax.Array
    scale: jax.Array


class StepStats(NamedTuple):
    """Per-iteration sums over the ``k`` MH steps of the chains' mean acceptance, of the
    mean number of visible units changed per chain, and of the scale ``R_t``."""

    accept: jax.Array
    changed: jax.Array
    scale: jax.Array


# --- the model -------------------------------------------------------------------------------


def binarised_digits(seed: int, test_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """The 1797 images of scikit-learn's ``load_digits`` binarised at half intensity (pixel
    values 0-16, ``>= 8`` is on), split at random into training and test rows."""
    from sklearn.datasets import load_digits

    images = (load_digits().data >= 8.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(images))
    num_test = int(round(test_fraction * len(images)))
    return images[order[num_test:]], images[order[:num_test]]


def log_unnormalised(rbm: Rbm, v: jax.Array) -> jax.Array:
    """``log pi~(v) = b . v + sum_h softplus(W_h . v + c_h)``, the hidden units summed out;
    `v` of shape ``(..., V)``, cast to float (the relaxation the gradient ratios use)."""
    v = jnp.asarray(v, rbm.weights.dtype)
    pre = v @ rbm.weights.T + rbm.hidden_bias
    return v @ rbm.visible_bias + jnp.sum(jax.nn.softplus(pre), axis=-1)


def _bits(values: jax.Array, num_bits: int) -> jax.Array:
    """The `num_bits` low bits of non-negative integers, shape ``values.shape + (num_bits,)``."""
    return (values[..., None] >> jnp.arange(num_bits)) & 1


def log_partition(rbm: Rbm, block_bits: int = 12) -> jax.Array:
    """
    Exact ``log Z``, summing the visible units out analytically and the hidden ones by
    enumeration: ``log Z = logsumexp_h [c . h + sum_v softplus(b_v + W_v . h)]`` over
    ``h in {0, 1}^H``, in ``2^(H - block_bits)`` sequential blocks of ``2^block_bits``
    hidden states (memory ``O(2^block_bits V)``).
    """
    num_hidden = rbm.hidden_bias.shape[0]
    low = min(num_hidden, block_bits)
    dtype = rbm.weights.dtype
    low_states = _bits(jnp.arange(2**low), low).astype(dtype)

    def block_log_sum(high_index: jax.Array) -> jax.Array:
        high_states = jnp.broadcast_to(
            _bits(high_index, num_hidden - low).astype(dtype), (2**low, num_hidden - low)
        )
        h = jnp.concatenate([low_states, high_states], axis=1)
        terms = h @ rbm.hidden_bias + jnp.sum(
            jax.nn.softplus(h @ rbm.weights + rbm.visible_bias), axis=1
        )
        return logsumexp(terms)

    return logsumexp(lax.map(block_log_sum, jnp.arange(2 ** (num_hidden - low))))


def average_log_likelihood(rbm: Rbm, data: jax.Array, log_z: jax.Array) -> jax.Array:
    """Mean of ``log pi(v) = log pi~(v) - log Z`` over the rows of `data`, nats per image."""
    return jnp.mean(log_unnormalised(rbm, data)) - log_z


@jax.jit
def evaluate(rbm: Rbm, train: jax.Array, test: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The exact average log-likelihoods of the training and the test rows."""
    log_z = log_partition(rbm)
    return average_log_likelihood(rbm, train, log_z), average_log_likelihood(rbm, test, log_z)


def init_rbm(rng_key: jax.Array, train: np.ndarray, num_hidden: int) -> Rbm:
    """Small random weights, visible biases at the training pixels' log-odds (so that the
    initial model is close to the independent-pixel model), zero hidden biases."""
    mean = np.clip(train.mean(0), 0.01, 0.99)
    return Rbm(
        0.01 * random.normal(rng_key, (num_hidden, train.shape[1])),
        jnp.asarray(np.log(mean) - np.log1p(-mean)),
        jnp.zeros(num_hidden),
    )


# --- the samplers that advance the fantasy chains --------------------------------------------


class Sampler(NamedTuple):
    """
    - **name** - ``"LBP-1"``, ``"ALBP"`` or ``"Gibbs"``.
    - **balancing** - ``"sqrt"`` or ``"barker"`` (``None`` for Gibbs).
    - **refresh** - ``(rbm, chains) -> chains``: the caches under new parameters.
    - **step** - ``(rbm, chains, key) -> (chains, accept, changed)``: one MH step (one
      sweep for Gibbs) of every chain, with the chains' mean acceptance and mean number of
      visible units changed.
    """

    name: str
    balancing: str | None
    refresh: Callable[[Rbm, Chains], Chains]
    step: Callable[[Rbm, Chains, jax.Array], tuple[Chains, jax.Array, jax.Array]]

    @property
    def label(self) -> str:
        """The paper's notation: ``LBP_s-1``, ``ALBP_b``, ..."""
        if self.balancing is None:
            return self.name
        suffix = {"sqrt": "s", "barker": "b"}[self.balancing]
        return self.name.replace("LBP", f"LBP_{suffix}")


def path_sampler(name: str, balancing: str, num_visible: int) -> Sampler:
    """LBP-1 (``R = 1``) or ALBP (``R_t`` adapted at every step) with gradient ratios."""
    adaptive = name == "ALBP"
    max_path_length = num_visible if adaptive else 1
    kernel = path.build_kernel(get_balancing(balancing), binary_neighbourhood, max_path_length)

    def local_fn(rbm: Rbm) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
        return gradient_local_fn(lambda v: log_unnormalised(rbm, v), binary_neighbourhood)

    def refresh(rbm: Rbm, chains: Chains) -> Chains:
        state = jax.vmap(lambda x: core_state.init(x, local_fn(rbm)))(chains.position)
        return chains._replace(log_density=state.log_density, log_ratios=state.log_ratios)

    def step(rbm: Rbm, chains: Chains, rng_key: jax.Array) -> tuple[Chains, jax.Array, jax.Array]:
        num_chains = chains.position.shape[0]
        key_round, key_step = random.split(rng_key)
        # Alg. 2: R = floor(R_t) + Bernoulli(R_t - floor(R_t)), one draw per step for all
        # chains: under `vmap` the path loops run until the longest chain's path is done,
        # so a shared R wastes no passes
        length = path_length.round_path_length(key_round, chains.scale) if adaptive else 1
        state = core_state.State(chains.position, chains.log_density, chains.log_ratios)
        state, info = jax.vmap(lambda key, s: kernel(key, s, local_fn(rbm), length))(
            random.split(key_step, num_chains), state
        )
        accept = jnp.mean(info.accept_prob)
        scale = chains.scale
        if adaptive:
            # Alg. 2: R_{t+1} = clip(R_t + (a_t - 0.574), 1, V), a_t the chains' mean
            scale = path_length.robbins_monro_step(scale, accept, TARGET_ACCEPT_PROB, num_visible)
        new = Chains(state.position, state.log_density, state.log_ratios, scale)
        return new, accept, jnp.mean(info.num_changed.astype(accept.dtype))

    return Sampler(name, balancing, refresh, step)


def gibbs_sampler() -> Sampler:
    """Block Gibbs: ``h ~ p(h | v)`` then ``v ~ p(v | h)``, both exact (no rejection)."""

    def refresh(rbm: Rbm, chains: Chains) -> Chains:
        del rbm
        return chains

    def step(rbm: Rbm, chains: Chains, rng_key: jax.Array) -> tuple[Chains, jax.Array, jax.Array]:
        key_h, key_v = random.split(rng_key)
        v = chains.position.astype(rbm.weights.dtype)
        h = random.bernoulli(key_h, jax.nn.sigmoid(v @ rbm.weights.T + rbm.hidden_bias))
        p_v = jax.nn.sigmoid(h.astype(v.dtype) @ rbm.weights + rbm.visible_bias)
        new = random.bernoulli(key_v, p_v).astype(chains.position.dtype)
        changed = jnp.mean(jnp.sum(new != chains.position, axis=1).astype(v.dtype))
        return chains._replace(position=new), jnp.ones((), v.dtype), changed

    return Sampler(GIBBS, None, refresh, step)


def make_samplers(balancings: Sequence[str], num_visible: int) -> list[Sampler]:
    """Block Gibbs (the reference), then LBP-1 and ALBP for every weight function."""
    samplers = [gibbs_sampler()]
    for balancing in balancings:
        samplers += [path_sampler(name, balancing, num_visible) for name in ("LBP-1", "ALBP")]
    return samplers


# --- PCD training ----------------------------------------------------------------------------


def pcd_trainer(
    sampler: Sampler, train: jax.Array, learning_rate: float
) -> tuple[Callable, Callable, Callable]:
    """
    ``(init, train_segment, get_params)`` for PCD with `sampler`, compiled once for every ``k``.

    ``init(rbm, chains) -> carry``; ``train_segment(carry, batch_index, keys, k) -> (carry,
    stats)`` runs one PCD iteration per row of ``batch_index`` (``(S, B)`` rows of `train`)
    and per key, with ``k`` (traced) MH steps of the chains per iteration, and returns
    per-iteration :class:`StepStats`; ``get_params(carry[1])`` is the current :class:`Rbm`.
    """
    opt_init, opt_update, get_params = optimizers.adam(learning_rate)

    def negative_log_likelihood_surrogate(
        rbm: Rbm, batch: jax.Array, fantasy: jax.Array
    ) -> jax.Array:
        # its gradient is the PCD estimate of -grad log-likelihood: the data term minus the
        # model term, the model expectation replaced by the fantasy chains' average
        return jnp.mean(log_unnormalised(rbm, fantasy)) - jnp.mean(log_unnormalised(rbm, batch))

    def iteration(carry: tuple, inputs: tuple) -> tuple[tuple, StepStats]:
        step_count, opt_state, chains, k = carry
        rows, key = inputs
        rbm = get_params(opt_state)
        # the parameters moved since the last iteration: recompute the cached log pi~(v)
        # and local ratios of the persistent chains
        chains = sampler.refresh(rbm, chains)

        def mh_step(i: jax.Array, loop: tuple) -> tuple:
            chains, stats = loop
            chains, accept, changed = sampler.step(rbm, chains, random.fold_in(key, i))
            stats = StepStats(
                stats.accept + accept, stats.changed + changed, stats.scale + chains.scale
            )
            return chains, stats

        zero = jnp.zeros((), rbm.weights.dtype)
        chains, stats = lax.fori_loop(0, k, mh_step, (chains, StepStats(zero, zero, zero)))
        fantasy = chains.position.astype(rbm.weights.dtype)
        grads = jax.grad(negative_log_likelihood_surrogate)(rbm, train[rows], fantasy)
        opt_state = opt_update(step_count, grads, opt_state)
        return (step_count + 1, opt_state, chains, k), stats

    def init(rbm: Rbm, chains: Chains) -> tuple:
        return 0, opt_init(rbm), chains

    @jax.jit
    def train_segment(
        carry: tuple, batch_index: jax.Array, keys: jax.Array, k: jax.Array
    ) -> tuple[tuple, StepStats]:
        step_count, opt_state, chains = carry
        (step_count, opt_state, chains, _), stats = lax.scan(
            iteration, (step_count, opt_state, chains, k), (batch_index, keys)
        )
        return (step_count, opt_state, chains), stats

    return init, train_segment, get_params


def batch_order(num_rows: int, batch_size: int, num_iterations: int, seed: int) -> np.ndarray:
    """Minibatch rows for every iteration, ``(num_iterations, batch_size)``: consecutive
    epochs, each a fresh permutation of the training rows (a short last batch dropped)."""
    rng = np.random.default_rng(seed)
    per_epoch = num_rows // batch_size
    num_epochs = -(-num_iterations // per_epoch)
    epochs = [rng.permutation(num_rows)[: per_epoch * batch_size] for _ in range(num_epochs)]
    return np.concatenate(epochs).reshape(-1, batch_size)[:num_iterations]


def train_run(
    sampler: Sampler,
    trainer: tuple[Callable, Callable, Callable],
    k: int,
    seed: int,
    train: jax.Array,
    test: jax.Array,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One PCD run of `args.num_iterations` iterations with `k` steps of `sampler` per
    iteration: the exact train and test log-likelihoods every `args.eval_every`."""
    init, train_segment, get_params = trainer
    key_rbm, key_chains, key_run = random.split(random.PRNGKey(seed), 3)
    num_visible = train.shape[1]
    rbm = init_rbm(key_rbm, np.asarray(train), args.hidden)
    position = random.bernoulli(key_chains, 0.5, (args.batch_size, num_visible)).astype(jnp.int32)
    chains = Chains(
        position,
        jnp.zeros(args.batch_size),
        jnp.zeros((args.batch_size, num_visible, 1)),
        jnp.ones(()),
    )
    carry = init(rbm, chains)
    order = batch_order(train.shape[0], args.batch_size, args.num_iterations, seed)
    keys = random.split(key_run, args.num_iterations)

    iterations, train_ll, test_ll = [0], *([float(x)] for x in evaluate(rbm, train, test))
    accept, changed, scale = [], [], []
    seconds = 0.0
    for start in range(0, args.num_iterations, args.eval_every):
        stop = min(start + args.eval_every, args.num_iterations)
        t0 = time.perf_counter()
        carry, stats = jax.block_until_ready(
            train_segment(carry, order[start:stop], keys[start:stop], k)
        )
        seconds += time.perf_counter() - t0
        accept.append(float(jnp.sum(stats.accept)))
        changed.append(float(jnp.sum(stats.changed)))
        scale.append(float(jnp.sum(stats.scale)))
        ll_train, ll_test = evaluate(get_params(carry[1]), train, test)
        iterations.append(stop)
        train_ll.append(float(ll_train))
        test_ll.append(float(ll_test))
    num_steps = args.num_iterations * k
    window = slice(-args.final_window, None)
    return {
        "sampler": sampler.name,
        "balancing": sampler.balancing,
        "label": sampler.label,
        "k": k,
        "seed": seed,
        "iterations": iterations,
        "train_ll": train_ll,
        "test_ll": test_ll,
        "final_test_ll": float(np.mean(test_ll[window])),
        "final_train_ll": float(np.mean(train_ll[window])),
        "acceptance": sum(accept) / num_steps,
        "changed_per_step": sum(changed) / num_steps,
        "mean_scale": sum(scale) / num_steps,
        "seconds": seconds,
    }


# --- summary ---------------------------------------------------------------------------------

SENSITIVITY_FRACTIONS = (0.7, 0.8, 0.9, 0.95)


def _mean_over_seeds(runs: list[dict[str, Any]], label: str, k: int, field: str) -> float:
    return float(np.mean([r[field] for r in runs if (r["label"], r["k"]) == (label, k)]))


def k_needed(
    final: dict[str, dict[int, float]], initial: float, reference: float, fraction: float
) -> tuple[float, dict[str, int | None]]:
    """The threshold ``initial + fraction (reference - initial)`` and, per sampler, the
    smallest ``k`` whose final log-likelihood reaches it (``None``: no ``k`` of the grid)."""
    threshold = initial + fraction * (reference - initial)
    needed = {
        label: next((k for k in sorted(by_k) if by_k[k] >= threshold), None)
        for label, by_k in final.items()
    }
    return threshold, needed


def summarise(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Final log-likelihoods per (sampler, k), averaged over seeds; the threshold; the
    smallest ``k`` each sampler needs to reach it and the ratios ``k(LBP-1) / k(ALBP)``, at
    ``--threshold-fraction`` and at the fractions of :data:`SENSITIVITY_FRACTIONS`."""
    labels = list(dict.fromkeys(run["label"] for run in runs))
    final = {
        label: {
            k: _mean_over_seeds(runs, label, k, "final_test_ll")
            for k in sorted({r["k"] for r in runs if r["label"] == label})
        }
        for label in labels
    }
    initial = float(np.mean([run["test_ll"][0] for run in runs]))
    reference = final[GIBBS][max(final[GIBBS])]
    pairs = {
        balancing: tuple(
            next(r["label"] for r in runs if (r["sampler"], r["balancing"]) == (name, balancing))
            for name in ("LBP-1", "ALBP")
        )
        for balancing in args.balancing
    }

    def at(fraction: float) -> dict[str, Any]:
        threshold, needed = k_needed(final, initial, reference, fraction)
        ratios = {
            f"{single} / {adaptive}": (
                needed[single] / needed[adaptive]
                if needed[single] is not None and needed[adaptive] is not None
                else None
            )
            for single, adaptive in pairs.values()
        }
        return {"fraction": fraction, "threshold": threshold, "k_needed": needed, "ratios": ratios}

    fractions = sorted({*SENSITIVITY_FRACTIONS, args.threshold_fraction})
    return {
        "final_test_ll": final,
        "initial_test_ll": initial,
        "reference_test_ll": reference,
        "reference_k": max(final[GIBBS]),
        **at(args.threshold_fraction),
        "sensitivity": [at(fraction) for fraction in fractions],
    }


def _marginal_ms_per_step(runs: list[dict[str, Any]], label: str) -> float | None:
    """Milliseconds per MH step of all chains, from the training times at the smallest and
    the largest ``k`` run (their difference is MH steps only: refresh and gradient cancel)."""
    steps = sorted({r["k"] for r in runs if r["label"] == label})
    if len(steps) < 2:
        return None
    low, high = steps[0], steps[-1]
    extra = _mean_over_seeds(runs, label, high, "seconds") - _mean_over_seeds(
        runs, label, low, "seconds"
    )
    num_iterations = runs[0]["iterations"][-1]
    return 1e3 * extra / (num_iterations * (high - low))


def _needed_text(k: int | None, steps: Sequence[int]) -> str:
    return f"> {max(steps)}" if k is None else str(k)


def markdown(runs: list[dict[str, Any]], summary: dict[str, Any], args: argparse.Namespace) -> str:
    """The tables of the report."""
    labels = list(summary["final_test_ll"])
    all_steps = sorted({*args.steps, *args.gibbs_steps})
    seeds = f", over seeds {list(args.seeds)}" if len(args.seeds) > 1 else ""
    lines = [
        f"Final held-out log-likelihood (nats per image, mean of the last {args.final_window} "
        f"evaluations{seeds}) after {args.num_iterations} PCD iterations with `k` steps per "
        f"iteration; **bold**: at or above the threshold {summary['threshold']:.2f}.",
        "",
        "| sampler | " + " | ".join(f"k = {k}" for k in all_steps) + " |",
        "| --- |" + " ---: |" * len(all_steps),
    ]
    for label in labels:
        cells = []
        for k in all_steps:
            value = summary["final_test_ll"][label].get(k)
            text = "-" if value is None else f"{value:.2f}"
            bold = value is not None and value >= summary["threshold"]
            cells.append(f"**{text}**" if bold else text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Threshold: initial model {summary['initial_test_ll']:.2f} + "
        f"{args.threshold_fraction} x (block-Gibbs PCD at k = {summary['reference_k']}: "
        f"{summary['reference_test_ll']:.2f} - initial) = {summary['threshold']:.2f}.",
        "",
        "| sampler | k needed | acceptance | mean R | units changed / step | ms / step |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label in labels:
        own = [r for r in runs if r["label"] == label]
        ms = _marginal_ms_per_step(runs, label)
        ran = sorted({r["k"] for r in own})
        needed = _needed_text(summary["k_needed"][label], ran)
        if ran != sorted(args.steps):
            needed += f" (of k = {', '.join(map(str, ran))})"
        lines.append(
            f"| {label} | {needed} | "
            f"{np.mean([r['acceptance'] for r in own]):.3f} | "
            f"{np.mean([r['mean_scale'] for r in own]):.1f} | "
            f"{np.mean([r['changed_per_step'] for r in own]):.1f} | "
            f"{'-' if ms is None else f'{ms:.3f}'} |"
        )
    pair_names = list(summary["ratios"])
    lines += [
        "",
        "| threshold fraction | threshold | "
        + " | ".join(f"k needed {label}" for label in labels)
        + " | "
        + " | ".join(f"ratio {name}" for name in pair_names)
        + " |",
        "| ---: | ---: |" + " ---: |" * (len(labels) + len(pair_names)),
    ]
    for item in summary["sensitivity"]:
        needed = [
            _needed_text(item["k_needed"][label], summary["final_test_ll"][label])
            for label in labels
        ]
        ratios = [item["ratios"][name] for name in pair_names]
        lines.append(
            f"| {item['fraction']} | {item['threshold']:.2f} | "
            + " | ".join(needed)
            + " | "
            + " | ".join("n/a" if r is None else f"{r:.1f}" for r in ratios)
            + " |"
        )
    lines += [
        "",
        "| ratio of k needed | this run | paper, Table 2 (MNIST, dyn. MNIST, Omniglot, Caltech) |",
        "| --- | ---: | --- |",
    ]
    columns = {"LBP_b-1 / ALBP_b": (0, 1), "LBP_s-1 / ALBP_s": (2, 3)}
    for name, ratio in summary["ratios"].items():
        single, adaptive = columns[name]
        paper = ", ".join(f"{row[single] / row[adaptive]:.1f}" for row in PAPER_TABLE_2.values())
        lines.append(f"| {name} | {'n/a' if ratio is None else f'{ratio:.1f}'} | {paper} |")
    lines += [
        "",
        "Acceptance, mean R (ALBP's adapted scale), units changed per step and chain: averages"
        " over every MH step of every run of the sampler. ms / step: one step of all "
        f"{args.batch_size} chains, from the training times at the smallest and the largest k"
        " run. Gibbs steps are block-Gibbs sweeps (no rejection).",
    ]
    return "\n".join(lines) + "\n"


def plot(
    runs: list[dict[str, Any]], summary: dict[str, Any], args: argparse.Namespace, out: Path
) -> None:
    """Test log-likelihood against iteration (one panel per sampler, one line per ``k``,
    first seed), final log-likelihood against ``k``, and the ``k`` each sampler needs."""
    labels = list(summary["final_test_ll"])
    num_panels = len(labels) + 2
    columns = min(num_panels, 4)
    rows = -(-num_panels // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.3 * rows), squeeze=False)
    axes = axes.ravel()
    all_steps = sorted({*args.steps, *args.gibbs_steps})
    palette = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(all_steps)))
    colours = dict(zip(all_steps, palette, strict=True))
    low = summary["initial_test_ll"] - 2.0
    high = max(max(r["test_ll"]) for r in runs) + 0.5
    for ax, label in zip(axes, labels, strict=False):
        for run in runs:
            if (run["label"], run["seed"]) == (label, args.seeds[0]):
                ax.plot(
                    run["iterations"],
                    run["test_ll"],
                    color=colours[run["k"]],
                    label=f"k = {run['k']}",
                )
        ax.axhline(summary["threshold"], color="gray", ls="--", lw=1)
        ax.set_ylim(low, high)
        ax.set_title(label)
        ax.set_xlabel("PCD iteration")
        ax.set_ylabel("test log-likelihood")
        ax.legend(fontsize=6, loc="lower right")
    ax = axes[len(labels)]
    for label in labels:
        by_k = summary["final_test_ll"][label]
        ax.plot(list(by_k), list(by_k.values()), "o-", label=label)
    ax.axhline(summary["threshold"], color="gray", ls="--", lw=1, label="threshold")
    ax.set_xscale("log")
    ax.set_ylim(low, high)
    ax.set_xlabel("MH steps per iteration k")
    ax.set_ylabel("final test log-likelihood")
    ax.legend(fontsize=7)
    ax = axes[len(labels) + 1]
    # LBP-1 and ALBP only: block Gibbs runs a shorter grid and sets the threshold
    path_labels = [label for label in labels if label != GIBBS]
    needed = [summary["k_needed"][label] for label in path_labels]
    bars = ax.bar(path_labels, [max(args.steps) * 1.5 if k is None else k for k in needed])
    for bar, k in zip(bars, needed, strict=True):
        ax.annotate(
            _needed_text(k, args.steps),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
        )
    ax.set_ylabel(f"k needed (threshold fraction {args.threshold_fraction})")
    ax.tick_params(axis="x", labelrotation=30)
    for ax in axes[num_panels:]:
        ax.set_visible(False)
    fig.suptitle(
        f"PCD on binarised digits: RBM with 64 visible and {args.hidden} hidden units, "
        f"{args.num_iterations} iterations"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


# --- entry point -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; ``--full`` and ``--quick`` set the sizes of their settings."""
    parser = argparse.ArgumentParser(
        description="MH steps per PCD iteration that LBP-1 and ALBP need to train an RBM"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the larger setting")
    size.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--hidden", type=int, help="hidden units (log Z enumerates 2^H)")
    parser.add_argument("--num-iterations", type=int, help="PCD iterations per run")
    parser.add_argument("--eval-every", type=int, help="iterations between evaluations")
    parser.add_argument("--steps", type=int, nargs="+", help="the grid of k (LBP-1, ALBP)")
    parser.add_argument(
        "--gibbs-steps",
        type=int,
        nargs="+",
        help="k of block-Gibbs PCD; the largest sets the reference",
    )
    parser.add_argument("--balancing", nargs="+", choices=("sqrt", "barker"))
    parser.add_argument("--seeds", type=int, nargs="+")
    parser.add_argument("--batch-size", type=int, default=100, help="minibatch and chains")
    parser.add_argument("--learning-rate", type=float, default=1e-2, help="Adam")
    parser.add_argument("--final-window", type=int, default=5, help="evaluations averaged")
    parser.add_argument("--threshold-fraction", type=float, default=0.9)
    parser.add_argument("--data-seed", type=int, default=0, help="train/test split")
    parser.add_argument(
        "--from-json", type=Path, help="redo tables and figure of a recorded rbm_pcd.json"
    )
    parser.add_argument(
        "--out-dir", type=Path, help="default docs/benchmarks/paper (full/, quick/ for those)"
    )
    args = parser.parse_args(argv)
    setting = QUICK if args.quick else FULL if args.full else REDUCED
    if args.out_dir is None and args.from_json is not None:
        args.out_dir = args.from_json.parent
    if args.out_dir is None:
        subfolder = "quick" if args.quick else "full" if args.full else ""
        args.out_dir = DEFAULT_OUT_DIR / subfolder
    for name, value in setting.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.steps = tuple(sorted(args.steps))
    args.gibbs_steps = tuple(sorted(args.gibbs_steps))
    if args.num_iterations % args.eval_every:
        parser.error("--num-iterations must be a multiple of --eval-every")
    args.final_window = min(args.final_window, args.num_iterations // args.eval_every)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train every (sampler, k, seed), write the JSON, markdown and figure, print tables;
    with ``--from-json``, only redo the summary, tables and figure of a recorded report."""
    args = parse_args(argv)
    if args.from_json is not None:
        report = json.loads(args.from_json.read_text())
        for name, value in report["config"].items():
            if name not in ("out_dir", "from_json"):
                setattr(args, name, tuple(value) if isinstance(value, list) else value)
        return write_report(report, args)
    train_np, test_np = binarised_digits(args.data_seed)
    train, test = jnp.asarray(train_np), jnp.asarray(test_np)
    runs, compile_s = [], {}
    t_start = time.perf_counter()
    for sampler in make_samplers(args.balancing, train.shape[1]):
        trainer = pcd_trainer(sampler, train, args.learning_rate)
        compile_s[sampler.label] = _compile(trainer, sampler, train, args)
        for k in args.gibbs_steps if sampler.name == GIBBS else args.steps:
            for seed in args.seeds:
                run = train_run(sampler, trainer, k, seed, train, test, args)
                runs.append(run)
                print(
                    f"{run['label']:>9} k={k:<3} seed={seed} final test LL "
                    f"{run['final_test_ll']:.3f} train {run['final_train_ll']:.3f} "
                    f"acc {run['acceptance']:.3f} R {run['mean_scale']:.1f} "
                    f"{run['seconds']:.1f} s",
                    flush=True,
                )
    config = {
        name: value for name, value in vars(args).items() if name not in ("out_dir", "from_json")
    }
    report = {
        "config": config,
        "num_train": int(train.shape[0]),
        "num_test": int(test.shape[0]),
        "environment": environment(),
        "total_seconds": time.perf_counter() - t_start,
        "compile_seconds": compile_s,
        "runs": runs,
    }
    return write_report(report, args)


def write_report(report: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Add the summary to `report`; write ``rbm_pcd.{json,md,png}`` to ``args.out_dir``."""
    runs = report["runs"]
    report["summary"] = summarise(runs, args)
    table = markdown(runs, report["summary"], args)
    print(table)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    plot(runs, report["summary"], args, args.out_dir / "rbm_pcd.png")
    (args.out_dir / "rbm_pcd.md").write_text(table)
    (args.out_dir / "rbm_pcd.json").write_text(json.dumps(json_ready(report), indent=1))
    print(f"total {report['total_seconds']:.0f} s; wrote {args.out_dir}/rbm_pcd.{{json,md,png}}")
    return report


def run(preset: Any, out_dir: Path, cache: Any = None) -> dict[str, Any]:
    """Entry point in the form of the suite's experiments (:mod:`benchmarks.paper`): the
    setting named by ``preset.name`` (``"quick"``, ``"reduced"`` or ``"full"``) into
    `out_dir`; the suite's shared cache of compiled samplers does not apply here."""
    del cache
    setting = {"quick": ["--quick"], "full": ["--full"]}.get(preset.name, [])
    return main([*setting, "--out-dir", str(out_dir)])


def _compile(
    trainer: tuple[Callable, Callable, Callable],
    sampler: Sampler,
    train: jax.Array,
    args: argparse.Namespace,
) -> float:
    """Compile the training loop of `sampler` (one program for every ``k``) on a throwaway
    call, so that no run's time includes it; returns the seconds it took."""
    init, train_segment, _ = trainer
    num_visible = train.shape[1]
    rbm = init_rbm(random.PRNGKey(0), np.asarray(train), args.hidden)
    chains = Chains(
        jnp.zeros((args.batch_size, num_visible), jnp.int32),
        jnp.zeros(args.batch_size),
        jnp.zeros((args.batch_size, num_visible, 1)),
        jnp.ones(()),
    )
    rows = np.zeros((args.eval_every, args.batch_size), np.int64)
    keys = random.split(random.PRNGKey(0), args.eval_every)
    t0 = time.perf_counter()
    jax.block_until_ready(train_segment(init(rbm, chains), rows, keys, 1))
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
