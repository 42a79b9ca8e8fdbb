"""Compile time and step time of the kernels at two revisions of the package, side by side in
one process: the working tree against an earlier commit (by default the previous landing),
to show that a change did not slow the kernels down.

The earlier revision's ``numpyro_discrete`` is extracted with ``git archive`` into a
temporary folder and imported first; its kernel classes are kept, the package is dropped
from ``sys.modules``, and the working tree's package is imported. Both then run on the same
model in the same process, alternately, so that machine noise hits both alike.

For each revision and kernel, from the kernel's own loop: the seconds to compile a loop of
kernel steps (``jit(...).lower().compile()``, every compilation a real one), and the step
time after warmup (the fastest of several timed loops of ``--steps`` steps,
``block_until_ready``). Then as a user sees it, through numpyro's ``MCMC``: the wall time of
a first ``run`` of ``--num-warmup`` + ``--num-samples`` (end to end, compilation included),
the fixed cost of a later ``run`` from ``post_warmup_state`` (its wall time less its
sampling time, the step time times the number of draws: numpyro traces and compiles its loop
again), and the minimum ESS over coordinates of that later run's draws per second of
sampling. Last, the seconds each chain's ``init`` takes in a run of two sequential chains
(``--chain-steps`` warmup steps and draws): numpyro calls ``init`` once per chain, with the
same argument objects.

    python -m tools.compare_revisions --base REV --out-dir /tmp/revisions
"""

import argparse
from collections.abc import Callable
import importlib
import json
from pathlib import Path
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

import jax
from jax import lax, random

from numpyro.infer import MCMC

from benchmarks import measurement
from benchmarks.targets import ising_target

DEFAULT_BASE = "d99ed6d"  # the previous landing (stop 36)
KERNELS = ("ALBP", "ACS")
# also measurable: every kernel whose class takes the model alone
OTHER_KERNELS = ("LBP", "DMALA", "ChromaticGibbs")


def _drop_package() -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == "numpyro_discrete"]:
        del sys.modules[name]


def load_revisions(base: str) -> dict[str, Any]:
    """``{label: package module}`` for the `base` commit and the working tree."""
    root = Path(__file__).resolve().parents[1]
    folder = Path(tempfile.mkdtemp(prefix="numpyro_discrete_base_"))
    archive = subprocess.run(
        ["git", "archive", base, "numpyro_discrete"], cwd=root, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    _drop_package()
    sys.path.insert(0, str(folder))
    base_package = importlib.import_module("numpyro_discrete")
    assert Path(base_package.__file__).is_relative_to(folder)
    sys.path.remove(str(folder))
    _drop_package()
    sys.path.insert(0, str(root))
    current = importlib.import_module("numpyro_discrete")
    assert Path(current.__file__).is_relative_to(root)
    return {f"base {base}": base_package, "working tree": current}


def kernel_for(package: Any, name: str, model: Callable) -> Any:
    if name == "ACS":
        return package.ACS(model, cycle_length=8)
    return getattr(package, name)(model)


def measure(kernel: Any, num_warmup: int, num_steps: int, repeats: int) -> dict[str, float]:
    """Compile seconds of a loop of steps, and post-warmup milliseconds per step."""
    state = kernel.init(random.key(0), num_warmup, None, (), {})

    def run(state: Any, num: jax.Array) -> Any:
        return lax.fori_loop(0, num, lambda _, s: kernel.sample(s, (), {}), state)

    start = time.perf_counter()
    compiled = jax.jit(run).lower(state, num_warmup).compile()
    compile_s = time.perf_counter() - start
    state = jax.block_until_ready(compiled(state, num_warmup))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        state = jax.block_until_ready(compiled(state, num_steps))
        best = min(best, time.perf_counter() - start)
    # the base revision may name the path length `num_flips`
    names = ("path_length", "num_flips", "step_size")
    path_length = next((getattr(state, n) for n in names if n in state._fields), None)
    return {
        "compile_s": compile_s,
        "ms_per_step": 1e3 * best / num_steps,
        "path_length_or_step_size": None if path_length is None else float(path_length),
    }


def measure_mcmc(
    kernel: Any, num_warmup: int, num_samples: int, ms_per_step: float
) -> dict[str, float]:
    """End-to-end wall time of a first ``MCMC.run``, the fixed cost of a later one, and the
    minimum ESS per sampling second of the later run's draws."""
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples, progress_bar=False)
    start = time.perf_counter()
    mcmc.run(random.key(1))
    jax.block_until_ready(mcmc.get_samples())
    first_run_s = time.perf_counter() - start
    mcmc.post_warmup_state = mcmc.last_state
    start = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key)
    draws = jax.block_until_ready(mcmc.get_samples()["x"])
    later_run_s = time.perf_counter() - start
    sampling_s = 1e-3 * ms_per_step * num_samples
    draws = np.asarray(draws).reshape(1, num_samples, -1)
    min_ess = float(np.nanmin(measurement.coordinate_ess(draws)))
    return {
        "first_run_s": first_run_s,
        "later_run_fixed_s": later_run_s - sampling_s,
        "min_ess_per_s": min_ess / sampling_s,
    }


def measure_chains(kernel: Any, num_steps: int) -> dict[str, float]:
    """The wall seconds of the first and of the second chain's ``init`` in a ``MCMC.run`` of
    two sequential chains of `num_steps` warmup steps and draws."""
    seconds = []
    init = kernel.init

    def timed_init(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        state = jax.block_until_ready(init(*args, **kwargs))
        seconds.append(time.perf_counter() - start)
        return state

    kernel.init = timed_init
    mcmc = MCMC(kernel, num_warmup=num_steps, num_samples=num_steps, num_chains=2,
                chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(random.key(2))
    return {"first_chain_init_s": seconds[0], "second_chain_init_s": seconds[1]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help="git revision to compare with")
    parser.add_argument("--p", type=int, default=50, help="Ising lattice side")
    parser.add_argument("--num-warmup", type=int, default=1000)
    parser.add_argument("--num-samples", type=int, default=5000, help="draws of each MCMC.run")
    parser.add_argument("--steps", type=int, default=2000, help="steps per timed loop")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument(
        "--chain-steps", type=int, default=100, help="warmup steps and draws of the 2-chain run"
    )
    parser.add_argument(
        "--kernels", nargs="+", default=list(KERNELS), choices=KERNELS + OTHER_KERNELS
    )
    parser.add_argument("--out-dir", type=Path, default=None)
    args = parser.parse_args(argv)

    packages = load_revisions(args.base)
    model = ising_target(args.p, "C2").model
    rows: dict[str, dict[str, list[dict[str, float]]]] = {}
    # JAX's persistent compilation cache is off unless configured; the in-memory caches
    # are cleared after every measurement, so every compilation is a real one
    for round_index in range(args.rounds):
        # alternate which revision goes first, so that drift hits both alike
        order = list(packages.items())[:: 1 if round_index % 2 == 0 else -1]
        for name in args.kernels:
            for label, package in order:
                kernel = kernel_for(package, name, model)
                result = measure(kernel, args.num_warmup, args.steps, args.repeats)
                measurement.release_compiled_programs()
                kernel = kernel_for(package, name, model)
                result |= measure_mcmc(
                    kernel, args.num_warmup, args.num_samples, result["ms_per_step"]
                )
                measurement.release_compiled_programs()
                result |= measure_chains(kernel_for(package, name, model), args.chain_steps)
                rows.setdefault(name, {}).setdefault(label, []).append(result)
                measurement.release_compiled_programs()

    summary = {
        name: {
            label: {
                "compile_s": min(r["compile_s"] for r in results),
                "ms_per_step": min(r["ms_per_step"] for r in results),
                "path_length_or_step_size": results[-1]["path_length_or_step_size"],
                # as a user sees them: medians over the rounds
                **{
                    field: float(np.median([r[field] for r in results]))
                    for field in (
                        "first_run_s",
                        "later_run_fixed_s",
                        "min_ess_per_s",
                        "first_chain_init_s",
                        "second_chain_init_s",
                    )
                },
            }
            for label, results in by_label.items()
        }
        for name, by_label in rows.items()
    }
    print(
        f"Ising {args.p}x{args.p} C2, {args.num_warmup} warmup steps; compile and ms/step: "
        f"best of {args.rounds} rounds x {args.repeats} loops of {args.steps} steps; "
        f"MCMC.run of {args.num_warmup} + {args.num_samples}, and init of two sequential "
        f"chains: medians over the rounds"
    )
    header = (
        f"{'kernel':8} {'revision':22} {'compile s':>10} {'ms/step':>9} {'R or alpha':>11} "
        f"{'first run s':>12} {'later run fixed s':>18} {'min-ESS/s':>10} "
        f"{'init s, chain 1 / 2':>20}"
    )
    print(header)
    for name, by_label in summary.items():
        for label, values in by_label.items():
            scale = measurement.fmt(values["path_length_or_step_size"])
            print(
                f"{name:8} {label:22} {values['compile_s']:10.2f} "
                f"{values['ms_per_step']:9.4f} {scale:>11} {values['first_run_s']:12.2f} "
                f"{values['later_run_fixed_s']:18.2f} {values['min_ess_per_s']:10.1f} "
                f"{values['first_chain_init_s']:13.2f} / {values['second_chain_init_s']:4.2f}"
            )
    result = {
        "settings": vars(args) | {"out_dir": str(args.out_dir)},
        "summary": summary,
        "rounds": rows,
        "environment": measurement.environment(),
    }
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        path = args.out_dir / "compare_revisions.json"
        path.write_text(json.dumps(measurement.json_ready(result), indent=2))
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
