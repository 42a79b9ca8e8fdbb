"""What every benchmark measures and records: ESS and EJD of discrete draws, timed
``MCMC`` runs and the split of wall time into compilation and sampling, a fresh persistent
compilation cache, the environment of a run, the command line every benchmark shares (size
presets, ``--quick``, ``--seed``, ``--out-dir``), and number formatting for the markdown
tables and strict JSON."""

import argparse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
import contextlib
import gc
import json
import math
import os
from pathlib import Path
import platform
import resource
import statistics
import subprocess
import tempfile
import time
from typing import Any, NamedTuple
import warnings

import numpy as np

import jax
from jax.experimental.compilation_cache import compilation_cache

import numpyro
from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC
from numpyro.infer.mcmc import MCMCKernel

import numpyro_discrete

__all__ = [
    "PROBE_DRAWS",
    "RESULTS_DIR",
    "apply_presets",
    "benchmark_parser",
    "parse_benchmark_args",
    "CallTiming",
    "call_timing",
    "chain_states",
    "chunk_timing",
    "probe_seconds",
    "probe_timing",
    "sequential_mcmc",
    "timed_first_run",
    "timed_later_run",
    "timed_run",
    "timed_warmup",
    "coordinate_ess",
    "draw_metrics",
    "environment",
    "ess_summary",
    "expected_jump_distance",
    "field_mean",
    "fmt",
    "fresh_compilation_cache",
    "hamming_ess",
    "json_ready",
    "markdown_table",
    "number_column",
    "peak_rss_mb",
    "per_second",
    "result_record",
    "write_results",
    "release_compiled_programs",
]

# --- metrics ------------------------------------------------------------------------------


def expected_jump_distance(draws: np.ndarray) -> float:
    """Mean Hamming distance between consecutive draws ``(chains, draws, N)``."""
    return float(np.mean(np.sum(draws[:, 1:] != draws[:, :-1], axis=-1)))


def coordinate_ess(draws: np.ndarray, block: int = 256) -> np.ndarray:
    """ESS of every coordinate of ``(chains, draws, N)`` draws, in blocks of coordinates
    to bound the memory of the float64 copy; NaN/inf where a coordinate never moved."""
    num_coords = draws.shape[-1]
    blocks = []
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for start in range(0, num_coords, block):
            chunk = draws[..., start : start + block].astype(np.float64)
            blocks.append(np.asarray(effective_sample_size(chunk)))
    return np.concatenate(blocks)


def hamming_ess(draws: np.ndarray, reference: np.ndarray) -> float:
    """ESS of the Hamming distance of each draw to the fixed `reference` state."""
    distance = np.sum(draws != reference, axis=-1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(effective_sample_size(distance))


def ess_summary(draws: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """The ESS of ``(chains, draws, N)`` draws as the benchmarks report it: ``ess_mean``
    and ``ess_min`` over the coordinates whose ESS is defined (NaN if none is; a coordinate
    that never moved has none), ``num_undefined_ess`` the count of the others, and
    ``ess_hamming`` (:func:`hamming_ess` to `reference`)."""
    ess = coordinate_ess(draws)
    defined = np.isfinite(ess)
    return {
        "ess_mean": float(ess[defined].mean()) if defined.any() else math.nan,
        "ess_min": float(ess[defined].min()) if defined.any() else math.nan,
        "num_undefined_ess": int((~defined).sum()),
        "ess_hamming": hamming_ess(draws, reference),
    }


def field_mean(fields: Mapping[str, np.ndarray], name: str) -> float | None:
    """The mean of the collected extra field `name`; None for a sampler without it."""
    return float(np.mean(fields[name])) if name in fields else None


def draw_metrics(
    draws: np.ndarray, fields: Mapping[str, np.ndarray], reference: np.ndarray
) -> dict[str, Any]:
    """The metrics of a discrete sampler's ``(chains, draws, N)`` draws and its collected
    extra `fields`: ``acceptance`` and ``final_R``, the means of ``accept_prob`` and
    ``path_length`` (None for a sampler without them), ``ejd``
    (:func:`expected_jump_distance`) and the :func:`ess_summary` against `reference`."""
    return {
        "acceptance": field_mean(fields, "accept_prob"),
        "final_R": field_mean(fields, "path_length"),
        "ejd": expected_jump_distance(draws),
        **ess_summary(draws, reference),
    }


def per_second(value: float, seconds: float) -> float:
    """`value` per second of `seconds` (an ESS per second of sampling); NaN without time."""
    return value / seconds if seconds > 0 else math.nan


# --- timing -------------------------------------------------------------------------------


#: kept draws of the short run that measures numpyro's per-``MCMC.run`` overhead
PROBE_DRAWS = 10
#: timed probe runs (after one that compiles); the fastest is used
PROBE_REPEATS = 3


def sequential_mcmc(
    kernel: MCMCKernel, num_warmup: int, num_samples: int, num_chains: int, **options: Any
) -> MCMC:
    """``numpyro.infer.MCMC`` as the benchmarks time it: its `num_chains` chains run one after
    the other (``chain_method="sequential"``), no progress bar; `options` are ``MCMC``'s other
    arguments (``thinning``)."""
    return MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="sequential",
        progress_bar=False,
        **options,
    )


def chain_states(state: Any, num_chains: int) -> list[Any]:
    """The state of each chain in the state of an ``MCMC`` of `num_chains` chains (whose
    leaves have a leading axis of chains when there are more than one)."""
    if num_chains == 1:
        return [state]
    return [jax.tree.map(lambda leaf, c=c: leaf[c], state) for c in range(num_chains)]


def timed_warmup(mcmc: MCMC, rng_key: jax.Array, *model_args: Any, **kwargs: Any) -> float:
    """Seconds of ``mcmc.warmup(rng_key, *model_args, **kwargs)`` (compilation included)
    until its last state is ready (``block_until_ready``)."""
    start = time.perf_counter()
    mcmc.warmup(rng_key, *model_args, **kwargs)
    jax.block_until_ready(mcmc.post_warmup_state)
    return time.perf_counter() - start


def timed_run(
    mcmc: Any,
    rng_key: jax.Array,
    *model_args: Any,
    extra_fields: tuple[str, ...] = (),
    release: bool = False,
    **model_kwargs: Any,
) -> float:
    """Seconds of ``mcmc.run(rng_key, *model_args, extra_fields=..., **model_kwargs)`` until
    its samples and extra fields are ready (``block_until_ready``). With `release`, the
    compiled programs are freed after the timed call (:func:`release_compiled_programs`), so
    that every run pays the same cost of loading its program."""
    start = time.perf_counter()
    mcmc.run(rng_key, *model_args, extra_fields=extra_fields, **model_kwargs)
    jax.block_until_ready((mcmc.get_samples(), mcmc.get_extra_fields()))
    elapsed = time.perf_counter() - start
    if release:
        release_compiled_programs()
    return elapsed


def timed_first_run(
    make_kernel: Callable[[], MCMCKernel],
    rng_key: jax.Array,
    num_warmup: int,
    num_samples: int,
    *model_args: Any,
    progress_bar: bool = False,
    extra_fields: tuple[str, ...] = (),
) -> tuple[MCMC, float]:
    """A user's first run, timed: building the kernel (`make_kernel`) and a one-chain
    ``MCMC`` and one ``run`` until its samples and extra fields are ready; the ``MCMC`` and
    the seconds."""
    start = time.perf_counter()
    mcmc = MCMC(
        make_kernel(), num_warmup=num_warmup, num_samples=num_samples, progress_bar=progress_bar
    )
    timed_run(mcmc, rng_key, *model_args, extra_fields=extra_fields)
    return mcmc, time.perf_counter() - start


def timed_later_run(
    mcmc: MCMC, *model_args: Any, extra_fields: tuple[str, ...] = (), **model_kwargs: Any
) -> float:
    """Seconds of a later ``run`` (:func:`timed_run`) from the last state of `mcmc` with that
    state's own key, what a user calls to draw more (numpyro traces and compiles its
    sampling loop again)."""
    mcmc.post_warmup_state = mcmc.last_state
    key = mcmc.post_warmup_state.rng_key
    return timed_run(mcmc, key, *model_args, extra_fields=extra_fields, **model_kwargs)


def probe_seconds(timed_run: Callable[[], float]) -> float:
    """The fastest of `PROBE_REPEATS` calls of `timed_run` (a timed ``MCMC.run`` of the
    probe's few draws), after one call that compiles its program: timing noise only adds."""
    timed_run()
    return min(timed_run() for _ in range(PROBE_REPEATS))


class CallTiming(NamedTuple):
    """Per-step cost and per-``MCMC.run`` overhead, from a typical chunk and a short probe
    run."""

    seconds_per_step: float
    overhead_s: float


def call_timing(
    chunk_s: Sequence[float], chunk_size: int, probe_s: float, probe_size: int
) -> CallTiming:
    """Two compiled ``MCMC.run`` calls of one sampler, ``t = overhead + steps * per_step``
    each: the fastest compiled chunk (of `chunk_size` steps) and the fastest probe (of
    `probe_size`), solved for both unknowns. numpyro's ``run`` re-traces its sampling loop
    on every call and JAX lowers it and loads the compiled executable again, a fixed cost
    that is not sampling."""
    # the fastest of the compiled chunks and of the probes: timing noise only adds
    typical = min(chunk_s[1:])
    if typical <= probe_s:
        # chunks too short to tell their steps from the noise of the overhead: the
        # chunk's whole time counts as sampling, and the overhead stays unknown (NaN)
        return CallTiming(typical / chunk_size, math.nan)
    per_step = (typical - probe_s) / (chunk_size - probe_size)
    return CallTiming(per_step, probe_s - probe_size * per_step)


def probe_timing(
    mcmc: MCMC,
    later_run: Callable[[], float],
    chunk_s: Sequence[float],
    chunk_size: int,
    thinning: int = 1,
) -> CallTiming:
    """Per-step cost and per-``MCMC.run`` overhead of `mcmc`'s sampling (:func:`call_timing`)
    from the times `chunk_s` of its chunks of `chunk_size` steps and a probe: a run of
    `PROBE_DRAWS` kept draws (at most a tenth of a chunk, at least one) from the last chunk's
    state, timed by `later_run` (:func:`probe_seconds`; its draws are not used). The probe's
    steps are whole `thinning` periods; ``mcmc.num_samples`` is left at them."""
    probe_size = thinning * max(1, min(PROBE_DRAWS, chunk_size // (10 * thinning)))
    mcmc.num_samples = probe_size
    return call_timing(chunk_s, chunk_size, probe_seconds(later_run), probe_size)


def chunk_timing(
    chunk_s: Sequence[float], warmup_s: float, compiled_in_warmup: bool
) -> tuple[float, float]:
    """``(compile_s, sampling_s)`` from the wall times of the warmup and the chunks: the
    first run of the sampling program (the warmup if it is the same program, otherwise
    the first chunk) minus a typical compiled chunk, and the sampling time of every chunk
    at the compiled rate."""
    typical = statistics.median(chunk_s[1:])
    if compiled_in_warmup:
        return warmup_s - typical, sum(chunk_s)
    return chunk_s[0] - typical, sum(chunk_s[1:]) + typical


_CACHE_OPTIONS = {
    "jax_compilation_cache_dir": None,  # set to the temporary directory
    "jax_persistent_cache_min_compile_time_secs": 0.0,
    "jax_persistent_cache_min_entry_size_bytes": -1,
}


@contextlib.contextmanager
def fresh_compilation_cache() -> Iterator[str]:
    """JAX's persistent compilation cache in a new temporary directory, caching every
    program; the previous settings are restored and the directory deleted on exit."""
    previous = {name: getattr(jax.config, name) for name in _CACHE_OPTIONS}
    with tempfile.TemporaryDirectory(prefix="benchmarks_jax_cache_") as path:
        try:
            for name, value in _CACHE_OPTIONS.items():
                jax.config.update(name, path if value is None else value)
            # the cache is switched on or off at the first compilation of the process
            compilation_cache.reset_cache()
            yield path
        finally:
            for name, value in previous.items():
                jax.config.update(name, value)
            compilation_cache.reset_cache()


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB (``ru_maxrss``, kilobytes on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def release_compiled_programs() -> None:
    """
    Drop JAX's in-memory caches of compiled programs. XLA's CPU backend maps memory for
    every program it loads, and each timed run loads one (from the persistent cache): a
    process that loads a few dozen large programs exhausts the kernel's limit on memory
    mappings (``vm.max_map_count``, 65530 by default) and crashes in LLVM. Call it between
    samplers, after their timings, and between the runs of one sampler when there are many.
    """
    jax.clear_caches()
    gc.collect()


def _git_revision() -> str | None:
    """The repository's commit, with ``+dirty`` for uncommitted changes to the package."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        out.check_returncode()
        return out.stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--", "numpyro_discrete")
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+dirty" if dirty else "")


def environment() -> dict[str, Any]:
    """Versions, commit, platform and machine load, recorded in every benchmark's JSON
    (the load average counts the benchmark itself: about 1 on an otherwise idle machine)."""
    return {
        "jax": jax.__version__,
        "numpyro": numpyro.__version__,
        "numpyro_discrete": numpyro_discrete.__version__,
        "git_revision": _git_revision(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "load_average_1m_5m_15m": list(os.getloadavg()),
    }


def result_record(settings: Mapping[str, Any], **entries: Any) -> dict[str, Any]:
    """What a benchmark's JSON holds: its `settings`, the :func:`environment` of the run,
    then `entries` in their order."""
    return {"settings": settings, "environment": environment(), **entries}


# --- command line ---------------------------------------------------------------------------

#: The folder of the benchmarks' results: the default ``--out-dir`` (or its parent).
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def benchmark_parser(
    description: str,
    full: Mapping[str, Any],
    quick: Mapping[str, Any],
    help: Mapping[str, str] | None = None,
    out_dirs: tuple[Path, Path] | None = None,
    seed_help: str | None = "MCMC keys",
) -> argparse.ArgumentParser:
    """
    The command line every benchmark shares: one option per size of the `full` preset (its
    type, and ``nargs="+"`` for a list, read from the presets; ``None`` until
    :func:`parse_benchmark_args` fills it from `full` or, with ``--quick``, `quick`),
    ``--seed`` (what it seeds: `seed_help`; none if ``None``), ``--quick`` and ``--out-dir``
    (default ``out_dirs``: ``(full, quick)``).
    The benchmark adds its own options to the parser returned.
    """
    help = {} if help is None else help
    parser = argparse.ArgumentParser(description=description)
    for name, value in full.items():
        values = [*value, *quick[name]] if isinstance(value, list) else [value, quick[name]]
        kind = float if any(isinstance(v, float) for v in values) else type(values[0])
        text = f"{help[name]} " if name in help else ""
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            nargs="+" if isinstance(value, list) else None,
            help=f"{text}(default {value}; --quick: {quick[name]})",
        )
    if seed_help is not None:
        parser.add_argument("--seed", type=int, default=0, help=f"{seed_help} (default 0)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    default = "" if out_dirs is None else f" (default {out_dirs[0]}; --quick: {out_dirs[1]})"
    parser.add_argument(
        "--out-dir", type=Path, default=None, help=f"folder of the JSON and markdown{default}"
    )
    return parser


def parse_benchmark_args(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    full: Mapping[str, Any],
    quick: Mapping[str, Any],
    out_dirs: tuple[Path, Path],
) -> argparse.Namespace:
    """Parse `argv` with a :func:`benchmark_parser`, fill the sizes left at ``None`` from the
    presets (:func:`apply_presets`), and check ``--num-chunks`` where there is one."""
    args = parser.parse_args(argv)
    apply_presets(args, full, quick, out_dirs)
    if getattr(args, "num_chunks", 2) < 2:
        parser.error("--num-chunks must be >= 2 (the first chunk absorbs compilation)")
    return args


def apply_presets(
    args: Any,
    full: Mapping[str, Any],
    quick: Mapping[str, Any],
    out_dirs: tuple[Path, Path] | None = None,
) -> None:
    """Set every size option the command line left at ``None`` from the `quick` preset
    (``--quick``) or the `full` one, and ``args.out_dir`` if ``None`` from `out_dirs`
    ``(full, quick)``."""
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if out_dirs is not None and args.out_dir is None:
        args.out_dir = out_dirs[1] if args.quick else out_dirs[0]


# --- reporting ----------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


Column = tuple[str, Callable[[Any], str]]


def number_column(title: str, name: str, digits: int = 3) -> Column:
    """A table column of the number ``row.<name>`` of each row, written by :func:`fmt` with
    `digits` significant digits (``n/a`` for None)."""
    return title, lambda row: fmt(getattr(row, name), digits)


def markdown_table(columns: Sequence[Column], rows: Iterable[Any]) -> list[str]:
    """The lines of a markdown table: a header of the columns' titles, then one line per
    row of each column's cell function applied to it."""
    lines = ["| " + " | ".join(title for title, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(cell(row) for _, cell in columns) + " |")
    return lines


def json_ready(value: Any) -> Any:
    """Non-finite floats as strings, so that the file stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_ready(v) for v in value]
    return value


def write_results(out_dir: Path, stem: str, result: dict[str, Any], report: str) -> Path:
    """Write a benchmark's raw numbers to ``<stem>.json`` (strict JSON, see
    :func:`json_ready`) and its markdown report to ``<stem>.md`` in `out_dir` (created if
    needed); return the report's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps(json_ready(result), indent=2) + "\n")
    report_path = out_dir / f"{stem}.md"
    report_path.write_text(report)
    return report_path
