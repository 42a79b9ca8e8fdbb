"""
Example: sampling a restricted Boltzmann machine with ACS, DMALA and ALBP
=========================================================================

A binary restricted Boltzmann machine with ``V`` visible and ``H`` hidden units, the hidden
units summed out:

.. math::

    \\log \\pi(v) = b^\\top v + \\sum_{h=1}^{H} \\operatorname{softplus}(W_h^\\top v + c_h) + C,
    \\qquad v \\in \\{0, 1\\}^V.

The weights are drawn once, ``W ~ N(0, scale^2)`` with biases ``b, c ~ N(0, 1)``; a large
``--scale`` makes the target multimodal (the RBM sampling task of Pynadath et al. 2024 uses
RBMs trained on images, which we do not download). The ground truth is block Gibbs
(``h | v`` then ``v | h``, both exact) run on many independent chains.

The three samplers run on the energy ``-log pi(v)`` through ``potential_fn`` (one binary site
``v``), from the same random initial states: :class:`~numpyro_discrete.ACS` with its
tuned cycle, :class:`~numpyro_discrete.DMALA` with a fixed step size and
:class:`~numpyro_discrete.ALBP`. For each the script prints the acceptance rate, the mean
number of coordinates changed per step, the root-mean-square error of the marginal means
``E[v_i]`` and of the pairwise second moments ``E[v_i v_j]`` against block Gibbs, and the
wall time; it saves a figure of the marginal means against the ground truth. The ground
truth has its own error: the standard error of a mean over ``--gibbs-chains`` independent
draws is at most ``0.5 / sqrt(gibbs_chains)`` (0.0035 with the default 20000).

Run it with the defaults (a few minutes on two CPU cores)::

    python examples/rbm.py                 # writes outputs/rbm.png
    python examples/rbm.py --visible 100 --hidden 40 --scale 1.0 --out /tmp/rbm

**References:**

1. *Gradient-based Discrete Sampling with Automatic Cyclical Scheduling*, Patrick
   Pynadath, Riddhiman Bhattacharya, Arun Hariharan, Ruqi Zhang (2024)
"""

import argparse
import os
import time

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro.infer import MCMC

from numpyro_discrete import ACS, ALBP, DMALA

matplotlib.use("Agg")

SAMPLERS = ("ACS", "DMALA", "ALBP")


def random_rbm(rng_key, num_visible, num_hidden, scale):
    key_w, key_b, key_c = random.split(rng_key, 3)
    weights = scale * random.normal(key_w, (num_hidden, num_visible))
    return weights, random.normal(key_b, (num_visible,)), random.normal(key_c, (num_hidden,))


def rbm_log_density(v, weights, visible_bias, hidden_bias):
    v = jnp.asarray(v, jnp.result_type(float))
    return visible_bias @ v + jnp.sum(jax.nn.softplus(weights @ v + hidden_bias))


def block_gibbs(rng_key, rbm, num_chains, num_steps):
    """Final states of `num_chains` block-Gibbs chains after `num_steps` sweeps."""
    weights, visible_bias, hidden_bias = rbm

    def sweep(v, key):
        key_h, key_v = random.split(key)
        h = random.bernoulli(key_h, jax.nn.sigmoid(v @ weights.T + hidden_bias))
        v = random.bernoulli(key_v, jax.nn.sigmoid(h @ weights + visible_bias))
        return v.astype(jnp.float32), None

    key_init, key_steps = random.split(rng_key)
    v0 = random.bernoulli(key_init, 0.5, (num_chains, weights.shape[1])).astype(jnp.float32)
    v, _ = lax.scan(sweep, v0, random.split(key_steps, num_steps))
    return np.asarray(v)


def moments(draws):
    draws = np.asarray(draws, np.float64)
    second = draws.T @ draws / len(draws)
    upper = np.triu_indices(draws.shape[1], 1)
    return draws.mean(0), second[upper]


def make_kernel(name, args, potential):
    if name == "ACS":
        return ACS(potential_fn=potential, cycle_length=args.cycle_length)
    if name == "DMALA":
        return DMALA(potential_fn=potential, step_size=args.dmala_step_size)
    return ALBP(potential_fn=potential)


def main(argv=None):
    parser = argparse.ArgumentParser(description="ACS vs DMALA vs ALBP on a random RBM")
    parser.add_argument("--visible", type=int, default=50)
    parser.add_argument("--hidden", type=int, default=20)
    parser.add_argument("--scale", type=float, default=0.6, help="std of the weights")
    parser.add_argument("--num-warmup", type=int, default=1000)
    parser.add_argument("--num-samples", type=int, default=5000)
    parser.add_argument("--num-chains", type=int, default=4)
    parser.add_argument("--cycle-length", type=int, default=20)
    parser.add_argument("--dmala-step-size", type=float, default=0.2)
    parser.add_argument("--gibbs-chains", type=int, default=20000)
    parser.add_argument("--gibbs-steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="outputs", help="output directory for the figure")
    parser.add_argument("--no-progress-bar", action="store_true")
    args = parser.parse_args(argv)

    key_rbm, key_gibbs, key_init, key_run = random.split(random.key(args.seed), 4)
    rbm = random_rbm(key_rbm, args.visible, args.hidden, args.scale)

    def potential(z):
        return -rbm_log_density(z["v"], *rbm)

    truth = block_gibbs(key_gibbs, rbm, args.gibbs_chains, args.gibbs_steps)
    true_mean, true_second = moments(truth)
    init = random.bernoulli(key_init, 0.5, (args.num_chains, args.visible)).astype(jnp.int32)
    print(f"{'sampler':7s} {'accept':>7s} {'changed':>8s} {'rmse E[v]':>10s} "
          f"{'rmse E[vv]':>11s} {'seconds':>8s}")  # fmt: skip
    metrics, means = {}, {}
    for s, name in enumerate(SAMPLERS):
        mcmc = MCMC(
            make_kernel(name, args, potential),
            num_warmup=args.num_warmup,
            num_samples=args.num_samples,
            num_chains=args.num_chains,
            chain_method="vectorized",
            progress_bar=not args.no_progress_bar,
        )
        t0 = time.perf_counter()
        mcmc.run(
            random.fold_in(key_run, s),
            init_params={"v": init},
            extra_fields=("accept_prob", "num_changed"),
        )
        draws = np.asarray(jax.block_until_ready(mcmc.get_samples()["v"]))
        seconds = time.perf_counter() - t0
        extra = mcmc.get_extra_fields()
        mean, second = moments(draws)
        means[name] = mean
        metrics[name] = {
            "accept_prob": float(np.mean(extra["accept_prob"])),
            "mean_changed": float(np.mean(extra["num_changed"])),
            "rmse_mean": float(np.sqrt(np.mean((mean - true_mean) ** 2))),
            "rmse_second": float(np.sqrt(np.mean((second - true_second) ** 2))),
            "seconds": seconds,
        }
        m = metrics[name]
        print(
            f"{name:7s} {m['accept_prob']:7.3f} {m['mean_changed']:8.2f} "
            f"{m['rmse_mean']:10.4f} {m['rmse_second']:11.4f} {m['seconds']:8.1f}"
        )
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "rbm.png")
    fig, ax = plt.subplots(figsize=(5, 5))
    for name in SAMPLERS:
        ax.scatter(true_mean, means[name], s=12, label=name)
    ax.plot([0, 1], [0, 1], color="gray", lw=1)
    ax.set_xlabel("E[v_i], block Gibbs")
    ax.set_ylabel("E[v_i], sampler")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"figure: {path}")
    return {"figure": path, "metrics": metrics}


if __name__ == "__main__":
    main()
