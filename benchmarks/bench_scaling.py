"""
Benchmark: scaling with the number of chains and with the number of coordinates
=============================================================================

How the cost of a step and the effective samples per second grow with the number of
vectorized chains (``MCMC(..., chain_method="vectorized")``) and with the number ``N`` of
binary coordinates, for every sampler of the package that suits the models, side by side in
one process:

- **ALBP** and **ChromaticGibbs** on the Ising model of :mod:`benchmarks.targets` (C2, open
  ``p x p`` lattice, written elementwise so that the kernels find its 2 colours; ALBP's
  ``"auto"`` weights are gradient weights there);
- **LBPGibbs**, as the README's demo runs it, on the demo model itself
  (``examples/segmentation.py``: a ``p x p`` binary image with an Ising prior, two grey
  levels and a noise scale): ``LBPGibbs(NUTS(model), discrete_kernel=ChromaticGibbs(model))``
  (**LBPGibbs-chromatic**), and with its default discrete kernel, ALBP (**LBPGibbs-albp**).

Parts (``--parts``):

- **chains** - ``N`` fixed (``--chains-p``: the lattice of the Ising model; the demo's
  ``p = 64`` for LBPGibbs), chains ``--chains`` (1 to 256).
- **size** - one chain, ``p`` in ``--size-p`` (``N = p^2`` from about ``10^3`` to ``10^6``),
  the same ``p`` for both models.

Metrics of every point (``C`` chains, ``num_warmup`` + ``num_samples`` steps each):

- **ms/step** - steady cost of one step of all ``C`` chains: the kernel's ``sample`` (one
  batched call) in a jitted ``fori_loop`` from the state after warmup, the loop grown until
  it takes ``--min-timing-seconds``, the fastest of ``--timing-repeats`` loops
  (``jax.block_until_ready``; the loop's compilation timed apart). **per chain** is it over
  ``C``; **x 1 chain** the ratio to the 1-chain point of the same sampler.
- **ESS** - ``numpyro.diagnostics.effective_sample_size`` over the ``C`` chains of the
  kept draws: of the potential energy ``-log pi(x)`` for ALBP and ChromaticGibbs (a global
  summary: at ``N = 10^6`` the draws of ``x`` itself would not fit in memory, so ``x`` is
  not collected, ``extra_fields=("potential_energy", "~z.x")``); for LBPGibbs the smallest
  over ``mu_0``, ``delta``, ``sigma`` and the discrete block's potential energy (``-log``
  of the joint given the continuous sites).
- **ESS/s** - ESS over the sampling time at the steady rate (``num_samples`` x ms/step):
  what a user gets per second once the program is compiled.
- **first run s** - end to end as a user sees it: building the kernel and ``MCMC`` and one
  ``mcmc.run`` (init, structure detection, tracing, compilation, warmup, sampling), up to
  ``jax.block_until_ready`` on the draws. **compile s** - first run s minus its steps at the
  steady rate (warmup steps that are cheaper than steady ones make it slightly low).
- **later run s** - the fixed cost of a later ``run`` of ``num_samples`` from
  ``mcmc.post_warmup_state = mcmc.last_state``: its wall time minus its steps at the steady
  rate (numpyro traces its loop again; JAX's persistent compilation cache is off).
- **RSS MB** - the process's peak resident memory after the point (``ru_maxrss``: a
  peak over the process so far; the points run in increasing ``N`` within a part, so at the
  largest ``N`` it is that point's peak, an upper bound).

Every run records whether an accelerator was used (``backend`` in the JSON): the scaling
on a GPU is measured with the same command on a machine that has one.

    python -m benchmarks.bench_scaling                       # about 15 minutes on 2 cores
    python -m benchmarks.bench_scaling --parts chains --chains 1 16
    python -m benchmarks.bench_scaling --quick               # smoke test, tiny sizes
"""

import argparse
from collections.abc import Callable, Sequence
import os
from pathlib import Path
import runpy
import tempfile
import time
from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC, NUTS

from numpyro_discrete import ALBP, ChromaticGibbs, LBPGibbs

from benchmarks.bench_structure import step_timing
from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    environment,
    fmt,
    markdown_table,
    parse_benchmark_args,
    peak_rss_mb,
    release_compiled_programs,
    timed_run,
    write_results,
)
from benchmarks.targets import ising_target

DEMO_SCRIPT = Path(__file__).parents[1] / "examples" / "segmentation.py"
DEFAULT_OUT_DIR = RESULTS_DIR / "scaling"
QUICK_OUT_DIR = Path(tempfile.gettempdir()) / "bench_scaling_quick"

FULL = {
    "chains": [1, 4, 16, 64, 256],
    "chains_p": 50,
    "demo_p": 64,
    "size_p": [32, 100, 316, 1000],
    "num_warmup": 300,
    "num_samples": 1000,
    "min_samples": 100,
    "min_timing_seconds": 1.0,
    "timing_repeats": 3,
}
QUICK = {
    "chains": [1, 2],
    "chains_p": 8,
    "demo_p": 8,
    "size_p": [8, 12],
    "num_warmup": 30,
    "num_samples": 60,
    "min_samples": 30,
    "min_timing_seconds": 0.05,
    "timing_repeats": 1,
}


class Problem(NamedTuple):
    """A model with its arguments, the sampler to build on it and what to collect."""

    model: Callable
    args: tuple
    make_kernel: Callable[[Callable], Any]
    extra_fields: tuple[str, ...]
    summaries: Callable[[MCMC], dict[str, np.ndarray]]


def _energy(mcmc: MCMC) -> dict[str, np.ndarray]:
    return {
        "potential_energy": np.asarray(
            mcmc.get_extra_fields(group_by_chain=True)["potential_energy"]
        )
    }


def _demo_summaries(mcmc: MCMC) -> dict[str, np.ndarray]:
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    values = {name: np.asarray(samples[name]) for name in ("mu_0", "delta", "sigma")}
    values["discrete_potential_energy"] = np.asarray(extra["discrete_state.potential_energy"])
    return values


def ising_problem(p: int, kernel: Callable[[Callable], Any]) -> Problem:
    model = ising_target(p, "C2", elementwise=True).model
    return Problem(model, (), kernel, ("potential_energy", "~z.x"), _energy)


def demo_problem(p: int, discrete_kernel: Callable[[Callable], Any]) -> Problem:
    demo = runpy.run_path(str(DEMO_SCRIPT))
    truth = demo["true_image"](p)
    noise = np.random.default_rng(0).normal(size=truth.shape)
    y = jnp.asarray(truth + noise, jnp.float32)
    return Problem(
        demo["segmentation_model"],
        (y, 0.5),
        lambda model: LBPGibbs(NUTS(model), discrete_kernel=discrete_kernel(model)),
        ("discrete_state.potential_energy", "~z.x"),
        _demo_summaries,
    )


SAMPLERS: dict[str, Callable[[int], Problem]] = {
    "ALBP": lambda p: ising_problem(p, ALBP),
    "ChromaticGibbs": lambda p: ising_problem(p, ChromaticGibbs),
    "LBPGibbs-chromatic": lambda p: demo_problem(p, ChromaticGibbs),
    "LBPGibbs-albp": lambda p: demo_problem(p, ALBP),
}
DEMO_SAMPLERS = ("LBPGibbs-chromatic", "LBPGibbs-albp")


def _ess(values: dict[str, np.ndarray]) -> float:
    """The smallest ESS over the summaries, each of shape (chains, draws)."""
    return min(float(effective_sample_size(v.astype(np.float64))) for v in values.values())


def measure_point(
    sampler: str, p: int, num_chains: int, num_samples: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One sampler at one (p, chains): a first and a later ``MCMC.run``, then the steady
    step time of the kernel's batched ``sample`` from the last state."""
    problem = SAMPLERS[sampler](p)

    start = time.perf_counter()
    kernel = problem.make_kernel(problem.model)
    mcmc = MCMC(kernel, num_warmup=args.num_warmup, num_samples=num_samples,
                num_chains=num_chains, chain_method="vectorized", progress_bar=False)  # fmt: skip
    first_run_s = (
        time.perf_counter()
        - start
        + timed_run(
            mcmc, jax.random.key(args.seed), *problem.args, extra_fields=problem.extra_fields
        )
    )
    summaries = problem.summaries(mcmc)
    mcmc.post_warmup_state = mcmc.last_state
    later_run_s = timed_run(
        mcmc, mcmc.post_warmup_state.rng_key, *problem.args, extra_fields=problem.extra_fields
    )
    later = problem.summaries(mcmc)
    summaries = {k: np.concatenate([v, later[k]], axis=1) for k, v in summaries.items()}
    loop_compile_s, per_step = step_timing(
        lambda s: kernel.sample(s, problem.args, {}),
        mcmc.last_state,
        args.min_timing_seconds,
        args.timing_repeats,
    )
    ess = _ess(summaries)
    row = {
        "sampler": sampler,
        "p": p,
        "num_coords": p * p,
        "num_chains": num_chains,
        "num_samples": 2 * num_samples,
        "ms_per_step": 1e3 * per_step,
        "ms_per_chain_step": 1e3 * per_step / num_chains,
        "ess": ess,
        "ess_per_s": ess / (2 * num_samples * per_step),
        "first_run_s": first_run_s,
        "compile_s": first_run_s - (args.num_warmup + num_samples) * per_step,
        "later_run_fixed_s": later_run_s - num_samples * per_step,
        "loop_compile_s": loop_compile_s,
        "peak_rss_mb": peak_rss_mb(),
    }
    release_compiled_programs()
    return row


def run_part(part: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for sampler in args.samplers:
        if part == "chains":
            p = args.demo_p if sampler in DEMO_SAMPLERS else args.chains_p
            points = [(p, c) for c in args.chains]
        else:
            points = [(p, 1) for p in args.size_p]
        for p, num_chains in points:
            # draws per chain: fewer for many chains (the ESS pools them), at least min_samples
            num_samples = max(args.min_samples, args.num_samples // num_chains)
            row = measure_point(sampler, p, num_chains, num_samples, args)
            row["part"] = part
            rows.append(row)
            print(
                f"{part:6s} {sampler:18s} N={row['num_coords']:>7d} chains={num_chains:>3d} "
                f"{fmt(row['ms_per_step'])} ms/step, ESS/s {fmt(row['ess_per_s'])}, "
                f"first run {fmt(row['first_run_s'])} s, RSS {fmt(row['peak_rss_mb'])} MB",
                flush=True,
            )
    _add_ratios(rows, "num_chains" if part == "chains" else "num_coords")
    return rows


def _add_ratios(rows: list[dict[str, Any]], axis: str) -> None:
    """Step time and ESS/s relative to the smallest point (1 chain, or the smallest N) of
    the same sampler."""
    for row in rows:
        base = min((r for r in rows if r["sampler"] == row["sampler"]), key=lambda r: r[axis])
        row["step_vs_smallest"] = row["ms_per_step"] / base["ms_per_step"]
        row["ess_per_s_vs_smallest"] = row["ess_per_s"] / base["ess_per_s"]


COLUMNS = [
    ("sampler", "sampler", None),
    ("N", "num_coords", None),
    ("chains", "num_chains", None),
    ("ms/step", "ms_per_step", 3),
    ("per chain", "ms_per_chain_step", 3),
    ("x smallest", "step_vs_smallest", 3),
    ("ESS", "ess", 4),
    ("ESS/s", "ess_per_s", 4),
    ("ESS/s x smallest", "ess_per_s_vs_smallest", 3),
    ("first run s", "first_run_s", 3),
    ("compile s", "compile_s", 3),
    ("later run s", "later_run_fixed_s", 3),
    ("RSS MB", "peak_rss_mb", 4),
]


def _table(rows: list[dict[str, Any]]) -> list[str]:
    return markdown_table(
        [
            (title, lambda row, k=key, d=digits: str(row[k]) if d is None else fmt(row[k], d))
            for title, key, digits in COLUMNS
        ],
        rows,
    )


def _checks(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, where the run has the points they need."""
    lines = []

    def check(what: str, target: str, value: float, met: bool) -> None:
        lines.append(f"| {what} | {target} | {fmt(value)} | {'yes' if met else 'no'} |")

    demo = {
        r["num_chains"]: r
        for r in rows
        if r["part"] == "chains" and r["sampler"] == "LBPGibbs-chromatic"
    }
    if 1 in demo and 16 in demo:
        ratio = demo[16]["ms_per_step"] / demo[1]["ms_per_step"]
        what = f"16 vectorized LBPGibbs chains / 1 chain, per step (N = {demo[1]['num_coords']})"
        check(what, "<= 4", ratio, ratio <= 4)
    albp = [r for r in rows if r["part"] == "size" and r["sampler"] == "ALBP"]
    if albp:
        row = max(albp, key=lambda r: r["num_coords"])
        gib = row["peak_rss_mb"] / 1024
        what = f"ALBP, N = {row['num_coords']}: peak RSS GiB (step {fmt(row['ms_per_step'])} ms)"
        check(what, "<= 24", gib, gib <= 24)
    if not lines:
        return []
    header = [
        "",
        "Targets of the issue.",
        "",
        "| check | target | value | met |",
        "|---|---|---|---|",
    ]
    return header + lines


def markdown_report(result: dict[str, Any]) -> str:
    env = result["environment"]
    s = result["settings"]
    lines = [
        "## bench_scaling",
        "",
        f"Backend {env['backend']} ({env['cpu_count']} CPU(s); no GPU was lent for this run "
        "unless the backend says gpu), jax "
        f"{env['jax']}, numpyro {env['numpyro']}; vectorized chains; {s['num_warmup']} warmup "
        f"steps, then two runs of max({s['min_samples']}, {s['num_samples']} / chains) draws "
        "per chain; ESS of the summaries named in the module docstring.",
    ]
    for part, title in (
        ("chains", "Against the number of chains"),
        ("size", "Against N, one chain"),
    ):
        rows = [r for r in result["rows"] if r["part"] == part]
        if rows:
            lines += ["", f"{title}.", "", *_table(rows)]
    lines += _checks(result["rows"])
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    out_dirs = (DEFAULT_OUT_DIR, QUICK_OUT_DIR)
    parser = benchmark_parser(
        "Step time and ESS/s against chains and N.", FULL, QUICK, None, out_dirs
    )
    parser.add_argument(
        "--parts", nargs="+", choices=["chains", "size"], default=["chains", "size"]
    )
    parser.add_argument("--samplers", nargs="+", choices=list(SAMPLERS), default=list(SAMPLERS))
    return parse_benchmark_args(parser, argv, FULL, QUICK, out_dirs)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns what it writes to ``bench_scaling.json``."""
    args = parse_args(argv)
    settings = {name: getattr(args, name) for name in [*FULL, "parts", "samplers", "seed", "quick"]}
    settings["cpu_count"] = os.cpu_count()
    rows = [row for part in args.parts for row in run_part(part, args)]
    result = {"settings": settings, "environment": environment(), "rows": rows}
    report = markdown_report(result)
    path = write_results(args.out_dir, "bench_scaling", result, report)
    print(report)
    print(f"written {path} and {path.with_suffix('.json')}")
    return result


if __name__ == "__main__":
    main()
