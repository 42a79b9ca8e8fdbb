"""
Example: a multimodal ordinal target with ACS, DMALA and ALBP
=============================================================

The synthetic target of Pynadath et al. (2024, Sec. 4.1 and Appendix D.1): two ordinal
coordinates ``x = (x_1, x_2)`` in ``{0, ..., 450}^2`` and 25 modes ``mu_ij = 75 (i + 1, j + 1)``,
``i, j = 0..4``, on a 5 x 5 grid 75 apart, with log density

.. math::

    \\log \\pi(x) = \\log \\sum_{i, j} w_{ij}
    \\exp\\left(-\\frac{\\|x - \\mu_{ij}\\|^2}{2 \\sigma^2}\\right) + C.

(The paper's eq. 2 has the bumps growing away from the modes, a sign slip.) The bump
variance is ours, ``sigma^2 = 20`` by default (``--sigma2``): bumps a few integers wide, with
negligible mass between modes. Two variants: equal weights ``w_ij``, and uneven ones,
``w_ij`` proportional to ``1 / (1 + i + j)`` (the mode ``mu_00 = (75, 75)`` heaviest, as in
the paper's Figure 5). The target is a NumPyro model with one ``DiscreteUniform(0, 450)``
site of shape ``(2,)`` and a ``factor``; the state space has 451^2 = 203401 points, so the
target is enumerated exactly.

Three samplers start in the mode ``mu_00``, all with their default arguments: moves in the
units of the site (a ladder of distances from 1 to twice the site's scale, here its prior
standard deviation 130: ``1, 16, 33, 65, 130, 260``; ``--window`` gives a fixed window
instead) and the same local ratios (``--weights``, exact by default):

- :class:`~numpyro_discrete.ACS`: the cyclical step size from ``step_size_max`` to
  ``step_size_min`` over cycles of 20 steps, both tuned during warmup in the units of the
  site (the paper fixes ``alpha_max = 1575, alpha_min = 3`` for this toy;
  ``--step-size-max``/``--step-size-min`` fix them here too), its balancing schedule tuned
  as well.
- :class:`~numpyro_discrete.DMALA`: one step size (default 0.2, in the units of the site)
  and ``beta = 0.5``.
- :class:`~numpyro_discrete.ALBP`: the locally balanced path proposal, path length adapted.

The script prints, per variant and sampler, the acceptance rate, the number of modes
visited (a draw within ``3 sigma`` of the mode's centre), the KL divergence
``KL(q || pi)`` between the samples' distribution over the 25 modes (each draw assigned
to its nearest mode) and the target's, and the total variation between them; it saves a
figure with heat maps of the target and of each sampler's draws.

Run it with the defaults (a few minutes on two CPU cores)::

    python examples/multimodal.py                 # writes outputs/multimodal.png
    python examples/multimodal.py --num-samples 5000 --variant uneven --out /tmp/mm

**References:**

1. *Gradient-based Discrete Sampling with Automatic Cyclical Scheduling*, Patrick
   Pynadath, Riddhiman Bhattacharya, Arun Hariharan, Ruqi Zhang (2024)
2. *A Langevin-like Sampler for Discrete Distributions*, Ruqi Zhang, Xingchao Liu, Qiang
   Liu (2022)
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
from jax.scipy.special import logsumexp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ACS, ALBP, DMALA

matplotlib.use("Agg")

SAMPLERS = ("ACS", "DMALA", "ALBP")


def mode_grid(num_side, spacing):
    """The ``num_side^2`` mode centres ``spacing * (i + 1, j + 1)`` and the upper bound
    ``(num_side + 1) * spacing`` of each coordinate."""
    ticks = spacing * (np.arange(num_side) + 1)
    means = np.stack(np.meshgrid(ticks, ticks, indexing="ij"), -1).reshape(-1, 2)
    return means.astype(np.float64), (num_side + 1) * spacing


def mode_log_weights(num_side, uneven):
    i, j = np.meshgrid(np.arange(num_side), np.arange(num_side), indexing="ij")
    weights = 1.0 / (1.0 + i + j) if uneven else np.ones((num_side, num_side))
    return np.log(weights / weights.sum()).reshape(-1)


def log_density(x, means, log_weights, sigma2):
    """``log pi(x)`` up to a constant, for integer or float ``x`` of shape ``(..., 2)``."""
    x = jnp.asarray(x, jnp.result_type(float))
    sq = jnp.sum((x[..., None, :] - means) ** 2, axis=-1)
    return logsumexp(log_weights - sq / (2.0 * sigma2), axis=-1)


def multimodal_model(means, log_weights, sigma2, upper):
    x = numpyro.sample("x", dist.DiscreteUniform(0, upper).expand([2]))
    numpyro.factor("bumps", log_density(x, means, log_weights, sigma2))


def exact_target(means, log_weights, sigma2, upper):
    """The enumerated target on the ``(upper + 1)^2`` grid, ``p[x_1, x_2]``."""
    grid = np.arange(upper + 1)
    points = np.stack(np.meshgrid(grid, grid, indexing="ij"), -1)
    log_p = np.asarray(log_density(points, means, log_weights, sigma2))
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def make_kernel(name, args, model):
    if name == "ACS":
        return ACS(
            model,
            step_size_max=args.step_size_max,
            step_size_min=args.step_size_min,
            cycle_length=args.cycle_length,
            weights=args.weights,
            ordinal_window=args.window,
        )
    if name == "DMALA":
        return DMALA(
            model, step_size=args.dmala_step_size, weights=args.weights, ordinal_window=args.window
        )
    return ALBP(model, weights=args.weights, ordinal_window=args.window)


def run_sampler(name, args, model_args, start, rng_key):
    mcmc = MCMC(
        make_kernel(name, args, multimodal_model),
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        progress_bar=not args.no_progress_bar,
    )
    t0 = time.perf_counter()
    mcmc.run(rng_key, *model_args, init_params={"x": start}, extra_fields=("accept_prob",))
    draws = np.asarray(jax.block_until_ready(mcmc.get_samples()["x"]))
    seconds = time.perf_counter() - t0
    return draws, float(np.mean(mcmc.get_extra_fields()["accept_prob"])), seconds


def mode_masses(target, means):
    """The target's mass of each mode's cell (the points nearest to that mode)."""
    grid = np.arange(target.shape[0])
    points = np.stack(np.meshgrid(grid, grid, indexing="ij"), -1).reshape(-1, 2)
    cells = nearest_mode(points, means)
    return np.bincount(cells, weights=target.reshape(-1), minlength=len(means))


def nearest_mode(points, means):
    sq = np.sum((np.asarray(points, np.float64)[:, None, :] - means) ** 2, axis=-1)
    return np.argmin(sq, axis=1)


def mode_metrics(draws, means, masses, sigma2):
    cells = nearest_mode(draws, means)
    q = np.bincount(cells, minlength=len(means)) / len(draws)
    seen = q > 0
    kl = float(np.sum(q[seen] * np.log(q[seen] / masses[seen])))
    near = np.sum((draws - means[cells]) ** 2, axis=1) <= 9.0 * sigma2
    visited = len(np.unique(cells[near]))
    return {"kl": kl, "tv": 0.5 * float(np.abs(q - masses).sum()), "modes_visited": visited}


def plot(results, path):
    variants = list(results)
    fig, axes = plt.subplots(
        len(variants), 1 + len(SAMPLERS), figsize=(3.2 * (1 + len(SAMPLERS)), 3.2 * len(variants))
    )
    axes = np.atleast_2d(axes)
    for row, variant in enumerate(variants):
        target, upper = results[variant]["target"], results[variant]["upper"]
        bins = np.linspace(-0.5, upper + 0.5, min(upper + 1, 90) + 1)
        # the target summed over the same bins as the histograms
        grid = np.arange(upper + 1)
        points = np.stack(np.meshgrid(grid, grid, indexing="ij"), -1).reshape(-1, 2)
        coarse = np.histogram2d(
            points[:, 0], points[:, 1], bins=[bins, bins], weights=target.reshape(-1)
        )[0]
        panels = [("target", coarse)]
        for name in SAMPLERS:
            draws = results[variant]["draws"][name]
            hist = np.histogram2d(draws[:, 0], draws[:, 1], bins=[bins, bins])[0]
            panels.append((name, hist / hist.sum()))
        for col, (title, image) in enumerate(panels):
            ax = axes[row, col]
            ax.imshow(image.T, origin="lower", cmap="viridis", extent=(0, upper, 0, upper))
            label = title
            if title != "target":
                metrics = results[variant]["metrics"][title]
                label = f"{title}: KL {metrics['kl']:.2f}, modes {metrics['modes_visited']}"
            ax.set_title(f"{variant}: {label}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description="ACS vs DMALA vs ALBP on a 25-mode ordinal target")
    parser.add_argument("--variant", default="both", choices=["even", "uneven", "both"])
    parser.add_argument("--num-side", type=int, default=5, help="modes per side (5: 25 modes)")
    parser.add_argument("--spacing", type=int, default=75, help="distance between modes")
    parser.add_argument("--sigma2", type=float, default=20.0, help="variance of each bump")
    parser.add_argument("--num-warmup", type=int, default=1000)
    parser.add_argument("--num-samples", type=int, default=10000)
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        help="ordinal window half-width (default: moves in the units of the site)",
    )
    parser.add_argument("--weights", default="exact", choices=["exact", "gradient"])
    parser.add_argument("--step-size-max", type=float, default=None, help="default: tuned")
    parser.add_argument("--step-size-min", type=float, default=None, help="default: tuned")
    parser.add_argument("--cycle-length", type=int, default=20)
    parser.add_argument("--dmala-step-size", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs", help="output directory for the figure")
    parser.add_argument("--no-progress-bar", action="store_true")
    args = parser.parse_args(argv)

    means, upper = mode_grid(args.num_side, args.spacing)
    start = jnp.asarray(means[0], jnp.int32)  # mu_00, the heaviest mode when uneven
    variants = ["even", "uneven"] if args.variant == "both" else [args.variant]
    results = {}
    print(f"{'variant':8s} {'sampler':7s} {'accept':>7s} {'modes':>6s} {'KL':>7s} {'TV':>6s}")
    for v, variant in enumerate(variants):
        log_weights = mode_log_weights(args.num_side, variant == "uneven")
        model_args = (jnp.asarray(means), jnp.asarray(log_weights), args.sigma2, upper)
        target = exact_target(means, log_weights, args.sigma2, upper)
        masses = mode_masses(target, means)
        entry = {"target": target, "upper": upper, "draws": {}, "metrics": {}}
        for s, name in enumerate(SAMPLERS):
            key = random.fold_in(random.key(args.seed), 10 * v + s)
            draws, accept, seconds = run_sampler(name, args, model_args, start, key)
            metrics = mode_metrics(draws, means, masses, args.sigma2)
            metrics.update(accept_prob=accept, seconds=seconds)
            entry["draws"][name] = draws
            entry["metrics"][name] = metrics
            print(
                f"{variant:8s} {name:7s} {accept:7.3f} {metrics['modes_visited']:6d} "
                f"{metrics['kl']:7.3f} {metrics['tv']:6.3f}"
            )
        results[variant] = entry
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "multimodal.png")
    plot(results, path)
    print(f"figure: {path}")
    return {
        "figure": path,
        "metrics": {variant: results[variant]["metrics"] for variant in results},
    }


if __name__ == "__main__":
    main()
