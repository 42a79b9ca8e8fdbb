"""Shared machinery of the paper-reproduction suite: samplers as pure cores, compiled runs,
size presets, targets and report files.

Two sampler families run on a flat binary target (:class:`~benchmarks.targets.BinaryTarget`):

- **LBP**: the ALBP step :func:`numpyro_discrete.core.path_length.build_kernel` (rounding
  of ``R_t``, then one :func:`numpyro_discrete.core.path.build_kernel` step) with gradient
  local ratios (exact on Bernoulli and Ising targets, first-order on FHMM and RBM) and the
  ``barker`` balancing ``g(t) = t / (1 + t)`` of the paper's Table 1;
- **RWM**: :mod:`benchmarks.paper.rwm`, after
  :func:`~numpyro_discrete.core.path_length.round_path_length`.

Both take a real scale ``R_t``: each step uses its probabilistic rounding (Alg. 2 line 5),
and during warmup ``R_t`` may follow the Robbins-Monro recursion towards a target acceptance
(:func:`~numpyro_discrete.core.path_length.update`, Alg. 2 lines 17-19; ALBP with 0.574,
ARWM with 0.234, any other target for the sweeps). The path of every step has one
of two static sizes, 1 or ``max_scale`` (chosen per step by ``lax.switch``), and ``R_t`` is
clipped to ``max_scale``: one compiled program per family and target serves every scale
and every target acceptance, and the experiments of a run share it (:class:`Cache`).
Compilation dominates the reduced run, so chains run one at a time through these
single-chain programs rather than through one program per batch shape.

Expected jump distance (EJD) in sweeps is Rao-Blackwellised: a step proposes ``R``
distinct flips and moves them all with probability ``min(1, A)``, so
``E[d(x_t, x_{t+1})] = E[R min(1, A)]``, which is averaged instead of the Hamming distance
of the accepted moves (same mean, less variance).
"""

from collections.abc import Callable, Sequence
import dataclasses
from dataclasses import dataclass, field
import datetime
import functools
import json
import math
from pathlib import Path
import time
from types import ModuleType
from typing import Any

import numpy as np

import jax
from jax import lax, random
import jax.numpy as jnp

from numpyro_discrete.core import path_length
from numpyro_discrete.core import state as core_state
from numpyro_discrete.core.balancing import get_balancing
from numpyro_discrete.core.local_ratios import gradient_local_fn
from numpyro_discrete.core.neighbourhood import binary_neighbourhood

from benchmarks import measurement
from benchmarks.paper import rwm
from benchmarks.targets import (
    BinaryTarget,
    bernoulli_binary,
    fhmm_binary,
    ising_binary,
    rbm_binary,
)

__all__ = [
    "FAMILIES",
    "OPTIMAL_ACCEPT",
    "PRESETS",
    "Cache",
    "Family",
    "Preset",
    "Runner",
    "Sweep",
    "SweepPoint",
    "compile_timed",
    "make_family",
    "make_target",
    "pyplot",
    "run_sweep",
    "chain_program",
    "sample_program",
    "save_figure",
    "write_json",
    "write_report",
]

FAMILIES = ("LBP", "RWM")
#: Asymptotically optimal acceptance rates (Corollaries 3.2 and 3.9).
OPTIMAL_ACCEPT = {"LBP": 0.574, "RWM": 0.234}
TARGET_KINDS = ("bernoulli", "ising", "fhmm", "rbm")
BALANCING = "barker"
FHMM_CHAINS = 5
DOCS_DIR = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / "paper"


@dataclass(frozen=True)
class Preset:
    """
    Sizes and chain lengths of one run of the suite.

    - **name** - ``"quick"``, ``"reduced"`` or ``"full"``.
    - **sizes** - per target kind, the sizes of the scaling experiment (Bernoulli ``N``,
      Ising ``p``, FHMM ``L`` with ``K = 5``); the middle one (the second of two) is the
      "medium" size of the efficiency curves and of the table. RBM: ``(visible,)``.
    - **steps** - per target kind, ``(warmup, samples)`` of each chain, one pair per size.
    - **rbm_hidden** - hidden units of the random RBM.
    - **lbp_grid / rwm_grid** - target acceptance rates of the efficiency sweeps.
    - **lbp_near / rwm_near** - the smaller grids, around the optimum, of the scaling
      sweeps at the sizes other than the medium one.
    - **chains** - independent chains per sweep point.
    - **table_samples** - draws of each sampler in the table (None: as the sweeps).
    - **pilot_steps** - length of the pilot chains that give every chain its start
      (:meth:`Cache.starts`).
    """

    name: str
    sizes: dict[str, tuple[int, ...]]
    steps: dict[str, tuple[tuple[int, int], ...]]
    rbm_hidden: int
    lbp_grid: tuple[float, ...]
    rwm_grid: tuple[float, ...]
    lbp_near: tuple[float, ...]
    rwm_near: tuple[float, ...]
    chains: int
    pilot_steps: int
    table_samples: int | None = None

    def medium(self, kind: str) -> int:
        """The middle size of `kind`."""
        sizes = self.sizes[kind]
        return sizes[len(sizes) // 2]

    def steps_for(self, kind: str, size: int) -> tuple[int, int]:
        """``(warmup, samples)`` at `size`."""
        return self.steps[kind][self.sizes[kind].index(size)]

    def scaled(self, fraction: float, chains: int | None = None) -> "Preset":
        """This preset with every chain length times `fraction` (at least 100 steps), and
        `chains` chains per sweep point if given."""

        def scale(steps: int) -> int:
            return max(100, round(steps * fraction))

        steps = {
            kind: tuple((scale(w), scale(s)) for w, s in pairs)
            for kind, pairs in self.steps.items()
        }
        table_samples = None if self.table_samples is None else scale(self.table_samples)
        return dataclasses.replace(
            self,
            steps=steps,
            chains=chains or self.chains,
            pilot_steps=scale(self.pilot_steps),
            table_samples=table_samples,
        )

    def grid(self, family: str, near: bool = False) -> tuple[float, ...]:
        """The sweep's target acceptance rates."""
        if family == "LBP":
            return self.lbp_near if near else self.lbp_grid
        return self.rwm_near if near else self.rwm_grid


def _paper_grid(optimal: float) -> tuple[float, ...]:
    """The paper's grid (Appendix D): 0.02 apart down to 0.03, plus the optimal rate."""
    return tuple(sorted({round(0.95 - 0.02 * k, 3) for k in range(47)} | {optimal}, reverse=True))


PRESETS: dict[str, Preset] = {
    # smoke test: seconds of sampling, minutes of compilation
    "quick": Preset(
        name="quick",
        sizes={"bernoulli": (16, 32), "ising": (4, 6), "fhmm": (4, 8), "rbm": (16,)},
        steps={k: ((100, 100),) * 2 for k in ("bernoulli", "ising", "fhmm")}
        | {"rbm": ((100, 100),)},
        rbm_hidden=8,
        lbp_grid=(0.8, 0.574, 0.3),
        rwm_grid=(0.4, 0.234, 0.1),
        lbp_near=(0.574, 0.4),
        rwm_near=(0.234, 0.15),
        chains=1,
        pilot_steps=100,
    ),
    # `make bench`: under 10 minutes on two CPU cores
    "reduced": Preset(
        name="reduced",
        sizes={
            "bernoulli": (100, 400, 1600),
            "ising": (10, 20, 40),
            "fhmm": (40, 160, 640),
            "rbm": (196,),
        },
        steps={k: ((1000, 2000),) * 3 for k in ("bernoulli", "ising", "fhmm")}
        | {"rbm": ((1000, 2000),)},
        rbm_hidden=100,
        lbp_grid=(0.9, 0.8, 0.7, 0.65, 0.6, 0.574, 0.55, 0.5, 0.45, 0.4, 0.3, 0.2, 0.1),
        rwm_grid=(0.6, 0.5, 0.4, 0.3, 0.25, 0.234, 0.2, 0.15, 0.1, 0.05),
        lbp_near=(0.7, 0.65, 0.6, 0.574, 0.55, 0.5, 0.45),
        rwm_near=(0.35, 0.3, 0.25, 0.234, 0.2, 0.15),
        chains=1,
        pilot_steps=2000,
        table_samples=5000,
    ),
    # the paper's sizes and chain lengths (Appendix D); hours on two CPU cores
    "full": Preset(
        name="full",
        sizes={
            "bernoulli": (100, 800, 6400),
            "ising": (20, 50, 100),
            "fhmm": (200, 1000, 4000),
            "rbm": (784,),
        },
        steps={
            k: ((5000, 5000), (20000, 20000), (50000, 50000))
            for k in ("bernoulli", "ising", "fhmm")
        }
        | {"rbm": ((20000, 20000),)},
        rbm_hidden=400,
        lbp_grid=_paper_grid(0.574),
        rwm_grid=_paper_grid(0.234),
        lbp_near=(0.7, 0.65, 0.6, 0.574, 0.55, 0.5, 0.45),
        rwm_near=(0.35, 0.3, 0.25, 0.234, 0.2, 0.15),
        chains=4,
        pilot_steps=20000,
    ),
}


def make_target(kind: str, size: int, preset: Preset) -> BinaryTarget:
    """The configuration-C2 target of `kind` at `size` (Appendix D)."""
    if kind == "bernoulli":
        return bernoulli_binary(size, "C2")
    if kind == "ising":
        return ising_binary(size, "C2")
    if kind == "fhmm":
        return fhmm_binary(size, FHMM_CHAINS, "C2")
    if kind == "rbm":
        return rbm_binary(size, preset.rbm_hidden)
    raise ValueError(f"unknown target kind {kind!r}; choose one of {TARGET_KINDS}")


# --- samplers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """
    A sampler family on one target, as pure functions.

    - **name** - ``"LBP"`` or ``"RWM"``.
    - **max_scale** - static path size; ``R_t`` is clipped to ``[1, max_scale]``.
    - **init** - ``x -> state``.
    - **step** - ``(key, state, R_t) -> (state, min(1, A), R)``: one step at the real scale
      ``R_t``, of the integer path length ``R`` it rounds to.
    """

    name: str
    max_scale: int
    init: Callable[[jax.Array], Any]
    step: Callable[[jax.Array, Any, jax.Array], tuple[Any, jax.Array, jax.Array]]


def default_max_scale(name: str, num_coords: int) -> int:
    """Room for the largest scales of a sweep: the LBP scale at acceptance 0.05 is about
    2.3 times the optimal one (eq. 6), itself below ``1.7 N^(2/3)`` on the paper's targets;
    RWM's optimal scale is ``O(1)``."""
    bound = math.ceil(4 * num_coords ** (2 / 3)) if name == "LBP" else 128
    return max(1, min(num_coords, bound))


def make_family(name: str, target: BinaryTarget, max_scale: int | None = None) -> Family:
    """The LBP (gradient ratios, barker balancing) or RWM family on `target`."""
    k = max_scale or default_max_scale(name, target.num_coords)
    buckets = (1, k) if k > 1 else (1,)
    if name == "LBP":
        local_fn = gradient_local_fn(target.log_density, binary_neighbourhood)
        kernel = path_length.build_kernel(get_balancing(BALANCING), binary_neighbourhood, k)

        def lbp_step(key: jax.Array, chain: Any, scale: jax.Array) -> tuple[Any, ...]:
            chain, info, length = kernel(key, chain, local_fn, scale)
            return chain, info.accept_prob, length

        return Family(name, k, functools.partial(core_state.init, local_fn=local_fn), lbp_step)
    if name == "RWM":
        kernel = rwm.build_kernel(buckets)

        def rwm_step(key: jax.Array, chain: Any, scale: jax.Array) -> tuple[Any, ...]:
            # Alg. 3 rounds R_t as Alg. 2 does
            key_round, key_step = random.split(key)
            length = path_length.round_path_length(key_round, scale)
            chain, info = kernel(key_step, chain, target.log_density, length)
            return chain, info.accept_prob, length

        init = functools.partial(rwm.init, log_density_fn=target.log_density)
        return Family(name, k, init, rwm_step)
    raise ValueError(f"unknown family {name!r}; choose one of {FAMILIES}")


# --- compiled runs ------------------------------------------------------------------------


def chain_program(family: Family) -> Callable[..., tuple[Any, ...]]:
    """
    ``(key, x0, scale, target_accept, adapt, num_warmup, num_measure) -> (state, R,
    warmup acceptance, acceptance, EJD)``.

    Warmup: `num_warmup` steps from `x0`, adapting ``R_t`` towards `target_accept` where
    `adapt` (ALBP / ARWM, Alg. 2 and 3), otherwise at the fixed `scale` (burn-in); ``R`` is
    the frozen scale. Measurement: `num_measure` steps at ``R``, mean acceptance and EJD
    (Rao-Blackwellised, module notes). Both lengths are traced, so one compiled program
    serves every chain length.
    """

    def run(
        key: jax.Array,
        x0: jax.Array,
        scale: jax.Array,
        target_accept: jax.Array,
        adapt: jax.Array,
        num_warmup: jax.Array,
        num_measure: jax.Array,
    ) -> tuple[Any, ...]:
        def warmup_step(i: jax.Array, carry: tuple) -> tuple:
            chain, adaptation, key, accept_sum = carry
            key, key_step = random.split(key)
            # Alg. 2, lines 5-16: round R_t, one step at that path length
            chain, accept, _ = family.step(key_step, chain, adaptation.path_length)
            # Alg. 2, lines 17-19: R_{t+1} = R_t + (A - target), frozen after warmup
            adapted = path_length.update(
                adaptation, i, accept, num_warmup, target_accept, family.max_scale
            )
            adaptation = core_state.select(adapt, adapted, adaptation)
            return chain, adaptation, key, accept_sum + accept

        def measure_step(_: jax.Array, carry: tuple) -> tuple:
            chain, key, accept_sum, jump_sum = carry
            key, key_step = random.split(key)
            chain, accept, length = family.step(key_step, chain, scale)
            return chain, key, accept_sum + accept, jump_sum + length * accept

        key_warmup, key_measure = random.split(key)
        zero = jnp.zeros((), jnp.float32)
        carry = (family.init(x0), path_length.init(scale), key_warmup, zero)
        chain, adaptation, _, warmup_sum = lax.fori_loop(0, num_warmup, warmup_step, carry)
        scale = adaptation.path_length
        carry = (chain, key_measure, zero, zero)
        chain, _, accept_sum, jump_sum = lax.fori_loop(0, num_measure, measure_step, carry)
        count = jnp.maximum(num_measure, 1)
        return (
            chain,
            scale,
            warmup_sum / jnp.maximum(num_warmup, 1),
            accept_sum / count,
            jump_sum / count,
        )

    return run


def sample_program(family: Family, num_steps: int) -> Callable[..., tuple[jax.Array, ...]]:
    """``(key, state, scale) -> (draws, acceptance)``: `num_steps` steps at the frozen
    `scale`, every state kept (``int8``, shape ``(num_steps, N)``) with each step's
    ``min(1, A)``."""

    def run(key: jax.Array, chain: Any, scale: jax.Array) -> tuple[jax.Array, ...]:
        def body(chain: Any, key: jax.Array) -> tuple[Any, tuple[jax.Array, jax.Array]]:
            chain, accept, _ = family.step(key, chain, scale)
            return chain, (chain.position.astype(jnp.int8), accept)

        _, (draws, accepts) = lax.scan(body, chain, random.split(key, num_steps))
        return draws, accepts

    return run


def compile_timed(fn: Callable, *args: Any) -> tuple[Callable, float]:
    """``jax.jit(fn)`` compiled ahead of time for `args`, and the seconds it took."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def run_timed(compiled: Callable, *args: Any) -> tuple[Any, float]:
    """Run a compiled program up to ``jax.block_until_ready``; its output and seconds."""
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    return out, time.perf_counter() - start


def random_state(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Uniformly random binary states (every chain's start)."""
    return random.bernoulli(key, 0.5, shape).astype(jnp.int32)


class Runner:
    """
    The compiled single-chain programs of one family on one target, :func:`chain_program`
    and :func:`sample_program`, each compiled ahead of time on first use (seconds in
    :attr:`compile_s`) and timed on every call.
    """

    def __init__(self, family: Family):
        self.family = family
        self.compile_s: dict[str, float] = {}
        self._compiled: dict[str, Callable] = {}

    def _call(self, name: str, program: Callable, *args: Any) -> tuple[Any, float]:
        if name not in self._compiled:
            self._compiled[name], self.compile_s[name] = compile_timed(program, *args)
        return run_timed(self._compiled[name], *args)

    def chain(
        self,
        key: jax.Array,
        x0: jax.Array,
        scale: float,
        target_accept: float,
        adapt: bool,
        num_warmup: int,
        num_measure: int,
    ) -> tuple[tuple[Any, ...], float]:
        """``((state, R, warmup acceptance, acceptance, EJD), seconds)``, see
        :func:`chain_program`."""
        args = (
            jnp.float32(scale), jnp.float32(target_accept), jnp.bool_(adapt),
            jnp.int32(num_warmup), jnp.int32(num_measure),
        )  # fmt: skip
        return self._call("chain", chain_program(self.family), key, x0, *args)

    def sample(
        self, key: jax.Array, state: Any, scale: jax.Array, num_steps: int
    ) -> tuple[tuple[jax.Array, jax.Array], float]:
        """``((draws, acceptance), seconds)``, see :func:`sample_program`."""
        name = f"sample-{num_steps}"
        return self._call(name, sample_program(self.family, num_steps), key, state, scale)


@dataclass
class Cache:
    """What the experiments of one run share: runners under ``(target name, family)`` and
    sweeps under ``(target name, family)``."""

    runners: dict[tuple[str, str], Runner] = field(default_factory=dict)
    sweeps: dict[tuple[str, str], "Sweep"] = field(default_factory=dict)
    _starts: dict[str, list[jax.Array]] = field(default_factory=dict)

    def runner(self, target: BinaryTarget, family: str) -> Runner:
        """The runner of `family` on `target`."""
        key = (target.name, family)
        if key not in self.runners:
            self.runners[key] = Runner(make_family(family, target))
        return self.runners[key]

    def starts(self, target: BinaryTarget, chains: int, pilot_steps: int) -> list[jax.Array]:
        """
        Starting states of `chains` chains on `target`, shared by every sweep point and
        table row: each is the last state of a pilot ALBP chain (adapted towards 0.574) of
        `pilot_steps` steps from a uniformly random state. The paper burns every chain in
        for 5000-50000 steps; a shared pilot lets the much shorter warmups of the reduced
        run (random-walk ones above all) start near stationarity.
        """
        starts = self._starts.setdefault(target.name, [])
        runner = self.runner(target, "LBP")
        while len(starts) < chains:
            key_init, key_pilot = random.split(random.fold_in(random.key(1), len(starts)))
            x0 = random_state(key_init, (target.num_coords,))
            accept = OPTIMAL_ACCEPT["LBP"]
            (state, *_), _ = runner.chain(key_pilot, x0, 1.0, accept, True, pilot_steps, 0)
            starts.append(state.position)
        return starts[:chains]

    def sweep(
        self, preset: Preset, kind: str, size: int, family: str, near: bool = False
    ) -> "Sweep":
        """The sweep (:func:`run_sweep`) of `family` on the `kind` target at `size` over the
        preset's grid (`near`: the smaller one around the optimum), run once per run of the
        suite (the grid of the first call serves the later ones) with a progress line."""
        target = make_target(kind, size, preset)
        key = (target.name, family)
        if key not in self.sweeps:
            grid, steps = preset.grid(family, near), preset.steps_for(kind, size)
            sweep = run_sweep(self, target, family, grid, steps, preset.chains, preset.pilot_steps)
            seconds = f"compile {sweep.compile_s:.1f} s, run {sweep.run_s:.1f} s"
            print(f"  sweep {target.name} {family}: {seconds}", flush=True)
            self.sweeps[key] = sweep
        return self.sweeps[key]


# --- sweeps -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepPoint:
    """
    One sweep point, averaged over its chains.

    - **target_accept** - target of the adaptation; None for the fixed ``R = 1`` point.
    - **scale** - frozen ``R`` (mean over chains).
    - **acceptance** - measured mean ``min(1, A)`` at that ``R``.
    - **ejd** - measured expected jump distance at that ``R``.
    - **ejd_se** - standard error of **ejd** across chains (NaN with one chain).
    """

    target_accept: float | None
    scale: float
    acceptance: float
    ejd: float
    ejd_se: float


@dataclass
class Sweep:
    """A sweep of one family on one target: its points and wall times."""

    target: str
    num_coords: int
    family: str
    num_warmup: int
    num_samples: int
    chains: int
    points: list[SweepPoint]
    compile_s: float
    run_s: float

    def best(self) -> SweepPoint:
        """The point of largest EJD (the grid search of Appendix D)."""
        return max(self.points, key=lambda point: point.ejd)

    def at(self, target_accept: float) -> SweepPoint:
        """The point adapted towards `target_accept`."""
        return next(p for p in self.points if p.target_accept == target_accept)


def run_sweep(
    cache: Cache,
    target: BinaryTarget,
    family: str,
    grid: Sequence[float],
    steps: tuple[int, int],
    chains: int,
    pilot_steps: int,
    seed: int = 0,
) -> Sweep:
    """
    Efficiency against acceptance (Sec. 6.1, Appendix D): first a point at ``R = 1``
    (LBP-1 / RWM-1), of acceptance ``a_max``; then, for every target acceptance of `grid`
    below ``a_max`` (higher ones stop at ``R = 1``; Appendix D starts below it) and for the
    optimal rate, adapt ``R`` from 1 during ``steps[0]`` steps (ALBP / ARWM towards that
    target), freeze it, and measure acceptance and EJD over ``steps[1]`` steps. Every point
    runs `chains` independent chains, from the starts of :meth:`Cache.starts`.
    """
    starts = cache.starts(target, chains, pilot_steps)
    runner = cache.runner(target, family)
    key = random.key(seed)
    run_s = 0.0

    def point(index: int, target_accept: float | None) -> SweepPoint:
        nonlocal run_s
        values = []
        for chain in range(chains):
            adapt = target_accept is not None
            (_, scale, _, acceptance, ejd), seconds = runner.chain(
                random.fold_in(key, index * 1000 + chain), starts[chain], 1.0,
                target_accept if adapt else 0.0, adapt, *steps,
            )  # fmt: skip
            run_s += seconds
            values.append((float(scale), float(acceptance), float(ejd)))
        scale, acceptance, ejd = np.asarray(values).T
        se = float(ejd.std(ddof=1) / math.sqrt(chains)) if chains > 1 else math.nan
        means = (float(scale.mean()), float(acceptance.mean()), float(ejd.mean()))
        return SweepPoint(target_accept, *means, se)

    points = [point(0, None)]
    a_max = points[0].acceptance
    targets = [t for t in grid if t < a_max or t == OPTIMAL_ACCEPT[family]]
    points += [point(i, t) for i, t in enumerate(targets, start=1)]
    compile_s = runner.compile_s.get("chain", 0.0)
    return Sweep(target.name, target.num_coords, family, *steps, chains, points, compile_s, run_s)


# --- reports ------------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    """Versions, commit, machine and load (:func:`benchmarks.measurement.environment`),
    dated, recorded beside every result."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"date": now, **measurement.environment()}


def _json_ready(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json_ready(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(out_dir: Path, name: str, result: dict[str, Any]) -> Path:
    """Write `result` (NaN as null) to ``out_dir/name.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name}.json"
    target.write_text(json.dumps(_json_ready(result), indent=2) + "\n")
    return target


def write_text(out_dir: Path, name: str, text: str) -> Path:
    """Write `text` to ``out_dir/name``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / name
    target.write_text(text)
    return target


def write_report(out_dir: Path, name: str, text: str, result: dict[str, Any]) -> dict[str, Any]:
    """Write an experiment's markdown `text` to ``out_dir/name.md`` and its `result` to
    ``out_dir/name.json`` (:func:`write_json`); return `result`."""
    write_text(out_dir, f"{name}.md", text)
    write_json(out_dir, name, result)
    return result


def pyplot() -> ModuleType:
    """matplotlib's ``pyplot`` on the non-interactive Agg backend, imported when a figure is
    drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    """Lay out `fig`, write it to `path` (110 dpi) and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table; floats with 3 significant decimals."""

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "n/a"
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
