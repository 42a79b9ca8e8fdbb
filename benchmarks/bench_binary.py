"""
Benchmark: ALBP and LBP-1 against numpyro's DiscreteGibbs on binary targets
==========================================================================

Runs, in one process and side by side, five samplers on two targets of Sun, Dai and
Schuurmans (2022, Appendix D; built in :mod:`benchmarks.targets`):

- targets: ``bernoulli`` (``N = 800`` independent coordinates, C2: ``p_i ~ U[0.15, 0.85]``)
  and ``ising`` (``p = 50``, 2500 coordinates on an open lattice, C2:
  ``(c, lambda) = (0.3, 0.15)``), both plain numpyro models with one binary site ``"x"``
  (``--config`` selects C1 or C3 instead, ``--bernoulli-n`` and ``--ising-p`` the sizes);
- samplers: ``ALBP`` with the ``sqrt`` and ``barker`` balancing functions (path length
  ``R`` adapted during warmup towards acceptance 0.574, then frozen), ``LBP`` with
  ``path_length=1`` (Gibbs-with-Gradients) with both balancings, and numpyro's
  ``DiscreteGibbs`` (one systematic sweep over all coordinates, in a random order, per
  step), each through ``numpyro.infer.MCMC(..., progress_bar=False)``.

Metrics (all computed after warmup, over every chain):

- **acc** - mean of the kernel's ``accept_prob`` (``min(1, A)``); n/a for DiscreteGibbs,
  whose conditional updates are always accepted.
- **R** - mean of ``path_length``, the real path-length scale ``R_t`` (constant after warmup);
  n/a for DiscreteGibbs.
- **EJD** - expected jump distance: mean Hamming distance between consecutive draws,
  computed from the samples (a rejected step counts 0).
- **ESS mean / ESS min** - ``numpyro.diagnostics.effective_sample_size`` of every
  coordinate (draws shaped ``(chains, draws, coords)``), averaged and minimised over the
  coordinates whose ESS is defined (a coordinate that never moved has none; the count of
  those is in the JSON as ``num_undefined_ess``).
- **ESS Ham.** - ESS of the Hamming distance to a fixed random reference state (one per
  target, drawn from ``--seed``), the statistic the seeds' code reports.
- **compile s / sampling s** - see *Timing* below. **warmup s** (JSON) is the wall time of
  ``mcmc.warmup``, compilation included.
- **minESS/s, HamESS/s** - ESS min and ESS Ham. per second of sampling time.
- **x Gibbs** - those two rates divided by DiscreteGibbs's on the same target.
- **EJD ratio** (second table) - EJD of ALBP over EJD of LBP-1 with the same balancing,
  next to the paper's value (its Tables 5 and 8 normalise EJD by LBP-1) and whether it is
  within 15% of it. The paper's values are for its own sizes and configurations; other
  sizes get "n/a".

Timing
------
numpyro's ``MCMC.run`` re-traces and re-compiles its sampling loop on every call (its
``fori_collect`` jits a fresh wrapper each time), so timing one ``run`` would mix
compilation into the sampling time. This script therefore

1. enables JAX's persistent compilation cache in a fresh temporary directory (deleted at
   exit; nothing is reused across processes), so that a second ``run`` of the same
   program only re-traces it and loads the compiled executable;
2. runs ``mcmc.warmup`` (timed as "warmup s", compilation included);
3. draws the post-warmup samples in ``--num-chunks`` equal consecutive chunks, each one
   ``mcmc.run`` started from the previous chunk's last state
   (``mcmc.post_warmup_state = mcmc.last_state``), timed up to
   ``jax.block_until_ready`` on the samples. The first chunk compiles the sampling loop;
   the others load it from the cache.

With chunk times ``t_1..t_K``: **compile s** ``= t_1 - median(t_2..t_K)`` (chunk 1 is
the first run of the sampling program). One exception: when the warmup is exactly one
chunk long (as with the defaults and ``--quick``), numpyro's warmup loop is the very
program of the sampling loop (same loop length, same collected fields), so it is compiled
during the warmup: then **compile s** ``= warmup s - median(t_2..t_K)``
(``compiled_in_warmup`` in the JSON). Either way compile s is the first run of the sampling
program minus a typical compiled run of the same length (kernel initialisation included; a
value near 0 or below means that compilation took less than the run-to-run noise).

Every ``run`` also pays a fixed overhead whatever its length: numpyro re-traces its loop,
JAX lowers it and loads the cached executable (about 0.3-1 s on two CPU cores, more for
kernels with several compiled branches). To keep it out of the sampling rate, a probe
``run`` of ``PROBE_DRAWS`` draws (10, or a tenth of a chunk if less) follows the chunks:
one call compiles it, then ``PROBE_REPEATS`` (3) calls are timed. The fastest probe
``t_p`` and the fastest compiled chunk ``min(t_2..t_K)`` of ``n`` draws (timing noise only
adds, so the minima are the least disturbed) are solved for
``t = overhead + draws * per_draw``:
**run overhead s** is that overhead and **sampling s** ``= per_draw * draws`` over all the
draws kept (when a chunk is not slower than the probe, as in ``--quick`` runs, sampling s
is the chunks' whole time and run overhead s is NaN). The probe's own draws are not used;
every chunk's draws count in the metrics, and the chain is continuous across chunks.

On a shared machine the wall times are noisy; the JSON records the per-chunk times.

Usage (from the repository root)::

    python -m benchmarks.bench_binary                 # full size, 5-10 min on 2 cores
    python -m benchmarks.bench_binary --quick         # smoke test, tiny sizes
    python -m benchmarks.bench_binary --targets ising --num-samples 4000 --out-dir /tmp/b

Outputs: the markdown tables on stdout, and ``bench_binary.json`` and ``bench_binary.md``
in ``--out-dir`` (default ``benchmarks/results``).

**References:**

1. *Optimal Scaling for Locally Balanced Proposals in Discrete Spaces*, Haoran Sun,
   Hanjun Dai, Dale Schuurmans (2022)
"""

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
import math
import os
from typing import Any

import numpy as np

import jax
from jax import random

import numpyro
from numpyro.infer import MCMC, DiscreteGibbs
from numpyro.infer.mcmc import MCMCKernel

from numpyro_discrete import ALBP, LBP

from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    chunk_timing,
    draw_metrics,
    field_mean,
    fmt,
    fresh_compilation_cache,
    markdown_table,
    number_column,
    parse_benchmark_args,
    per_second,
    probe_timing,
    release_compiled_programs,
    result_record,
    sequential_mcmc,
    timed_run,
    timed_warmup,
    write_results,
)
from benchmarks.targets import Target, bernoulli_target, ising_target

SITE = "x"
GIBBS = "DiscreteGibbs"

#: EJD of ALBP normalised by LBP-1 (same balancing), Sun, Dai and Schuurmans (2022):
#: Table 5 (Bernoulli, N = 100, 800, 6400) and Table 8 (Ising, p = 20, 50, 100).
PAPER_EJD_RATIO: dict[tuple[str, str], float] = {
    ("bernoulli-100-C1", "barker"): 24.05,
    ("bernoulli-100-C2", "barker"): 19.16,
    ("bernoulli-100-C3", "barker"): 15.96,
    ("bernoulli-800-C1", "barker"): 100.25,
    ("bernoulli-800-C2", "barker"): 78.63,
    ("bernoulli-800-C3", "barker"): 64.47,
    ("bernoulli-6400-C1", "barker"): 416.55,
    ("bernoulli-6400-C2", "barker"): 324.59,
    ("bernoulli-6400-C3", "barker"): 266.73,
    ("bernoulli-100-C1", "sqrt"): 23.40,
    ("bernoulli-100-C2", "sqrt"): 17.88,
    ("bernoulli-100-C3", "sqrt"): 13.59,
    ("bernoulli-800-C1", "sqrt"): 96.96,
    ("bernoulli-800-C2", "sqrt"): 72.39,
    ("bernoulli-800-C3", "sqrt"): 53.28,
    ("bernoulli-6400-C1", "sqrt"): 401.94,
    ("bernoulli-6400-C2", "sqrt"): 297.95,
    ("bernoulli-6400-C3", "sqrt"): 218.09,
    ("ising-20-C1", "barker"): 43.42,
    ("ising-20-C2", "barker"): 30.99,
    ("ising-20-C3", "barker"): 23.50,
    ("ising-50-C1", "barker"): 141.01,
    ("ising-50-C2", "barker"): 96.23,
    ("ising-50-C3", "barker"): 69.54,
    ("ising-100-C1", "barker"): 338.14,
    ("ising-100-C2", "barker"): 219.73,
    ("ising-100-C3", "barker"): 152.05,
    ("ising-20-C1", "sqrt"): 43.85,
    ("ising-20-C2", "sqrt"): 31.83,
    ("ising-20-C3", "sqrt"): 24.32,
    ("ising-50-C1", "sqrt"): 146.02,
    ("ising-50-C2", "sqrt"): 105.43,
    ("ising-50-C3", "sqrt"): 79.82,
    ("ising-100-C1", "sqrt"): 364.76,
    ("ising-100-C2", "sqrt"): 261.05,
    ("ising-100-C3", "sqrt"): 195.65,
}
EJD_TOLERANCE = 0.15

#: Sizes of the full run and of ``--quick``.
FULL = {
    "bernoulli_n": 800,
    "ising_p": 50,
    "num_warmup": 5000,
    "num_samples": 50000,
    "gibbs_num_warmup": 100,
    "gibbs_num_samples": 2500,
    "num_chunks": 4,
}
#: ``--quick`` makes each warmup as long as a sampling chunk, so that numpyro's warmup and
#: sampling loops are the same program and each sampler compiles once (a smoke test whose
#: time is mostly compilation).
QUICK = {
    "bernoulli_n": 8,
    "ising_p": 3,
    "num_warmup": 100,
    "num_samples": 200,
    "gibbs_num_warmup": 20,
    "gibbs_num_samples": 40,
    "num_chunks": 2,
}


@dataclass(frozen=True)
class SamplerSpec:
    """
    - **name** - label in the tables, e.g. ``"ALBP-sqrt"``.
    - **family** - ``"ALBP"``, ``"LBP-1"`` or ``"DiscreteGibbs"``.
    - **balancing** - ``"sqrt"``, ``"barker"``, or None for DiscreteGibbs.
    - **make** - ``model -> kernel``.
    - **extra_fields** - state fields to collect besides the samples.
    """

    name: str
    family: str
    balancing: str | None
    make: Callable[[Callable], MCMCKernel]
    extra_fields: tuple[str, ...]


def sampler_specs() -> list[SamplerSpec]:
    """ALBP and LBP-1 with both balancings, then numpyro's DiscreteGibbs."""
    fields = ("accept_prob", "path_length", "num_changed")
    specs = []
    for balancing in ("sqrt", "barker"):
        specs.append(
            SamplerSpec(
                f"ALBP-{balancing}",
                "ALBP",
                balancing,
                lambda model, b=balancing: ALBP(model, balancing=b),
                fields,
            )
        )
        specs.append(
            SamplerSpec(
                f"LBP1-{balancing}",
                "LBP-1",
                balancing,
                lambda model, b=balancing: LBP(model, path_length=1, balancing=b),
                fields,
            )
        )
    # DiscreteGibbs's state has no acceptance or path length
    specs.append(SamplerSpec(GIBBS, GIBBS, None, DiscreteGibbs, ()))
    return specs


@dataclass
class Row:
    """One (target, sampler) result; None where a metric does not apply."""

    target: str
    sampler: str
    family: str
    balancing: str | None
    num_coords: int
    num_chains: int
    num_warmup: int
    num_samples: int
    acceptance: float | None
    final_R: float | None
    ejd: float
    mean_num_changed: float | None
    ess_mean: float
    ess_min: float
    num_undefined_ess: int
    ess_hamming: float
    warmup_s: float
    compile_s: float
    sampling_s: float
    chunk_s: list[float]
    run_overhead_s: float
    compiled_in_warmup: bool
    ess_min_per_s: float
    ess_hamming_per_s: float
    ess_min_per_s_vs_gibbs: float | None = None
    ess_hamming_per_s_vs_gibbs: float | None = None


# --- running ------------------------------------------------------------------------------


def later_run(mcmc: MCMC, spec: "SamplerSpec") -> float:
    """A timed later ``run`` from the chain's last state (:func:`timed_run`)."""
    return timed_run(mcmc, mcmc.post_warmup_state.rng_key, extra_fields=spec.extra_fields)


def run_sampler(
    spec: SamplerSpec,
    target: Target,
    rng_key: jax.Array,
    *,
    num_warmup: int,
    num_samples: int,
    num_chunks: int,
    num_chains: int,
    reference: np.ndarray,
    init_params: dict[str, Any] | None = None,
) -> Row:
    """Warm up (from `init_params` if given, else a prior draw), then sample in
    `num_chunks` timed chunks; compute every metric."""
    chunk_size = math.ceil(num_samples / num_chunks)
    mcmc = sequential_mcmc(spec.make(target.model), num_warmup, chunk_size, num_chains)
    warmup_s = timed_warmup(mcmc, rng_key, extra_fields=spec.extra_fields, init_params=init_params)

    draws, extras, chunk_s = [], [], []
    for _ in range(num_chunks):
        chunk_s.append(later_run(mcmc, spec))
        samples = mcmc.get_samples(group_by_chain=True)[SITE]
        draws.append(np.asarray(samples).reshape(num_chains, chunk_size, -1))
        fields = mcmc.get_extra_fields(group_by_chain=True)
        extras.append({name: np.asarray(value) for name, value in fields.items()})
        mcmc.post_warmup_state = mcmc.last_state
    calls = probe_timing(mcmc, lambda: later_run(mcmc, spec), chunk_s, chunk_size)
    x = np.concatenate(draws, axis=1).astype(np.int8)  # (chains, draws, N)
    extra = {k: np.concatenate([e[k] for e in extras], axis=1) for k in spec.extra_fields}

    metrics = draw_metrics(x, extra, reference)
    # numpyro's warmup loop has `num_warmup` steps and buffers for `chunk_size` draws: the
    # same program as a chunk when the two are equal
    compiled_in_warmup = num_warmup == chunk_size
    compile_s = chunk_timing(chunk_s, warmup_s, compiled_in_warmup)[0]
    sampling_s = calls.seconds_per_step * x.shape[1]
    return Row(
        target=target.name,
        sampler=spec.name,
        family=spec.family,
        balancing=spec.balancing,
        num_coords=target.num_coords,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=x.shape[1],
        **metrics,
        mean_num_changed=field_mean(extra, "num_changed"),
        warmup_s=warmup_s,
        compile_s=compile_s,
        sampling_s=sampling_s,
        chunk_s=chunk_s,
        run_overhead_s=calls.overhead_s,
        compiled_in_warmup=compiled_in_warmup,
        ess_min_per_s=per_second(metrics["ess_min"], sampling_s),
        ess_hamming_per_s=per_second(metrics["ess_hamming"], sampling_s),
    )


def add_gibbs_ratios(rows: list[Row]) -> None:
    """Fill the ESS/s ratios to DiscreteGibbs on the same target, in place."""
    gibbs = {row.target: row for row in rows if row.family == GIBBS}
    for row in rows:
        base = gibbs.get(row.target)
        if base is None:
            continue
        row.ess_min_per_s_vs_gibbs = row.ess_min_per_s / base.ess_min_per_s
        row.ess_hamming_per_s_vs_gibbs = row.ess_hamming_per_s / base.ess_hamming_per_s


def ejd_ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """EJD of ALBP over LBP-1 per target and balancing, against the paper's value."""
    by_key = {(row.target, row.family, row.balancing): row for row in rows}
    out = []
    for target in dict.fromkeys(row.target for row in rows):
        for balancing in ("sqrt", "barker"):
            albp = by_key.get((target, "ALBP", balancing))
            lbp1 = by_key.get((target, "LBP-1", balancing))
            if albp is None or lbp1 is None:
                continue
            ratio = albp.ejd / lbp1.ejd if lbp1.ejd > 0 else math.nan
            paper = PAPER_EJD_RATIO.get((target, balancing))
            relative = None if paper is None else ratio / paper - 1.0
            out.append(
                {
                    "target": target,
                    "balancing": balancing,
                    "ejd_albp": albp.ejd,
                    "ejd_lbp1": lbp1.ejd,
                    "ratio": ratio,
                    "paper": paper,
                    "relative_difference": relative,
                    "within_15pct": None
                    if relative is None
                    else bool(abs(relative) <= EJD_TOLERANCE),
                }
            )
    return out


# --- reporting ----------------------------------------------------------------------------


COLUMNS = (
    ("target", lambda r: r.target),
    ("sampler", lambda r: r.sampler),
    ("draws", lambda r: str(r.num_chains * r.num_samples)),
    number_column("acc", "acceptance"),
    number_column("R", "final_R", 4),
    number_column("EJD", "ejd", 4),
    number_column("ESS mean", "ess_mean", 4),
    number_column("ESS min", "ess_min", 4),
    number_column("ESS Ham.", "ess_hamming", 4),
    number_column("compile s", "compile_s"),
    number_column("run overhead s", "run_overhead_s"),
    number_column("sampling s", "sampling_s"),
    number_column("minESS/s", "ess_min_per_s"),
    number_column("HamESS/s", "ess_hamming_per_s"),
    number_column("x Gibbs (min)", "ess_min_per_s_vs_gibbs"),
    number_column("x Gibbs (Ham.)", "ess_hamming_per_s_vs_gibbs"),
)


def _relative(item: dict[str, Any]) -> str:
    relative = item["relative_difference"]
    return "n/a" if relative is None else f"{relative:+.1%}"


def _within(item: dict[str, Any]) -> str:
    within = item["within_15pct"]
    return "n/a" if within is None else ("yes" if within else "no")


EJD_COLUMNS = (
    ("target", lambda i: i["target"]),
    ("balancing", lambda i: i["balancing"]),
    ("EJD ALBP", lambda i: fmt(i["ejd_albp"], 4)),
    ("EJD LBP-1", lambda i: fmt(i["ejd_lbp1"], 4)),
    ("ratio", lambda i: fmt(i["ratio"], 4)),
    ("paper", lambda i: fmt(i["paper"], 4)),
    ("difference", _relative),
    ("within", _within),
)


def markdown_report(rows: list[Row], ratios: list[dict[str, Any]], settings: dict) -> str:
    """The two markdown tables, with a header line on the settings."""
    lines = [
        "## bench_binary",
        "",
        f"{settings['num_chains']} chain(s); LBP/ALBP: {settings['num_warmup']} warmup + "
        f"{settings['num_samples']} samples; DiscreteGibbs: "
        f"{settings['gibbs_num_warmup']} warmup + {settings['gibbs_num_samples']} samples "
        f"(sweeps); {settings['num_chunks']} timed chunks; seed {settings['seed']}; "
        f"{settings['cpu_count']} CPU(s), jax {jax.__version__}, "
        f"numpyro {numpyro.__version__}.",
        "",
    ]
    lines += markdown_table(COLUMNS, rows)
    lines += [
        "",
        "EJD ratio ALBP / LBP-1 (same balancing) against Sun, Dai and Schuurmans (2022), "
        f"Tables 5 and 8; within {EJD_TOLERANCE:.0%}?",
        "",
    ]
    lines += markdown_table(EJD_COLUMNS, ratios)
    return "\n".join(lines) + "\n"


# --- entry point --------------------------------------------------------------------------


def build_targets(
    names: Sequence[str], sizes: dict[str, int], config: str, seed: int
) -> list[Target]:
    """The requested targets in configuration `config`, parameters drawn from `seed`."""
    builders = {
        "bernoulli": lambda: bernoulli_target(sizes["bernoulli_n"], config, seed),
        "ising": lambda: ising_target(sizes["ising_p"], config, seed),
    }
    return [builders[name]() for name in names]


#: Help of the size options, whose defaults come from :data:`FULL` or :data:`QUICK`.
_SIZE_HELP = {
    "num_warmup": "warmup steps of LBP/ALBP",
    "num_samples": "post-warmup draws of LBP/ALBP",
    "gibbs_num_warmup": "warmup sweeps of DiscreteGibbs",
    "gibbs_num_samples": "post-warmup sweeps (draws) of DiscreteGibbs",
    "num_chunks": "timed sampling chunks, >= 2",
    "bernoulli_n": "coordinates of the Bernoulli target",
    "ising_p": "side of the Ising lattice",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = benchmark_parser(
        "ALBP / LBP-1 / numpyro DiscreteGibbs on Bernoulli and Ising targets.",
        FULL,
        QUICK,
        _SIZE_HELP,
        (RESULTS_DIR, RESULTS_DIR),
        seed_help="MCMC keys and Hamming reference",
    )
    targets = ["bernoulli", "ising"]
    parser.add_argument(
        "--targets", nargs="+", choices=targets, default=targets, help="default: both"
    )
    parser.add_argument(
        "--num-chains", type=int, default=1, help="chains, run one after another (default 1)"
    )
    parser.add_argument("--config", choices=["C1", "C2", "C3"], default="C2", help="default C2")
    parser.add_argument("--target-seed", type=int, default=0, help="target parameters (default 0)")
    return parse_benchmark_args(parser, argv, FULL, QUICK, (RESULTS_DIR, RESULTS_DIR))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns what it writes to ``bench_binary.json``."""
    args = parse_args(argv)

    settings = {
        name: getattr(args, name)
        for name in [
            *FULL,
            "targets",
            "config",
            "num_chains",
            "seed",
            "target_seed",
            "quick",
        ]
    }
    settings["cpu_count"] = os.cpu_count()
    rng = np.random.default_rng(args.seed)
    rows: list[Row] = []
    with fresh_compilation_cache():
        for t_index, target in enumerate(
            build_targets(args.targets, vars(args), args.config, args.target_seed)
        ):
            reference = rng.integers(0, 2, size=target.num_coords, dtype=np.int8)
            for s_index, spec in enumerate(sampler_specs()):
                is_gibbs = spec.family == GIBBS
                key = random.fold_in(random.key(args.seed), 100 * t_index + s_index)
                row = run_sampler(
                    spec,
                    target,
                    key,
                    num_warmup=args.gibbs_num_warmup if is_gibbs else args.num_warmup,
                    num_samples=args.gibbs_num_samples if is_gibbs else args.num_samples,
                    num_chunks=args.num_chunks,
                    num_chains=args.num_chains,
                    reference=reference,
                )
                print(
                    f"[{target.name}] {spec.name}: {row.sampling_s:.1f} s sampling, "
                    f"{row.compile_s:.1f} s compile, {row.run_overhead_s:.2f} s per run, "
                    f"ESS min {row.ess_min:.1f}",
                    flush=True,
                )
                rows.append(row)
                release_compiled_programs()

    add_gibbs_ratios(rows)
    ratios = ejd_ratios(rows)
    report = markdown_report(rows, ratios, settings)
    print(report)

    result = result_record(
        settings,
        timing="t_k the wall time of chunk k of n draws, t_p of the probe of p draws; "
        "compile_s = t_1 - median(t_2..t_K) (warmup_s - median(t_2..t_K) when "
        "compiled_in_warmup); per_draw = (min(t_2..t_K) - t_p) / (n - p) with t_p the "
        "fastest of the probes, "
        "run_overhead_s = t_p - p * per_draw, sampling_s = per_draw * draws (see the "
        "module docstring)",
        rows=[asdict(row) for row in rows],
        ejd_ratios=ratios,
    )
    write_results(args.out_dir, "bench_binary", result, report)
    return result


if __name__ == "__main__":
    main()
