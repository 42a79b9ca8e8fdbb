"""
Benchmark: chromatic sweeps against a hand-written sampler and THRML on lattices
================================================================================

The same Markov chain three ways, side by side in one process: systematic two-colour
(checkerboard) Gibbs on an open ``p x p`` lattice, each colour class drawn at once from its
exact conditional.

- **ChromaticGibbs** - ``ChromaticGibbs(model)`` on the model as a user writes it
  (:func:`~benchmarks.targets.ising_target` / :func:`~benchmarks.targets.potts_target`,
  elementwise factors), its structure and colouring detected at ``init``; the steady state
  runs the kernel's ``sample``, the code ``MCMC`` runs.
- **checkerboard** - the sampler written by hand in plain JAX for this one model
  (:func:`checkerboard_ising`, :func:`checkerboard_potts`): neighbour sums by slicing, one
  uniform per site per sweep (the two halves use the two halves of one draw), inversion.
  The speed a user could reach by hand.
- **THRML** - `thrml <https://github.com/extropic-ai/thrml>`_, a JAX library for block Gibbs
  sampling of discrete graphical models (optional: ``pip install thrml``; its rows are left
  out when it is not installed). Ising: its ``IsingEBM``; Potts: a ``FactorizedEBM`` of
  categorical factors (the field and the two edge directions); the two checkerboard blocks,
  one ``sample_blocks`` call per sweep.

Metrics, per model, size and sampler (one chain):

- **ms/sweep** - steady state: a jitted ``lax.scan`` of ``--num-sweeps`` sweeps collecting a
  fixed random subset of ``--subset`` coordinates, compiled, called once (burn-in) and once
  timed (``jax.block_until_ready``); the time of the second call over its sweeps.
- **compile s** - ``jit(...).lower(...).compile()`` of that scan, timed apart.
- **first run s** - what a user waits for, in this process after the others' runs (shared
  JAX caches of small operations make it a lower bound): building the sampler (for
  ChromaticGibbs, the kernel and ``MCMC``, structure detection included) and a first run of
  ``--first-warmup`` + ``--first-samples`` sweeps collecting every coordinate.
- **ESS/sweep** - ``numpyro.diagnostics.effective_sample_size`` of each coordinate of the
  subset over the timed call's sweeps (started where the compiling call ended, so past
  burn-in), min and mean; of the mean state (magnetisation, or mean label) in the JSON.
- **minESS/s** - min ESS per sweep over seconds per sweep. **x checkerboard** - over the
  checkerboard's on the same lattice.
- **mean** - the subset's mean state, with its Monte Carlo standard error in the JSON: the
  three samplers target one distribution, and the table shows they agree.

Run: ``python -m benchmarks.bench_sweeps`` (Ising and Potts, ``p`` in 50, 200, 1000);
``--quick`` for a smoke test. Results: ``benchmarks/results/sweeps/``.
"""

from collections.abc import Callable, Sequence
import functools
import importlib.util
import operator
from pathlib import Path
import time
from typing import Any, NamedTuple

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC

from numpyro_discrete import ChromaticGibbs

from benchmarks.measurement import (
    benchmark_parser,
    coordinate_ess,
    environment,
    fmt,
    parse_benchmark_args,
    write_results,
)
from benchmarks.targets import POTTS_BETA, Target, ising_target, potts_target

SITE = "x"
FULL = {
    "models": ["ising", "potts"],
    "sizes": [50, 200, 1000],
    "num_sweeps": 1000,
    "subset": 1000,
    "first_warmup": 500,
    "first_samples": 100,
}
QUICK = {
    "models": ["ising", "potts"],
    "sizes": [8],
    "num_sweeps": 60,
    "subset": 32,
    "first_warmup": 10,
    "first_samples": 10,
}
HELP = {
    "models": "lattice models (ising, potts)",
    "sizes": "lattice sides p (p x p coordinates)",
    "num_sweeps": "sweeps of the compiling call and of the timed call",
    "subset": "coordinates whose draws are kept (ESS, mean)",
    "first_warmup": "warmup sweeps of the first run",
    "first_samples": "sweeps of the first run that collect every coordinate",
}
OUT_DIRS = (Path("benchmarks/results/sweeps"), Path("benchmarks/results/quick"))
THRML_INSTALLED = importlib.util.find_spec("thrml") is not None


class Sampler(NamedTuple):
    """A pure sweep: ``sweep(state, key) -> state``; ``read(state)`` the flat ``(N,)``
    integer state; ``init`` the state to start from."""

    init: Any
    sweep: Callable[[Any, jax.Array], Any]
    read: Callable[[Any], jax.Array]


# --- the hand-written samplers ----------------------------------------------------------------


def _checkerboard(shape: tuple[int, int]) -> jax.Array:
    rows, cols = np.indices(shape)
    return jnp.asarray((rows + cols) % 2 == 0)


def _neighbour_sum(a: jax.Array) -> jax.Array:
    """Sum over the four lattice neighbours of each site, zero outside (open lattice); `a`
    is ``(p, p)`` or ``(p, p, K)``."""
    pad = [(1, 1), (1, 1)] + [(0, 0)] * (a.ndim - 2)
    padded = jnp.pad(a, pad)
    return padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]


def checkerboard_ising(field: np.ndarray, lam: float) -> Sampler:
    """Checkerboard Gibbs by hand for ``log pi(s) = sum_i a_i s_i - lam sum_<ij> s_i s_j``
    (:func:`~benchmarks.targets.ising_target`): ``P(s_i = 1 | rest) = sigmoid(2 (a_i - lam
    n_i))``, ``n_i`` the sum of the neighbour spins. The state is ``(p, p)`` spins in
    ``{-1, 1}``."""
    field = jnp.asarray(field, jnp.float32)
    black = _checkerboard(field.shape)

    def sweep(s: jax.Array, key: jax.Array) -> jax.Array:
        # one uniform per site: the black half reads the black sites' draws, the white
        # half the white sites'
        u = random.uniform(key, s.shape)
        for colour in (black, ~black):
            p_up = jax.nn.sigmoid(2.0 * (field - lam * _neighbour_sum(s)))
            s = jnp.where(colour, jnp.where(u < p_up, 1.0, -1.0), s)
        return s

    init = jnp.where(_checkerboard(field.shape), 1.0, -1.0)
    return Sampler(init, sweep, lambda s: ((s.reshape(-1) + 1) // 2).astype(jnp.int32))


def checkerboard_potts(field: np.ndarray, beta: float) -> Sampler:
    """Checkerboard Gibbs by hand for the Potts model of
    :func:`~benchmarks.targets.potts_target`: ``log pi(x) = sum_i a_i[x_i] + beta
    sum_<ij> [x_i = x_j]``, so ``log P(x_i = k | rest) = a_i[k] + beta c_ik + const``,
    ``c_ik`` the number of neighbours of colour ``k``; drawn by inversion, one uniform per
    site. Every operation is on ``(p, p)`` planes, one per colour (a softmax along a last
    axis of 3 is a slow reduction on CPU). The state is ``(p, p)`` labels."""
    planes = [jnp.asarray(field[..., k], jnp.float32) for k in range(field.shape[-1])]
    black = _checkerboard(planes[0].shape)

    def sweep(x: jax.Array, key: jax.Array) -> jax.Array:
        u = random.uniform(key, x.shape)
        for colour in (black, ~black):
            logits = [a + beta * _neighbour_sum((x == k).astype(jnp.float32)) for k, a in
                      enumerate(planes)]  # fmt: skip
            top = functools.reduce(jnp.maximum, logits)
            weights = [jnp.exp(logit - top) for logit in logits]
            threshold = u * functools.reduce(operator.add, weights)
            running, draw = jnp.zeros_like(u), jnp.zeros(x.shape, x.dtype)
            for w in weights[:-1]:
                running = running + w
                draw = draw + (running <= threshold).astype(x.dtype)
            x = jnp.where(colour, draw, x)
        return x

    init = jnp.zeros(planes[0].shape, jnp.int32)
    return Sampler(init, sweep, lambda x: x.reshape(-1))


# --- THRML ------------------------------------------------------------------------------------


def _thrml_lattice(p: int) -> tuple[list, list, list, np.ndarray]:
    """Nodes of a ``p x p`` lattice in row-major order, its right and down edges as index
    pairs, and the two checkerboard blocks' node indices."""
    index = np.arange(p * p).reshape(p, p)
    right = np.stack([index[:, :-1].ravel(), index[:, 1:].ravel()], 1)
    down = np.stack([index[:-1, :].ravel(), index[1:, :].ravel()], 1)
    black = np.asarray(_checkerboard((p, p))).ravel()
    return right, down, [index.ravel()[black], index.ravel()[~black]], black


def thrml_sampler(target: Target, model: str) -> Sampler:
    """THRML's block Gibbs on the target's lattice, the two checkerboard blocks."""
    import thrml
    from thrml.models import (
        CategoricalEBMFactor,
        CategoricalGibbsConditional,
        IsingEBM,
        IsingSamplingProgram,
    )
    from thrml.models.ebm import FactorizedEBM

    p = target.shape[0]
    right, down, blocks, _ = _thrml_lattice(p)
    edges = np.concatenate([right, down])
    if model == "ising":
        nodes = [thrml.SpinNode() for _ in range(p * p)]
        lam = float(target.params["lambda"])
        ebm = IsingEBM(
            nodes,
            [(nodes[a], nodes[b]) for a, b in edges],
            jnp.asarray(target.params["field"], jnp.float32).ravel(),
            jnp.full(len(edges), -lam, jnp.float32),
            jnp.asarray(1.0, jnp.float32),
        )
        free = [thrml.Block([nodes[i] for i in block]) for block in blocks]
        program = IsingSamplingProgram(ebm, free, [])
        init = [jnp.asarray(np.arange(len(b)) % 2 == 0) for b in blocks]
    else:
        nodes = [thrml.CategoricalNode() for _ in range(p * p)]
        field = np.asarray(target.params["field"], np.float32).reshape(p * p, -1)
        num_colours = field.shape[1]
        pair = POTTS_BETA * np.eye(num_colours, dtype=np.float32)
        factors = [CategoricalEBMFactor([thrml.Block(nodes)], jnp.asarray(field))]
        for pairs in (right, down):
            groups = [thrml.Block([nodes[i] for i in pairs[:, k]]) for k in (0, 1)]
            weights = jnp.asarray(np.broadcast_to(pair, (len(pairs),) + pair.shape))
            factors.append(CategoricalEBMFactor(groups, weights))
        ebm = FactorizedEBM(factors)
        free = [thrml.Block([nodes[i] for i in block]) for block in blocks]
        spec = thrml.BlockGibbsSpec(free, [], ebm.node_shape_dtypes)
        samplers = [CategoricalGibbsConditional(num_colours) for _ in free]
        program = thrml.FactorSamplingProgram(spec, samplers, ebm.factors, [])
        init = [jnp.zeros(len(b), jnp.uint8) for b in blocks]
    sampler_states = [s.init() for s in program.samplers]
    position = np.concatenate(blocks)
    inverse = jnp.asarray(np.argsort(position))

    def sweep(state: list, key: jax.Array) -> list:
        return thrml.sample_blocks(key, list(state), [], program, list(sampler_states))[0]

    def read(state: list) -> jax.Array:
        return jnp.concatenate([b.astype(jnp.int32) for b in state])[inverse]

    return Sampler(init, sweep, read)


# --- measuring --------------------------------------------------------------------------------


def make_target(model: str, p: int) -> Target:
    if model == "ising":
        return ising_target(p, "C2", elementwise=True)
    return potts_target(p, elementwise=True)


def make_sampler(name: str, target: Target) -> Sampler:
    """The hand-written or THRML sampler of `target` (ChromaticGibbs: :func:`first_run`)."""
    model = "ising" if target.name.startswith("ising") else "potts"
    if name == "checkerboard":
        if model == "ising":
            return checkerboard_ising(target.params["field"], float(target.params["lambda"]))
        return checkerboard_potts(target.params["field"], POTTS_BETA)
    return thrml_sampler(target, model)


def first_run(
    name: str, target: Target, key: jax.Array, warmup: int, samples: int
) -> tuple[float, Sampler]:
    """Seconds from building the sampler to `samples` full draws after `warmup` sweeps, and
    the sampler at its last state. ChromaticGibbs runs in ``MCMC`` as a user runs it; its
    sweep is then the kernel's ``sample`` (whose state carries its own key)."""
    start = time.perf_counter()
    if name == "ChromaticGibbs":
        kernel = ChromaticGibbs(target.model)
        mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, progress_bar=False)
        mcmc.run(key)
        jax.block_until_ready(mcmc.get_samples())
        seconds = time.perf_counter() - start
        sampler = Sampler(
            mcmc.last_state,
            lambda state, _: kernel.sample(state, (), {}),
            lambda state: state.z[SITE].reshape(-1).astype(jnp.int32),
        )
        return seconds, sampler
    sampler = make_sampler(name, target)

    @jax.jit
    def run(state: Any, key: jax.Array) -> tuple[Any, jax.Array]:
        warm_key, key = random.split(key)
        state = lax.fori_loop(
            0, warmup, lambda i, s: sampler.sweep(s, random.fold_in(warm_key, i)), state
        )

        def collect(state: Any, key: jax.Array) -> tuple[Any, jax.Array]:
            state = sampler.sweep(state, key)
            return state, sampler.read(state)

        return lax.scan(collect, state, random.split(key, samples))

    state, _ = jax.block_until_ready(run(sampler.init, key))
    return time.perf_counter() - start, sampler._replace(init=state)


def steady_state(
    sampler: Sampler, key: jax.Array, num_sweeps: int, subset: np.ndarray
) -> dict[str, Any]:
    """Compile a scan of sweeps (timed apart), run it, then time a second call from where
    the first ended."""

    @jax.jit
    def run(state: Any, key: jax.Array) -> tuple[Any, jax.Array]:
        def step(state: Any, key: jax.Array) -> tuple[Any, jax.Array]:
            state = sampler.sweep(state, key)
            return state, sampler.read(state)[subset].astype(jnp.int8)

        return lax.scan(step, state, random.split(key, num_sweeps))

    first_key, timed_key = random.split(key)
    start = time.perf_counter()
    run = run.lower(sampler.init, first_key).compile()
    compile_s = time.perf_counter() - start
    state, _ = jax.block_until_ready(run(sampler.init, first_key))
    start = time.perf_counter()
    _, draws = jax.block_until_ready(run(state, timed_key))
    timed_s = time.perf_counter() - start
    draws = np.asarray(draws, np.float64)[None]  # (1 chain, sweeps, subset)
    ess = coordinate_ess(draws)
    ess = ess[np.isfinite(ess)]
    mean_state = draws.mean(-1)
    mean_ess = float(effective_sample_size(mean_state))
    seconds_per_sweep = timed_s / num_sweeps
    return {
        "ms_per_sweep": 1e3 * seconds_per_sweep,
        "compile_s": compile_s,
        "ess_min_per_sweep": float(ess.min()) / num_sweeps if ess.size else float("nan"),
        "ess_mean_per_sweep": float(ess.mean()) / num_sweeps if ess.size else float("nan"),
        "ess_mean_state_per_sweep": mean_ess / num_sweeps,
        "min_ess_per_s": float(ess.min()) / num_sweeps / seconds_per_sweep
        if ess.size
        else float("nan"),
        "mean": float(mean_state.mean()),
        "mean_mcse": float(mean_state.std() / np.sqrt(max(mean_ess, 1.0))),
    }


def run_benchmark(
    args: Any, written: Callable[[list[dict[str, Any]]], None]
) -> list[dict[str, Any]]:
    """Every row, `written` after each lattice (a long run keeps what it measured)."""
    names = ["ChromaticGibbs", "checkerboard"] + (["THRML"] if THRML_INSTALLED else [])
    rows = []
    for model in args.models:
        for p in args.sizes:
            target = make_target(model, p)
            subset = np.sort(
                np.random.default_rng(args.seed).choice(
                    p * p, min(args.subset, p * p), replace=False
                )
            )
            for name in names:
                key = random.fold_in(random.key(args.seed), p)
                first_s, sampler = first_run(
                    name, target, key, args.first_warmup, args.first_samples
                )
                row = {"model": model, "p": p, "num_coords": p * p, "sampler": name}
                row.update(steady_state(sampler, key, args.num_sweeps, subset))
                row["first_run_s"] = first_s
                rows.append(row)
                print(
                    f"{model} {p}x{p} {name}: {row['ms_per_sweep']:.3f} ms/sweep, "
                    f"ESS/sweep {row['ess_min_per_sweep']:.3f}, first run {first_s:.2f} s",
                    flush=True,
                )
            anchor = next(
                r["min_ess_per_s"]
                for r in rows
                if (r["model"], r["p"], r["sampler"]) == (model, p, "checkerboard")
            )
            for row in rows:
                if (row["model"], row["p"]) == (model, p):
                    row["x_checkerboard"] = row["min_ess_per_s"] / anchor
            written(rows)
    return rows


def report(rows: Sequence[dict[str, Any]], settings: dict[str, Any], env: dict[str, Any]) -> str:
    thrml = "" if THRML_INSTALLED else " THRML is not installed: its rows are missing."
    lines = [
        "## bench_sweeps",
        "",
        f"One chain; steady state: {settings['num_sweeps']} sweeps compiled, then "
        f"{settings['num_sweeps']} timed; ESS over {settings['subset']} coordinates; first run: "
        f"{settings['first_warmup']} + {settings['first_samples']} sweeps. "
        f"{env['platform']}, jax {env['jax']}.{thrml}",
        "",
        "| model | p | sampler | ms/sweep | compile s | first run s | ESS/sweep min | "
        "ESS/sweep mean | minESS/s | x checkerboard | mean |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['p']} | {r['sampler']} | {fmt(r['ms_per_sweep'])} | "
            f"{fmt(r['compile_s'])} | {fmt(r['first_run_s'])} | "
            f"{fmt(r['ess_min_per_sweep'])} | {fmt(r['ess_mean_per_sweep'])} | "
            f"{fmt(r['min_ess_per_s'])} | {fmt(r['x_checkerboard'])} | "
            f"{r['mean']:.3f} ± {r['mean_mcse']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_parser(__doc__.split("\n")[1], FULL, QUICK, HELP, OUT_DIRS, "keys")
    args = parse_benchmark_args(parser, argv, FULL, QUICK, OUT_DIRS)
    settings = {name: getattr(args, name) for name in FULL}
    env = environment()
    env["platform"] = f"{jax.devices()[0].device_kind} ({jax.default_backend()})"
    env["thrml"] = THRML_INSTALLED

    def written(rows: list[dict[str, Any]]) -> None:
        result = {"settings": settings, "environment": env, "rows": rows}
        write_results(args.out_dir, "bench_sweeps", result, report(rows, settings, env))

    print(report(run_benchmark(args, written), settings, env))
    print(f"wrote {args.out_dir / 'bench_sweeps.md'}")


if __name__ == "__main__":
    main()
