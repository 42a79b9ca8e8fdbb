"""
Example: a hidden Markov model written with numpyro's scan, sampled with chain blocks
====================================================================================

A Gaussian HMM with ``K`` categorical hidden states over ``T`` time steps, written the way
numpyro users write it, with :func:`numpyro.contrib.control_flow.scan`:

.. math::

    x_t \\sim \\mathrm{Categorical}(P_{x_{t-1}}), \\quad
    y_t \\sim \\mathcal{N}(\\mu_{x_t}, \\sigma^2), \\quad
    P_k \\sim \\mathrm{Dirichlet}(\\mathbf{1} + 8 e_k), \\quad
    \\mu \\sim \\text{ordered } \\mathcal{N}(0, 5^2)^K, \\quad
    \\sigma \\sim \\mathrm{HalfNormal}(2).

Two samplers run on the same data, side by side:

- ``LBPGibbs(NUTS(model))``, whose discrete kernel is chosen from the model's structure:
  :class:`CollapsedDraw`, as it reads from the model's program, through the ``scan``, that
  the states form one chain in time that shares no term with anything else discrete. NUTS
  moves ``P, mu, sigma`` with ``x`` summed out (the chain's normaliser by the forward
  algorithm, its potentials read from the model's terms), then the whole sequence ``x`` is
  drawn jointly from its exact conditional given them (forward filtering, backward
  sampling). No user-written transition matrix or enumeration markup;
- NUTS on the same model with ``x`` summed out by numpyro's enumeration (``x_t`` marked
  ``infer={"enumerate": "parallel"}``): the reference, exact in the discrete states.

The script prints both posterior summaries of ``mu`` and ``sigma`` (the ordered prior on
``mu`` removes label switching), their agreement in Monte Carlo standard errors, effective
samples per second of sampling and the wall times, and saves a figure with the data, the
true states and the posterior probability of each state over time.

The chains run in parallel, one per CPU device (``numpyro.set_host_device_count``);
``--chain-method vectorized`` batches them on one device, where a batched NUTS step lasts
as long as the longest trajectory of the chains.

Run it with the defaults (about two and a half minutes on two CPU cores, most of them for
NUTS with the states enumerated)::

    python examples/hmm.py                       # writes outputs/hmm.png
    python examples/hmm.py --T 300 --K 3 --num-samples 500 --out /tmp/hmm
"""

import argparse
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

from numpyro_discrete import LBPGibbs, diagnose
from numpyro_discrete.gallery.sequences import hmm_model, simulate_hmm

matplotlib.use("Agg")


def timed_run(kernel, args, y, seed):
    """Warmup (with compilation) and sampling, timed apart; the MCMC object."""
    mcmc = MCMC(
        kernel,
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        chain_method=args.chain_method,
        progress_bar=args.progress_bar,
    )
    start = time.perf_counter()
    mcmc.warmup(random.key(seed), y, args.K)
    jax.block_until_ready(mcmc.post_warmup_state)
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, y, args.K)
    jax.block_until_ready(mcmc.last_state)
    return mcmc, warmup_s, time.perf_counter() - start


def state_probabilities(mcmc, num_states):
    """``(T, K)`` posterior probability of each state at each step, from the draws."""
    x = np.asarray(mcmc.get_samples()["x"])
    return np.stack([(x == k).mean(0) for k in range(num_states)], axis=1)


def plot(truth, probs, path):
    fig, axes = plt.subplots(2, 1, figsize=(12, 5), sharex=True, constrained_layout=True)
    steps = np.arange(truth["y"].shape[0])
    axes[0].plot(steps, truth["y"], ".", ms=2, color="0.4", label="$y$")
    axes[0].plot(steps, truth["locs"][truth["x"]], color="C3", lw=1, label="true mean")
    axes[0].legend(loc="upper right", fontsize="small")
    axes[0].set_title("data and the true state means")
    axes[1].stackplot(steps, probs.T, labels=[f"state {k}" for k in range(probs.shape[1])])
    axes[1].set_ylabel("P($x_t = k$ | y)")
    axes[1].set_xlabel("time step")
    axes[1].legend(loc="upper right", fontsize="small", ncols=probs.shape[1])
    axes[1].set_title("posterior state probabilities (LBPGibbs, the states drawn exactly)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="An HMM written with numpyro's scan: chain blocks against enumeration."
    )
    parser.add_argument("--T", type=int, default=1000, help="time steps")
    parser.add_argument("--K", type=int, default=4, help="hidden states")
    parser.add_argument("--num-warmup", type=int, default=500)
    parser.add_argument("--num-samples", type=int, default=1000)
    parser.add_argument("--num-chains", type=int, default=2)
    parser.add_argument(
        "--chain-method", default="parallel", choices=["parallel", "sequential", "vectorized"]
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs", help="output directory for the figure")
    parser.add_argument(
        "--no-progress-bar", dest="progress_bar", action="store_false", default=True
    )
    args = parser.parse_args(argv)
    if args.chain_method == "parallel":
        # before jax's first computation (a process that already ran one keeps its devices)
        numpyro.set_host_device_count(args.num_chains)

    truth = simulate_hmm(np.random.default_rng(args.seed), args.T, args.K)
    y = jnp.asarray(truth["y"])

    def enumerated(y, num_states):
        return hmm_model(y, num_states, enumerate_states=True)

    kernel = LBPGibbs(NUTS(hmm_model))
    runs = {
        "LBPGibbs(NUTS)": timed_run(kernel, args, y, args.seed),
        "NUTS, x enumerated": timed_run(NUTS(enumerated), args, y, args.seed + 1),
    }
    print(
        f"\nHMM written with scan, T={args.T}, K={args.K}; "
        f"LBPGibbs chose {type(kernel.discrete_kernel).__name__} for x, blocks "
        f"{kernel.discrete_kernel.blocks}"
    )
    print(f"true locs = {truth['locs']}, sigma = {truth['sigma']}")
    summary = {
        "discrete_kernel": type(kernel.discrete_kernel).__name__,
        "blocks": kernel.discrete_kernel.blocks,
    }
    estimates = {}
    for name, (mcmc, warmup_s, sample_s) in runs.items():
        draws = mcmc.get_samples(group_by_chain=True)
        params = {k: np.asarray(draws[k]) for k in ("locs", "sigma")}
        print(f"\n{name}: warmup {warmup_s:.1f} s (with compilation), sampling {sample_s:.1f} s")
        numpyro.diagnostics.print_summary(params, group_by_chain=True)
        if "x" in draws:  # the discrete states: split R-hat, ESS, chains that never moved
            print(diagnose(mcmc))
        ess = min(
            float(np.min(numpyro.diagnostics.effective_sample_size(v))) for v in params.values()
        )
        r_hat = max(
            float(np.max(numpyro.diagnostics.split_gelman_rubin(v))) for v in params.values()
        )
        estimates[name] = {
            k: (
                v.mean((0, 1)),
                v.std((0, 1)) / np.sqrt(np.min(numpyro.diagnostics.effective_sample_size(v))),
            )
            for k, v in params.items()
        }
        summary[name] = {
            "warmup_s": warmup_s,
            "sampling_s": sample_s,
            "min_ess": ess,
            "min_ess_per_s": ess / sample_s,
            "max_r_hat": r_hat,
        }
    (ours, reference) = (estimates[name] for name in runs)
    worst = 0.0
    for site in ("locs", "sigma"):
        (m1, s1), (m2, s2) = ours[site], reference[site]
        worst = max(worst, float(np.max(np.abs(m1 - m2) / np.sqrt(s1**2 + s2**2))))
    summary["max_z_difference"] = worst
    print(
        f"\nagreement: the posterior means differ by at most {worst:.1f} combined standard "
        "errors (|z| < 4 expected)"
    )
    for name in runs:
        print(f"  {name:28s} min ESS/s of locs, sigma: {summary[name]['min_ess_per_s']:.1f}")
    os.makedirs(args.out, exist_ok=True)
    figure = os.path.join(args.out, "hmm.png")
    plot(truth, state_probabilities(runs["LBPGibbs(NUTS)"][0], args.K), figure)
    print(f"figure: {figure}")
    summary["figure"] = figure
    return summary


if __name__ == "__main__":
    main()
