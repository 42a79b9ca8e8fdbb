"""
Benchmark: what a user waits for, compilation included, in fresh processes
==========================================================================

Compiled programs are cached per process, so every measurement below runs in its own
fresh subprocess (``python -m benchmarks.bench_compile --worker '<json spec>'``, which prints
one JSON line on stdout), without JAX's persistent compilation cache (the subprocess's
environment has no ``JAX_COMPILATION_CACHE_DIR`` and the worker sets
``jax_enable_compilation_cache`` to False), as for a user who did not turn it on.

Cases:

- **ising** - the Ising model of :mod:`benchmarks.targets` (``p = 50``, C2, open lattice,
  ``N = 2500``), the README's form (``ising_target(50)``: one scalar factor, "summed"):
  ``ALBP``, ``ACS`` and numpyro's ``DiscreteGibbs`` (default arguments); the elementwise
  form (``ising_target(50, elementwise=True)``: structure detection finds 2 colours):
  ``ChromaticGibbs`` and ``ALBP``.
- **ising-large** - the summed Ising model at ``p = 316`` (``N = 99,856``; ``--quick``:
  ``p = 60``), ``ALBP``: the runs subprocess only (no progress bar, no end-to-end).
- **fhmm-demo** - the model and data of ``examples/fhmm.py`` at its defaults (``L = 200``,
  ``K = 3``, seed 0) and its kernel ``LBPGibbs(NUTS(fhmm_model),
  discrete_kernel=ALBP(fhmm_model, weights="auto"), num_discrete_steps=1)``: the runs and
  the progress-bar subprocesses (the demo runs with numpyro's progress bar), no end-to-end;
  and, as the anchor of NUTS's own cost on this model, ``NUTS`` on the model conditioned on
  the true hidden states (``"NUTS(x known)"``: the continuous sites only).
- **gallery** - the gallery's models (:data:`GALLERY_MODELS`; ``--quick``: the mixture) at
  their example size, seed 0, with the kernel a user writes first,
  ``LBPGibbs(NUTS(model))`` (``"LBPGibbs(NUTS) default"``: the discrete kernel chosen from
  the structure), beside numpyro's ``DiscreteHMCGibbs(NUTS(model))``: one **first**
  subprocess each, a first run of ``--gallery-steps`` warmup steps and as many draws
  (500; ``--quick`` 50), timed as the runs subprocess's first run; and, as the floor no
  discrete kernel can go below, ``NUTS`` alone on the model conditioned on its discrete
  sites (``"NUTS(x known)"``, at the values LBPGibbs's chains start from: drawn given
  NUTS's starting point), which numpyro starts op by op.

Subprocesses of each (case, sampler), ``W``/``S`` = ``--num-warmup``/``--num-samples``
(1000/1000; ``--quick`` 100/100), one chain, ``jax.random.key(0)``:

- **runs** (``progress_bar=False``): building the kernel and ``MCMC(kernel, num_warmup=W,
  num_samples=S, progress_bar=False)`` and ``mcmc.run(key)``, timed until
  ``jax.block_until_ready(mcmc.get_samples())``: **first run s** (kernel construction,
  ``init`` with structure detection, numpyro's tracing, compilation, the ``W + S`` steps).
  Then later runs, each from ``mcmc.post_warmup_state = mcmc.last_state`` with the state's
  own ``rng_key`` and ``mcmc.num_samples`` set to ``S`` (**later run s**), 10, 10 again and
  ``L`` (``t_S, t_10, t_10', t_L``). numpyro 0.22 re-traces and compiles its sampling loop
  on every ``run`` with the progress bar off, so each later run pays that again, and that
  cost varies by tenths of a second from run to run: ``L`` starts at ``5 S``; each ``L`` is
  run twice and ``t_L`` is the faster; while the long run's steps (``t_L - min(t_10,
  t_10')``) take less than ``--min-long-seconds`` (2 s; ``--quick`` 0.5 s), four times the
  spread of the short pair or twice that of the long pair, ``L`` grows (at most 10x, 3
  times); a step still not resolved after that is the row's error, not a number (every
  long run in ``long_runs``: ``[L, thinning, seconds]``). Past ``5 * 10^7`` kept values
  (``L * N``) its draws are thinned (``mcmc.thinning``: the same steps, fewer copies into
  numpyro's collection), to bound memory. From them::

      per_step_s        = (t_L - min(t_10, t_10')) / (L - 10)       (ms/step = 1000 x)
      later_run_fixed_s = min(t_10, t_10') - 10 * per_step_s
      compile_s         = first_run_s - (W + S) * per_step_s

  (``compile_s`` is the fixed cost of the first run: init, detection, tracing and
  compilation; ALBP's early warmup steps are cheaper than its steady ones and NUTS's vary,
  so it is approximate.) **import s** - from the parent's launch of the subprocess to the
  worker's first line (interpreter start and the imports of jax, numpyro, numpyro_discrete
  and this module), plus the import of ``examples/fhmm.py`` for the demo.
- **progress bar** (``progress_bar=True``, numpyro's default; tqdm writes to the child's
  stderr, which is discarded unless it fails): **first run (progress bar) s**, timed the
  same way, then **later run (progress bar) s**, a second run of ``S`` draws from
  ``post_warmup_state`` (numpyro's progress-bar loop calls one jitted step per iteration
  and reuses it when the collection's shape is unchanged).
- **end-to-end** (``ising`` only): ``MCMC(kernel, num_warmup=2000, num_samples=20000,
  progress_bar=False)`` (``--quick`` 200/2000), timed from kernel construction to the
  samples ready: **e2e wall s**. ``min_ess`` = the minimum over coordinates of
  :func:`~benchmarks.measurement.coordinate_ess` of the draws of ``x`` (``(1, draws, N)``;
  coordinates that never moved have no finite ESS: left out, counted in
  ``num_undefined_ess``), **e2e minESS/s** = ``min_ess / e2e_wall_s``, **x Gibbs e2e** =
  that over DiscreteGibbs's on the same model (the elementwise and the summed form are the
  same density), and, for comparison, the steady-state rate ``steady_min_ess_per_s =
  min_ess / (draws * per_step_s)`` with ``per_step_s`` from the runs subprocess (JSON).

A ``DiscreteGibbs`` step is a sweep over all ``N`` coordinates, each of which evaluates the
model (~27 ms on Ising 50x50 on two cores, against ~0.05 ms for an ALBP step): its step
counts (``W``, ``S``, ``L`` and the end-to-end ones) are divided by ``--gibbs-divisor``
(default 10) so that its subprocesses stay within ``--timeout``; its rates are per second,
so they compare, although its first-run and end-to-end times cover fewer steps. ``ACS``
gets at least 180 warmup steps (its default schedules need 90 tuning steps, at most half of
the warmup; this only changes ``--quick``).

Targets of the issue, printed as PASS/FAIL and stored in the JSON (meaningless at
``--quick`` sizes): on the summed Ising 50x50, ALBP's first run <= 5 s, later run fixed
<= 1 s, steady step <= 0.15 ms, end-to-end minESS/s >= 20x DiscreteGibbs's; ALBP's first
run <= 8 s at ``N = 99,856``; ``compile_s`` of the fhmm demo's LBPGibbs(NUTS) <= 5 s;
the default LBPGibbs's first run on a gallery model <= 5 s, and <= 0.5x DiscreteHMCGibbs's
on the mixture and the factorial HMM.

Usage (from the repository root)::

    python -m benchmarks.bench_compile                  # full sizes, about 10 min on 2 cores
    python -m benchmarks.bench_compile --quick          # smoke test, a few minutes
    python -m benchmarks.bench_compile --cases ising --samplers ALBP,DiscreteGibbs

Outputs: the markdown table and the checks on stdout, ``bench_compile.json`` (settings,
environment, command line, every row, every check) and ``bench_compile.md`` in ``--out``
(default ``benchmarks/results``; a ``--quick`` run without ``--out`` writes to
``bench_compile_quick`` in the temporary folder, never to the results).
"""

import argparse
from collections.abc import Callable, Sequence
import contextlib
from dataclasses import asdict, dataclass, field
from functools import partial
import importlib.util
import json
import math
import os
from pathlib import Path
import shlex
import subprocess
import sys
import tempfile
import time
from types import ModuleType
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp

import numpyro
from numpyro.infer import MCMC, NUTS, DiscreteGibbs, DiscreteHMCGibbs
from numpyro.infer.mcmc import MCMCKernel

from numpyro_discrete import ACS, ALBP, ChromaticGibbs, LBPGibbs
from numpyro_discrete.gallery import GALLERY
from numpyro_discrete.model.sites import model_sites

from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    coordinate_ess,
    fmt,
    json_ready,
    markdown_table,
    number_column,
    parse_benchmark_args,
    result_record,
    timed_first_run,
    timed_run,
    write_results,
)
from benchmarks.targets import ising_target

ROOT = Path(__file__).resolve().parents[1]
QUICK_OUT_DIR = Path(tempfile.gettempdir()) / "bench_compile_quick"
SITE = "x"
GIBBS = "DiscreteGibbs"
LBP_GIBBS = "LBPGibbs(NUTS)"
NUTS_KNOWN = "NUTS(x known)"
LBP_GIBBS_DEFAULT = "LBPGibbs(NUTS) default"
DHMC_GIBBS = "DiscreteHMCGibbs"
CASES = ("ising", "ising-large", "fhmm-demo", "gallery")
SAMPLERS = (
    "ALBP",
    "ACS",
    GIBBS,
    "ChromaticGibbs",
    LBP_GIBBS,
    NUTS_KNOWN,
    LBP_GIBBS_DEFAULT,
    DHMC_GIBBS,
)
KINDS = ("runs", "progress_bar", "e2e", "first")
#: The gallery models of the "gallery" case (``--quick``: the first only); their one first
#: run is ``gallery_steps`` warmup steps and draws (issue 31's 500 + 500, one chain).
GALLERY_MODELS = ("mixture", "fhmm", "hmm", "change_point", "variable_selection", "sbm")

FULL = {
    "ising_p": 50,
    "large_p": 316,
    "num_warmup": 1000,
    "num_samples": 1000,
    "e2e_num_warmup": 2000,
    "e2e_num_samples": 20000,
    "min_long_seconds": 2.0,
    "gallery_steps": 500,
}
QUICK = {
    "ising_p": 50,
    "large_p": 60,
    "num_warmup": 100,
    "num_samples": 100,
    "e2e_num_warmup": 200,
    "e2e_num_samples": 2000,
    "min_long_seconds": 0.5,
    "gallery_steps": 50,
}
#: The later run of ``L = LATER_FACTOR * S`` draws that gives the per-step cost.
LATER_FACTOR = 5
#: Draws of the short later runs that give the fixed cost of a run.
SHORT_DRAWS = 10
#: Times the long run is grown (see ``--min-long-seconds``).
MAX_LONG_GROWTHS = 3
#: ACS's default schedules need 90 tuning steps, which it takes from up to half of warmup.
ACS_MIN_WARMUP = 180
#: Kept values (draws x N) of a long run above which its draws are thinned (memory).
MAX_KEPT_VALUES = 50_000_000
#: The example and its defaults (``examples/fhmm.py``'s argparse) for the fhmm demo.
FHMM_EXAMPLE = ROOT / "examples" / "fhmm.py"
FHMM_DEMO = {"L": 200, "K": 3, "seed": 0, "weights": "auto", "num_discrete_steps": 1}
#: Issue targets (seconds; the step in ms; the end-to-end ratio to DiscreteGibbs).
FIRST_RUN_BUDGET_S = 5.0
LATER_RUN_FIXED_BUDGET_S = 1.0
STEP_BUDGET_MS = 0.15
E2E_RATIO_TARGET = 20.0
LARGE_FIRST_RUN_BUDGET_S = 8.0
FHMM_COMPILE_BUDGET_S = 5.0
#: LBPGibbs's first run on the gallery: at most this fraction of DiscreteHMCGibbs's on the
#: mixture and the factorial HMM, and at most GALLERY_FIRST_RUN_BUDGET_S on every model.
GALLERY_FIRST_RUN_RATIO = 0.5
GALLERY_FIRST_RUN_BUDGET_S = 5.0


@dataclass(frozen=True)
class RowSpec:
    """
    - **case** - ``"ising"``, ``"ising-large"``, ``"fhmm-demo"`` or ``"gallery"``.
    - **sampler** - one of :data:`SAMPLERS`.
    - **form** - ``"summed"`` or ``"elementwise"`` (Ising), ``"demo"`` (fhmm), the gallery
      model's name (gallery).
    - **kinds** - the subprocesses it runs, from :data:`KINDS`.
    """

    case: str
    sampler: str
    form: str
    kinds: tuple[str, ...]


def row_specs(cases: Sequence[str], samplers: Sequence[str], quick: bool) -> list[RowSpec]:
    """The (case, sampler) rows of the selected cases and samplers, in the order they run."""
    all_kinds = ("runs", "progress_bar", "e2e")
    specs = [
        RowSpec("ising", "ALBP", "summed", all_kinds),
        RowSpec("ising", "ACS", "summed", all_kinds),
        RowSpec("ising", GIBBS, "summed", all_kinds),
        RowSpec("ising", "ChromaticGibbs", "elementwise", all_kinds),
        RowSpec("ising", "ALBP", "elementwise", all_kinds),
        RowSpec("ising-large", "ALBP", "summed", ("runs",)),
        RowSpec("fhmm-demo", LBP_GIBBS, "demo", ("runs", "progress_bar")),
        RowSpec("fhmm-demo", NUTS_KNOWN, "demo", ("runs", "progress_bar")),
    ]
    specs += [
        RowSpec("gallery", sampler, name, ("first",))
        for name in (GALLERY_MODELS[:1] if quick else GALLERY_MODELS)
        for sampler in (LBP_GIBBS_DEFAULT, DHMC_GIBBS, NUTS_KNOWN)
    ]
    return [s for s in specs if s.case in cases and s.sampler in samplers]


@dataclass
class Row:
    """One (case, sampler) result; None where a metric does not apply or its subprocess
    failed (the message in ``errors``)."""

    case: str
    target: str
    form: str
    sampler: str
    num_coords: int
    num_warmup: int
    num_samples: int
    later_num_samples: int
    e2e_num_warmup: int | None = None
    e2e_num_samples: int | None = None
    import_s: float | None = None
    setup_s: float | None = None
    first_run_s: float | None = None
    later_run_s: float | None = None
    short_runs_s: list[float] | None = None
    long_run_s: float | None = None
    long_runs: list[list[float]] | None = None
    per_step_s: float | None = None
    ms_per_step: float | None = None
    later_run_fixed_s: float | None = None
    compile_s: float | None = None
    import_pb_s: float | None = None
    first_run_pb_s: float | None = None
    later_run_pb_s: float | None = None
    import_e2e_s: float | None = None
    e2e_wall_s: float | None = None
    min_ess: float | None = None
    num_undefined_ess: int | None = None
    e2e_min_ess_per_s: float | None = None
    steady_min_ess_per_s: float | None = None
    x_gibbs_e2e: float | None = None
    compilation_cache: dict[str, Any] | None = None
    errors: dict[str, str] = field(default_factory=dict)


# --- the worker (one fresh process per measurement) -----------------------------------------


def load_example(path: Path) -> ModuleType:
    """Import an example script (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def target_label(case: str, form: str, p: int, config: str) -> tuple[str, int]:
    """``(name, N)`` of a case's model, as in :mod:`benchmarks.targets`."""
    if case == "fhmm-demo":
        return f"fhmm-demo-L{FHMM_DEMO['L']}-K{FHMM_DEMO['K']}", FHMM_DEMO["L"] * FHMM_DEMO["K"]
    if case == "gallery":
        return f"gallery-{form}", 0
    return f"ising-{p}-{config}" + ("-ew" if form == "elementwise" else ""), p * p


def build_model(spec: dict[str, Any]) -> tuple[Callable, tuple, float]:
    """``(model, model_args, import_s)`` of a worker spec: the Ising target, or the fhmm
    example's model and simulated data (``import_s``: the example's import), or a gallery
    model with its example-size data (seed 0)."""
    if spec["case"] == "gallery":
        data = GALLERY[spec["form"]].simulate(0, "example")
        model = partial(GALLERY[spec["form"]].model, **data.kwargs)
        if spec["sampler"] == NUTS_KNOWN:
            # the discrete sites where LBPGibbs's chains start them (drawn given NUTS's
            # starting point), read before the timed run
            sites = model_sites(model, jax.random.key(0), data.args, {})
            model = numpyro.handlers.condition(
                model, {name: sites.trace[name]["value"] for name in sites.discrete}
            )
        return model, data.args, 0.0
    if spec["case"] == "fhmm-demo":
        start = time.perf_counter()
        example = load_example(FHMM_EXAMPLE)
        import_s = time.perf_counter() - start
        truth = example.simulate(
            np.random.default_rng(FHMM_DEMO["seed"]), FHMM_DEMO["L"], FHMM_DEMO["K"]
        )
        model = example.fhmm_model
        if spec["sampler"] == NUTS_KNOWN:
            model = numpyro.handlers.condition(model, {"x": truth["x"]})
        return model, (jnp.asarray(truth["y"]), FHMM_DEMO["K"]), import_s
    target = ising_target(spec["p"], spec["config"], 0, elementwise=spec["form"] == "elementwise")
    return target.model, (), 0.0


def make_kernel(sampler: str, model: Callable) -> MCMCKernel:
    """The kernel a user builds, default arguments (the fhmm demo's for LBPGibbs)."""
    if sampler == "ALBP":
        return ALBP(model)
    if sampler == "ACS":
        return ACS(model)
    if sampler == GIBBS:
        return DiscreteGibbs(model)
    if sampler == "ChromaticGibbs":
        return ChromaticGibbs(model)
    if sampler == LBP_GIBBS:
        return LBPGibbs(
            NUTS(model),
            discrete_kernel=ALBP(model, weights=FHMM_DEMO["weights"]),
            num_discrete_steps=FHMM_DEMO["num_discrete_steps"],
        )
    if sampler == NUTS_KNOWN:
        return NUTS(model)
    if sampler == LBP_GIBBS_DEFAULT:
        return LBPGibbs(NUTS(model))
    if sampler == DHMC_GIBBS:
        return DiscreteHMCGibbs(NUTS(model))
    raise ValueError(f"unknown sampler {sampler!r}")


def later_key(state: Any) -> jax.Array:
    """The post-warmup state's own key (numpyro's documented way to draw more), or
    ``jax.random.key(1)`` where the state holds none or a batch of them."""
    key = getattr(state, "rng_key", None)
    if key is None:
        return jax.random.key(1)
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    return key if jnp.ndim(key) == (0 if typed else 1) else jax.random.key(1)


def first_run(
    spec: dict[str, Any],
    model: Callable,
    model_args: tuple,
    num_warmup: int,
    num_samples: int,
    progress_bar: bool,
) -> tuple[MCMC, float]:
    """A user's first run (:func:`timed_first_run`) of the spec's sampler, key 0: the
    ``MCMC`` and the seconds."""
    return timed_first_run(
        lambda: make_kernel(spec["sampler"], model),
        jax.random.key(0),
        num_warmup,
        num_samples,
        *model_args,
        progress_bar=progress_bar,
    )


def measure_runs(
    spec: dict[str, Any], model: Callable, model_args: tuple
) -> dict[str, float | list[float]]:
    """The first run and the later runs of the **runs** subprocess (module docstring)."""
    warmup, samples = spec["num_warmup"], spec["num_samples"]
    mcmc, first_run_s = first_run(spec, model, model_args, warmup, samples, False)

    def later(num_samples: int) -> float:
        mcmc.post_warmup_state = mcmc.last_state
        mcmc.num_samples = num_samples
        return timed_run(mcmc, later_key(mcmc.post_warmup_state), *model_args)

    later_run_s = later(samples)
    short = [later(SHORT_DRAWS), later(SHORT_DRAWS)]
    # the long run: L = 5 S, timed twice and the faster kept (timing noise only adds),
    # grown until its steps take `min_long_s`, four times the short runs' spread and twice
    # the long runs' (a later run's fixed cost, a recompilation of numpyro's loop, varies
    # by tenths of a second, more on a busy machine: the faster of two long runs once fell
    # below the faster short run, a negative step; on a machine shared with other work the
    # long runs' spread also grows with their length, which four times it never outgrew:
    # CI's slow tier once failed so), kept draws thinned past MAX_KEPT_VALUES
    long = spec["later_num_samples"]
    long_runs: list[list[float]] = []

    def long_run(num_samples: int) -> float:
        mcmc.thinning = max(1, math.ceil(num_samples * spec["num_coords"] / MAX_KEPT_VALUES))
        seconds = later(num_samples)
        long_runs.append([num_samples, mcmc.thinning, seconds])
        mcmc.thinning = 1
        return seconds

    for growth in range(MAX_LONG_GROWTHS + 1):
        pair = [long_run(long), long_run(long)]
        long_run_s = min(pair)
        stepping = long_run_s - min(short)
        short_spread, long_spread = abs(short[0] - short[1]), abs(pair[0] - pair[1])
        spread = max(short_spread, long_spread)
        min_long_s = max(spec["min_long_s"], 4.0 * short_spread, 2.0 * long_spread)
        if stepping >= min_long_s:
            break
        if growth == MAX_LONG_GROWTHS:
            raise RuntimeError(
                f"the step's time is not resolved: {long} steps took {stepping:.3g} s beyond "
                f"a short run, under {min_long_s:.3g} s (the runs' spread: {spread:.3g} s); "
                "raise --min-long-seconds or rerun on an idle machine"
            )
        long = math.ceil(long * min(10.0, 2.0 * min_long_s / max(stepping, 0.2 * min_long_s)))
    per_step_s = (long_run_s - min(short)) / (long - SHORT_DRAWS)
    return {
        "first_run_s": first_run_s,
        "later_run_s": later_run_s,
        "short_runs_s": short,
        "long_run_s": long_run_s,
        "later_num_samples": long,
        "long_runs": long_runs,
        "per_step_s": per_step_s,
        "later_run_fixed_s": min(short) - SHORT_DRAWS * per_step_s,
        "compile_s": first_run_s - (warmup + samples) * per_step_s,
    }


def measure_progress_bar(
    spec: dict[str, Any], model: Callable, model_args: tuple
) -> dict[str, float]:
    """The first and a later run of ``S`` draws with numpyro's progress bar."""
    mcmc, first_run_pb_s = first_run(
        spec, model, model_args, spec["num_warmup"], spec["num_samples"], True
    )
    mcmc.post_warmup_state = mcmc.last_state
    later_run_pb_s = timed_run(mcmc, later_key(mcmc.post_warmup_state), *model_args)
    return {"first_run_pb_s": first_run_pb_s, "later_run_pb_s": later_run_pb_s}


def measure_e2e(
    spec: dict[str, Any], model: Callable, model_args: tuple
) -> dict[str, float | int | None]:
    """Wall time from kernel construction to the draws, and their minimum coordinate ESS."""
    samples = spec["e2e_num_samples"]
    mcmc, e2e_wall_s = first_run(spec, model, model_args, spec["e2e_num_warmup"], samples, False)
    ess = coordinate_ess(np.asarray(mcmc.get_samples()[SITE]).reshape(1, samples, -1))
    finite = ess[np.isfinite(ess)]
    min_ess = float(finite.min()) if finite.size else None
    return {
        "e2e_wall_s": e2e_wall_s,
        "min_ess": min_ess,
        "num_undefined_ess": int(ess.size - finite.size),
        "e2e_min_ess_per_s": None if min_ess is None else min_ess / e2e_wall_s,
    }


def measure_first(spec: dict[str, Any], model: Callable, model_args: tuple) -> dict[str, Any]:
    """The **first** subprocess: one first run of ``num_warmup + num_samples`` steps."""
    _, seconds = first_run(spec, model, model_args, spec["num_warmup"], spec["num_samples"], False)
    return {"first_run_s": seconds}


MEASUREMENTS: dict[str, Callable[[dict[str, Any], Callable, tuple], dict[str, Any]]] = {
    "first": measure_first,
    "runs": measure_runs,
    "progress_bar": measure_progress_bar,
    "e2e": measure_e2e,
}


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement (``spec["kind"]``) in this fresh process."""
    import_s = time.time() - spec["launched_at"]
    if hasattr(jax.config, "jax_enable_compilation_cache"):
        jax.config.update("jax_enable_compilation_cache", False)
    start = time.perf_counter()
    model, model_args, example_import_s = build_model(spec)
    setup_s = time.perf_counter() - start - example_import_s
    result = MEASUREMENTS[spec["kind"]](spec, model, model_args)
    result["import_s"] = import_s + example_import_s
    result["setup_s"] = setup_s
    result["compilation_cache"] = {
        "jax_enable_compilation_cache": getattr(jax.config, "jax_enable_compilation_cache", None),
        "jax_compilation_cache_dir": jax.config.jax_compilation_cache_dir,
    }
    return result


def worker_main(spec_json: str) -> None:
    """Run a worker spec; everything printed goes to stderr but the one JSON line."""
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        result = run_worker(json.loads(spec_json))
    stdout.write(json.dumps(json_ready(result)) + "\n")
    stdout.flush()


# --- the parent ------------------------------------------------------------------------------


def run_subprocess(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one worker in a fresh process; its JSON result, or ``{"error": message}``."""
    env = dict(os.environ)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    spec = {**spec, "launched_at": time.time()}
    command = [sys.executable, "-m", "benchmarks.bench_compile", "--worker", json.dumps(spec)]
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        # the exception's own line first: a one-line report (pytest's summary) shows it
        tail = done.stderr.strip().splitlines()[-15:] or ["(no output)"]
        return {"error": f"exit status {done.returncode}: {tail[-1]}\n" + "\n".join(tail)}
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"error": f"no JSON result on stdout: {lines[-1][:500]}"}


def worker_spec(row: RowSpec, kind: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The JSON spec of one subprocess of a row (DiscreteGibbs's steps divided)."""
    divisor = settings["gibbs_divisor"] if row.sampler == GIBBS else 1
    samples = max(1, settings["num_samples"] // divisor)
    min_warmup = ACS_MIN_WARMUP if row.sampler == "ACS" else 0
    p = settings["large_p"] if row.case == "ising-large" else settings["ising_p"]
    if row.case == "gallery":
        warmup = samples = settings["gallery_steps"]
    else:
        warmup = max(min_warmup, settings["num_warmup"] // divisor)
    return {
        "case": row.case,
        "form": row.form,
        "sampler": row.sampler,
        "kind": kind,
        "p": p,
        "config": settings["config"],
        "num_warmup": warmup,
        "num_samples": samples,
        "later_num_samples": max(LATER_FACTOR * samples, SHORT_DRAWS + 1),
        "min_long_s": settings["min_long_seconds"],
        "num_coords": target_label(row.case, row.form, p, settings["config"])[1],
        "e2e_num_warmup": max(min_warmup, settings["e2e_num_warmup"] // divisor),
        "e2e_num_samples": max(2, settings["e2e_num_samples"] // divisor),
    }


def measure_row(row_spec: RowSpec, settings: dict[str, Any], timeout: float) -> Row:
    """All subprocesses of one (case, sampler)."""
    first = worker_spec(row_spec, "runs", settings)
    name, num_coords = target_label(row_spec.case, row_spec.form, first["p"], first["config"])
    row = Row(
        case=row_spec.case,
        target=name,
        form=row_spec.form,
        sampler=row_spec.sampler,
        num_coords=num_coords,
        num_warmup=first["num_warmup"],
        num_samples=first["num_samples"],
        later_num_samples=first["later_num_samples"],
    )
    if "e2e" in row_spec.kinds:
        row.e2e_num_warmup = first["e2e_num_warmup"]
        row.e2e_num_samples = first["e2e_num_samples"]
    renamed = {"progress_bar": {"import_s": "import_pb_s"}, "e2e": {"import_s": "import_e2e_s"}}
    for kind in row_spec.kinds:
        start = time.perf_counter()
        result = run_subprocess(worker_spec(row_spec, kind, settings), timeout)
        elapsed = time.perf_counter() - start
        if "error" in result:
            row.errors[kind] = result["error"]
            print(f"[{name}] {row.sampler} {kind}: FAILED ({result['error'][-300:]})", flush=True)
            continue
        for key, value in result.items():
            key = renamed.get(kind, {}).get(key, key)
            if key == "setup_s" and kind != "runs":
                continue
            if hasattr(row, key):
                setattr(row, key, value)
        print(f"[{name}] {row.sampler} {kind}: {_summary(kind, result)} ({elapsed:.1f} s)")
    if row.per_step_s is not None:
        row.ms_per_step = 1000.0 * row.per_step_s
        if row.min_ess is not None and row.e2e_num_samples:
            row.steady_min_ess_per_s = row.min_ess / (row.e2e_num_samples * row.per_step_s)
    return row


def _summary(kind: str, result: dict[str, Any]) -> str:
    if kind == "runs":
        return (
            f"first run {fmt(result['first_run_s'])} s, {fmt(1000 * result['per_step_s'])} "
            f"ms/step, compile {fmt(result['compile_s'])} s, later run fixed "
            f"{fmt(result['later_run_fixed_s'])} s"
        )
    if kind == "first":
        return f"first run {fmt(result['first_run_s'])} s"
    if kind == "progress_bar":
        return (
            f"first run {fmt(result['first_run_pb_s'])} s, later run "
            f"{fmt(result['later_run_pb_s'])} s"
        )
    return (
        f"{fmt(result['e2e_wall_s'])} s, min ESS {fmt(result['min_ess'])}, "
        f"minESS/s {fmt(result['e2e_min_ess_per_s'])}"
    )


def add_gibbs_ratios(rows: list[Row]) -> None:
    """``x_gibbs_e2e``: end-to-end minESS/s over DiscreteGibbs's on the same case."""
    base = {
        row.case: row.e2e_min_ess_per_s
        for row in rows
        if row.sampler == GIBBS and row.e2e_min_ess_per_s
    }
    for row in rows:
        if row.e2e_min_ess_per_s is not None and row.case in base:
            row.x_gibbs_e2e = row.e2e_min_ess_per_s / base[row.case]


def _find(rows: list[Row], case: str, sampler: str, form: str) -> Row | None:
    return next(
        (r for r in rows if (r.case, r.sampler, r.form) == (case, sampler, form)),
        None,
    )


def _check(name: str, value: float | None, target: str, met: bool) -> dict[str, Any]:
    return {"check": name, "target": target, "value": value, "met": bool(met)}


def issue_checks(rows: list[Row]) -> list[dict[str, Any]]:
    """The issue's targets (module docstring) for the rows that ran; a failed measurement
    counts as not met."""
    checks = []

    def at_most(name: str, value: float | None, budget: float, unit: str) -> None:
        met = value is not None and value <= budget
        checks.append(_check(name, value, f"<= {budget:g} {unit}", met))

    albp = _find(rows, "ising", "ALBP", "summed")
    if albp is not None:
        label = f"ALBP {albp.target}"
        at_most(f"{label}: first run s", albp.first_run_s, FIRST_RUN_BUDGET_S, "s")
        at_most(
            f"{label}: later run fixed s", albp.later_run_fixed_s, LATER_RUN_FIXED_BUDGET_S, "s"
        )
        at_most(f"{label}: ms/step", albp.ms_per_step, STEP_BUDGET_MS, "ms")
        if _find(rows, "ising", GIBBS, "summed") is not None:
            ratio = albp.x_gibbs_e2e
            met = ratio is not None and ratio >= E2E_RATIO_TARGET
            checks.append(
                _check(f"{label}: e2e minESS/s / {GIBBS}'s", ratio, f">= {E2E_RATIO_TARGET:g}", met)
            )
    large = _find(rows, "ising-large", "ALBP", "summed")
    if large is not None:
        at_most(
            f"ALBP {large.target} (N = {large.num_coords}): first run s",
            large.first_run_s,
            LARGE_FIRST_RUN_BUDGET_S,
            "s",
        )
    fhmm = _find(rows, "fhmm-demo", LBP_GIBBS, "demo")
    if fhmm is not None:
        at_most(f"{LBP_GIBBS} {fhmm.target}: compile s", fhmm.compile_s, FHMM_COMPILE_BUDGET_S, "s")
    for name in GALLERY_MODELS:
        ours = _find(rows, "gallery", LBP_GIBBS_DEFAULT, name)
        if ours is None:
            continue
        label = f"{LBP_GIBBS_DEFAULT} gallery-{name}: first run s"
        at_most(label, ours.first_run_s, GALLERY_FIRST_RUN_BUDGET_S, "s")
        numpyro_row = _find(rows, "gallery", DHMC_GIBBS, name)
        if name in ("mixture", "fhmm") and numpyro_row is not None:
            ratio = None
            if ours.first_run_s is not None and numpyro_row.first_run_s:
                ratio = ours.first_run_s / numpyro_row.first_run_s
            met = ratio is not None and ratio <= GALLERY_FIRST_RUN_RATIO
            checks.append(
                _check(f"{label} / {DHMC_GIBBS}'s", ratio, f"<= {GALLERY_FIRST_RUN_RATIO:g}", met)
            )
    return checks


def check_lines(checks: list[dict[str, Any]]) -> list[str]:
    return [
        f"{'PASS' if c['met'] else 'FAIL'}: {c['check']} = {fmt(c['value'])} (target {c['target']})"
        for c in checks
    ]


TABLE_COLUMNS = (
    ("case", lambda r: r.target),
    ("sampler", lambda r: r.sampler),
    number_column("import s", "import_s"),
    number_column("first run s", "first_run_s"),
    number_column("compile s", "compile_s"),
    number_column("later run s", "later_run_s"),
    number_column("later run fixed s", "later_run_fixed_s"),
    number_column("ms/step", "ms_per_step"),
    number_column("first run (progress bar) s", "first_run_pb_s"),
    number_column("later run (progress bar) s", "later_run_pb_s"),
    number_column("e2e wall s", "e2e_wall_s"),
    number_column("e2e minESS/s", "e2e_min_ess_per_s"),
    number_column("x Gibbs e2e", "x_gibbs_e2e"),
)


def markdown_report(rows: list[Row], checks: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    lines = [
        "## bench_compile",
        "",
        f"One chain, each measurement in a fresh process, no persistent compilation cache; "
        f"{settings['num_warmup']} warmup + {settings['num_samples']} samples per run, "
        f"end-to-end {settings['e2e_num_warmup']} + {settings['e2e_num_samples']} "
        f"(DiscreteGibbs: all step counts / {settings['gibbs_divisor']}); gallery first runs "
        f"{settings['gallery_steps']} + {settings['gallery_steps']}; "
        f"{settings['cpu_count']} CPU(s), jax {jax.__version__}, numpyro {numpyro.__version__}"
        + (" (--quick: small sizes, the targets mean nothing)." if settings["quick"] else "."),
        "",
        *markdown_table(TABLE_COLUMNS, rows),
        "",
    ]
    if checks:
        lines += ["Targets of the issue:", ""]
        lines += [f"- {line}" for line in check_lines(checks)]
        lines.append("")
    failed = [(row, kind, message) for row in rows for kind, message in row.errors.items()]
    if failed:
        lines += ["Failed measurements:", ""]
        for row, kind, message in failed:
            last = message.strip().splitlines()[-1] if message.strip() else message
            lines.append(f"- {row.target} {row.sampler} ({kind}): {last}")
        lines.append("")
    lines += [
        "How measured: every number comes from a fresh `python -m benchmarks.bench_compile "
        "--worker` process (JAX's persistent compilation cache off). **first run** is kernel "
        "construction + `MCMC(..., progress_bar=False)` + `mcmc.run` until the samples are "
        "ready; later runs start from `post_warmup_state = last_state` with `num_samples` = "
        f"S, {SHORT_DRAWS}, {SHORT_DRAWS}, L >= {LATER_FACTOR} S (each timed twice, the faster "
        f"kept, grown until its steps take {settings['min_long_seconds']:g} s, 4x the spread "
        "of the two t_10 and 2x that of the two t_L; numpyro "
        "re-traces and compiles its loop on every such run); "
        "**ms/step** = (t_L - min t_10) / (L - 10); "
        "**later run fixed** = min t_10 - 10 x per step; **compile** = first run - (W + S) x "
        "per step. The progress-bar columns are a first and a second run of S draws with "
        "numpyro's progress bar, in another process. **e2e** runs the end-to-end sizes "
        "from kernel construction to the draws; minESS/s is the minimum coordinate ESS of "
        "`x` over that wall time, **x Gibbs e2e** its ratio to DiscreteGibbs's. **import s** "
        "is the time from launching the process to the worker's first line. See the module "
        "docstring of `benchmarks/bench_compile.py`.",
    ]
    return "\n".join(lines) + "\n"


# --- entry point -----------------------------------------------------------------------------

_HELP = {
    "ising_p": "side of the Ising lattice of the ising case",
    "large_p": "side of the Ising lattice of the ising-large case",
    "num_warmup": "warmup steps of the first run (runs and progress-bar subprocesses)",
    "num_samples": "draws S of the first run; later runs draw S, 10, 10 and 5 S",
    "e2e_num_warmup": "warmup steps of the end-to-end run",
    "e2e_num_samples": "draws of the end-to-end run",
    "min_long_seconds": (
        "seconds of stepping the long later run is grown to (and to 4x the spread of two "
        "short runs, 2x that of two long runs)"
    ),
    "gallery_steps": "warmup steps and draws of the gallery case's first runs",
}


def _names(values: Sequence[str] | None, allowed: Sequence[str], what: str) -> list[str]:
    """Names given space- or comma-separated, checked against `allowed`."""
    if values is None:
        return list(allowed)
    names = [name for value in values for name in value.split(",") if name]
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise SystemExit(f"unknown {what}: {unknown} (choose from {list(allowed)})")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    out_dirs = (RESULTS_DIR, QUICK_OUT_DIR)
    parser = benchmark_parser(
        "First-run, later-run, per-step and end-to-end times of the samplers, each measured "
        "in a fresh process without a persistent compilation cache.",
        FULL,
        QUICK,
        _HELP,
        out_dirs,
        seed_help=None,
    )
    parser.add_argument(
        "--cases", nargs="+", help=f"cases, space or comma separated (default all: {CASES})"
    )
    parser.add_argument(
        "--samplers", nargs="+", help=f"samplers, space or comma separated (default {SAMPLERS})"
    )
    parser.add_argument(
        "--gibbs-divisor",
        type=int,
        default=10,
        help="DiscreteGibbs's step counts divided by this: its step is a sweep of N model "
        "evaluations (default 10)",
    )
    parser.add_argument("--config", choices=["C1", "C2", "C3"], default="C2", help="Ising, C2")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per subprocess (default 600)"
    )
    parser.add_argument("--worker", help="internal: run one measurement (a JSON spec)")
    args = parse_benchmark_args(parser, argv, FULL, QUICK, out_dirs)
    if args.worker is not None:
        return args
    if args.gibbs_divisor < 1:
        parser.error("--gibbs-divisor must be >= 1")
    args.cases = _names(args.cases, CASES, "cases")
    args.samplers = _names(args.samplers, SAMPLERS, "samplers")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    """Run the benchmark; returns what it writes to ``bench_compile.json`` (None for a
    ``--worker`` call, which prints its one JSON line)."""
    args = parse_args(argv)
    if args.worker is not None:
        worker_main(args.worker)
        return None
    settings = {
        name: getattr(args, name)
        for name in [*FULL, "cases", "samplers", "gibbs_divisor", "config", "timeout", "quick"]
    }
    settings["cpu_count"] = os.cpu_count()
    command = sys.argv if argv is None else [sys.argv[0], *argv]

    rows = [
        measure_row(spec, settings, args.timeout)
        for spec in row_specs(args.cases, args.samplers, args.quick)
    ]
    add_gibbs_ratios(rows)
    checks = issue_checks(rows)
    report = markdown_report(rows, checks, settings)
    print(report)
    result = result_record(
        settings,
        command=shlex.join(str(part) for part in command),
        timing="per_step_s = (long_run_s - min(short_runs_s)) / (later_num_samples - 10); "
        "later_run_fixed_s = min(short_runs_s) - 10 * per_step_s; compile_s = first_run_s - "
        "(num_warmup + num_samples) * per_step_s; e2e_min_ess_per_s = min_ess / e2e_wall_s; "
        "steady_min_ess_per_s = min_ess / (e2e_num_samples * per_step_s) (module docstring)",
        rows=[asdict(row) for row in rows],
        issue_targets=checks,
    )
    print(f"wrote {write_results(args.out_dir, 'bench_compile', result, report)}")
    return result


if __name__ == "__main__":
    main()
