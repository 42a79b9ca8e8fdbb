"""
Example: Bayesian image segmentation with LBPGibbs and ChromaticGibbs
=====================================================================

A noisy grey-level image ``y`` on a ``p x p`` lattice is explained by a hidden binary
image ``x`` (background 0, foreground 1) with an Ising prior that favours equal
neighbours, and two unknown grey levels and an unknown noise scale:

.. math::

    \\log p(x) = J \\sum_{\\langle i, j \\rangle} s_i s_j + C, \\quad s = 2 x - 1, \\qquad
    y_{ij} \\sim \\mathcal{N}(\\mu_{x_{ij}}, \\sigma^2),

    \\mu_0 \\sim \\mathcal{N}(0, 2^2), \\quad \\mu_1 = \\mu_0 + \\delta, \\quad
    \\delta \\sim \\mathrm{HalfNormal}(2), \\quad \\sigma \\sim \\mathrm{HalfNormal}(1),

where ``<i, j>`` runs over the horizontal and vertical neighbour pairs and the coupling
``J`` is fixed (``--coupling``). The ordered parameterisation ``mu_1 = mu_0 + delta``,
``delta > 0`` makes class 1 the brighter one: the posterior has no mirror mode (swapping
the classes would need ``mu_1 < mu_0``), so ``mu_0``, ``mu_1`` and ``x`` can be summarised
as they are. The prior is written as one ``numpyro.factor`` per edge direction, an array
with one term per edge, so the kernels read the lattice from the model: 2 colours (see
*Model structure and chromatic Gibbs* in the user guide).

The true image (a disc, an ellipse and a rectangle) is fixed, and ``y`` is simulated from
the likelihood with ``mu = (0, 1)`` and ``sigma = 1`` (``--noise``): thresholding each
pixel at 1/2 would misclassify 31% of them. The posterior is sampled with
``LBPGibbs(NUTS(model))``, whose discrete kernel is chosen from the model's structure: a
lattice of 2 colours, so ``ChromaticGibbs``; each step draws every pixel from its exact
conditional, one colour (half of the checkerboard) at a time, given ``mu_0, delta,
sigma``, then moves ``mu_0, delta, sigma`` with NUTS given ``x``.
Enumerating ``x`` (``2^(p^2)`` states) is out of the question, and numpyro's
``DiscreteHMCGibbs`` updates one pixel at a time, each update evaluating the whole model,
so that a sweep costs ``p^2`` model evaluations. The script runs both with several chains
and gives ``DiscreteHMCGibbs(NUTS(model))`` the same wall time as ours, setup and
compilation included (``--compare-seconds`` sets another, 0 skips it).

It prints numpyro's summary of ``mu_0``, ``mu_1``, ``sigma`` and of two summaries of ``x``
that every sampler must agree on, the fraction of foreground pixels and the number of
neighbour pairs that disagree (the length of the boundary); the pixel error rate of the
posterior marginals against the true image; the acceptance of the discrete block and the
NUTS steps; timings; a table comparing both samplers at equal wall time (draws per chain,
wall seconds, smallest effective sample size and largest ``r_hat`` over the five
quantities, pixel error); and, as its last line, ``max r_hat: <value>``, the largest
``r_hat`` over the five quantities of our sampler's summary. It saves a figure with the
true image, the data, the posterior marginals ``P(x_ij = 1 | y)`` of both samplers, and the
traces of the boundary length.

Run it with the defaults (4 chains of 500 warmup steps and 1000 draws, 64 x 64 = 4096
pixels; about 40 seconds end to end on two idle CPU cores, of which 16 s are ours, warmup
and sampling with compilation, and the rest the comparison; about a minute on busy ones)::

    python examples/segmentation.py                     # writes outputs/segmentation.png
    python examples/segmentation.py --discrete-kernel albp
    python examples/segmentation.py --p 128 --noise 0.7 --compare-seconds 0 --out /tmp/seg

**References:**

1. *Stochastic Relaxation, Gibbs Distributions, and the Bayesian Restoration of Images*,
   Stuart Geman, Donald Geman (1984)
2. *Parallel Gibbs Sampling: From Colored Fields to Thin Junction Trees*, Joseph Gonzalez,
   Yucheng Low, Arthur Gretton, Carlos Guestrin (2011)
3. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
   Hanjun Dai, Dale Schuurmans (2022)
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
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, DiscreteHMCGibbs

from numpyro_discrete import ALBP, ChromaticGibbs, LBPGibbs, diagnose

matplotlib.use("Agg")

TRUE_MU = (0.0, 1.0)
EXTRA_FIELDS = ("accept_prob", "num_changed", "hmc_state.num_steps")
# the quantities summarised, in the order printed; all are the same under any relabelling
QUANTITIES = ("mu_0", "mu_1", "sigma", "foreground", "boundary")


def segmentation_model(y, coupling):
    """Two-class segmentation of ``y`` (p, p) with an Ising prior of fixed ``coupling``."""
    mu_0 = numpyro.sample("mu_0", dist.Normal(0.0, 2.0))
    delta = numpyro.sample("delta", dist.HalfNormal(2.0))
    mu_1 = numpyro.deterministic("mu_1", mu_0 + delta)
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand(y.shape))
    s = 2.0 * x - 1.0
    # one term per edge, one factor per direction: the kernels read the lattice from these
    numpyro.factor("right", coupling * s[:, :-1] * s[:, 1:])
    numpyro.factor("down", coupling * s[:-1, :] * s[1:, :])
    numpyro.sample("y", dist.Normal(jnp.where(x == 1, mu_1, mu_0), sigma), obs=y)


def true_image(p):
    """A disc, an ellipse and a rectangle on a ``p x p`` grid (about 28% foreground)."""
    row, col = np.meshgrid(np.arange(p) / p, np.arange(p) / p, indexing="ij")
    disc = (row - 0.3) ** 2 + (col - 0.3) ** 2 < 0.18**2
    ellipse = ((row - 0.25) / 0.1) ** 2 + ((col - 0.75) / 0.15) ** 2 < 1
    rectangle = (np.abs(row - 0.7) < 0.12) & (np.abs(col - 0.6) < 0.25)
    return (disc | ellipse | rectangle).astype(np.int32)


def label_invariant(x):
    """Foreground fraction and boundary length (disagreeing neighbour pairs) of draws
    ``x`` (..., p, p)."""
    boundary = np.sum(x[..., :, 1:] != x[..., :, :-1], axis=(-2, -1)) + np.sum(
        x[..., 1:, :] != x[..., :-1, :], axis=(-2, -1)
    )
    return np.mean(x, axis=(-2, -1)), boundary.astype(np.float64)


def quantities(samples):
    """The summarised quantities, each of shape (chains, draws), from grouped samples."""
    foreground, boundary = label_invariant(np.asarray(samples["x"]))
    values = {name: np.asarray(samples[name], np.float64) for name in QUANTITIES[:3]}
    return {**values, "foreground": foreground, "boundary": boundary}


def diagnostics(values):
    """Smallest effective sample size and largest split ``r_hat`` over the quantities."""
    stats = numpyro.diagnostics.summary(values)
    n_eff = min(float(np.min(stats[name]["n_eff"])) for name in values)
    r_hat = max(float(np.max(stats[name]["r_hat"])) for name in values)
    return n_eff, r_hat


def pixel_error(x, truth):
    """Fraction of pixels whose posterior marginal is on the wrong side of 1/2."""
    marginals = np.mean(x.reshape(-1, *truth.shape), axis=0)
    return float(np.mean((marginals > 0.5) != truth)), marginals


def run_ours(args, rng_key, model_args):
    """Warmup (with the model analysis and compilation), then sampling; timed apart."""
    discrete_kernel = {
        "auto": "auto",
        "chromatic": ChromaticGibbs(segmentation_model),
        "albp": ALBP(segmentation_model),
    }[args.discrete_kernel]
    mcmc = MCMC(
        LBPGibbs(NUTS(segmentation_model), discrete_kernel=discrete_kernel),
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        # LBPGibbs does not support "vectorized"; with the progress bar on, numpyro compiles
        # one step and reuses it for every chain (with it off, it compiles each chain's loop)
        chain_method="sequential",
        progress_bar=args.progress_bar,
    )
    start = time.perf_counter()
    mcmc.warmup(rng_key, *model_args)
    jax.block_until_ready(mcmc.post_warmup_state)
    warmup_time = time.perf_counter() - start
    start = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, *model_args, extra_fields=EXTRA_FIELDS)
    jax.block_until_ready(mcmc.last_state)
    sample_time = time.perf_counter() - start
    return mcmc, mcmc.sampler.discrete_kernel, warmup_time, sample_time


def time_numpyro_step(rng_key, model_args):
    """Seconds to set up and compile ``DiscreteHMCGibbs(NUTS(model))`` and seconds per step,
    from a few steps of one chain."""
    kernel = DiscreteHMCGibbs(NUTS(segmentation_model))
    start = time.perf_counter()
    state = kernel.init(rng_key, 10, None, model_args, {})
    step = jax.jit(lambda state: kernel.sample(state, model_args, {}))
    state = jax.block_until_ready(step(state))
    setup_time = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(3):
        state = step(state)
    jax.block_until_ready(state)
    return setup_time, (time.perf_counter() - start) / 3


def run_numpyro(args, rng_key, model_args, seconds):
    """``DiscreteHMCGibbs(NUTS(model))`` with as many steps as fit in ``seconds`` of wall
    time (its own setup and compilation included), half warmup, at least 4 + 4 per chain."""
    key_time, key_run = random.split(rng_key)
    setup_time, step_time = time_numpyro_step(key_time, model_args)
    steps = int((seconds - setup_time) / step_time / args.num_chains)
    num_warmup = max(steps // 2, 4)
    num_samples = max(steps - num_warmup, 4)
    mcmc = MCMC(
        DiscreteHMCGibbs(NUTS(segmentation_model)),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=args.num_chains,
        chain_method="sequential",
        progress_bar=args.progress_bar,
    )
    start = time.perf_counter()
    mcmc.run(key_run, *model_args)
    jax.block_until_ready(mcmc.last_state)
    return mcmc, time.perf_counter() - start, step_time


def plot(truth, y, marginals, boundaries, titles, path):
    """True image, data, posterior marginals per sampler, and boundary-length traces."""
    num = len(marginals)
    images = [(truth, "true image $x$", "gray"), (y, "data $y$", "gray")]
    images += [
        (m, f"P($x=1$ | $y$), {t}", "viridis") for m, t in zip(marginals, titles, strict=True)
    ]
    fig = plt.figure(figsize=(3.3 * (2 + num), 6.6), constrained_layout=True)
    top, bottom = fig.subfigures(2, 1)
    image_axes = top.subplots(1, 2 + num)
    for ax, (image, title, cmap) in zip(image_axes, images, strict=True):
        kwargs = {"vmin": 0.0, "vmax": 1.0} if cmap == "viridis" else {}
        shown = ax.imshow(image, cmap=cmap, **kwargs)
        ax.set_title(title, fontsize="medium")
        ax.set_xticks([])
        ax.set_yticks([])
    top.colorbar(shown, ax=image_axes[-1], shrink=0.8)
    trace_axes = bottom.subplots(1, num, sharey=True, squeeze=False)[0]
    for ax, chains, title in zip(trace_axes, boundaries, titles, strict=True):
        for chain, trace in enumerate(chains):
            ax.plot(np.arange(1, len(trace) + 1), trace, lw=0.8, label=f"chain {chain}")
        ax.set_xlabel("draw (after warmup)")
        ax.set_title(f"boundary length, {title}", fontsize="medium")
    trace_axes[0].set_ylabel("disagreeing neighbour pairs")
    trace_axes[0].legend(fontsize="small", ncols=2)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_row(name, draws, seconds, n_eff, r_hat, error):
    print(f"  {name:<34} {draws:>13} {seconds:>8.1f} {n_eff:>9.1f} {r_hat:>9.3f} {error:>9.2%}")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Bayesian image segmentation (Ising prior, unknown grey levels and noise) "
        "sampled with LBPGibbs(NUTS) (its discrete kernel chosen from the structure), against "
        "numpyro's DiscreteHMCGibbs at "
        "equal wall time."
    )
    parser.add_argument("--p", type=int, default=64, help="image side (p * p binary pixels)")
    parser.add_argument("--coupling", type=float, default=0.5, help="Ising coupling J")
    parser.add_argument("--noise", type=float, default=1.0, help="true noise scale sigma")
    parser.add_argument("--num-warmup", type=int, default=500)
    parser.add_argument("--num-samples", type=int, default=1000)
    parser.add_argument("--num-chains", type=int, default=4)
    parser.add_argument(
        "--discrete-kernel",
        choices=("auto", "chromatic", "albp"),
        default="auto",
        help="kernel of the discrete block: chosen from the structure (auto), ChromaticGibbs "
        "(every pixel per step, a colour at a time) or ALBP (a locally balanced path of R "
        "pixels per step)",
    )
    parser.add_argument(
        "--compare-seconds",
        type=float,
        default=None,
        help="wall seconds for numpyro's DiscreteHMCGibbs (default: the same as ours, "
        "warmup and sampling with setup and compilation; 0 skips the comparison)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs", help="output directory for the figure")
    parser.add_argument(
        "--no-progress-bar", dest="progress_bar", action="store_false", default=True
    )
    args = parser.parse_args(argv)

    start_all = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    truth = true_image(args.p)
    y = np.where(truth == 1, TRUE_MU[1], TRUE_MU[0]) + args.noise * rng.normal(size=truth.shape)
    model_args = (jnp.asarray(y), args.coupling)
    key_ours, key_numpyro = random.split(random.key(args.seed))

    mcmc, discrete_kernel, warmup_time, sample_time = run_ours(args, key_ours, model_args)
    samples = mcmc.get_samples(group_by_chain=True)
    values = quantities(samples)
    n_eff, r_hat = diagnostics(values)
    error, marginals = pixel_error(np.asarray(samples["x"]), truth)
    extra = mcmc.get_extra_fields()
    kernel_name = type(discrete_kernel).__name__
    name = f"LBPGibbs(NUTS, {kernel_name})"
    wall_time = warmup_time + sample_time
    num_steps = args.num_chains * args.num_samples

    print(
        f"\nImage segmentation, {args.p} x {args.p} = {args.p**2} binary pixels, coupling "
        f"J = {args.coupling}; true mu = {TRUE_MU}, sigma = {args.noise}"
    )
    print(
        f"{name}: {args.num_chains} chains x ({args.num_warmup} warmup + {args.num_samples}) "
        "draws; foreground = fraction of pixels with x = 1, boundary = neighbour pairs "
        f"with x_i != x_j (true image: {truth.mean():.3f}, {label_invariant(truth)[1]:.0f})"
    )
    numpyro.diagnostics.print_summary(values)
    # per discrete site: split R-hat, ESS and stuck chains, with a warning if they disagree
    print(diagnose(mcmc))
    if args.discrete_kernel == "auto":
        print(f"  discrete kernel chosen              {kernel_name}")
    if isinstance(discrete_kernel, ChromaticGibbs):
        print(f"  ChromaticGibbs colours              {discrete_kernel.num_colours}")
    print(f"  discrete block acceptance           {float(np.mean(extra['accept_prob'])):.3f}")
    print(f"  pixels changed / step               {float(np.mean(extra['num_changed'])):.1f}")
    num_leapfrog = float(np.mean(extra["hmc_state.num_steps"]))
    print(f"  NUTS leapfrog steps / step          {num_leapfrog:.1f}")
    print(f"  pixel error of P(x = 1 | y) > 1/2   {error:.2%}")
    print(
        f"  wall time                           warmup {warmup_time:.1f} s (incl. model "
        f"analysis and compilation), sampling {sample_time:.1f} s "
        f"({1e3 * sample_time / num_steps:.2f} ms per step)"
    )
    summary = {
        "max_r_hat": r_hat,
        "min_n_eff": n_eff,
        "pixel_error": error,
        "mean": {key: float(np.mean(value)) for key, value in values.items()},
        "accept_prob": float(np.mean(extra["accept_prob"])),
        "warmup_time": warmup_time,
        "sample_time": sample_time,
    }
    marginal_maps, boundaries, titles = [marginals], [values["boundary"]], [kernel_name]

    seconds = wall_time if args.compare_seconds is None else args.compare_seconds
    if seconds > 0:
        other, other_time, step_time = run_numpyro(args, key_numpyro, model_args, seconds)
        other_samples = other.get_samples(group_by_chain=True)
        other_values = quantities(other_samples)
        other_n_eff, other_r_hat = diagnostics(other_values)
        other_error, other_marginals = pixel_error(np.asarray(other_samples["x"]), truth)
        print(
            f"\nnumpyro's DiscreteHMCGibbs(NUTS), {args.num_chains} chains x "
            f"({other.num_warmup} warmup + {other.num_samples}) draws, "
            f"{step_time:.3f} s per step (one pixel at a time):"
        )
        numpyro.diagnostics.print_summary(other_values)
        print("at equal wall time (setup and compilation included; ESS and r_hat over the")
        print("five quantities above):")
        header = ("sampler", "draws / chain", "wall s", "min ESS", "max r_hat", "px error")
        print("  {:<34} {:>13} {:>8} {:>9} {:>9} {:>9}".format(*header))
        draws = f"{args.num_warmup} + {args.num_samples}"
        print_row(name, draws, wall_time, n_eff, r_hat, error)
        draws = f"{other.num_warmup} + {other.num_samples}"
        print_row(
            "DiscreteHMCGibbs(NUTS)", draws, other_time, other_n_eff, other_r_hat, other_error
        )
        summary["numpyro"] = {
            "max_r_hat": other_r_hat,
            "min_n_eff": other_n_eff,
            "pixel_error": other_error,
            "wall_time": other_time,
            "num_warmup": other.num_warmup,
            "num_samples": other.num_samples,
        }
        marginal_maps.append(other_marginals)
        boundaries.append(other_values["boundary"])
        titles.append("DiscreteHMCGibbs")

    os.makedirs(args.out, exist_ok=True)
    figure = os.path.join(args.out, "segmentation.png")
    plot(truth, y, marginal_maps, boundaries, titles, figure)
    summary["figure"] = figure
    summary["total_time"] = time.perf_counter() - start_all
    print(f"\n  figure                              {figure}")
    print(f"  end to end                          {summary['total_time']:.1f} s")
    print(f"max r_hat: {r_hat:.3f}")
    return summary


if __name__ == "__main__":
    main()
