"""
Paper reproduction suite: Sun, Dai and Schuurmans (2022), *Optimal Scaling for Locally
Balanced Proposals in Discrete Spaces*
=====================================================================================

Four experiments, one module each; the first three on the targets of Appendix D
(configuration C2; the FHMM's ``X`` alone, ``w``, ``b``, ``sigma`` at their true values; a
random RBM):

- ``efficiency`` (:mod:`benchmarks.paper.efficiency`, Figs. 1-4): EJD against acceptance
  rate for LBP and RWM, with ``R`` adapted towards each rate of a grid and then frozen;
  the measured optimum against 0.574 / 0.234, the asymptotic curves on Bernoulli;
- ``scaling`` (:mod:`benchmarks.paper.scaling`, Fig. 5): optimal ``R`` and the LBP / RWM
  efficiency ratio against ``N``, log-log, with fitted slopes (theory: 2/3);
- ``table`` (:mod:`benchmarks.paper.table`, Table 1, Tables 5-16): RWM-1, ARWM, GRWM,
  LBP-1, ALBP, GLBP: EJD, ESS, time; ALBP against the grid-searched best;
- ``rbm_pcd`` (:mod:`benchmarks.paper.rbm_pcd`, Sec. 6.3 / Table 2): PCD training of an RBM
  on binarised digits, the MH steps per iteration LBP-1 and ALBP need to reach a fixed
  exact held-out log-likelihood (also ``make bench-rbm`` alone).

Sizes (``--quick``, default, ``--full``) are in :data:`benchmarks.paper.common.PRESETS`: the
default ("reduced") runs in under 10 minutes on two CPU cores; ``--full`` runs the paper's
sizes and chain lengths (hours). Sweeps are shared between experiments within a run.

Usage (from the repository root)::

    python -m benchmarks.paper                  # reduced sizes -> docs/benchmarks/paper/
    python -m benchmarks.paper --full           # paper sizes   -> docs/benchmarks/paper/full/
    python -m benchmarks.paper --quick --out-dir /tmp/paper     # smoke test
    python -m benchmarks.paper --only efficiency scaling

Each experiment writes ``<name>.json`` (every number, with versions and machine),
``<name>.md`` (the tables the documentation includes) and, for the first two,
``<name>.png``; ``suite.json`` records the wall time of each experiment.
"""

import argparse
from pathlib import Path
import time

from benchmarks.paper import efficiency, rbm_pcd, scaling, table
from benchmarks.paper.common import DOCS_DIR, PRESETS, Cache, environment, write_json

EXPERIMENTS = {
    "efficiency": efficiency.run,
    "scaling": scaling.run,
    "table": table.run,
    "rbm_pcd": rbm_pcd.run,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.paper",
        description="Reproduce the experiments of Sun, Dai and Schuurmans (2022).",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the paper's sizes (hours)")
    size.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument(
        "--only", nargs="+", choices=list(EXPERIMENTS), default=list(EXPERIMENTS),
        help="experiments to run (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--steps-fraction", type=float, default=1.0,
        help="scale every chain length of the preset (e.g. 0.1 for a shorter --full run)",
    )  # fmt: skip
    parser.add_argument(
        "--chains", type=int, default=None, help="chains per sweep point (default: preset's)"
    )
    parser.add_argument(
        "--out-dir", type=Path, default=None,
        help="output folder (default docs/benchmarks/paper, or its full/ and quick/)",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    """Run the chosen experiments; return the wall times."""
    args = parse_args(argv)
    name = "full" if args.full else "quick" if args.quick else "reduced"
    preset = PRESETS[name].scaled(args.steps_fraction, args.chains)
    out_dir = args.out_dir or (DOCS_DIR if name == "reduced" else DOCS_DIR / name)
    cache = Cache()
    seconds = {}
    start = time.perf_counter()
    for experiment in args.only:
        print(f"{experiment} ({name})", flush=True)
        begin = time.perf_counter()
        EXPERIMENTS[experiment](preset, out_dir, cache)
        seconds[experiment] = time.perf_counter() - begin
        print(f"{experiment}: {seconds[experiment]:.0f} s", flush=True)
    total = time.perf_counter() - start
    print(f"suite ({name}): {total:.0f} s; results in {out_dir}", flush=True)
    summary = {
        "preset": preset,
        "argv": vars(args),
        "seconds": seconds,
        "total_s": total,
        "env": environment(),
    }
    write_json(out_dir, "suite", summary)
    return summary


if __name__ == "__main__":
    main()
