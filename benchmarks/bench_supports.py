"""
Benchmark: ALBP on categorical and integer-valued sites against numpyro's DiscreteGibbs
======================================================================================

Two targets beyond binary sites, each run side by side in one process:

- **potts** - a 3-state Potts model on a ``p x p`` open lattice (default ``p = 30``, 900
  coordinates): ``x_i ~ Categorical(logits=h_i)`` with fields ``h_i ~ N(0, 0.5^2)^3``, and
  ``beta * sum_<ij> J[x_i, x_j]`` with ``J`` the identity (each unordered neighbour pair
  once, ``beta = 0.6``), written as a table lookup: the colours are used as indices, so
  ``weights="auto"`` must choose exact local ratios (checked).
- **poisson** - an N-mixture abundance model (a Poisson latent observed through binomial
  thinning): ``n_i ~ Poisson(lambda_i)``, ``lambda_i ~ U[2, 8]`` fixed, and ``J = 3``
  surveys ``y_ij ~ Binomial(n_i, 0.5)`` at each of ``N = 400`` sites (default). ``n_i``
  enters the likelihood arithmetically (as a ``total_count``); the sites are independent
  given the data (one colour) and ``log pi`` is not affine in ``n_i`` (the Poisson prior),
  so ``"auto"`` chooses exact ratios, colour-batched (it chose the gradient before the
  kernels read the model's structure; ``results/bench_supports.md`` was recorded then);
  ``weights="exact"`` is run too. numpyro's
  DiscreteGibbs needs a finite support to enumerate, so it runs on the same model with
  ``n_i`` a categorical over ``0..n_max`` with Poisson probabilities (``n_max = 60``: the
  prior tail above it is below 1e-30 for every site).

Samplers: ``ALBP`` (auto weights), ``LBP-1``, ``ALBP`` with exact weights (Poisson only)
and numpyro's ``DiscreteGibbs`` (one sweep per step). Metrics, timing (compile time apart,
``block_until_ready``, chunked runs) and the ESS conventions are those of
:mod:`benchmarks.bench_binary`, whose runner this script reuses; **ms/step** is the
sampling time per step per chain, and the Hamming ESS counts the coordinates that differ
from a fixed reference drawn from the target's prior.

Usage (from the repository root)::

    python -m benchmarks.bench_supports            # full size, about 10 min on 2 cores
    python -m benchmarks.bench_supports --quick    # smoke test, tiny sizes

Outputs: the markdown table on stdout, ``bench_supports.json`` and ``bench_supports.md`` in
``--out-dir`` (default ``benchmarks/results``).
"""

import argparse
from collections.abc import Sequence
from dataclasses import asdict
import os
from typing import Any

import numpy as np

import jax
from jax import random
import jax.numpy as jnp
from jax.scipy.special import gammaln

import numpyro
import numpyro.distributions as dist
from numpyro.infer import DiscreteGibbs

from numpyro_discrete import ALBP, LBP

from benchmarks.bench_binary import (
    COLUMNS,
    GIBBS,
    Row,
    SamplerSpec,
    add_gibbs_ratios,
    run_sampler,
)
from benchmarks.measurement import (
    RESULTS_DIR,
    benchmark_parser,
    environment,
    fmt,
    fresh_compilation_cache,
    markdown_table,
    parse_benchmark_args,
    release_compiled_programs,
    write_results,
)
from benchmarks.targets import Target, potts_target

POISSON_SURVEYS = 3
POISSON_DETECTION = 0.5
POISSON_MAX = 60

FULL = {
    "potts_p": 30,
    "poisson_n": 400,
    "num_warmup": 2000,
    "num_samples": 8000,
    "gibbs_num_warmup": 50,
    "gibbs_num_samples": 400,
    "num_chunks": 4,
}
QUICK = {
    "potts_p": 3,
    "poisson_n": 6,
    "num_warmup": 100,
    "num_samples": 200,
    "gibbs_num_warmup": 20,
    "gibbs_num_samples": 40,
    "num_chunks": 2,
}


def poisson_targets(num_sites: int, seed: int = 0) -> tuple[Target, Target]:
    """The N-mixture model, with ``n_i`` Poisson (for LBP/ALBP) and, for DiscreteGibbs,
    categorical over ``0..n_max`` with the same (truncated) probabilities."""
    rng = np.random.default_rng(seed)
    rates_np = rng.uniform(2.0, 8.0, num_sites)
    abundance = rng.poisson(rates_np)
    counts_np = rng.binomial(abundance[:, None], POISSON_DETECTION, (num_sites, POISSON_SURVEYS))
    rates, counts = jnp.asarray(rates_np), jnp.asarray(counts_np)
    support = jnp.arange(POISSON_MAX + 1)
    truncated_logits = support * jnp.log(rates[:, None]) - gammaln(support + 1.0)

    def likelihood(n: jax.Array) -> None:
        numpyro.sample("y", dist.Binomial(n[:, None], POISSON_DETECTION), obs=counts)

    def model() -> None:
        likelihood(numpyro.sample("x", dist.Poisson(rates)))

    def truncated_model() -> None:
        likelihood(numpyro.sample("x", dist.Categorical(logits=truncated_logits)))

    params = {
        "rates": rates_np,
        "counts": counts_np,
        "detection": POISSON_DETECTION,
        # a prior draw may fall below an observed count (probability zero): start every
        # sampler at the smallest feasible abundances instead
        "init_params": {"x": jnp.asarray(counts_np.max(1), jnp.int32)},
    }
    name = f"poisson-{num_sites}"
    return (
        Target(name, model, num_sites, (num_sites,), params),
        Target(name, truncated_model, num_sites, (num_sites,), params),
    )


def sampler_specs(target_name: str) -> list[SamplerSpec]:
    fields = ("accept_prob", "path_length", "num_changed")
    specs = [
        SamplerSpec("ALBP", "ALBP", "sqrt", lambda model: ALBP(model), fields),
        SamplerSpec("LBP1", "LBP-1", "sqrt", lambda model: LBP(model), fields),
    ]
    if target_name.startswith("poisson"):
        specs.append(
            SamplerSpec(
                "ALBP-exact", "ALBP", "sqrt", lambda model: ALBP(model, weights="exact"), fields
            )
        )
    specs.append(SamplerSpec(GIBBS, GIBBS, None, DiscreteGibbs, ()))
    return specs


def markdown_report(rows: list[Row], modes: dict[str, dict], settings: dict) -> str:
    lines = [
        "## bench_supports",
        "",
        f"{settings['num_chains']} chain(s); LBP/ALBP: {settings['num_warmup']} warmup + "
        f"{settings['num_samples']} samples; DiscreteGibbs: {settings['gibbs_num_warmup']} "
        f"warmup + {settings['gibbs_num_samples']} sweeps; {settings['num_chunks']} timed "
        f"chunks; seed {settings['seed']}; {settings['cpu_count']} CPU(s), jax "
        f"{jax.__version__}, numpyro {numpyro.__version__}.",
        "",
    ]
    kept = [column for column in COLUMNS if column[0] not in ("ESS mean", "run overhead s")]
    # bench_binary's columns, with the ratio mode after the sampler and ms/step before the
    # compile time
    columns = [
        *kept[:2],
        ("weights", lambda r: modes.get((r.target, r.sampler), "n/a")),
        *kept[2:8],
        ("ms/step", lambda r: fmt(1e3 * r.sampling_s / (r.num_chains * r.num_samples))),
        *kept[8:],
    ]
    lines += markdown_table(columns, rows)
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = benchmark_parser(
        "ALBP / LBP-1 / numpyro DiscreteGibbs on Potts and Poisson-latent targets.",
        FULL,
        QUICK,
        out_dirs=(RESULTS_DIR, RESULTS_DIR),
    )
    targets = ["potts", "poisson"]
    parser.add_argument("--targets", nargs="+", choices=targets, default=targets)
    parser.add_argument("--num-chains", type=int, default=1, help="chains (default 1)")
    parser.add_argument("--target-seed", type=int, default=0, help="target parameters")
    return parse_benchmark_args(parser, argv, FULL, QUICK, (RESULTS_DIR, RESULTS_DIR))


def _reference(target: Target, seed: int) -> np.ndarray:
    """A fixed state drawn from the model's prior, for the Hamming-distance ESS."""
    trace = numpyro.handlers.trace(numpyro.handlers.seed(target.model, seed)).get_trace()
    return np.asarray(trace["x"]["value"]).reshape(-1)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns what it writes to ``bench_supports.json``."""
    args = parse_args(argv)
    settings = {name: getattr(args, name) for name in [*FULL, "targets", "num_chains", "seed"]}
    settings.update(quick=args.quick, target_seed=args.target_seed, cpu_count=os.cpu_count())
    pairs = []
    if "potts" in args.targets:
        potts = potts_target(args.potts_p, args.target_seed)
        pairs.append((potts, potts))
    if "poisson" in args.targets:
        pairs.append(poisson_targets(args.poisson_n, args.target_seed))
    rows: list[Row] = []
    modes: dict[tuple[str, str], str] = {}
    with fresh_compilation_cache():
        for t_index, (target, gibbs_target) in enumerate(pairs):
            reference = _reference(target, args.seed)
            for s_index, spec in enumerate(sampler_specs(target.name)):
                is_gibbs = spec.family == GIBBS
                kernel_target = gibbs_target if is_gibbs else target
                kernel = spec.make(kernel_target.model)
                run_spec = SamplerSpec(
                    spec.name, spec.family, spec.balancing, lambda _, k=kernel: k, spec.extra_fields
                )
                row = run_sampler(
                    run_spec,
                    kernel_target,
                    random.fold_in(random.key(args.seed), 100 * t_index + s_index),
                    num_warmup=args.gibbs_num_warmup if is_gibbs else args.num_warmup,
                    num_samples=args.gibbs_num_samples if is_gibbs else args.num_samples,
                    num_chunks=args.num_chunks,
                    num_chains=args.num_chains,
                    reference=reference,
                    init_params=target.params.get("init_params"),
                )
                mode = getattr(kernel, "weights_mode", None)
                if mode is not None:
                    modes[(row.target, row.sampler)] = mode["x"]
                print(
                    f"[{target.name}] {spec.name}: {row.sampling_s:.1f} s sampling, "
                    f"{row.compile_s:.1f} s compile, ESS min {row.ess_min:.1f}",
                    flush=True,
                )
                rows.append(row)
                release_compiled_programs()
    if "potts" in args.targets and modes[(pairs[0][0].name, "ALBP")] != "exact":
        raise RuntimeError("ALBP's auto weights should be exact on the Potts colours")
    add_gibbs_ratios(rows)
    report = markdown_report(rows, modes, settings)
    print(report)
    result = {
        "settings": settings,
        "environment": environment(),
        "weights_mode": {f"{t}/{s}": m for (t, s), m in modes.items()},
        "rows": [asdict(row) for row in rows],
    }
    write_results(args.out_dir, "bench_supports", result, report)
    return result


if __name__ == "__main__":
    main()
