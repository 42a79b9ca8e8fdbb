"""
Example: Bayesian factorial HMM with LBPGibbs and chain blocks
==============================================================

A factorial hidden Markov model (Ghahramani and Jordan 1997): ``K`` independent binary
chains ``x_{l,k}`` over ``L`` time steps, each chain starting at ``x_{0,k} ~ Bern(0.1)`` and
keeping its value with probability 0.8 at every step, and one real observation per step,

.. math::

    y_l \\sim \\mathcal{N}(w \\cdot x_l + b, \\sigma^2), \\quad
    w \\sim \\mathcal{N}(0, 1)^K, \\quad b \\sim \\mathcal{N}(0, 1), \\quad
    \\sigma \\sim \\mathrm{HalfNormal}(1).

The hidden states are one ``(L, K)`` binary site ``x``: a uniform Bernoulli site whose log
probability a ``numpyro.factor`` replaces by the Markov prior, written in vectorised,
polynomial form (so that its gradient in a float-relaxed ``x`` exists). The discrete sampler
therefore sees one flat vector of ``L * K`` coordinates.

The data are simulated from the model with ``sigma^2 = 0.5`` (configuration C3 of Sun, Dai
and Schuurmans 2022, Appendix D) and fixed weights that double from chain to chain, then
the posterior is sampled with :class:`~numpyro_discrete.LBPGibbs`: each step moves ``x``
given the continuous sites, then ``w, b, sigma`` with NUTS given ``x``. The kernel of
``x`` is ``LBPGibbs``'s default, chosen from the model's structure:
:class:`~numpyro_discrete.BlockGibbs`: from the model's program (the Markov prior
written as one summed factor, as users write it) it finds that each hidden chain is a chain
of coupled coordinates along the time axis, and draws each one jointly from its exact
conditional given the others by forward filtering, backward sampling (the structured Gibbs
sampler of Ghahramani and Jordan). ``--discrete-kernel chromatic`` or ``albp`` choose the
one-coordinate-at-a-time sweeps of ``ChromaticGibbs`` or ``ALBP``'s path moves instead:
strongly coupled in time, the hidden states move slowly under both. The script runs
``--num-chains`` vectorized chains and prints numpyro's summary of ``w, b, sigma``
(relabelled, see the note) with the true values, the discrete block's acceptance, the
fraction of hidden states whose posterior marginal is on the wrong side of 1/2, the
convergence of the mean signal (split R-hat over the chains, and whether it is below
1.01), and timings, and saves a figure with the posterior marginals ``P(x_{l,k} = 1)``
against the true states and each chain's posterior mean signal against the data.

.. note:: An FHMM posterior is invariant under permuting the chains (with their weights):
    it has ``K!`` mirror modes, and a sampler that moves between them makes raw summaries
    of ``w`` and ``x`` meaningless. The script therefore maps every draw to the mirror mode
    closest to the true weights before summarising ``w``, ``b`` and the marginals of ``x``,
    and also reports the mean signal ``w . x_l + b``, which is the same in every mirror
    mode, with its ``r_hat`` and effective sample size. Flipping a chain (``x_k -> 1 -
    x_k``, ``w_k -> -w_k``, ``b -> b + w_k``) emits the same signal too, but its mode is
    *not* the same posterior: the priors of ``b`` and of ``x_0`` change under the flip, so
    the mean signal's distribution differs (most at the first step), and a chain reaches
    such a mode only when its ``w_k`` passes through 0. Measured at ``--seed 3`` with 8000
    draws: the mean signal at the first step averaged 0.95 in draws with every weight
    positive and 1.87 in draws with the two smaller ones negative, and its ``r_hat`` was
    1.027. ``--positive-weights`` (``w ~ HalfNormal(1)``) removes those modes but adds a
    trap near ``w_k = 0``; see the documentation page of this example.

Run it with the defaults (about 30 seconds on two CPU cores)::

    python examples/fhmm.py                      # writes outputs/fhmm.png
    python examples/fhmm.py --discrete-kernel albp --weights exact
    python examples/fhmm.py --L 500 --K 6 --num-samples 4000 --out /tmp/fhmm

**References:**

1. *Factorial Hidden Markov Models*, Zoubin Ghahramani, Michael I. Jordan (1997)
2. *On Gibbs sampling for state space models*, C. K. Carter, R. Kohn (1994)
3. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
   Hanjun Dai, Dale Schuurmans (2022)
"""

import argparse
from functools import partial
import os
import time

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

import jax
from jax import random
import jax.numpy as jnp

import numpyro
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ALBP, BlockGibbs, ChromaticGibbs, LBPGibbs, diagnose
from numpyro_discrete.gallery.fhmm import fhmm_data, fhmm_model

matplotlib.use("Agg")

EXTRA_FIELDS = ("accept_prob", "num_changed", "hmc_state.num_steps")
# the convergence the script reports: split R-hat of the mean signal at every step
MAX_R_HAT = 1.01


def simulate(rng, num_steps, num_chains):
    """True ``x`` (L, K), ``w``, ``b``, ``sigma`` and the observations ``y``, from the
    gallery's simulator (configuration C3: ``sigma^2 = 0.5``)."""
    # positive weights doubling from chain to chain: the 2^K levels of w . x_l are evenly
    # spaced (for K = 3 by 0.71, one noise standard deviation)
    w = 2.0 ** np.arange(num_chains) / 2.0 ** (num_chains / 2 - 1)
    data = fhmm_data(num_steps, num_chains, "C3", rng, w=w, b=0.3)  # rng: a Generator
    return {"x": data.x, "w": data.w, "b": data.b, "sigma": data.sigma, "y": data.y}


def discrete_kernel(name, weights, model):
    """The kernel of ``x`` given ``w, b, sigma`` (``"auto"``: chosen by LBPGibbs from the
    model's structure)."""
    if name == "auto":
        return "auto"
    if name == "block":
        return BlockGibbs(model)
    if name == "chromatic":
        return ChromaticGibbs(model)
    return ALBP(model, weights=weights)


def run_inference(args, rng_key, y, num_chains):
    """Warmup, then sampling from the post-warmup state (timed apart: the first includes
    compilation)."""
    model = partial(fhmm_model, positive_weights=args.positive_weights)
    mcmc = MCMC(
        LBPGibbs(
            NUTS(model),
            discrete_kernel=discrete_kernel(args.discrete_kernel, args.weights, model),
            num_discrete_steps=args.num_discrete_steps,
        ),
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        chain_method="vectorized",
        progress_bar=args.progress_bar,
    )
    start = time.perf_counter()
    mcmc.warmup(rng_key, y, num_chains)
    jax.block_until_ready(mcmc.post_warmup_state)
    warmup_time = time.perf_counter() - start
    start = time.perf_counter()
    extra_fields = EXTRA_FIELDS + (("path_length",) if args.discrete_kernel == "albp" else ())
    mcmc.run(mcmc.post_warmup_state.rng_key, y, num_chains, extra_fields=extra_fields)
    jax.block_until_ready(mcmc.last_state)
    sample_time = time.perf_counter() - start
    return mcmc, warmup_time, sample_time


def relabel_draws(w_true, w, b, x):
    """Each draw mapped to the mirror mode closest to the truth: true chains, largest ``|w|``
    first, take the unused recovered chain whose ``|w|`` is closest, flipped (``x -> 1 - x``,
    ``w -> -w``, ``b -> b + w``) when its sign differs. Returns ``w, b, x`` relabelled."""
    num_draws, num_chains = w.shape
    order = np.empty((num_draws, num_chains), dtype=int)
    taken = np.zeros((num_draws, num_chains), dtype=bool)
    rows = np.arange(num_draws)
    for k in np.argsort(-np.abs(w_true)):
        distance = np.where(taken, np.inf, np.abs(np.abs(w) - abs(w_true[k])))
        order[:, k] = np.argmin(distance, axis=1)
        taken[rows, order[:, k]] = True
    w = np.take_along_axis(w, order, axis=1)
    x = np.take_along_axis(x, order[:, None, :], axis=2)
    flip = np.sign(w) != np.sign(w_true)
    b = b + np.sum(np.where(flip, w, 0.0), axis=1)
    return np.where(flip, -w, w), b, np.where(flip[:, None, :], 1 - x, x)


def plot(truth, marginals, signal, path):
    num_chains = truth["x"].shape[1]
    fig, axes = plt.subplots(
        num_chains + 1, 1, figsize=(12, 1.4 * num_chains + 2.6), constrained_layout=True
    )
    steps = np.arange(truth["x"].shape[0])
    for k, ax in enumerate(axes[:-1]):
        ax.fill_between(steps, truth["x"][:, k], step="mid", color="0.85", label="true $x$")
        ax.plot(steps, marginals[:, k], color="C0", lw=1.2, label="P($x=1$ | y)")
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel(f"chain {k}\n$w$={truth['w'][k]:+.2f}")
        ax.set_xticks([])
    axes[0].legend(loc="upper right", ncols=2, fontsize="small")
    axes[0].set_title("posterior marginals of the hidden states against the truth")
    ax = axes[-1]
    ax.plot(steps, truth["y"], ".", color="0.5", ms=3, label="$y$")
    for chain, trace in enumerate(signal.mean(1)):
        ax.plot(steps, trace, lw=1, label=f"posterior mean signal, chain {chain}")
    ax.set_xlabel("time step")
    ax.legend(loc="upper right", fontsize="small", ncols=3)
    ax.set_title("the mean signal $w \\cdot x_l + b$ of each chain (label-invariant)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Bayesian factorial HMM sampled with LBPGibbs (a discrete kernel + NUTS)."
    )
    parser.add_argument("--L", type=int, default=200, help="number of time steps")
    parser.add_argument("--K", type=int, default=3, help="number of binary chains")
    parser.add_argument("--num-warmup", type=int, default=1500)
    parser.add_argument("--num-samples", type=int, default=8000)
    parser.add_argument("--num-chains", type=int, default=4, help="vectorized chains")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--discrete-kernel",
        choices=("auto", "block", "chromatic", "albp"),
        default="auto",
        help="the kernel of x: auto (LBPGibbs's choice from the model's structure: "
        "BlockGibbs here), block (each hidden chain drawn jointly from its exact "
        "conditional, BlockGibbs), chromatic (one coordinate per colour class at a time, "
        "ChromaticGibbs) or albp (locally balanced path moves, ALBP)",
    )
    parser.add_argument(
        "--num-discrete-steps",
        type=int,
        default=1,
        help="moves of x per NUTS move of w, b, sigma",
    )
    parser.add_argument(
        "--weights",
        choices=("auto", "gradient", "exact"),
        default="auto",
        help="with --discrete-kernel albp, its local log-ratios: first-order estimates "
        "from one gradient (auto, for binary sites) or exact, one model evaluation per "
        "coordinate (better when the likelihood is strongly curved in x: large |w| / sigma)",
    )
    parser.add_argument(
        "--positive-weights",
        action="store_true",
        help="prior w ~ HalfNormal(1) instead of N(0, 1): no flipped modes, but a chain whose "
        "weight falls near 0 can stay there (see the note in the docstring)",
    )
    parser.add_argument("--out", default="outputs", help="output directory for the figure")
    parser.add_argument(
        "--no-progress-bar", dest="progress_bar", action="store_false", default=True
    )
    args = parser.parse_args(argv)

    truth = simulate(np.random.default_rng(args.seed), args.L, args.K)
    y = jnp.asarray(truth["y"])
    mcmc, warmup_time, sample_time = run_inference(args, random.key(args.seed), y, args.K)
    print(f"\nFactorial HMM, L={args.L}, K={args.K} ({args.L * args.K} binary coordinates)")
    print(f"true w = {np.round(truth['w'], 2)}, b = {truth['b']}, sigma = {truth['sigma']:.3f}")
    samples = mcmc.get_samples()
    w, b, x = relabel_draws(
        truth["w"],
        np.asarray(samples["w"], np.float64),
        np.asarray(samples["b"], np.float64),
        np.asarray(samples["x"]),
    )
    print("posterior, each draw relabelled to the mirror mode closest to the truth:")
    numpyro.diagnostics.print_summary(
        {"w": w, "b": b, "sigma": np.asarray(samples["sigma"])}, group_by_chain=False
    )
    # the discrete states' split R-hat, ESS and chains that never moved (their log joint,
    # which is the same in every mirror mode)
    print(diagnose(mcmc))
    # the mean signal w . x_l + b is the same in every mirror mode: no relabelling needed
    by_chain = mcmc.get_samples(group_by_chain=True)
    signal = np.einsum(
        "cslk,csk->csl", np.asarray(by_chain["x"], np.float64), np.asarray(by_chain["w"])
    )
    signal = signal + np.asarray(by_chain["b"])[..., None]
    signal_r_hat = float(np.max(numpyro.diagnostics.split_gelman_rubin(signal)))
    signal_n_eff = float(np.min(numpyro.diagnostics.effective_sample_size(signal)))
    extra = mcmc.get_extra_fields()
    marginals = x.mean(0)
    wrong = float(np.mean((marginals > 0.5) != truth["x"]))
    summary = {
        "discrete_kernel": type(mcmc.sampler.discrete_kernel).__name__,
        "accept_prob": float(np.mean(extra["accept_prob"])),
        "mean_changed": float(np.mean(extra["num_changed"])),
        "mean_nuts_steps": float(np.mean(extra["hmc_state.num_steps"])),
        "wrong_state_fraction": wrong,
        "w_mean": w.mean(0).tolist(),
        "signal_max_r_hat": signal_r_hat,
        "signal_min_n_eff": signal_n_eff,
        "converged": signal_r_hat <= MAX_R_HAT,
        "num_draws": int(samples["x"].shape[0]),
        "warmup_time": warmup_time,
        "sample_time": sample_time,
    }
    how = " (chosen from the structure)" if args.discrete_kernel == "auto" else ""
    print(f"  discrete kernel                   {summary['discrete_kernel']}{how}")
    print(f"  its acceptance after warmup       {summary['accept_prob']:.3f}")
    if args.discrete_kernel == "albp":
        print(f"  ALBP path length R                {np.mean(extra['path_length']):.2f}")
    print(f"  coordinates of x changed / step   {summary['mean_changed']:.2f}")
    print(f"  NUTS leapfrog steps / step        {summary['mean_nuts_steps']:.1f}")
    print(f"  states on the wrong side of 1/2   {wrong:.3%}")
    print(
        f"  mean signal w . x_l + b           max split r_hat {signal_r_hat:.3f}, "
        f"min n_eff {signal_n_eff:.0f} over the {args.L} steps ({args.num_chains} chains)"
    )
    verdict = "converged" if summary["converged"] else "NOT converged"
    print(f"  {verdict}: max r_hat {signal_r_hat:.3f} vs {MAX_R_HAT}")
    print(
        f"  wall time                         warmup {warmup_time:.1f} s (incl. compilation), "
        f"sampling {sample_time:.1f} s"
    )
    os.makedirs(args.out, exist_ok=True)
    figure = os.path.join(args.out, "fhmm.png")
    plot(truth, marginals, signal, figure)
    print(f"  figure                            {figure}")
    summary["figure"] = figure
    return summary


if __name__ == "__main__":
    main()
