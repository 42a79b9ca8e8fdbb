"""
Benchmark: chain blocks on the factorial HMM, against numpyro and a hand-written FFBS Gibbs
==========================================================================================

One process runs, on one simulated FHMM (``--L``, ``--K``, ``--config``; the model of
:func:`benchmarks.targets.fhmm_model`, its Markov prior one summed factor as users write
it), the samplers of :mod:`benchmarks.bench_fhmm` named by ``--methods`` (default:
``LBPGibbs[block]``, ours with :class:`~numpyro_discrete.BlockGibbs` as the discrete
kernel; ``FFBS-Gibbs``, the hand-written anchor drawing each hidden chain by forward
filtering, backward sampling inside numpyro's ``HMCGibbs``; numpyro's
``DiscreteHMCGibbs``; ``LBPGibbs``, our default with ``ALBP``), each through
``numpyro.infer.MCMC`` with ``--num-chains`` chains run one after the other.

Per sampler: **end to end s** - the first ``mcmc.run`` (tracing, compilation, warmup and
sampling) as a user waits for it; **later run s** - a second ``mcmc.run`` of the same
length from the last state; **step ms** - the steady cost of one post-warmup step, the
steps run in one jitted loop (:func:`benchmarks.bench_fhmm.steady_step_cost`); **sampling
s** - step ms times the post-warmup steps of all chains; **fixed s of a later run** -
later run s minus its steps' cost. Label-invariant quantities only: the mean signal
``w . x_l + b`` at every step (min ESS over the ``L`` steps, max split R-hat) and the sorted
``|w|``; ESS/s is per second of sampling, and relative to ``FFBS-Gibbs`` and
``DiscreteHMCGibbs``.

Usage (from the repository root)::

    python -m benchmarks.bench_chain_blocks                      # L = 200, K = 3
    python -m benchmarks.bench_chain_blocks --L 1000 --K 10 --methods "LBPGibbs[block]" FFBS-Gibbs
    python -m benchmarks.bench_chain_blocks --quick              # smoke test

Outputs: the table on stdout, and ``bench_chain_blocks_L{L}_K{K}.json`` / ``.md`` in
``--out-dir`` (default ``benchmarks/results``).
"""

import argparse
from collections.abc import Sequence
from dataclasses import asdict, dataclass
import os
from typing import Any

import numpy as np

import jax
from jax import random
import jax.numpy as jnp

from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

from benchmarks.bench_fhmm import (
    METHODS,
    QUICK_SIZES,
    mean_signal,
    sorted_abs_weights,
    steady_step_cost,
)
from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    chain_states,
    fmt,
    markdown_table,
    number_column,
    parse_benchmark_args,
    result_record,
    sequential_mcmc,
    timed_later_run,
    timed_run,
    write_results,
)
from benchmarks.targets import fhmm_data, fhmm_enumerated_model, fhmm_model

DEFAULT_METHODS = ("LBPGibbs", "FFBS-Gibbs", "DiscreteHMCGibbs", "LBPGibbs[albp]")
ANCHORS = ("FFBS-Gibbs", "DiscreteHMCGibbs")
#: The sizes of a full run and of ``--quick`` (a smoke test).
FULL = {
    "L": 200,
    "K": 3,
    "num_warmup": 1000,
    "num_samples": 2000,
    "gibbs_num_warmup": 500,
    "gibbs_num_samples": 1000,
    "num_chains": 4,
}
QUICK = {**QUICK_SIZES, "num_chains": 2}


@dataclass
class Row:
    method: str
    num_warmup: int
    num_samples: int
    num_chains: int
    end_to_end_s: float
    later_run_s: float
    step_ms: float
    sampling_s: float
    later_run_fixed_s: float
    ess_signal_min: float
    ess_signal_median: float
    ess_sigma: float
    rhat_signal_max: float
    ess_sorted_abs_w_min: float
    ess_signal_per_s: float
    signal_per_s_vs: dict[str, float]


def run(method_name: str, model_args: tuple, args: argparse.Namespace, seed: int) -> Row:
    method = next(m for m in METHODS if m.name == method_name)
    sweep = method.sweep_based
    num_warmup = args.gibbs_num_warmup if sweep else args.num_warmup
    num_samples = args.gibbs_num_samples if sweep else args.num_samples
    kernel = method.make(fhmm_model, fhmm_enumerated_model, model_args)
    mcmc = sequential_mcmc(kernel, num_warmup, num_samples, args.num_chains)
    end_to_end = timed_run(mcmc, random.key(seed), *model_args)
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    first_chain = chain_states(mcmc.last_state, args.num_chains)[0]
    step_s = steady_step_cost(mcmc.sampler, first_chain, model_args)
    later = timed_later_run(mcmc, *model_args)
    steps = num_samples * args.num_chains
    sampling_s = step_s * steps
    signal = mean_signal(samples["x"], samples["w"], samples["b"])
    ess_by_step = effective_sample_size(signal)
    ess_signal = float(np.min(ess_by_step))
    return Row(
        method=method_name,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=args.num_chains,
        end_to_end_s=end_to_end,
        later_run_s=later,
        step_ms=1e3 * step_s,
        sampling_s=sampling_s,
        later_run_fixed_s=later - sampling_s,
        ess_signal_min=ess_signal,
        ess_signal_median=float(np.median(ess_by_step)),
        ess_sigma=float(effective_sample_size(samples["sigma"])),
        rhat_signal_max=float(np.max(split_gelman_rubin(signal))),
        ess_sorted_abs_w_min=float(np.min(effective_sample_size(sorted_abs_weights(samples["w"])))),
        ess_signal_per_s=ess_signal / sampling_s,
        signal_per_s_vs={},
    )


COLUMNS = (
    ("sampler", lambda r: r.method),
    number_column("end to end s", "end_to_end_s"),
    number_column("later run s", "later_run_s"),
    number_column("fixed s of a later run", "later_run_fixed_s"),
    number_column("step ms", "step_ms"),
    number_column("sampling s", "sampling_s"),
    number_column("ESS signal (min)", "ess_signal_min", 4),
    number_column("ESS signal (median)", "ess_signal_median", 4),
    number_column("ESS sigma", "ess_sigma", 4),
    number_column("R-hat signal (max)", "rhat_signal_max"),
    number_column("ESS sorted abs(w)", "ess_sorted_abs_w_min", 4),
    number_column("ESS signal/s", "ess_signal_per_s"),
    ("vs FFBS-Gibbs", lambda r: fmt(r.signal_per_s_vs.get("FFBS-Gibbs"))),
    ("vs DiscreteHMCGibbs", lambda r: fmt(r.signal_per_s_vs.get("DiscreteHMCGibbs"))),
)


def report(rows: Sequence[Row], settings: dict[str, Any]) -> str:
    lines = [
        f"## bench_chain_blocks, FHMM L = {settings['L']}, K = {settings['K']}",
        "",
        f"{settings['config']}; {settings['num_chains']} chains one after the other; "
        f"{settings['num_warmup']} + {settings['num_samples']} steps per chain "
        f"({settings['gibbs_num_warmup']} + {settings['gibbs_num_samples']} for "
        f"DiscreteHMCGibbs); data seed {settings['seed']}, chain seed "
        f"{settings['seed'] if settings['chain_seed'] is None else settings['chain_seed']}; "
        f"{os.cpu_count()} CPU(s), "
        f"jax {jax.__version__}.",
        "",
    ]
    lines += markdown_table(COLUMNS, rows)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    out_dirs = (RESULTS_DIR, RESULTS_DIR)
    parser = benchmark_parser("Chain blocks on the FHMM.", FULL, QUICK, None, out_dirs)
    parser.add_argument("--config", choices=["C1", "C2", "C3"], default="C3")
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    parser.add_argument(
        "--chain-seed",
        type=int,
        default=None,
        help="the seed of the chains' keys and initial values (default: --seed, which "
        "sets the data)",
    )
    args = parse_benchmark_args(parser, argv, FULL, QUICK, out_dirs)
    settings = {k: v for k, v in vars(args).items() if k != "out_dir"}
    data = fhmm_data(args.L, args.K, args.config, seed=args.seed)
    model_args = (jnp.asarray(data.y), args.K)
    rows = []
    for name in args.methods:
        # one seed for every method: the same data, initial values and chain keys
        chain_seed = args.seed if args.chain_seed is None else args.chain_seed
        rows.append(run(name, model_args, args, chain_seed))
        print(f"[L={args.L}, K={args.K}] {name}: done", flush=True)
    for anchor in ANCHORS:
        base = next((r.ess_signal_per_s for r in rows if r.method == anchor), None)
        for row in rows:
            if base:
                row.signal_per_s_vs[anchor] = row.ess_signal_per_s / base
    text = report(rows, settings)
    result = result_record(settings, rows=[asdict(r) for r in rows])
    write_results(args.out_dir, f"bench_chain_blocks_L{args.L}_K{args.K}", result, text)
    print(text)
    return result


if __name__ == "__main__":
    main()
