"""
Benchmark: structure detection, chromatic Gibbs and colour-batched exact ratios
==============================================================================

At ``init``, every kernel of the package reads which flat coordinates each term of the
model's log joint depends on and colours the interaction graph; ``weights="auto"`` then uses
colour-batched exact local ratios when they are cheap, and :class:`~numpyro_discrete.ChromaticGibbs`
sweeps the colour classes. This script measures what that buys, side by side in one process:

- **ising** - the Ising model of :mod:`benchmarks.targets` (``p = 50``, C2, open lattice),
  written elementwise (``ising_target(..., elementwise=True)``: the field and each edge
  direction as their own elementwise factors, 2 colours). Samplers: ``ChromaticGibbs``,
  ``ALBP`` (auto weights: exact, colour-batched), ``ALBP(weights="gradient")``, numpyro's
  ``DiscreteGibbs`` (one systematic sweep per step) and **checkerboard**, a hand-written
  Gibbs sampler in plain JAX (the two colours of the open lattice, each half drawn at once
  from its exact conditional given the field and the neighbour sums, a ``jax.lax.scan`` over
  sweeps, jitted): the speed a user could reach by hand.
- **potts** - the 3-state Potts model (``p = 30``, colours used as indices into the field
  and the coupling tables, ``potts_target(..., elementwise=True)``: the two directions of
  neighbour pairs as elementwise factors). Samplers: ``ALBP`` (auto: exact,
  colour-batched), ``ChromaticGibbs``, ``DiscreteGibbs``.
- **detection** - the wall time and memory of ``detect_dependencies`` + ``term_structure``
  on the Ising lattice at ``N = 10^4`` and ``10^5`` coordinates, written elementwise and
  as one summed factor (split into its summands at ``init``), on the term
  function the kernels use (``DiscreteTarget.from_model(...).log_terms()``), and the colour
  count of every model, in both its elementwise and its summed (one scalar factor) form.

Before sampling, the script checks that the elementwise and the summed form of each model
have the same log density at random states (numpyro's ``log_density``; it stops otherwise).

Metrics (after warmup; one chain):

- **weights / colours** - the kernel's ``weights_mode`` and ``num_colours`` after ``init``.
- **acc** - mean ``accept_prob``: ALBP's MH acceptance; ChromaticGibbs's mean over the
  classes of a sweep (1 for a valid colouring); n/a for DiscreteGibbs and checkerboard
  (exact Gibbs updates). **R** - ALBP's path length after warmup.
- **ESS mean / min** - ``numpyro.diagnostics.effective_sample_size`` of every coordinate (the
  integer value: the spin, or the Potts colour label), mean and min over coordinates;
  **ESS Ham.** (JSON) - of the Hamming distance to a fixed random reference state.
- **ESS/step** - ESS min per step of that sampler: a ChromaticGibbs, DiscreteGibbs or
  checkerboard step is a sweep over all ``N`` coordinates, an ALBP step one MH move of about
  ``R`` coordinates.
- **ms/step** - steady-state cost of one step: the kernel's ``sample`` (or the hand-written
  sweep) in a jitted ``fori_loop`` started from the post-warmup state, the loop length grown
  until one loop takes ``--min-timing-seconds``, then the fastest of ``--timing-repeats``
  timed loops (``jax.block_until_ready``). The loop's compilation is timed apart
  (``jit(...).lower(...).compile()``, **loop compile s** in the JSON).
- **first run s** - what a user waits for: building the kernel and ``MCMC`` and one
  ``mcmc.run(key)`` of ``num_warmup + num_samples`` steps (kernel ``init`` with structure
  detection, numpyro's tracing, compilation, warmup, sampling), timed up to
  ``jax.block_until_ready`` on the samples. For checkerboard: ``jit`` of the whole run (warmup
  loop and a ``scan`` collecting the draws) and its first call.
- **compile s** - the fixed cost of that first run: first run s minus its
  ``num_warmup + num_samples`` steps at the steady ms/step (initialisation, structure
  detection, tracing and compilation; ALBP's early warmup steps are cheaper than its steady
  ones, so its value is slightly low).
- **later run s** (fixed) - the fixed cost of a later run: a second ``mcmc.run`` of
  ``num_samples`` steps from ``mcmc.post_warmup_state = mcmc.last_state`` (what a user
  calls to draw more), minus its steps at the steady ms/step. numpyro re-traces its sampling
  loop and compiles it again on every ``run`` (JAX's persistent compilation cache is off, as
  for a user who did not turn it on). Checkerboard calls its jitted function again (a cache
  hit: only the dispatch).
- **minESS/s** - ESS min per second of sampling, the sampling time being ms/step times the
  draws (compilation and per-run costs apart). The draws are the ``num_samples`` of the
  first run and the ``num_samples`` of the later run (one continuous chain), so ``draws`` is
  twice ``--num-samples``.
- **x Gibbs / x checkerboard** - minESS/s over that of ``DiscreteGibbs`` / checkerboard on
  the same target.

The tables also check the targets of the issue that added structure detection (met or not;
meaningless at ``--quick`` sizes): on Ising, ChromaticGibbs at least 0.5x checkerboard and
100x DiscreteGibbs; on Potts, ALBP at least 5x and ChromaticGibbs at least 100x
DiscreteGibbs; detection and colouring at most 5 s at ``N = 10^5``, elementwise and through
sums.

Detection: for each size, ``DiscreteTarget.from_model`` is timed once (the whole ``init``
of the structure, cold: tracing, detection, colouring, weights; **init s** and the increase
of the process's peak resident memory, **RSS +MB**: a lower bound, the peak of the process
so far), then ``detect_dependencies`` and ``term_structure`` are timed apart on its term
function (**detect s**, **colour s**), then run again under ``tracemalloc``
(**traced peak MB**: the peak of the Python and numpy allocations of one detection and
colouring; XLA's buffers are not traced).

Usage (from the repository root)::

    python -m benchmarks.bench_structure            # full size, under 10 min on 2 cores
    python -m benchmarks.bench_structure --quick --out-dir /tmp/bs   # smoke test, < 2 min
    python -m benchmarks.bench_structure --targets ising detection --num-samples 2000

Outputs: the markdown tables on stdout, ``bench_structure.json`` and ``bench_structure.md``
in ``--out-dir`` (default ``benchmarks/results``; a ``--quick`` run without ``--out-dir``
writes to ``bench_structure_quick`` in the temporary folder, never to the results).
"""

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
import math
import os
from pathlib import Path
import tempfile
import time
import tracemalloc
from typing import Any

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

import numpyro
from numpyro.infer import DiscreteGibbs
from numpyro.infer.util import log_density

from numpyro_discrete import ALBP, ChromaticGibbs
from numpyro_discrete.model.initial_values import initial_position
from numpyro_discrete.model.target import DiscreteTarget
from numpyro_discrete.structure.colouring import term_structure
from numpyro_discrete.structure.dependencies import detect_dependencies

from benchmarks.bench_sweeps import checkerboard_ising
from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    draw_metrics,
    fmt,
    markdown_table,
    number_column,
    parse_benchmark_args,
    peak_rss_mb,
    per_second,
    release_compiled_programs,
    result_record,
    timed_first_run,
    timed_later_run,
    write_results,
)
from benchmarks.targets import Target, ising_target, potts_target

QUICK_OUT_DIR = Path(tempfile.gettempdir()) / "bench_structure_quick"
SITE = "x"
GIBBS = "DiscreteGibbs"
CHECKERBOARD = "checkerboard"

FULL = {
    "ising_p": 50,
    "potts_p": 30,
    "num_warmup": 1000,
    "num_samples": 5000,
    "gibbs_num_warmup": 50,
    "gibbs_num_samples": 250,
    "detect_sizes": [10_000, 100_000],
    "min_timing_seconds": 0.5,
    "timing_repeats": 3,
}
QUICK = {
    "ising_p": 8,
    "potts_p": 8,
    "num_warmup": 100,
    "num_samples": 300,
    "gibbs_num_warmup": 10,
    "gibbs_num_samples": 40,
    "detect_sizes": [100, 1000],
    "min_timing_seconds": 0.05,
    "timing_repeats": 2,
}

#: ``(target family, sampler, reference sampler, minimum ratio of minESS/s)`` of the issue.
ISSUE_TARGETS = (
    ("ising", "ChromaticGibbs", CHECKERBOARD, 0.5),
    ("ising", "ChromaticGibbs", GIBBS, 100.0),
    ("potts", "ALBP", GIBBS, 5.0),
    ("potts", "ChromaticGibbs", GIBBS, 100.0),
)
#: Seconds allowed to detection and colouring at ``N = 10^5``.
DETECTION_BUDGET_S = 5.0


@dataclass(frozen=True)
class SamplerSpec:
    """
    - **name** - label in the tables.
    - **make** - ``model -> kernel``; None for the hand-written checkerboard sampler.
    - **extra_fields** - state fields collected besides the samples.
    - **sweeps** - whether it takes the ``--gibbs-*`` step counts (DiscreteGibbs).
    """

    name: str
    make: Callable[[Callable], Any] | None
    extra_fields: tuple[str, ...] = ()
    sweeps: bool = False


ALBP_FIELDS = ("accept_prob", "path_length", "num_changed")
CHROMATIC_FIELDS = ("accept_prob", "num_changed")


def sampler_specs(family: str) -> list[SamplerSpec]:
    """The samplers of the ``"ising"`` or ``"potts"`` target, in the order they run."""
    chromatic = SamplerSpec("ChromaticGibbs", ChromaticGibbs, CHROMATIC_FIELDS)
    albp = SamplerSpec("ALBP", ALBP, ALBP_FIELDS)
    gibbs = SamplerSpec(GIBBS, DiscreteGibbs, (), sweeps=True)
    if family == "ising":
        gradient = SamplerSpec(
            "ALBP-gradient", lambda model: ALBP(model, weights="gradient"), ALBP_FIELDS
        )
        return [chromatic, albp, gradient, gibbs, SamplerSpec(CHECKERBOARD, None)]
    return [albp, chromatic, gibbs]


@dataclass
class Row:
    """One (target, sampler) result; None where a metric does not apply."""

    target: str
    family: str
    sampler: str
    weights: str | None
    num_colours: int | None
    num_coords: int
    num_warmup: int
    num_draws: int
    acceptance: float | None
    final_R: float | None
    ejd: float
    ess_mean: float
    ess_min: float
    num_undefined_ess: int
    ess_hamming: float
    ess_min_per_step: float
    ms_per_step: float
    loop_compile_s: float
    first_run_s: float
    first_run_fixed_s: float
    later_run_s: float
    later_run_fixed_s: float
    sampling_s: float
    ess_min_per_s: float
    ess_hamming_per_s: float
    ess_min_per_s_vs_gibbs: float | None = None
    ess_min_per_s_vs_checkerboard: float | None = None


# --- steady-state step time -----------------------------------------------------------------


def step_timing(
    step: Callable[[Any], Any], state: Any, min_seconds: float, repeats: int
) -> tuple[float, float]:
    """``(compile_s, seconds_per_step)`` of `step` in a jitted ``fori_loop`` from `state`:
    the loop (whose length is an argument) compiled once and timed apart, its length grown
    until a loop takes `min_seconds`, then the fastest of `repeats` loops of that length."""

    def loop(state: Any, num_steps: jax.Array) -> Any:
        return lax.fori_loop(0, num_steps, lambda _, s: step(s), state)

    start = time.perf_counter()
    compiled = jax.jit(loop).lower(state, jnp.int32(1)).compile()
    compile_s = time.perf_counter() - start
    state = jax.block_until_ready(compiled(state, jnp.int32(1)))

    def timed(num_steps: int) -> float:
        nonlocal state
        start = time.perf_counter()
        state = jax.block_until_ready(compiled(state, jnp.int32(num_steps)))
        return time.perf_counter() - start

    num_steps, elapsed = 2, timed(2)
    while elapsed < min_seconds:
        num_steps = math.ceil(num_steps * min(10.0, 1.2 * min_seconds / max(elapsed, 1e-5)))
        elapsed = timed(num_steps)
    best = min([elapsed] + [timed(num_steps) for _ in range(repeats - 1)])
    return compile_s, best / num_steps


# --- running --------------------------------------------------------------------------------


@dataclass
class Draws:
    """What a sampler produced, before the metrics."""

    x: np.ndarray  # (1, draws, N)
    extra: dict[str, np.ndarray]
    first_run_s: float
    later_run_s: float
    loop_compile_s: float
    seconds_per_step: float
    weights: str | None = None
    num_colours: int | None = None


def run_mcmc(
    spec: SamplerSpec,
    model: Callable,
    key: jax.Array,
    num_warmup: int,
    num_samples: int,
    min_seconds: float,
    repeats: int,
) -> Draws:
    """A first ``MCMC.run`` as a user calls it, a later one from its last state, then the
    steady step time of the kernel's ``sample`` from there."""
    fields = spec.extra_fields
    mcmc, first_run_s = timed_first_run(
        lambda: spec.make(model), key, num_warmup, num_samples, extra_fields=fields
    )
    kernel = mcmc.sampler
    draws: list[np.ndarray] = []
    extras: list[dict[str, np.ndarray]] = []

    def keep_draws() -> None:
        draws.append(np.asarray(mcmc.get_samples()[SITE]).reshape(num_samples, -1))
        extras.append({k: np.asarray(v) for k, v in mcmc.get_extra_fields().items()})

    keep_draws()
    later_run_s = timed_later_run(mcmc, extra_fields=fields)
    keep_draws()
    loop_compile_s, per_step = step_timing(
        lambda s: kernel.sample(s, (), {}), mcmc.last_state, min_seconds, repeats
    )
    modes = getattr(kernel, "weights_mode", None)
    return Draws(
        x=np.concatenate(draws)[None].astype(np.int8),
        extra={k: np.concatenate([e[k] for e in extras]) for k in fields},
        first_run_s=first_run_s,
        later_run_s=later_run_s,
        loop_compile_s=loop_compile_s,
        seconds_per_step=per_step,
        weights=None if modes is None else modes[SITE],
        num_colours=getattr(kernel, "num_colours", None),
    )


def run_checkerboard(
    target: Target,
    key: jax.Array,
    num_warmup: int,
    num_samples: int,
    min_seconds: float,
    repeats: int,
) -> Draws:
    """The hand-written sampler (:func:`benchmarks.bench_sweeps.checkerboard_ising`), timed
    like :func:`run_mcmc`: a first call of its jitted run (compilation included) from
    uniform random spins, a later call from its last state, then the steady step time of
    its sweep."""
    start = time.perf_counter()
    sampler = checkerboard_ising(target.params["field"], float(target.params["lambda"]))

    def sweep(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        s, key = carry
        key, sweep_key = random.split(key)
        return sampler.sweep(s, sweep_key), key

    def run(key: jax.Array, s: jax.Array, num_warmup: jax.Array, num_samples: int):
        carry = lax.fori_loop(0, num_warmup, lambda _, c: sweep(c), (s, key))

        def collect(c: tuple, _: None) -> tuple[tuple, jax.Array]:
            c = sweep(c)
            return c, sampler.read(c[0]).astype(jnp.int8)

        return lax.scan(collect, carry, None, length=num_samples)

    jitted = jax.jit(run, static_argnums=3)
    key_init, key_run = random.split(key)
    s0 = 2.0 * random.bernoulli(key_init, 0.5, target.shape).astype(jnp.float32) - 1.0
    warmup = jnp.int32(num_warmup)
    carry, first = jax.block_until_ready(jitted(key_run, s0, warmup, num_samples))
    first_run_s = time.perf_counter() - start

    # the same program again (no warmup): a cache hit, as a user's second call
    start = time.perf_counter()
    carry, later = jax.block_until_ready(jitted(carry[1], carry[0], jnp.int32(0), num_samples))
    later_run_s = time.perf_counter() - start
    loop_compile_s, per_step = step_timing(sweep, carry, min_seconds, repeats)
    x = np.concatenate([np.asarray(first), np.asarray(later)]).reshape(1, 2 * num_samples, -1)
    return Draws(x, {}, first_run_s, later_run_s, loop_compile_s, per_step, None, 2)


def measure_row(
    target: Target,
    family: str,
    spec: SamplerSpec,
    draws: Draws,
    num_warmup: int,
    num_samples: int,
    reference: np.ndarray,
) -> Row:
    """Every metric of one sampler's draws and timings."""
    metrics = draw_metrics(draws.x, draws.extra, reference)
    per_step = draws.seconds_per_step
    num_draws = draws.x.shape[1]
    sampling_s = per_step * num_draws
    return Row(
        target=target.name,
        family=family,
        sampler=spec.name,
        weights=draws.weights,
        num_colours=draws.num_colours,
        num_coords=target.num_coords,
        num_warmup=num_warmup,
        num_draws=num_draws,
        **metrics,
        ess_min_per_step=metrics["ess_min"] / num_draws,
        ms_per_step=1e3 * per_step,
        loop_compile_s=draws.loop_compile_s,
        first_run_s=draws.first_run_s,
        first_run_fixed_s=draws.first_run_s - (num_warmup + num_samples) * per_step,
        later_run_s=draws.later_run_s,
        later_run_fixed_s=draws.later_run_s - num_samples * per_step,
        sampling_s=sampling_s,
        ess_min_per_s=per_second(metrics["ess_min"], sampling_s),
        ess_hamming_per_s=per_second(metrics["ess_hamming"], sampling_s),
    )


def add_ratios(rows: list[Row]) -> None:
    """minESS/s over DiscreteGibbs's and checkerboard's on the same target, in place."""
    for reference, field in (
        (GIBBS, "ess_min_per_s_vs_gibbs"),
        (CHECKERBOARD, "ess_min_per_s_vs_checkerboard"),
    ):
        base = {row.target: row.ess_min_per_s for row in rows if row.sampler == reference}
        for row in rows:
            if row.target in base:
                setattr(row, field, row.ess_min_per_s / base[row.target])


# --- sanity check and structure -------------------------------------------------------------


def _random_states(target: Target, num_values: int, seed: int, count: int = 3) -> list:
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.integers(0, num_values, target.shape)) for _ in range(count)]


def check_forms(pairs: Sequence[tuple[Target, Target, int]], seed: int) -> list[dict[str, Any]]:
    """The elementwise and the summed form of each model have the same log density at
    random states; raises otherwise."""
    out = []
    for summed, elementwise, num_values in pairs:
        for state in _random_states(summed, num_values, seed):
            values = [
                float(log_density(t.model, (), {}, {SITE: state})[0]) for t in (summed, elementwise)
            ]
            close = math.isclose(values[0], values[1], rel_tol=1e-5, abs_tol=1e-3)
            out.append(
                {
                    "summed": summed.name,
                    "elementwise": elementwise.name,
                    "log_density": values,
                    "equal": close,
                }
            )
            if not close:
                raise RuntimeError(
                    f"{elementwise.name} and {summed.name} differ at a random state: {values}"
                )
    return out


def structure_summary(target: Target, seed: int) -> dict[str, Any]:
    """Colour count, dense terms and auto weights of a model, as ``init`` finds them."""
    found = DiscreteTarget.from_model(target.model, random.key(seed), (), {})
    structure = found.structure
    return {
        "target": target.name,
        "num_coords": target.num_coords,
        "num_terms": int(structure.num_terms),
        "num_dense_terms": int(structure.dense_terms.size),
        "num_colours": int(structure.num_colours),
        "auto_weights": found.weights_mode[SITE],
        "note": found.structure_note,
    }


def measure_detection(
    num_coords: int, config: str, seed: int, elementwise: bool = True
) -> dict[str, Any]:
    """Detection and colouring of the Ising lattice of about `num_coords` coordinates,
    written elementwise or as one summed factor (see the module docstring)."""
    p = max(2, round(math.sqrt(num_coords)))
    target = ising_target(p, config, seed, elementwise=elementwise)
    rss_before = peak_rss_mb()
    start = time.perf_counter()
    found = DiscreteTarget.from_model(target.model, random.key(seed), (), {})
    init_s = time.perf_counter() - start
    rss_delta = peak_rss_mb() - rss_before
    terms = found.log_terms()
    x = np.asarray(initial_position(found, random.key(seed + 1), None, (), {}))

    start = time.perf_counter()
    dependencies = detect_dependencies(terms, x)
    detect_s = time.perf_counter() - start
    start = time.perf_counter()
    structure = term_structure(dependencies)
    colour_s = time.perf_counter() - start

    tracemalloc.start()
    try:
        term_structure(detect_dependencies(terms, x))
        traced_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {
        "target": target.name,
        "form": "elementwise" if elementwise else "summed",
        "num_coords": p * p,
        "num_terms": int(dependencies.num_terms),
        "num_pairs": int(dependencies.terms.size),
        "num_colours": int(structure.num_colours),
        "init_s": init_s,
        "detect_s": detect_s,
        "colour_s": colour_s,
        "detect_and_colour_s": detect_s + colour_s,
        "traced_peak_mb": traced_peak / 2**20,
        "max_rss_increase_mb": rss_delta,
    }


# --- reporting ------------------------------------------------------------------------------


def _issue_checks(
    rows: list[Row], detection: list[dict[str, Any]], quick: bool
) -> list[dict[str, Any]]:
    by_key = {(row.family, row.sampler): row for row in rows}
    checks = []
    for family, sampler, reference, minimum in ISSUE_TARGETS:
        row, base = by_key.get((family, sampler)), by_key.get((family, reference))
        if row is None or base is None:
            continue
        ratio = row.ess_min_per_s / base.ess_min_per_s
        checks.append(
            {
                "check": f"{row.target}: {sampler} minESS/s / {reference}",
                "target": f">= {minimum:g}",
                "value": ratio,
                "met": bool(ratio >= minimum),
            }
        )
    for form in ("elementwise", "summed"):
        rows_of_form = [d for d in detection if d["form"] == form]
        largest = max(rows_of_form, key=lambda d: d["num_coords"], default=None)
        if largest is None or not (quick or largest["num_coords"] >= 90_000):
            continue
        value = largest["detect_and_colour_s"]
        checks.append(
            {
                "check": f"detection + colouring, {form}, N = {largest['num_coords']}",
                "target": f"<= {DETECTION_BUDGET_S:g} s",
                "value": value,
                "met": bool(value <= DETECTION_BUDGET_S),
            }
        )
    return checks


COLUMNS = (
    ("target", lambda r: r.target),
    ("sampler", lambda r: r.sampler),
    ("weights", lambda r: r.weights or "n/a"),
    ("colours", lambda r: "n/a" if r.num_colours is None else str(r.num_colours)),
    ("draws", lambda r: str(r.num_draws)),
    number_column("acc", "acceptance"),
    number_column("R", "final_R", 4),
    number_column("ESS mean", "ess_mean", 4),
    number_column("ESS min", "ess_min", 4),
    number_column("ESS/step", "ess_min_per_step"),
    number_column("ms/step", "ms_per_step"),
    number_column("compile s", "first_run_fixed_s"),
    number_column("later run s", "later_run_fixed_s"),
    number_column("first run s", "first_run_s"),
    number_column("minESS/s", "ess_min_per_s"),
    number_column("x Gibbs", "ess_min_per_s_vs_gibbs"),
    number_column("x checkerboard", "ess_min_per_s_vs_checkerboard"),
)


def markdown_report(
    rows: list[Row],
    structures: list[dict[str, Any]],
    detection: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    settings: dict[str, Any],
) -> str:
    lines = [
        "## bench_structure",
        "",
        f"One chain; ALBP, ChromaticGibbs and checkerboard: {settings['num_warmup']} warmup + "
        f"2 runs of {settings['num_samples']} samples; DiscreteGibbs: "
        f"{settings['gibbs_num_warmup']} warmup + 2 runs of {settings['gibbs_num_samples']} "
        f"sweeps; seed {settings['seed']}; {settings['cpu_count']} CPU(s), jax "
        f"{jax.__version__}, numpyro {numpyro.__version__}"
        + (" (--quick: tiny sizes, the ratios mean nothing)." if settings["quick"] else "."),
        "",
    ]
    if rows:
        lines += markdown_table(COLUMNS, rows)
        lines.append("")
    if structures:
        lines += [
            "Structure found at `init` (`DiscreteTarget.from_model`): the elementwise and the "
            "summed form of each model.",
            "",
            "| model | N | terms | dense terms | colours | auto weights |",
            "|---|---|---|---|---|---|",
        ]
        for s in structures:
            lines.append(
                f"| {s['target']} | {s['num_coords']} | {s['num_terms']} | "
                f"{s['num_dense_terms']} | {s['num_colours']} | {s['auto_weights']} |"
            )
        lines.append("")
    if detection:
        lines += [
            "Detection and colouring on the Ising lattice, written elementwise or as one "
            "summed factor (split into its summands at init).",
            "",
            "| form | N | terms | pairs | colours | init s | detect s | colour s "
            "| detect + colour s | traced peak MB | RSS +MB |",
            "|" + "---|" * 11,
        ]
        for d in detection:
            lines.append(
                f"| {d['form']} | {d['num_coords']} | {d['num_terms']} | {d['num_pairs']} | "
                f"{d['num_colours']} | {fmt(d['init_s'])} | {fmt(d['detect_s'])} | "
                f"{fmt(d['colour_s'])} | {fmt(d['detect_and_colour_s'])} | "
                f"{fmt(d['traced_peak_mb'])} | {fmt(d['max_rss_increase_mb'])} |"
            )
        lines.append("")
    if checks:
        lines += [
            "Targets of the issue.",
            "",
            "| check | target | value | met |",
            "|---|---|---|---|",
        ]
        for c in checks:
            met = "yes" if c["met"] else "no"
            lines.append(f"| {c['check']} | {c['target']} | {fmt(c['value'])} | {met} |")
    return "\n".join(lines) + "\n"


# --- entry point ----------------------------------------------------------------------------

_HELP = {
    "ising_p": "side of the Ising lattice",
    "potts_p": "side of the Potts lattice",
    "num_warmup": "warmup steps of ALBP, ChromaticGibbs and checkerboard",
    "num_samples": "draws of each of their two runs",
    "gibbs_num_warmup": "warmup sweeps of DiscreteGibbs",
    "gibbs_num_samples": "draws (sweeps) of each of its two runs",
    "detect_sizes": "coordinates of the detection lattices",
    "min_timing_seconds": "length of a timed loop of steps",
    "timing_repeats": "timed loops, the fastest kept",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    out_dirs = (RESULTS_DIR, QUICK_OUT_DIR)
    parser = benchmark_parser(
        "Structure detection, ChromaticGibbs and colour-batched ALBP against numpyro's "
        "DiscreteGibbs and a hand-written checkerboard Gibbs sampler.",
        FULL,
        QUICK,
        _HELP,
        out_dirs,
        seed_help="MCMC keys, references",
    )
    parts = ["ising", "potts", "detection"]
    parser.add_argument("--targets", nargs="+", choices=parts, default=parts, help="default: all")
    parser.add_argument("--config", choices=["C1", "C2", "C3"], default="C2", help="Ising, C2")
    parser.add_argument("--target-seed", type=int, default=0, help="target parameters")
    return parse_benchmark_args(parser, argv, FULL, QUICK, out_dirs)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns what it writes to ``bench_structure.json``."""
    args = parse_args(argv)
    settings = {
        name: getattr(args, name)
        for name in [*FULL, "targets", "config", "seed", "target_seed", "quick"]
    }
    settings["cpu_count"] = os.cpu_count()

    families: dict[str, tuple[Target, int]] = {}
    if "ising" in args.targets:
        families["ising"] = (
            ising_target(args.ising_p, args.config, args.target_seed, elementwise=True),
            2,
        )
    if "potts" in args.targets:
        families["potts"] = (potts_target(args.potts_p, args.target_seed, elementwise=True), 3)
    summed = {
        "ising": lambda: ising_target(args.ising_p, args.config, args.target_seed),
        "potts": lambda: potts_target(args.potts_p, args.target_seed),
    }
    pairs = [(summed[f](), target, values) for f, (target, values) in families.items()]
    sanity = check_forms(pairs, args.seed)
    print(f"elementwise and summed forms agree at {len(sanity)} random states", flush=True)

    detection = []
    if "detection" in args.targets:
        for size in args.detect_sizes:
            for elementwise in (True, False):
                d = measure_detection(size, args.config, args.target_seed, elementwise)
                detection.append(d)
                print(
                    f"[detection {d['form']} N={d['num_coords']}] {d['init_s']:.2f} s init, "
                    f"{d['detect_s']:.2f} s detect, {d['colour_s']:.2f} s colour, "
                    f"{d['num_colours']} colours",
                    flush=True,
                )
                release_compiled_programs()
    structures = [structure_summary(t, args.seed) for pair in pairs for t in pair[:2]]

    rows: list[Row] = []
    rng = np.random.default_rng(args.seed)
    for t_index, (family, (target, num_values)) in enumerate(families.items()):
        reference = rng.integers(0, num_values, target.num_coords, dtype=np.int8)
        for s_index, spec in enumerate(sampler_specs(family)):
            warmup = args.gibbs_num_warmup if spec.sweeps else args.num_warmup
            samples = args.gibbs_num_samples if spec.sweeps else args.num_samples
            key = random.fold_in(random.key(args.seed), 100 * t_index + s_index)
            timing = (args.min_timing_seconds, args.timing_repeats)
            release_compiled_programs()
            if spec.make is None:
                draws = run_checkerboard(target, key, warmup, samples, *timing)
            else:
                draws = run_mcmc(spec, target.model, key, warmup, samples, *timing)
            row = measure_row(target, family, spec, draws, warmup, samples, reference)
            print(
                f"[{target.name}] {spec.name}: {row.ms_per_step:.3f} ms/step, first run "
                f"{row.first_run_s:.1f} s, ESS min {row.ess_min:.1f}",
                flush=True,
            )
            rows.append(row)
    release_compiled_programs()

    add_ratios(rows)
    checks = _issue_checks(rows, detection, args.quick)
    report = markdown_report(rows, structures, detection, checks, settings)
    print(report)
    result = result_record(
        settings,
        timing="ms_per_step: fastest timed jitted loop of the kernel's sample from the "
        "post-warmup state; first_run_fixed_s = first_run_s - (num_warmup + num_draws / 2) "
        "* per_step; later_run_fixed_s = later_run_s - num_draws / 2 * per_step; "
        "sampling_s = per_step * num_draws (num_draws: the draws of both runs; see the "
        "module docstring)",
        forms_agree=sanity,
        structures=structures,
        detection=detection,
        rows=[asdict(row) for row in rows],
        issue_targets=checks,
    )
    print(f"wrote {write_results(args.out_dir, 'bench_structure', result, report)}")
    return result


if __name__ == "__main__":
    main()
