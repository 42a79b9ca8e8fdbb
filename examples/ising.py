"""
Example: Ising model with ALBP
==============================

An Ising model on a ``p x p`` open lattice, written as an ordinary NumPyro model with one
binary site ``x`` of shape ``(p, p)`` and spins ``s = 2 x - 1``:

.. math::

    \\log \\pi(x) = \\sum_i a_i s_i - \\lambda \\sum_{\\langle i, j \\rangle} s_i s_j + C,

where ``<i, j>`` runs over the horizontal and vertical neighbour pairs, each counted once
(the field and energy of the gallery's Ising model,
:mod:`numpyro_discrete.gallery.lattices`, written here as one summed factor; the gallery
writes it elementwise). The external field ``a`` is drawn once (numpy, ``--seed``):
``a_i ~ U(-c, 2c)`` inside the disc ``(v1 - p/2)^2 + (v2 - p/2)^2 <= p^2/2``
(``v1, v2 = 0..p-1`` the row and column of site ``i``) and ``a_i ~ U(-2c, c)`` outside
it. The defaults ``p = 50, c = 0.3, lambda = 0.15`` (2500 binary coordinates) are the
"C2" Ising target of Sun, Dai and Schuurmans (2022, Appendix D.2), taken as written
there: note that a disc of radius ``p / sqrt(2)`` centred on the lattice covers every
site (the corners lie on its boundary), so all ``a_i`` are in fact drawn from
``U(-c, 2c)``.
With ``lambda > 0`` the coupling favours unequal neighbours (antiferromagnetic).

The model is sampled with :class:`~numpyro_discrete.ALBP`: each step changes ``R``
coordinates along a locally balanced path chosen from one gradient of the log density, and
``R`` is adapted during warmup towards the acceptance rate 0.574, then frozen. The script
runs the warmup first (collecting the trajectory of ``R``), then the sampling phase from the
post-warmup state, and prints

- the mean acceptance probability after warmup and the final ``R``,
- the mean number of coordinates changed per step (rejections count 0),
- the mean magnetisation ``mean(s)``,
- the minimum and mean effective sample size over the ``p * p`` coordinates,
- the wall time of each phase (the first includes compilation).

It saves a figure with three panels: the external field ``a``, the sample mean of ``x`` at
every site, and ``R`` during warmup.

Run it with the defaults (about 10 seconds on two CPU cores)::

    python examples/ising.py                 # writes outputs/ising.png
    python examples/ising.py --p 20 --lam 0.1 --c 0.2 --balancing barker --out /tmp/ising

**References:**

1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
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
from numpyro.diagnostics import effective_sample_size
import numpyro.distributions as dist
from numpyro.infer import MCMC

from numpyro_discrete import ALBP
from numpyro_discrete.gallery.lattices import ising_energy, ising_field

matplotlib.use("Agg")

EXTRA_FIELDS = ("accept_prob", "path_length", "num_changed")


def ising_model(field, lam):
    """Ising model on an open lattice with external field `field` and coupling `lam`, its
    log density one scalar factor (the gallery's ``ising_energy``)."""
    x = numpyro.sample("x", dist.Bernoulli(0.5).expand(field.shape))
    numpyro.factor("ising", ising_energy(x, field, lam))


def run_inference(model, args, rng_key, *model_args):
    """Warmup (collecting ``R_t``), then sampling from the post-warmup state."""
    kernel = ALBP(model, balancing=args.balancing)
    mcmc = MCMC(
        kernel,
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        # one process, chains batched with vmap: no need for several host devices
        chain_method="vectorized",
        progress_bar=args.progress_bar,
    )
    start = time.perf_counter()
    mcmc.warmup(rng_key, *model_args, collect_warmup=True, extra_fields=EXTRA_FIELDS)
    warmup_R = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["path_length"])
    jax.block_until_ready(mcmc.post_warmup_state)
    warmup_time = time.perf_counter() - start

    # `run` after `warmup` starts from `post_warmup_state` and skips adaptation
    start = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, *model_args, extra_fields=EXTRA_FIELDS)
    jax.block_until_ready(mcmc.last_state)
    sample_time = time.perf_counter() - start
    return mcmc, warmup_R, warmup_time, sample_time


def summarise(mcmc, warmup_R, warmup_time, sample_time):
    """The numbers the script prints, as a dict."""
    extra = mcmc.get_extra_fields(group_by_chain=True)
    x = np.asarray(mcmc.get_samples(group_by_chain=True)["x"])  # (chains, draws, p, p)
    num_chains, num_draws = x.shape[:2]
    # a coordinate that never moved has zero variance and no defined ESS (NaN)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = effective_sample_size(x.reshape(num_chains, num_draws, -1).astype(float))
    finite = np.isfinite(ess)
    return {
        "accept_prob": float(np.mean(extra["accept_prob"])),
        "final_R": float(warmup_R[:, -1].mean()),
        "final_R_per_chain": np.asarray(extra["path_length"][:, -1]).tolist(),
        "mean_changed": float(np.mean(extra["num_changed"])),
        "magnetisation": float(np.mean(2 * x - 1)),
        "min_ess": float(ess[finite].min()) if finite.any() else float("nan"),
        "mean_ess": float(ess[finite].mean()) if finite.any() else float("nan"),
        "num_undefined_ess": int((~finite).sum()),
        "num_coords": int(ess.size),
        "num_draws": int(num_chains * num_draws),
        "warmup_time": warmup_time,
        "sample_time": sample_time,
    }


def plot(field, mean_x, warmup_R, path):
    """Three panels: the field, the sample mean of ``x``, and ``R_t`` during warmup."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), constrained_layout=True)
    bound = float(np.abs(field).max())
    im = axes[0].imshow(field, cmap="RdBu_r", vmin=-bound, vmax=bound)
    axes[0].set_title("external field $a$")
    fig.colorbar(im, ax=axes[0], shrink=0.85)
    im = axes[1].imshow(mean_x, cmap="viridis", vmin=0.0, vmax=1.0)
    axes[1].set_title("sample mean of $x$ (= P($s_i = +1$))")
    fig.colorbar(im, ax=axes[1], shrink=0.85)
    for ax in axes[:2]:
        ax.set_xticks([])
        ax.set_yticks([])
    steps = np.arange(1, warmup_R.shape[1] + 1)
    for chain, r in enumerate(warmup_R):
        axes[2].plot(steps, r, lw=1, label=f"chain {chain}")
    axes[2].set_xlabel("warmup step")
    axes[2].set_ylabel("$R_t$")
    axes[2].set_title("path length $R_t$ during warmup (ALBP)")
    if len(warmup_R) > 1:
        axes[2].legend(loc="lower right")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Ising model on a p x p lattice sampled with ALBP (numpyro-discrete)."
    )
    parser.add_argument("--p", type=int, default=50, help="lattice side (N = p * p)")
    parser.add_argument("--c", type=float, default=0.3, help="scale of the external field")
    parser.add_argument("--lam", type=float, default=0.15, help="coupling lambda")
    parser.add_argument("--num-warmup", type=int, default=1500)
    parser.add_argument("--num-samples", type=int, default=1500)
    parser.add_argument("--num-chains", type=int, default=2)
    parser.add_argument("--balancing", default="sqrt", choices=["sqrt", "barker"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs", help="output directory for the figure")
    parser.add_argument(
        "--no-progress-bar", dest="progress_bar", action="store_false", default=True
    )
    args = parser.parse_args(argv)

    field = jnp.asarray(ising_field(args.p, args.c, args.seed))
    mcmc, warmup_R, warmup_time, sample_time = run_inference(
        ising_model, args, random.key(args.seed), field, args.lam
    )
    summary = summarise(mcmc, warmup_R, warmup_time, sample_time)

    print(
        f"\nIsing p={args.p} (N={args.p**2}), c={args.c}, lambda={args.lam}, "
        f"balancing={args.balancing}, {args.num_chains} chain(s) x "
        f"{args.num_warmup} warmup + {args.num_samples} samples"
    )
    print(f"  acceptance after warmup     {summary['accept_prob']:.3f}")
    per_chain = ", ".join(f"{r:.2f}" for r in summary["final_R_per_chain"])
    print(f"  final R (per chain)         {per_chain}")
    print(f"  coordinates changed / step  {summary['mean_changed']:.2f}")
    print(f"  mean magnetisation          {summary['magnetisation']:+.4f}")
    print(
        f"  ESS over {summary['num_coords']} coordinates   min {summary['min_ess']:.1f}, "
        f"mean {summary['mean_ess']:.1f} (of {summary['num_draws']} draws)"
    )
    if summary["num_undefined_ess"]:
        print(f"  ({summary['num_undefined_ess']} coordinates never moved: ESS undefined)")
    print(
        f"  wall time                   warmup {warmup_time:.1f} s (incl. compilation), "
        f"sampling {sample_time:.1f} s"
    )

    os.makedirs(args.out, exist_ok=True)
    figure = os.path.join(args.out, "ising.png")
    mean_x = np.asarray(mcmc.get_samples()["x"]).mean(axis=0)
    plot(np.asarray(field), mean_x, warmup_R, figure)
    print(f"  figure                      {figure}")
    summary["figure"] = figure
    return summary


if __name__ == "__main__":
    main()
