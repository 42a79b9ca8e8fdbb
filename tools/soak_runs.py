"""Many ``MCMC`` runs in one process, each on a new model closure, and the process's resident
memory every few runs: what a notebook session or a test suite does. ``--kernel ours`` runs
``LBPGibbs(NUTS(model))``, ``--kernel numpyro`` numpyro's ``DiscreteHMCGibbs(NUTS(model))``
on the same models; run one after the other (each in its own process) to compare:

    python -m tools.soak_runs --kernel ours --runs 200 --out /tmp/soak_ours.json
    python -m tools.soak_runs --kernel numpyro --runs 200 --out /tmp/soak_numpyro.json

``--clear-caches`` calls ``jax.clear_caches()`` after each run, the workaround for a process
whose memory grows with the programs JAX keeps compiled.
"""

import argparse
import gc
import json
import time

import numpy as np

import jax
import jax.numpy as jnp

import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, DiscreteHMCGibbs

from numpyro_discrete import LBPGibbs


def rss_mib() -> float:
    """Resident set size of this process, from /proc/self/status."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def new_mixture(offset: float):
    """A two-component mixture closing over `offset`: a new function, as a user's loop makes."""

    def model(y):
        locs = numpyro.sample("locs", dist.Normal(offset, 5.0).expand([2]).to_event(1))
        with numpyro.plate("data", y.shape[0]):
            z = numpyro.sample("z", dist.Bernoulli(0.5))
            numpyro.sample("y", dist.Normal(locs[z], 1.0), obs=y)

    return model


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=("ours", "numpyro"), default="ours")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--every", type=int, default=10, help="runs between RSS readings")
    parser.add_argument("--clear-caches", action="store_true")
    parser.add_argument("--out", default=None, help="JSON of the readings")
    args = parser.parse_args(argv)

    y = jnp.concatenate([jnp.full(20, -2.0), jnp.full(20, 2.0)])
    readings, start = [], time.perf_counter()
    for run in range(args.runs):
        model = new_mixture(0.01 * run)
        kernel = LBPGibbs(NUTS(model)) if args.kernel == "ours" else DiscreteHMCGibbs(NUTS(model))
        mcmc = MCMC(kernel, num_warmup=50, num_samples=50, progress_bar=False)
        mcmc.run(jax.random.key(run), y)
        jax.block_until_ready(mcmc.get_samples())
        del mcmc, kernel, model
        if args.clear_caches:
            jax.clear_caches()
        if run % args.every == 0 or run == args.runs - 1:
            gc.collect()
            readings.append({"run": run, "rss_mib": rss_mib(), "s": time.perf_counter() - start})
            print(f"run {run:4d}  RSS {readings[-1]['rss_mib']:8.1f} MiB  "
                  f"{readings[-1]['s']:7.1f} s", flush=True)  # fmt: skip
    after_20 = [r["rss_mib"] for r in readings if r["run"] >= 20]
    growth = (after_20[-1] - after_20[0]) / max(readings[-1]["run"] - 20, 1) if after_20 else 0.0
    print(f"{args.kernel}: RSS growth after run 20: {growth:.2f} MiB per run")
    if args.out:
        with open(args.out, "w") as f:
            result = {
                "kernel": args.kernel,
                "clear_caches": args.clear_caches,
                "readings": readings,
                "growth_mib_per_run": growth,
                "jax": jax.__version__,
                "numpyro": numpyro.__version__,
            }
            json.dump(result, f, indent=1)
    assert np.isfinite(growth)


if __name__ == "__main__":
    main()
