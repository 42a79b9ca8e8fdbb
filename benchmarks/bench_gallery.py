"""
Benchmark: every gallery model, the default discrete kernel against each kernel, numpyro's
samplers and NUTS with enumeration
=========================================================================================

One process runs, on every model of :data:`numpyro_discrete.gallery.GALLERY` (``--models``),
the samplers of :data:`METHODS` (``--methods``) through ``numpyro.infer.MCMC``, each with
``--num-chains`` chains run one after the other (numpyro's default on one device):

- ``LBPGibbs``: ``LBPGibbs(NUTS(model))``, the one line a user writes; the discrete kernel
  is chosen from the model's structure (the **chosen** column).
- ``LBPGibbs[ALBP]``, ``LBPGibbs[ChromaticGibbs]``, ``LBPGibbs[BlockGibbs]``: the same with
  the discrete kernel forced.
- numpyro's ``DiscreteHMCGibbs(NUTS(model))`` and ``MixedHMC(HMC(model,
  trajectory_length=1.2), num_discrete_updates=20)`` (models with continuous sites), and
  ``DiscreteGibbs(model)`` (discrete sites only): the anchors.
- ``NUTS-enum``: NUTS on the model with every discrete site summed out by numpyro's
  enumeration (``entry.enumerated``), where it runs; its summaries take the discrete sites'
  exact conditional expectations.

A sampler that cannot run a model (a support it does not take, no chain block, no
continuous site) is recorded with the error's first line, not as a failure of the benchmark.

Per model and sampler, at the ``"example"`` size (what a user runs):
**first run s** - the first ``mcmc.run`` (init, tracing, compilation, warmup, sampling of
every chain) as a user waits for it, after JAX's in-memory caches are cleared (the
persistent cache is off); **step ms** - the steady cost of one post-warmup step, the steps
run in one jitted loop (:func:`benchmarks.bench_fhmm.steady_step_cost`) from each chain's
last state, averaged over the chains (rows measured before this was so timed the first
chain's state only);
**sampling s** - step ms times the post-warmup steps of all chains; **later fixed s** - a
second ``mcmc.run`` of the same length from the last state minus its steps' cost (numpyro
traces and compiles its loop again); **min ESS** - numpyro's multi-chain ESS, the smallest
over every coordinate of the model's label-invariant summaries; **ESS/s** - min ESS per
second of sampling, and **x numpyro** - that divided by the best of numpyro's samplers on the
model; **R-hat** - the largest split R-hat of the summaries.

At the ``"exact"`` size (unless ``--no-check``), a second run of each sampler (``--check-
warmup`` + ``--check-samples``, the same chains) against the entry's reference: **|z|** is
the largest over the summaries' coordinates of ``(|mean - reference| - error) / se``, ``se``
combining the run's ESS-based Monte Carlo error and the reference's.

Usage (from the repository root)::

    python -m benchmarks.bench_gallery                         # every model, every sampler
    python -m benchmarks.bench_gallery --models mixture fhmm --methods LBPGibbs DiscreteHMCGibbs
    python -m benchmarks.bench_gallery --quick                 # smoke test

Outputs: the table on stdout, and ``bench_gallery.json`` / ``.md`` in ``--out-dir`` (default
``benchmarks/results``).
"""

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any
import warnings

import numpy as np

from jax import random

from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from numpyro.infer import HMC, MCMC, NUTS, DiscreteGibbs, DiscreteHMCGibbs, MixedHMC
from numpyro.infer.mcmc import MCMCKernel

from numpyro_discrete import ALBP, BlockGibbs, ChromaticGibbs, LBPGibbs
from numpyro_discrete.gallery import GALLERY, GalleryModel, batch_summaries, mcse

from benchmarks.bench_fhmm import steady_step_cost
from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    chain_states,
    fmt,
    parse_benchmark_args,
    release_compiled_programs,
    result_record,
    sequential_mcmc,
    timed_later_run,
    timed_run,
    write_results,
)

QUICK_OUT_DIR = RESULTS_DIR / "quick"

#: name -> ``(entry) -> kernel``; ``None`` where the sampler does not apply to the entry
METHODS: dict[str, Callable[[GalleryModel], MCMCKernel | None]] = {
    "LBPGibbs": lambda e: LBPGibbs(NUTS(e.model)),
    "LBPGibbs[ALBP]": lambda e: LBPGibbs(NUTS(e.model), discrete_kernel=ALBP(e.model)),
    "LBPGibbs[ChromaticGibbs]": lambda e: LBPGibbs(
        NUTS(e.model), discrete_kernel=ChromaticGibbs(e.model)
    ),
    "LBPGibbs[BlockGibbs]": lambda e: LBPGibbs(NUTS(e.model), discrete_kernel=BlockGibbs(e.model)),
    "DiscreteHMCGibbs": lambda e: DiscreteHMCGibbs(NUTS(e.model)),
    "MixedHMC": lambda e: MixedHMC(HMC(e.model, trajectory_length=1.2), num_discrete_updates=20),
    "DiscreteGibbs": lambda e: DiscreteGibbs(e.model),
    "NUTS-enum": lambda e: NUTS(e.enumerated[0]) if e.enumerated else None,
}
#: numpyro's samplers of discrete latents: the anchors of **x numpyro**
NUMPYRO = ("DiscreteHMCGibbs", "MixedHMC", "DiscreteGibbs")


@dataclass
class Row:
    """One sampler on one model; ``status`` is ``"ok"``, ``"n/a"`` (with the reason in
    ``note``) or ``"failed"``."""

    model: str
    method: str
    status: str = "ok"
    note: str = ""
    chosen: str = ""
    num_warmup: int = 0
    num_samples: int = 0
    num_chains: int = 0
    first_run_s: float | None = None
    later_fixed_s: float | None = None
    step_ms: float | None = None
    sampling_s: float | None = None
    ess_min: float | None = None
    ess_min_per_s: float | None = None
    vs_numpyro: float | None = None
    rhat_max: float | None = None
    check_z_max: float | None = None


def summaries_of(entry: GalleryModel, method: str) -> GalleryModel:
    """The entry whose ``summaries`` read the draws of `method` (NUTS-enum draws have no
    discrete sites)."""
    if method == "NUTS-enum":
        return entry._replace(summaries=entry.enumerated[1])
    return entry


def run_chains(kernel: MCMCKernel, data: Any, args: argparse.Namespace, warmup: int, samples: int):
    mcmc = sequential_mcmc(kernel, warmup, samples, args.num_chains)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        seconds = timed_run(mcmc, random.key(args.seed), *data.args, **data.kwargs)
    return mcmc, seconds


def summary_draws(entry: GalleryModel, mcmc: MCMC, data: Any) -> np.ndarray:
    """Every summary coordinate, ``(chains, draws, coordinates)``."""
    out = batch_summaries(entry, mcmc.get_samples(group_by_chain=True), data, 2)
    return np.concatenate([v.reshape(v.shape[:2] + (-1,)) for v in out.values()], axis=-1)


def check_z(entry: GalleryModel, method: str, args: argparse.Namespace) -> float:
    """The largest ``|z|`` of a run at the ``"exact"`` size against the entry's reference."""
    data = entry.simulate(args.seed, "exact")
    reference = entry.reference(data)
    kernel = METHODS[method](entry)
    mcmc, _ = run_chains(kernel, data, args, args.check_warmup, args.check_samples)
    out = batch_summaries(
        summaries_of(entry, method), mcmc.get_samples(group_by_chain=True), data, 2
    )
    z = []
    for key, draws in out.items():
        se = np.sqrt(mcse(draws) ** 2 + reference.se[key] ** 2)
        error = np.maximum(np.abs(draws.mean((0, 1)) - reference.mean[key]) - reference.error, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            z.append(np.where(error > 0, error / se, 0.0).ravel())
    return float(np.max(np.concatenate(z)))


def measure(entry: GalleryModel, method: str, args: argparse.Namespace) -> Row:
    row = Row(entry.name, method, num_chains=args.num_chains)
    kernel = METHODS[method](entry)
    if kernel is None:
        row.status, row.note = "n/a", "numpyro cannot enumerate its discrete sites"
        return row
    data = entry.simulate(args.seed, args.size)
    release_compiled_programs()
    try:
        mcmc, row.first_run_s = run_chains(kernel, data, args, args.num_warmup, args.num_samples)
    except Exception as error:  # a sampler that does not take the model: recorded, not fatal
        row.status, row.note = "n/a", f"{type(error).__name__}: {str(error).splitlines()[0]}"
        return row
    row.num_warmup, row.num_samples = args.num_warmup, args.num_samples
    if isinstance(kernel, LBPGibbs):
        row.chosen = type(kernel.discrete_kernel).__name__
    draws = summary_draws(summaries_of(entry, method), mcmc, data)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        moving = draws.std((0, 1)) > 0
        row.ess_min = float(np.min(effective_sample_size(draws[..., moving])))
        row.rhat_max = float(np.max(split_gelman_rubin(draws[..., moving])))
    later_s = timed_later_run(mcmc, *data.args, **data.kwargs)
    # the mean over every chain's last state: a step's cost depends on the chain (NUTS's
    # trajectories follow its adapted step size and mass matrix; on the spike-and-slab
    # model one run's four chains stepped in 0.29-0.46 ms, DiscreteHMCGibbs's in 0.23-1.05)
    chains = chain_states(mcmc.last_state, args.num_chains)
    seconds = args.min_step_seconds / len(chains)
    step_s = float(np.mean([
        steady_step_cost(kernel, chain, data.args, seconds, model_kwargs=data.kwargs)
        for chain in chains
    ]))  # fmt: skip
    row.step_ms = 1e3 * step_s
    row.sampling_s = step_s * args.num_samples * args.num_chains
    row.later_fixed_s = later_s - row.sampling_s
    row.ess_min_per_s = row.ess_min / row.sampling_s
    if args.check:
        row.check_z_max = check_z(entry, method, args)
    return row


def compare_with_numpyro(rows: list[Row]) -> None:
    """Fill **x numpyro**: ESS/s over the best of numpyro's samplers on the same model."""
    for model in {row.model for row in rows}:
        anchors = [
            row.ess_min_per_s
            for row in rows
            if row.model == model and row.method in NUMPYRO and row.ess_min_per_s
        ]
        for row in rows:
            if row.model == model and row.ess_min_per_s and anchors:
                row.vs_numpyro = row.ess_min_per_s / max(anchors)


COLUMNS = (
    ("model", "model"),
    ("sampler", "method"),
    ("chosen", "chosen"),
    ("\\|z\\| (exact size)", "check_z_max"),
    ("R-hat", "rhat_max"),
    ("min ESS", "ess_min"),
    ("ESS/s", "ess_min_per_s"),
    ("x numpyro", "vs_numpyro"),
    ("first run s", "first_run_s"),
    ("later fixed s", "later_fixed_s"),
    ("step ms", "step_ms"),
)


def markdown_report(rows: Sequence[Row], settings: dict[str, Any]) -> str:
    lines = [
        "# Gallery: every model, every sampler",
        "",
        f"{settings['num_chains']} chains one after the other, {settings['num_warmup']} "
        f"warmup + {settings['num_samples']} draws each, size {settings['size']!r}, seed "
        f"{settings['seed']}; |z| from {settings['check_warmup']} + "
        f"{settings['check_samples']} draws at the 'exact' size. ESS/s: min ESS of the "
        "label-invariant summaries per second of sampling.",
        "",
        "| " + " | ".join(title for title, _ in COLUMNS) + " |",
        "|" + " --- |" * len(COLUMNS),
    ]
    for row in rows:
        if row.status != "ok":
            cells = [row.model, row.method, f"{row.status}: {row.note[:90]}"]
            cells += [""] * (len(COLUMNS) - len(cells))
        else:
            cells = [
                fmt(getattr(row, field))
                if not isinstance(getattr(row, field), str)
                else getattr(row, field) or "-"
                for _, field in COLUMNS
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


#: The settings of a full run and of ``--quick`` (a smoke test).
FULL = {
    "models": list(GALLERY),
    "methods": list(METHODS),
    "size": "example",
    "num_chains": 4,
    "num_warmup": 500,
    "num_samples": 1000,
    "check_warmup": 500,
    "check_samples": 2000,
    "min_step_seconds": 2.0,
}
QUICK = {
    "models": ["mixture", "ising"],
    "methods": ["LBPGibbs", "DiscreteHMCGibbs", "DiscreteGibbs", "NUTS-enum"],
    "size": "exact",
    "num_chains": 2,
    "num_warmup": 30,
    "num_samples": 30,
    "check_warmup": 30,
    "check_samples": 30,
    "min_step_seconds": 0.05,
}
_NAMED = ("models", "methods", "size")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    out_dirs = (RESULTS_DIR, QUICK_OUT_DIR)
    sizes = {k: v for k, v in FULL.items() if k not in _NAMED}
    quick_sizes = {k: v for k, v in QUICK.items() if k not in _NAMED}
    parser = benchmark_parser(__doc__.split("\n")[1], sizes, quick_sizes, None, out_dirs)
    parser.add_argument("--models", nargs="+", choices=list(GALLERY), default=None)
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=None)
    parser.add_argument("--size", choices=("example", "exact"), default=None)
    parser.add_argument("--no-check", dest="check", action="store_false")
    return parse_benchmark_args(parser, argv, FULL, QUICK, out_dirs)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    settings = {k: v for k, v in vars(args).items() if k not in ("out_dir", "quick")}
    rows = []
    for name in args.models:
        for method in args.methods:
            row = measure(GALLERY[name], method, args)
            print(f"{name:20s} {method:26s} {row.status} {row.note[:60]}", flush=True)
            rows.append(row)
        # after every model: a long run stopped midway keeps what it measured
        compare_with_numpyro(rows)
        report = markdown_report(rows, settings)
        result = result_record(settings, rows=[asdict(row) for row in rows])
        write_results(args.out_dir, "bench_gallery", result, report)
    print(report)
    return result


if __name__ == "__main__":
    main()
