"""
Example: sampling an RBM trained on digits with ACS, ALBP, LBP-1 and DiscreteGibbs
==================================================================================

A binary restricted Boltzmann machine with ``V = 64`` visible units (the 8 x 8 images of
scikit-learn's ``load_digits``, which ship with the package, binarised at half intensity)
and ``H`` hidden units, the hidden units summed out:

.. math::

    \\log \\pi(v) = b^\\top v + \\sum_{h=1}^{H} \\operatorname{softplus}(W_h^\\top v + c_h) + C,
    \\qquad v \\in \\{0, 1\\}^V.

The weights are trained here, in a few seconds, by persistent contrastive divergence
(PCD-1: one block-Gibbs sweep of persistent fantasy chains per minibatch). The ground truth
is block Gibbs (``h | v`` then ``v | h``, both exact) on many independent chains, half of
them started from uniform noise and half from the training images; the script prints the
MMD between the two halves as a check that the chains forgot where they started.

As in the RBM experiment of Pynadath et al. (2024), every sampler starts all of its chains
in the most likely mode: the best state that greedy single-flip ascent reaches from every
ground-truth draw and every training image. From there:

- :class:`~numpyro_discrete.ACS`, its cyclical schedule tuned in the first
  ``--acs-tune-fraction`` of the warmup steps (cycles of 20 steps need at least 90 of
  them: the defaults give 0.3 x 300);
- :class:`~numpyro_discrete.ALBP`, its path length adapted during the warmup steps;
- :class:`~numpyro_discrete.LBP` with ``path_length=1`` (Gibbs-with-Gradients);
- numpyro's :class:`~numpyro.infer.DiscreteGibbs` on a NumPyro model of the same RBM,
  ``v ~ Bernoulli(logits=b)`` plus a ``factor`` for the summed-out hidden units. One of its
  steps is a whole sweep: ``V`` single-site Gibbs updates in a random order.

ACS, ALBP and LBP-1 run on the energy ``-log pi(v)`` through ``potential_fn``. Each sampler
runs ``--num-chains`` chains (vectorised) for ``--num-steps`` steps, warmup included, in
compiled chunks of ``--chunk`` steps; after every chunk the script computes the MMD between
the chains' current states and the ground truth with the kernel
``k(x, y) = exp(-hamming(x, y) / V)``. Each chunk is timed up to ``block_until_ready``
(compilation done beforehand and timed apart), so the figure shows MMD against steps and
against seconds. The dashed line is the MMD of ``--num-chains`` held-out ground-truth draws:
the floor that exact samples reach with that many chains (the mean over a few held-out sets).
The table gives, per sampler, the compile time, the time per step, the mean number of
coordinates changed per step and chain, the MMD early on, the first step (and second) at
which the MMD is within 1.25 times the floor, and the mean MMD over the last quarter.

Run it with the defaults (about two minutes on two shared CPU cores)::

    python examples/rbm.py                 # writes outputs/rbm.png
    python examples/rbm.py --quick         # tiny sizes, a smoke run
    python examples/rbm.py --hidden 32 --num-steps 4000 --out /tmp/rbm

**References:**

1. *Gradient-based Discrete Sampling with Automatic Cyclical Scheduling*, Patrick
   Pynadath, Riddhiman Bhattacharya, Arun Hariharan, Ruqi Zhang (2024)
2. *Oops I Took A Gradient: Scalable Sampling for Discrete Distributions*, Will Grathwohl,
   Kevin Swersky, Milad Hashemi, David Duvenaud, Chris Maddison (2021)
3. *Training Restricted Boltzmann Machines using Approximations to the Likelihood
   Gradient*, Tijmen Tieleman (2008)
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

import numpyro
import numpyro.distributions as dist
from numpyro.infer import DiscreteGibbs

from numpyro_discrete import ACS, ALBP, LBP

matplotlib.use("Agg")

SAMPLERS = ("ACS", "ALBP", "LBP-1", "DiscreteGibbs")


def binarised_digits():
    """The 1797 images of ``load_digits`` as a ``(1797, 64)`` float array of 0s and 1s."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "examples/rbm.py needs scikit-learn for its digits data: "
            "pip install 'numpyro-discrete[examples]'"
        ) from err
    return (load_digits().data >= 8.0).astype(np.float32)


def rbm_log_density(v, weights, visible_bias, hidden_bias):
    v = jnp.asarray(v, jnp.result_type(float))
    return v @ visible_bias + jnp.sum(jax.nn.softplus(v @ weights.T + hidden_bias), axis=-1)


def rbm_model(weights, visible_bias, hidden_bias):
    v = numpyro.sample("v", dist.Bernoulli(logits=visible_bias))
    v = jnp.asarray(v, jnp.result_type(float))
    numpyro.factor("hidden", jnp.sum(jax.nn.softplus(weights @ v + hidden_bias)))


def gibbs_sweep(rbm, v, rng_key):
    """One block-Gibbs sweep, ``h | v`` then ``v | h``, of a batch of visible states."""
    weights, visible_bias, hidden_bias = rbm
    key_h, key_v = random.split(rng_key)
    h = random.bernoulli(key_h, jax.nn.sigmoid(v @ weights.T + hidden_bias)).astype(v.dtype)
    return random.bernoulli(key_v, jax.nn.sigmoid(h @ weights + visible_bias)).astype(v.dtype)


def train_rbm(rng_key, data, num_hidden, num_epochs, batch_size, learning_rate):
    """PCD-1 with ``batch_size`` persistent chains, plain SGD and a small weight decay."""
    num_batches, num_visible = len(data) // batch_size, data.shape[1]
    key_w, key_fantasy, key_epochs = random.split(rng_key, 3)
    mean = jnp.clip(jnp.mean(data, 0), 0.01, 0.99)
    rbm = (
        0.01 * random.normal(key_w, (num_hidden, num_visible)),
        jnp.log(mean) - jnp.log1p(-mean),
        jnp.zeros(num_hidden),
    )
    fantasy = random.bernoulli(key_fantasy, 0.5, (batch_size, num_visible)).astype(data.dtype)

    def update(carry, inputs):
        (weights, visible_bias, hidden_bias), fantasy = carry
        batch, key = inputs
        fantasy = gibbs_sweep((weights, visible_bias, hidden_bias), fantasy, key)
        h_data = jax.nn.sigmoid(batch @ weights.T + hidden_bias)
        h_model = jax.nn.sigmoid(fantasy @ weights.T + hidden_bias)
        grad_w = (h_data.T @ batch - h_model.T @ fantasy) / batch_size - 1e-4 * weights
        rbm = (
            weights + learning_rate * grad_w,
            visible_bias + learning_rate * (batch.mean(0) - fantasy.mean(0)),
            hidden_bias + learning_rate * (h_data.mean(0) - h_model.mean(0)),
        )
        return (rbm, fantasy), None

    def epoch(carry, key):
        key_perm, key_steps = random.split(key)
        order = random.permutation(key_perm, len(data))[: num_batches * batch_size]
        batches = data[order].reshape(num_batches, batch_size, num_visible)
        carry, _ = lax.scan(update, carry, (batches, random.split(key_steps, num_batches)))
        return carry, None

    (rbm, _), _ = jax.jit(lambda c, k: lax.scan(epoch, c, k))(
        (rbm, fantasy), random.split(key_epochs, num_epochs)
    )
    return rbm


def block_gibbs(rng_key, rbm, v0, num_sweeps):
    """The final states of block-Gibbs chains started at the rows of `v0`."""

    def body(v, key):
        return gibbs_sweep(rbm, v, key), None

    v, _ = jax.jit(lambda v, keys: lax.scan(body, v, keys))(v0, random.split(rng_key, num_sweeps))
    return np.asarray(v)


def flip_gains(rbm, v):
    """``log pi(v with bit j flipped) - log pi(v)`` for every row of `v` and every ``j``."""
    weights, visible_bias, hidden_bias = rbm
    pre = v @ weights.T + hidden_bias  # (n, H)
    sign = 1.0 - 2.0 * v  # (n, V): +1 where a flip turns a 0 into a 1
    flipped = pre[:, None, :] + sign[:, :, None] * weights.T  # (n, V, H)
    hidden = jnp.sum(jax.nn.softplus(flipped) - jax.nn.softplus(pre)[:, None, :], axis=-1)
    return sign * visible_bias + hidden


def greedy_ascent(rbm, v, max_iters):
    """Flip the best single bit of every row while that raises ``log pi``: local maxima."""

    def cond(carry):
        _, improved, it = carry
        return improved & (it < max_iters)

    def body(carry):
        v, _, it = carry
        gains = flip_gains(rbm, v)
        best = jnp.argmax(gains, axis=1)
        up = jnp.take_along_axis(gains, best[:, None], axis=1)[:, 0] > 0
        flip = jax.nn.one_hot(best, v.shape[1], dtype=v.dtype) * up[:, None]
        return jnp.abs(v - flip), jnp.any(up), it + 1

    v, _, _ = jax.jit(lambda v: lax.while_loop(cond, body, (v, jnp.array(True), 0)))(v)
    return v


def mean_kernel(x, y):
    """The mean of ``k(x_i, y_j) = exp(-hamming(x_i, y_j) / V)`` over all pairs of rows."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    hamming = x @ (1.0 - y).T + (1.0 - x) @ y.T
    return float(np.mean(np.exp(-hamming / x.shape[1])))


def mmd(x, y, kernel_yy=None):
    """The (biased, V-statistic) MMD between two sets of binary rows; `kernel_yy`, the
    reference's own term ``mean_kernel(y, y)``, can be computed once and passed in."""
    kernel_yy = mean_kernel(y, y) if kernel_yy is None else kernel_yy
    squared = mean_kernel(x, x) + kernel_yy - 2.0 * mean_kernel(x, y)
    return float(np.sqrt(max(squared, 0.0)))


def make_kernel(name, args, potential):
    if name == "ACS":
        return ACS(
            potential_fn=potential,
            cycle_length=args.cycle_length,
            tune_fraction=args.acs_tune_fraction,
        )
    if name == "ALBP":
        return ALBP(potential_fn=potential)
    if name == "LBP-1":
        return LBP(potential_fn=potential, path_length=1)
    return DiscreteGibbs(rbm_model)


def init_chains(name, kernel, rng_key, start, args, model_args):
    """Batched initial states (every chain at `start`) and the batched one-step function."""
    keys = random.split(rng_key, args.num_chains)
    if name == "DiscreteGibbs":
        # DiscreteGibbs initialises one chain: set it up once, then batch its state
        state = kernel.init(keys[0], args.num_warmup, {"v": start}, model_args, None)
        v0 = jnp.broadcast_to(state.z["v"], (args.num_chains, start.shape[0]))
        energy = jax.vmap(kernel.get_potential_fn(model_args, None))({"v": v0})
        state = state._replace(z={"v": v0}, potential_energy=energy, rng_key=keys)
        return state, jax.vmap(kernel.sample, in_axes=(0, None, None))
    v0 = jnp.broadcast_to(start.astype(jnp.int32), (args.num_chains, start.shape[0]))
    state = kernel.init(keys, args.num_warmup, {"v": v0}, model_args, None)
    return state, kernel.sample


def run_sampler(name, args, rbm, start, reference, rng_key):
    """Run one sampler in compiled, timed chunks; the MMD to `reference` after each."""

    def potential(z):
        return -rbm_log_density(z["v"], *rbm)

    kernel = make_kernel(name, args, potential)
    model_args = rbm if name == "DiscreteGibbs" else ()
    t0 = time.perf_counter()
    state, step = init_chains(name, kernel, rng_key, start, args, model_args)

    def advance(state):
        def body(carry, _):
            state, changed = carry
            new = step(state, model_args, None)
            changed = changed + jnp.sum(new.z["v"] != state.z["v"])
            return (new, changed), None

        (state, changed), _ = lax.scan(body, (state, jnp.array(0)), None, length=args.chunk)
        return state, changed

    compiled = jax.jit(advance).lower(state).compile()
    compile_s = time.perf_counter() - t0

    num_chunks = args.num_steps // args.chunk
    kernel_yy = mean_kernel(reference, reference)
    steps, seconds, mmds = [0], [0.0], [mmd(state.z["v"], reference, kernel_yy)]
    changed_total = 0
    for k in range(num_chunks):
        t0 = time.perf_counter()
        state, changed = jax.block_until_ready(compiled(state))
        seconds.append(seconds[-1] + time.perf_counter() - t0)
        steps.append((k + 1) * args.chunk)
        mmds.append(mmd(state.z["v"], reference, kernel_yy))
        changed_total += int(changed)
    num_steps = num_chunks * args.chunk
    return {
        "steps": np.array(steps),
        "seconds": np.array(seconds),
        "mmd": np.array(mmds),
        "compile_s": compile_s,
        "ms_per_step": 1e3 * seconds[-1] / num_steps,
        "changed_per_step": changed_total / (num_steps * args.num_chains),
    }


def plot(results, floor, args, path):
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for name in SAMPLERS:
        r = results[name]
        axes[0].plot(r["steps"], r["mmd"], label=name)
        # log time axis: the start (0 s) is left out; it is the first point of the left panel
        axes[1].plot(r["seconds"][1:], r["mmd"][1:], label=name)
    axes[1].set_xscale("log")
    for ax in axes:
        ax.axhline(floor, color="gray", ls="--", lw=1, label="exact draws")
        ax.set_yscale("log")
    axes[0].axvline(args.num_warmup, color="gray", ls=":", lw=1)
    axes[0].set_xlabel("steps (warmup to the dotted line)")
    axes[1].set_xlabel("seconds of sampling, log scale (compilation excluded)")
    axes[0].set_ylabel("MMD to block Gibbs")
    axes[1].legend()
    fig.suptitle(f"RBM on binarised digits: 64 visible, {args.hidden} hidden units")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


QUICK = {
    "hidden": 8,
    "train_epochs": 2,
    "num_chains": 8,
    "num_steps": 80,
    "num_warmup": 40,
    "chunk": 20,
    "cycle_length": 2,
    "gibbs_chains": 64,
    "gibbs_sweeps": 20,
}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="ACS, ALBP, LBP-1 and DiscreteGibbs on an RBM trained on digits"
    )
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--train-epochs", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--num-chains", type=int, default=200)
    parser.add_argument("--num-steps", type=int, default=1000, help="warmup included")
    parser.add_argument("--num-warmup", type=int, default=300)
    parser.add_argument("--chunk", type=int, default=10, help="steps between MMD points")
    parser.add_argument("--cycle-length", type=int, default=20, help="ACS cycle length")
    parser.add_argument(
        "--acs-tune-fraction", type=float, default=0.3, help="share of warmup ACS tunes in"
    )
    parser.add_argument("--gibbs-chains", type=int, default=4000)
    parser.add_argument("--gibbs-sweeps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--out", default="outputs", help="output directory for the figure")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)

    key_train, key_gibbs, key_noise, key_run = random.split(random.PRNGKey(args.seed), 4)
    data = binarised_digits()
    t0 = time.perf_counter()
    rbm = train_rbm(
        key_train, jnp.asarray(data), args.hidden, args.train_epochs, args.batch_size,
        args.learning_rate,
    )  # fmt: skip
    rbm = jax.block_until_ready(rbm)
    print(f"trained the RBM ({args.train_epochs} PCD-1 epochs) in {time.perf_counter() - t0:.1f} s")

    # ground truth: half the chains from noise, half from training images
    t0 = time.perf_counter()
    half = args.gibbs_chains // 2
    rows = np.random.default_rng(args.seed).integers(0, len(data), args.gibbs_chains - half)
    noise = random.bernoulli(key_noise, 0.5, (half, data.shape[1])).astype(jnp.float32)
    v0 = jnp.concatenate([noise, jnp.asarray(data[rows])])
    truth = block_gibbs(key_gibbs, rbm, v0, args.gibbs_sweeps)
    split = np.random.default_rng(args.seed + 1).permutation(len(truth))
    print(
        f"block Gibbs: {args.gibbs_chains} chains x {args.gibbs_sweeps} sweeps in "
        f"{time.perf_counter() - t0:.1f} s; MMD noise-started vs image-started "
        f"{mmd(truth[:half], truth[half:]):.4f}, random halves "
        f"{mmd(truth[split[:half]], truth[split[half:]]):.4f}"
    )
    # the floor: held-out exact draws, `num_chains` at a time, against the reference
    num_held = max(args.num_chains, args.gibbs_chains // 4) // args.num_chains * args.num_chains
    held_out, reference = truth[split[:num_held]], truth[split[num_held:]]
    kernel_yy = mean_kernel(reference, reference)
    floor = float(
        np.mean(
            [
                mmd(chunk, reference, kernel_yy)
                for chunk in np.split(held_out, num_held // args.num_chains)
            ]
        )
    )

    candidates = np.asarray(greedy_ascent(rbm, jnp.concatenate([v0, truth]), 4 * data.shape[1]))
    log_p = np.asarray(rbm_log_density(candidates, *rbm))
    start = jnp.asarray(candidates[np.argmax(log_p)])
    print(
        f"mode: log pi = {log_p.max():.2f} (unnormalised), reached from "
        f"{np.mean(log_p >= log_p.max() - 1e-3):.1%} of {len(log_p)} greedy ascents; "
        f"{int(start.sum())} of {data.shape[1]} pixels on"
    )
    print(
        f"floor: MMD of {args.num_chains} held-out exact draws {floor:.4f} "
        f"(mean of {num_held // args.num_chains} sets; reference {len(reference)} draws)"
    )

    results = {}
    for s, name in enumerate(SAMPLERS):
        results[name] = run_sampler(name, args, rbm, start, reference, random.fold_in(key_run, s))
    early, late = len(results["ACS"]["steps"]) // 20, len(results["ACS"]["steps"]) // 5
    step_early, step_late = results["ACS"]["steps"][early], results["ACS"]["steps"][late]
    print(
        f"\n{'sampler':13s} {'compile s':>9s} {'ms/step':>8s} {'flips/step':>10s} "
        f"{f'MMD@{step_early}':>9s} {f'MMD@{step_late}':>9s} {'steps to':>8s} "
        f"{'s to':>6s} {'MMD last':>8s}"
    )
    print(f"{'':13s} {'':>9s} {'':>8s} {'':>10s} {'':>9s} {'':>9s} {'1.25 fl':>8s} "
          f"{'1.25 fl':>6s} {'quarter':>8s}")  # fmt: skip
    for name, r in results.items():
        below = np.flatnonzero(r["mmd"] <= 1.25 * floor)
        r["steps_to_floor"] = int(r["steps"][below[0]]) if len(below) else None
        r["seconds_to_floor"] = float(r["seconds"][below[0]]) if len(below) else None
        r["mmd_last_quarter"] = float(np.mean(r["mmd"][-max(1, len(r["mmd"]) // 4) :]))
        reached = (
            f"{r['steps_to_floor']:8d} {r['seconds_to_floor']:6.2f}"
            if len(below)
            else f"{'-':>8s} {'-':>6s}"
        )
        print(
            f"{name:13s} {r['compile_s']:9.1f} {r['ms_per_step']:8.3f} "
            f"{r['changed_per_step']:10.2f} {r['mmd'][early]:9.4f} {r['mmd'][late]:9.4f} "
            f"{reached} {r['mmd_last_quarter']:8.4f}"
        )
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "rbm.png")
    plot(results, floor, args, path)
    print(f"figure: {path}")
    metrics = {
        name: {
            "compile_s": r["compile_s"],
            "ms_per_step": r["ms_per_step"],
            "changed_per_step": r["changed_per_step"],
            "steps_to_floor": r["steps_to_floor"],
            "seconds_to_floor": r["seconds_to_floor"],
            "mmd_last_quarter": r["mmd_last_quarter"],
            "mmd": r["mmd"].tolist(),
            "seconds": r["seconds"].tolist(),
            "steps": r["steps"].tolist(),
        }
        for name, r in results.items()
    }
    return {"figure": path, "floor": floor, "metrics": metrics}


if __name__ == "__main__":
    main()
