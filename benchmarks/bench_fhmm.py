"""
Benchmark: LBPGibbs against numpyro's mixed samplers on a Bayesian factorial HMM
================================================================================

One process runs, on one simulated FHMM of size ``(L, K)`` (``--L``, ``--K``; targets in
:mod:`benchmarks.targets`: ``w ~ N(0, 1)^K``, ``b ~ N(0, 1)``, ``sigma ~ HalfNormal(1)``,
data with ``sigma^2`` of ``--config``, default C2), eight samplers through
``numpyro.infer.MCMC``:

- ``LBPGibbs``: :class:`~numpyro_discrete.LBPGibbs` ``(NUTS)`` with its default discrete
  kernel, chosen from the structure (``BlockGibbs`` on this model);
- ``LBPGibbs[albp]``: ``discrete_kernel=ALBP(model)``, ALBP on ``X`` with its default
  gradient estimates of the local log-ratios (the default before the choice by structure);
- ``LBPGibbs[albp, 10 moves]``: the same with ``num_discrete_steps=10``, ten ALBP moves of
  ``X`` per NUTS move of the continuous sites;
- ``LBPGibbs[exact]``: the same with ``ALBP(model, weights="exact")``, the ``L K`` local
  log-ratios evaluated exactly (one vectorised model evaluation per coordinate) - the
  choice when the likelihood is strongly curved in ``X`` (large ``|w| / sigma``), where a
  first-order estimate of a flip's effect is poor and the acceptance collapses;
- ``LBPGibbs[exact, coloured]``: ``ALBP(weights="exact")`` on ``fhmm_elementwise_model``
  (below), whose exact ratios are colour-batched: one model evaluation per colour class of
  ``X`` instead of one per coordinate;
- ``LBPGibbs[chromatic]``: the same with ``ChromaticGibbs`` as the discrete block, one sweep
  over the colour classes of ``X`` per NUTS move, on ``fhmm_elementwise_model`` (the same
  density with the Markov prior written elementwise, so that the structure is found:
  ``K`` colours); its **X mean R** is n/a (a sweep has no path length);
- ``Gibbs[DiscreteGibbs-mod]``: numpyro's
  ``Gibbs([(DiscreteGibbs(model, modified=True), discrete_latent_sites), (NUTS(model), None)])``
  (one Metropolised-Gibbs sweep over all ``L K`` coordinates per step);
- ``DiscreteHMCGibbs``: numpyro's ``DiscreteHMCGibbs(NUTS(model))`` (the same composite with
  the plain Gibbs conditional);
- ``MixedHMC``: numpyro's ``MixedHMC(HMC(model, trajectory_length=1.2),
  num_discrete_updates=20)`` (the settings of its documentation);
- ``NUTS-enum``: NUTS on the model with ``X`` summed out by enumeration over the ``2^K``
  joint states of a time step (``L 4^K`` work per gradient).

The two sweep-based kernels (``Gibbs[...]``, ``DiscreteHMCGibbs``) and ``MixedHMC`` take
``--gibbs-num-warmup`` / ``--gibbs-num-samples`` steps (their steps are far costlier), the
others ``--num-warmup`` / ``--num-samples``. With ``--sampling-seconds S``, every sampler
instead takes as many post-warmup steps as fill ``S`` seconds at its measured cost per step
(never fewer than the counts above), and keeps at most ``--max-draws`` of them, evenly
thinned: equal sampling time puts every sampler's ESS above the floor of the estimator,
where a fixed number of draws leaves the slowly mixing ones at 3 to 5.

Metrics, after warmup: **ESS w** - min over the ``K`` coordinates of
``numpyro.diagnostics.effective_sample_size``; **ESS w within chains** - the same with each
chain's ESS computed alone and summed over the chains (with ``--num-chains``: far above the
multi-chain ESS when each chain mixes within a mode and the chains sit in different
modes); **ESS sorted abs(w)** - min ESS of the order statistics of ``|w|``, which are
invariant under the posterior's symmetries (permuting the hidden chains together with their
weights, and, up to the weak priors on ``x_0`` and ``b``, flipping a chain,
``x_k -> 1 - x_k, w_k -> -w_k, b -> b + w_k``), so that chains in mirror modes agree on
them; **ESS X min** - min over the ``L K`` coordinates with a defined ESS; **ESS X Ham.** -
ESS of the Hamming distance to a fixed random reference state (as in
:mod:`benchmarks.bench_binary`, whose metric helpers are reused); ESS per second of
sampling (**/s**), and ESS/s of ``w`` and of sorted ``|w|`` relative to the best of the
numpyro Gibbs-type kernels (``Gibbs[...]``, ``DiscreteHMCGibbs``, ``MixedHMC``); for the
LBPGibbs rows, **X accept** and **X mean R**, the discrete block's mean acceptance
probability and path length ``R`` over the draws.

Timing follows :mod:`benchmarks.bench_binary`: a fresh persistent compilation cache,
``mcmc.warmup`` timed with compilation, then ``--num-chunks`` sampling chunks timed up to
``jax.block_until_ready``, the first one's compilation removed, then a short probe run whose
time separates the fixed cost of every ``MCMC.run`` call (numpyro re-traces its loop, JAX
lowers it and loads the cached executable: several seconds for the large LBPGibbs program,
as much as thousands of its steps) from the cost per step; **sampling s** is the cost per
step times the steps, **run overhead s** the fixed cost. With ``--sampling-seconds``, the
number of steps is planned from the cost per step measured after warmup, in one jitted loop
(the pilot below runs unadapted steps, e.g. NUTS trees of any depth). Budget: before the real
run, each sampler's cost per step is measured on a few jitted steps of its kernel (after
compiling them); if ``warmup x cost`` plus two sampling chunks exceeds ``--time-budget``
seconds, the sampler is reported as "over budget" with the predicted time instead of being
run. Otherwise it runs, and sampling stops before the chunk that would pass the budget
(status "stopped at budget": its metrics come from the chunks that ran, and the table
says how many draws that was). A sampler that runs out of memory (numpy ``MemoryError`` or
XLA ``RESOURCE_EXHAUSTED``) is reported as "out of memory". The JSON and markdown files are
rewritten after every sampler, so an interrupted run keeps what it measured.

Usage (from the repository root)::

    python -m benchmarks.bench_fhmm --L 200 --K 5
    python -m benchmarks.bench_fhmm --L 1000 --K 10 --time-budget 600
    python -m benchmarks.bench_fhmm --L 1000 --K 10 --sampling-seconds 240 \
        --methods LBPGibbs MixedHMC --out-dir benchmarks/results/equal_time
    python -m benchmarks.bench_fhmm --quick            # smoke test, tiny sizes

Outputs: the table on stdout, and ``bench_fhmm_L{L}_K{K}.json`` / ``.md`` in ``--out-dir``
(default ``benchmarks/results``).
"""

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
import math
import os
from pathlib import Path
import statistics
import time
from typing import Any

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

import numpyro
from numpyro.diagnostics import split_gelman_rubin
from numpyro.infer import (
    HMC,
    MCMC,
    NUTS,
    DiscreteGibbs,
    DiscreteHMCGibbs,
    Gibbs,
    HMCGibbs,
    MixedHMC,
)
from numpyro.infer.gibbs import discrete_latent_sites
from numpyro.infer.mcmc import MCMCKernel

from numpyro_discrete import ALBP, BlockGibbs, ChromaticGibbs, LBPGibbs

from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    chain_states,
    chunk_timing,
    coordinate_ess,
    fresh_compilation_cache,
    hamming_ess,
    markdown_table,
    number_column,
    parse_benchmark_args,
    probe_timing,
    release_compiled_programs,
    result_record,
    sequential_mcmc,
    timed_run,
    timed_warmup,
    write_results,
)
from benchmarks.targets import (
    fhmm_data,
    fhmm_elementwise_model,
    fhmm_enumerated_model,
    fhmm_ffbs_gibbs_fn,
    fhmm_model,
)

GIBBS_TYPE = ("Gibbs[DiscreteGibbs-mod]", "DiscreteHMCGibbs", "MixedHMC")


@dataclass(frozen=True)
class Method:
    """
    - **name** - label in the table.
    - **make** - ``(model, enumerated_model, model_args) -> kernel``.
    - **samples_x** - whether the kernel samples ``X`` (False when it is summed out).
    - **sweep_based** - whether it takes the ``--gibbs-*`` step counts.
    - **reports_discrete_move** - whether its state has the discrete block's
      `discrete_fields` (reported as means over the draws).
    - **discrete_fields** - those fields: ``accept_prob`` and, for ALBP, ``path_length``.
    """

    name: str
    make: Callable[[Callable, Callable, tuple], MCMCKernel]
    samples_x: bool
    sweep_based: bool
    reports_discrete_move: bool = False
    discrete_fields: tuple[str, ...] = ("accept_prob", "path_length")


METHODS = (
    Method("LBPGibbs", lambda m, e, a: LBPGibbs(NUTS(m)), True, False),
    Method(
        "LBPGibbs[albp]",
        lambda m, e, a: LBPGibbs(NUTS(m), discrete_kernel=ALBP(m)),
        True,
        False,
        True,
    ),
    Method(
        "LBPGibbs[albp, 10 moves]",
        lambda m, e, a: LBPGibbs(NUTS(m), discrete_kernel=ALBP(m), num_discrete_steps=10),
        True,
        False,
        True,
    ),
    Method(
        "LBPGibbs[exact]",
        lambda m, e, a: LBPGibbs(NUTS(m), discrete_kernel=ALBP(m, weights="exact")),
        True,
        False,
        True,
    ),
    # the elementwise form of the model in place of `m` (the same density, whose structure
    # the kernels find); both blocks must be built on the same model
    Method(
        "LBPGibbs[exact, coloured]",
        lambda m, e, a: LBPGibbs(
            NUTS(fhmm_elementwise_model),
            discrete_kernel=ALBP(fhmm_elementwise_model, weights="exact"),
        ),
        True,
        False,
        True,
    ),
    Method(
        "LBPGibbs[chromatic]",
        lambda m, e, a: LBPGibbs(
            NUTS(fhmm_elementwise_model), discrete_kernel=ChromaticGibbs(fhmm_elementwise_model)
        ),
        True,
        False,
        True,
        ("accept_prob",),
    ),
    Method(
        "Gibbs[DiscreteGibbs-mod]",
        lambda m, e, a: Gibbs(
            [(DiscreteGibbs(m, modified=True), discrete_latent_sites), (NUTS(m), None)]
        ),
        True,
        True,
    ),
    Method("DiscreteHMCGibbs", lambda m, e, a: DiscreteHMCGibbs(NUTS(m)), True, True),
    Method(
        "MixedHMC",
        lambda m, e, a: MixedHMC(HMC(m, trajectory_length=1.2), num_discrete_updates=20),
        True,
        True,
    ),
    Method("NUTS-enum", lambda m, e, a: NUTS(e), False, False),
    Method(
        "LBPGibbs[block]",
        lambda m, e, a: LBPGibbs(NUTS(m), discrete_kernel=BlockGibbs(m)),
        True,
        False,
        True,
        ("accept_prob",),
    ),
    # the hand-written anchor: each hidden chain by forward filtering, backward sampling
    Method(
        "FFBS-Gibbs",
        lambda m, e, a: HMCGibbs(NUTS(m), gibbs_fn=fhmm_ffbs_gibbs_fn(*a), gibbs_sites=["x"]),
        True,
        False,
    ),
)


@dataclass
class Row:
    """One sampler's result; ``status`` is "ok", "over budget" or "out of memory"."""

    method: str
    status: str
    num_warmup: int
    num_samples: int
    num_chains: int = 1
    thinning: int = 1
    step_s: float | None = None
    predicted_s: float | None = None
    warmup_s: float | None = None
    compile_s: float | None = None
    sampling_s: float | None = None
    run_overhead_s: float | None = None
    chunk_s: list[float] | None = None
    ess_w_min: float | None = None
    ess_w_within_chains: float | None = None
    ess_w_sorted_abs: float | None = None
    ess_signal_min: float | None = None
    ess_signal_per_s: float | None = None
    rhat_signal_max: float | None = None
    signal_per_s_vs_discrete_hmc_gibbs: float | None = None
    signal_per_s_vs_ffbs_gibbs: float | None = None
    ess_x_min: float | None = None
    ess_x_hamming: float | None = None
    ess_w_per_s: float | None = None
    ess_w_sorted_abs_per_s: float | None = None
    ess_x_min_per_s: float | None = None
    ess_x_hamming_per_s: float | None = None
    w_per_s_vs_best_gibbs: float | None = None
    w_sorted_abs_per_s_vs_best_gibbs: float | None = None
    discrete_accept_prob: float | None = None
    mean_path_length: float | None = None
    note: str = ""


def _is_oom(error: BaseException) -> bool:
    # XLA's CPU client reports a failed allocation as INTERNAL "Out of memory allocating"
    message = str(error)
    return isinstance(error, MemoryError) or any(
        text in message for text in ("RESOURCE_EXHAUSTED", "Out of memory")
    )


def step_cost(kernel: MCMCKernel, rng_key: jax.Array, model_args: tuple, steps: int = 3) -> float:
    """Seconds per jitted ``kernel.sample`` step from the kernel's initial state, after
    compiling it (the pilot of the budget check)."""
    state = kernel.init(rng_key, 0, None, model_args, {})
    sample = jax.jit(lambda s: kernel.sample(s, model_args, {}))
    # twice: the first output's dtypes may differ from the initial state's (one retrace)
    state = jax.block_until_ready(sample(sample(state)))
    start = time.perf_counter()
    for _ in range(steps):
        state = sample(state)
    jax.block_until_ready(state)
    return (time.perf_counter() - start) / steps


def steady_step_cost(
    kernel: MCMCKernel,
    state: Any,
    model_args: tuple,
    min_seconds: float = 2.0,
    model_kwargs: dict | None = None,
) -> float:
    """Seconds per ``kernel.sample`` step from `state` (a post-warmup state), the steps run
    in one jitted loop, as ``MCMC`` runs them, for at least `min_seconds`: a small step's
    cost would otherwise include Python's dispatch of each step."""
    kwargs = dict(model_kwargs or {})
    run = jax.jit(
        lambda s, n: lax.fori_loop(0, n, lambda _, s: kernel.sample(s, model_args, kwargs), s)
    )
    jax.block_until_ready(run(state, 2))
    num_steps = 3
    while True:
        start = time.perf_counter()
        jax.block_until_ready(run(state, num_steps))
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / num_steps
        num_steps = math.ceil(num_steps * min(10.0, 1.2 * min_seconds / max(elapsed, 1e-4)))


def later_run(mcmc: MCMC, model_args: tuple, extra_fields: tuple[str, ...]) -> float:
    """A timed later ``run`` from the chain's last state (:func:`timed_run`). Every run (and
    chain) loads its program anew: the memory mappings of the previous ones are freed (a few
    chains and chunks of LBPGibbs reach vm.max_map_count), after every run, so that the
    chunks and the probe pay the same per-run cost."""
    key = mcmc.post_warmup_state.rng_key
    return timed_run(mcmc, key, *model_args, extra_fields=extra_fields, release=True)


def sampling_plan(
    num_samples: int,
    step_s: float,
    num_chunks: int,
    sampling_seconds: float | None,
    max_draws: int,
    num_chains: int = 1,
) -> tuple[int, int]:
    """``(thinning, chunk)`` per chain: with `sampling_seconds`, the steps of each of the
    `num_chains` chains that together fill that time at `step_s` per step (at least
    `num_samples`), thinned to at most `max_draws` kept draws per chain; split into
    `num_chunks` chunks of whole thinning periods."""
    if sampling_seconds is not None:
        num_samples = max(num_samples, round(sampling_seconds / (num_chains * step_s)))
    thinning = max(1, math.ceil(num_samples / max_draws))
    return thinning, thinning * math.ceil(num_samples / (num_chunks * thinning))


def run_method(
    method: Method,
    models: tuple[Callable, Callable],
    model_args: tuple,
    rng_key: jax.Array,
    *,
    num_warmup: int,
    num_samples: int,
    num_chunks: int,
    budget: float,
    reference: np.ndarray,
    sampling_seconds: float | None = None,
    max_draws: int = 4000,
    num_chains: int = 1,
) -> Row:
    """Budget check, warmup, chunked sampling, metrics. With `sampling_seconds`, the
    number of steps is the one that fills that sampling time at the measured cost per step
    (at least `num_samples`), kept as at most `max_draws` evenly thinned draws. With
    `num_chains` > 1, as many independent chains run one after the other, sharing the
    sampling time; every ESS is numpyro's multi-chain ESS, which falls when the chains
    disagree."""
    row = Row(method.name, "ok", num_warmup, num_samples, num_chains)
    key_pilot, key_run = random.split(rng_key)
    try:
        row.step_s = step_cost(method.make(*models, model_args), key_pilot, model_args)
    except Exception as error:
        if not _is_oom(error):
            raise
        row.status, row.note = "out of memory", f"{type(error).__name__} at the first step"
        return row
    row.thinning, chunk = sampling_plan(
        num_samples, row.step_s, num_chunks, sampling_seconds, max_draws, num_chains
    )
    row.num_samples = chunk * num_chunks
    row.predicted_s = num_chains * row.step_s * (num_warmup + row.num_samples)
    minimum_s = num_chains * row.step_s * (num_warmup + 2 * chunk)
    if minimum_s > budget:
        row.status = "over budget"
        row.note = f"warmup and two chunks predicted at {minimum_s:.0f} s > budget {budget:.0f} s"
        return row

    kernel = method.make(*models, model_args)
    mcmc = sequential_mcmc(kernel, num_warmup, chunk, num_chains, thinning=row.thinning)
    row.warmup_s = timed_warmup(mcmc, key_run, *model_args)
    if sampling_seconds is not None:
        # The pilot's cost is that of unadapted steps (NUTS's first step size is 1, its trees
        # of any depth); equal sampling time needs the cost after warmup.
        first_chain = chain_states(mcmc.post_warmup_state, num_chains)[0]
        row.step_s = steady_step_cost(mcmc.sampler, first_chain, model_args)
        row.thinning, chunk = sampling_plan(
            num_samples, row.step_s, num_chunks, sampling_seconds, max_draws, num_chains
        )
        mcmc.num_samples, mcmc.thinning = chunk, row.thinning
    draws: dict[str, list[np.ndarray]] = {"w": [], "b": [], "x": []}
    extra_fields = method.discrete_fields if method.reports_discrete_move else ()
    moves: dict[str, list[np.ndarray]] = {name: [] for name in extra_fields}
    chunk_s: list[float] = []
    for _ in range(num_chunks):
        # two chunks at least: the first one may carry the compilation
        next_chunk_s = statistics.median(chunk_s[1:]) if len(chunk_s) > 1 else 0.0
        if len(chunk_s) >= 2 and row.warmup_s + sum(chunk_s) + next_chunk_s > budget:
            row.status = "stopped at budget"
            row.note = f"{len(chunk_s)} of {num_chunks} chunks within {budget:.0f} s"
            break
        chunk_s.append(later_run(mcmc, model_args, extra_fields))
        samples = mcmc.get_samples(group_by_chain=True)
        for site in draws if method.samples_x else ("w", "b"):
            draws[site].append(np.asarray(samples[site]))
        fields = mcmc.get_extra_fields()
        for name in moves:
            moves[name].append(np.asarray(fields[name]))
        mcmc.post_warmup_state = mcmc.last_state
    # the probe separates numpyro's per-run overhead from sampling
    calls = probe_timing(
        mcmc, lambda: later_run(mcmc, model_args, extra_fields), chunk_s, chunk, row.thinning
    )
    row.compile_s = chunk_timing(chunk_s, row.warmup_s, num_warmup == chunk)[0]
    row.num_samples = chunk * len(chunk_s)
    row.sampling_s = calls.seconds_per_step * row.num_samples
    row.run_overhead_s = calls.overhead_s
    row.chunk_s = chunk_s
    if moves:
        row.discrete_accept_prob = float(np.concatenate(moves["accept_prob"]).mean())
        if "path_length" in moves:
            row.mean_path_length = float(np.concatenate(moves["path_length"]).mean())
    w = np.concatenate(draws["w"], axis=1)
    b = np.concatenate(draws["b"], axis=1)
    row.ess_w_min = float(np.nanmin(coordinate_ess(w)))
    row.ess_w_per_s = row.ess_w_min / row.sampling_s
    row.ess_w_within_chains = within_chain_ess(w)
    row.ess_w_sorted_abs = float(np.nanmin(coordinate_ess(sorted_abs_weights(w))))
    row.ess_w_sorted_abs_per_s = row.ess_w_sorted_abs / row.sampling_s
    if method.samples_x:
        x = np.concatenate(draws["x"], axis=1)
        x = x.reshape(*x.shape[:2], -1).astype(np.int8)
        ess = coordinate_ess(x)
        row.ess_x_min = float(ess[np.isfinite(ess)].min()) if np.isfinite(ess).any() else None
        row.ess_x_hamming = hamming_ess(x, reference)
        if row.ess_x_min is not None:
            row.ess_x_min_per_s = row.ess_x_min / row.sampling_s
        row.ess_x_hamming_per_s = row.ess_x_hamming / row.sampling_s
        signal = mean_signal(x.reshape(*x.shape[:2], -1, w.shape[-1]), w, b)
        row.ess_signal_min = float(np.nanmin(coordinate_ess(signal)))
        row.ess_signal_per_s = row.ess_signal_min / row.sampling_s
        if num_chains > 1:
            row.rhat_signal_max = float(np.nanmax(split_gelman_rubin(signal)))
    return row


def mean_signal(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(chains, draws, L)`` the mean of each observation, ``w . x_l + b``: the same in
    every mirror mode of the posterior (label-invariant)."""
    return np.einsum("cdlk,cdk->cdl", x.astype(np.float64), w) + b[..., None]


def sorted_abs_weights(w: np.ndarray) -> np.ndarray:
    """The order statistics of ``|w|`` along the last axis: the same in every mirror mode
    of the FHMM posterior (hidden chains permuted with their weights, or one chain
    flipped), unlike the labels ``w_k``."""
    return np.sort(np.abs(w), axis=-1)


def within_chain_ess(w: np.ndarray) -> float:
    """Min over coordinates of the sum over chains of each chain's own ESS of the
    ``(chains, draws, K)`` draws `w`: what the chains would give together if they agreed.
    Far above the multi-chain ESS, it says that each chain mixes within a mode and the
    chains sit in different ones."""
    per_chain = np.stack([coordinate_ess(chain[None]) for chain in w])
    # a chain whose ESS is undefined (a constant coordinate) adds nothing
    return float(np.nanmin(np.nansum(per_chain, axis=0)))


def _kept(row: Row) -> bool:
    return row.status in ("ok", "stopped at budget")


COLUMNS = (
    ("sampler", lambda r: r.method),
    ("status", lambda r: r.status if r.status == "ok" else f"{r.status} ({r.note})"),
    ("steps", lambda r: str(r.num_samples) if _kept(r) else "-"),
    ("thinning", lambda r: str(r.thinning) if _kept(r) else "-"),
    number_column("s/step", "step_s"),
    number_column("compile s", "compile_s"),
    number_column("run overhead s", "run_overhead_s"),
    number_column("sampling s", "sampling_s"),
    number_column("ESS w (min)", "ess_w_min", 4),
    number_column("ESS w within chains", "ess_w_within_chains", 4),
    number_column("ESS sorted abs(w)", "ess_w_sorted_abs", 4),
    number_column("ESS X (min)", "ess_x_min", 4),
    number_column("ESS X Ham.", "ess_x_hamming", 4),
    number_column("ESS w/s", "ess_w_per_s"),
    number_column("ESS X min/s", "ess_x_min_per_s"),
    number_column("ESS X Ham./s", "ess_x_hamming_per_s"),
    number_column("w/s vs best Gibbs-type", "w_per_s_vs_best_gibbs"),
    number_column("sorted abs(w)/s vs best Gibbs-type", "w_sorted_abs_per_s_vs_best_gibbs"),
    number_column("X accept", "discrete_accept_prob"),
    number_column("X mean R", "mean_path_length"),
    number_column("ESS signal (min)", "ess_signal_min", 4),
    number_column("ESS signal/s", "ess_signal_per_s"),
    number_column("signal/s vs DiscreteHMCGibbs", "signal_per_s_vs_discrete_hmc_gibbs"),
    number_column("signal/s vs FFBS-Gibbs", "signal_per_s_vs_ffbs_gibbs"),
    number_column("R-hat signal (max)", "rhat_signal_max"),
)


def markdown_report(rows: Sequence[Row], settings: dict[str, Any]) -> str:
    lines = [
        f"## bench_fhmm, L = {settings['L']}, K = {settings['K']}",
        "",
        f"{settings['config']}; {_chains(settings.get('num_chains', 1))}; "
        f"LBPGibbs and NUTS-enum {settings['num_warmup']} "
        f"warmup + {settings['num_samples']} samples, sweep-based kernels and MixedHMC "
        f"{settings['gibbs_num_warmup']} + {settings['gibbs_num_samples']}"
        + (
            f", or as many steps as fill {settings['sampling_seconds']:.0f} s of sampling "
            f"(kept as at most {settings['max_draws']} thinned draws)"
            if settings.get("sampling_seconds")
            else ""
        )
        + f"; budget {settings['time_budget']:.0f} s per sampler; seed {settings['seed']}; "
        f"{settings['cpu_count']} CPU(s), jax {jax.__version__}, numpyro "
        f"{numpyro.__version__}.",
        "",
    ]
    lines += markdown_table(COLUMNS, rows)
    return "\n".join(lines) + "\n"


def _chains(num_chains: int) -> str:
    if num_chains == 1:
        return "one chain"
    return f"{num_chains} chains run one after the other (steps per chain, multi-chain ESS)"


#: The sizes of a full run and of ``--quick`` (a smoke test).
FULL = {
    "L": 200,
    "K": 5,
    "num_warmup": 1000,
    "num_samples": 2000,
    "gibbs_num_warmup": 200,
    "gibbs_num_samples": 400,
    "num_chunks": 8,
}
#: The FHMM benchmarks' smoke-test sizes (also ``bench_chain_blocks``'s).
QUICK_SIZES = {
    "L": 12,
    "K": 2,
    "num_warmup": 20,
    "num_samples": 40,
    "gibbs_num_warmup": 20,
    "gibbs_num_samples": 40,
}
QUICK = {**QUICK_SIZES, "num_chunks": 8}
_HELP = {"L": "time steps", "K": "binary chains", "num_chunks": "timed chunks, >= 2"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    out_dirs = (RESULTS_DIR, RESULTS_DIR)
    parser = benchmark_parser(
        "LBPGibbs vs numpyro's samplers on an FHMM.", FULL, QUICK, _HELP, out_dirs
    )
    parser.add_argument("--config", choices=["C1", "C2", "C3"], default="C2")
    parser.add_argument(
        "--time-budget", type=float, default=300.0, help="seconds per sampler (default 300)"
    )
    parser.add_argument(
        "--sampling-seconds",
        type=float,
        default=None,
        help="give every sampler as many steps as fill this sampling time at its measured "
        "cost per step (at least --num-samples / --gibbs-num-samples); default: off",
    )
    parser.add_argument(
        "--max-draws",
        type=int,
        default=4000,
        help="thin the kept draws to at most this many (default 4000)",
    )
    parser.add_argument(
        "--num-chains",
        type=int,
        default=1,
        help="independent chains per sampler, run one after the other and sharing "
        "--sampling-seconds; ESS over all of them (default 1)",
    )
    parser.add_argument("--methods", nargs="+", default=[m.name for m in METHODS])
    return parse_benchmark_args(parser, argv, FULL, QUICK, out_dirs)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark at one size; returns what it writes to the JSON file."""
    args = parse_args(argv)
    settings = {
        k: getattr(args, k)
        for k in ("L", "K", "config", "num_warmup", "num_samples", "gibbs_num_warmup",
                  "gibbs_num_samples", "num_chunks", "time_budget", "sampling_seconds",
                  "max_draws", "num_chains", "seed", "quick")
    }  # fmt: skip
    settings["cpu_count"] = os.cpu_count()
    data = fhmm_data(args.L, args.K, args.config, seed=args.seed)
    model_args = (jnp.asarray(data.y), args.K)
    reference = np.random.default_rng(args.seed).integers(0, 2, args.L * args.K, dtype=np.int8)
    stem = f"bench_fhmm_L{args.L}_K{args.K}"
    rows: list[Row] = []
    with fresh_compilation_cache():
        for index, method in enumerate(m for m in METHODS if m.name in args.methods):
            sweep = method.sweep_based
            row = run_method(
                method,
                (fhmm_model, fhmm_enumerated_model),
                model_args,
                random.fold_in(random.key(args.seed), index),
                num_warmup=args.gibbs_num_warmup if sweep else args.num_warmup,
                num_samples=args.gibbs_num_samples if sweep else args.num_samples,
                num_chunks=args.num_chunks,
                budget=args.time_budget,
                reference=reference,
                sampling_seconds=args.sampling_seconds,
                max_draws=args.max_draws,
                num_chains=args.num_chains,
            )
            print(f"[L={args.L}, K={args.K}] {method.name}: {row.status} {row.note}", flush=True)
            rows.append(row)
            result = record_rows(rows, settings, args.out_dir, stem)
            release_compiled_programs()
    print(markdown_report(rows, settings))
    return result


def record_rows(
    rows: list[Row], settings: dict[str, Any], out_dir: Path, stem: str
) -> dict[str, Any]:
    """Compare the rows so far with the best Gibbs-type kernel and (re)write the JSON and
    markdown files; returns what the JSON holds."""
    for rate, ratio in (
        ("ess_w_per_s", "w_per_s_vs_best_gibbs"),
        ("ess_w_sorted_abs_per_s", "w_sorted_abs_per_s_vs_best_gibbs"),
    ):
        rates = [getattr(r, rate) for r in rows if r.method in GIBBS_TYPE and getattr(r, rate)]
        for row in rows:
            if rates and getattr(row, rate) is not None:
                setattr(row, ratio, getattr(row, rate) / max(rates))
    for anchor, ratio in (
        ("DiscreteHMCGibbs", "signal_per_s_vs_discrete_hmc_gibbs"),
        ("FFBS-Gibbs", "signal_per_s_vs_ffbs_gibbs"),
    ):
        base = next((r.ess_signal_per_s for r in rows if r.method == anchor), None)
        for row in rows:
            if base and row.ess_signal_per_s is not None:
                setattr(row, ratio, row.ess_signal_per_s / base)
    result = result_record(settings, rows=[asdict(row) for row in rows])
    write_results(out_dir, stem, result, markdown_report(rows, settings))
    return result


if __name__ == "__main__":
    main()
