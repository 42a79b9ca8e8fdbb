"""
Benchmark: first and later runs with JAX's persistent compilation cache, loop checks on or off
==============================================================================================

JAX stores no program that holds a host callback in its persistent compilation cache, and
the kernels' in-run checks report through one (:mod:`numpyro_discrete.kernels.loop_checks`).
This benchmark measures what :func:`numpyro_discrete.enable_loop_checks` ``(False)`` buys a
user who turns the cache on: for each case, ``--processes`` fresh processes per setting
(checks on, checks off, and, on gallery models, numpyro's ``DiscreteHMCGibbs(NUTS(model))``
with the same cache: its loop holds no callback), alternated, every process of a setting
sharing one new cache directory (threshold ``jax_persistent_cache_min_compile_time_secs =
0.2``). Each process times, as a user waits for them:

- **first run s** - kernel construction, ``MCMC(..., progress_bar=False)`` and ``run`` until
  the draws are ready (init, tracing, compilation or loading from the cache, every step);
- **later run s** - a second ``run`` of ``S`` draws from ``post_warmup_state`` in the same
  process (numpyro traces and compiles its loop again on every ``run``: a different loop
  length from the first run's, so compiled in the first process, loaded in later ones).

Cases: ``ising`` - ``ALBP`` on the summed Ising 50 x 50 of :mod:`benchmarks.targets` (1000 +
1000; ``--quick``: 10 x 10, 50 + 50); gallery models (``--models``) - ``LBPGibbs(NUTS(model))``
at the example size (500 + 500), one chain, or ``K`` sequential chains for ``model/K`` (numpyro
compiles its loop again for every chain: from the second on, a cache hit with the checks
off). The first process of each setting starts with an empty cache, so it compiles
everything either way, but for the chains after the first.

Usage (from the repository root)::

    python -m benchmarks.bench_persistent_cache
    python -m benchmarks.bench_persistent_cache --models mixture --processes 2
    python -m benchmarks.bench_persistent_cache --quick
"""

from collections.abc import Sequence
import json
from pathlib import Path
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    fmt,
    parse_benchmark_args,
    result_record,
    write_results,
)

FULL = {
    "models": ["ising", "mixture", "mixture/4", "fhmm", "change_point"],
    "processes": 3,
    "ising_p": 50,
}
QUICK = {"models": ["ising"], "processes": 2, "ising_p": 10}
HELP = {
    "models": "cases: ising, gallery models, model/K for K sequential chains",
    "processes": "fresh processes per case and setting",
    "ising_p": "side of the Ising lattice",
}
CACHE_THRESHOLD_S = 0.2
#: numpyro's anchor on the gallery's models, with the cache on (its loop holds no callback)
ANCHOR = "DiscreteHMCGibbs"


def variants(case: str) -> tuple[tuple[str, str], ...]:
    """The (sampler, loop checks) settings of `case`."""
    if case == "ising":
        return ("ALBP", "on"), ("ALBP", "off")
    return ("LBPGibbs(NUTS)", "on"), ("LBPGibbs(NUTS)", "off"), (ANCHOR, "-")


def run_worker(spec: dict[str, Any]) -> dict[str, float]:
    """One process's first and later run of `spec`'s case (``--worker``)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", spec["cache_dir"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_THRESHOLD_S)
    from numpyro.infer import MCMC, NUTS, DiscreteHMCGibbs

    import numpyro_discrete
    from numpyro_discrete import ALBP, LBPGibbs
    from numpyro_discrete.gallery import GALLERY

    from benchmarks.targets import ising_target

    numpyro_discrete.enable_loop_checks(spec["loop_checks"] != "off")
    name, _, chains = spec["case"].partition("/")
    if name == "ising":
        model, args, kwargs = ising_target(spec["ising_p"]).model, (), {}
        steps = 50 if spec["quick"] else 1000
    else:
        entry = GALLERY[name]
        data = entry.simulate(0, "example")
        model, args, kwargs, steps = entry.model, data.args, data.kwargs, 500
    start = time.perf_counter()
    kernels = {
        "ALBP": lambda: ALBP(model),
        "LBPGibbs(NUTS)": lambda: LBPGibbs(NUTS(model)),
        ANCHOR: lambda: DiscreteHMCGibbs(NUTS(model)),
    }
    kernel = kernels[spec["sampler"]]()
    mcmc = MCMC(
        kernel,
        num_warmup=steps,
        num_samples=steps,
        num_chains=int(chains or 1),
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(jax.random.key(0), *args, **kwargs)
    jax.block_until_ready(mcmc.get_samples())
    first = time.perf_counter() - start
    mcmc.post_warmup_state = mcmc.last_state
    start = time.perf_counter()
    mcmc.run(mcmc.last_state.rng_key, *args, **kwargs)
    jax.block_until_ready(mcmc.get_samples())
    return {"first_run_s": first, "later_run_s": time.perf_counter() - start}


def measure(case: str, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every process of `case`, its settings alternated."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_persistent_cache_") as root:
        for index in range(settings["processes"]):
            for sampler, loop_checks in variants(case):
                spec = {
                    "case": case,
                    "sampler": sampler,
                    "loop_checks": loop_checks,
                    "cache_dir": str(Path(root) / f"{sampler[:4]}-{loop_checks}"),
                    "ising_p": settings["ising_p"],
                    "quick": settings["quick"],
                }
                command = [sys.executable, "-m", __spec__.name, "--worker", json.dumps(spec)]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"{case}, {sampler}, {loop_checks}: {done.stderr[-2000:]}")
                timing = json.loads(done.stdout.strip().splitlines()[-1])
                row = {"case": case, "sampler": sampler, "loop_checks": loop_checks}
                rows.append({**row, "process": index + 1, **timing})
                print(
                    f"{case:14s} {sampler:16s} checks {loop_checks:3s} process {index + 1}: "
                    f"first run {fmt(timing['first_run_s'])} s, later run "
                    f"{fmt(timing['later_run_s'])} s",
                    flush=True,
                )
    return rows


def markdown_report(rows: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    processes = range(1, settings["processes"] + 1)
    header = (
        ["case", "sampler", "loop checks"]
        + [f"first run s, process {p}" for p in processes]
        + [f"later run s, process {p}" for p in processes]
    )
    lines = [
        "## bench_persistent_cache",
        "",
        f"JAX's persistent compilation cache on (threshold {CACHE_THRESHOLD_S} s), one cache "
        "directory per case and setting, fresh processes alternated between the settings; "
        "the first process of each starts with an empty cache.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for case in settings["models"]:
        for sampler, loop_checks in variants(case):
            mine = [
                r
                for r in rows
                if (r["case"], r["sampler"], r["loop_checks"]) == (case, sampler, loop_checks)
            ]
            cells = [fmt(r["first_run_s"]) for r in mine] + [fmt(r["later_run_s"]) for r in mine]
            lines.append("| " + " | ".join([case, sampler, loop_checks, *cells]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        print(json.dumps(run_worker(json.loads(argv[1]))))
        return None
    out_dirs = (RESULTS_DIR / "persistent_cache", RESULTS_DIR / "quick")
    parser = benchmark_parser(__doc__.splitlines()[1], FULL, QUICK, HELP, out_dirs, None)
    args = parse_benchmark_args(parser, argv, FULL, QUICK, out_dirs)
    settings = {name: getattr(args, name) for name in FULL} | {"quick": args.quick}
    rows = [row for case in settings["models"] for row in measure(case, settings)]
    report = markdown_report(rows, settings)
    print(report)
    result = result_record(settings, rows=rows)
    write_results(args.out_dir, "bench_persistent_cache", result, report)
    return result


if __name__ == "__main__":
    main()
