"""The logic of the paper-reproduction suite (``benchmarks/paper``): the RWM-R kernel's exact
transition matrix on a 4-coordinate space, the kernel's draws against it, the flat log
densities against the numpyro models, the fits and the asymptotic curves; and (slow) the
whole suite at its ``--quick`` size in a subprocess."""

import itertools
import json
import math
from pathlib import Path
import subprocess
import sys

import numpy as np
from numpy.testing import assert_allclose
import pytest

import jax
from jax import random
import jax.numpy as jnp

from numpyro.handlers import substitute
from numpyro.infer.util import log_density

from benchmarks.paper import common, rwm
from benchmarks.paper.efficiency import fit_optimum, lbp_theory, rwm_theory
from benchmarks.paper.scaling import fit_loglog
from benchmarks.targets import (
    bernoulli_binary,
    bernoulli_target,
    fhmm_binary,
    fhmm_data,
    fhmm_model,
    ising_binary,
    ising_target,
)

ROOT = Path(__file__).resolve().parents[2]
NUM_COORDS = 4
STATES = np.array(list(itertools.product([0, 1], repeat=NUM_COORDS)), np.int32)
LOG_PI_WEIGHTS = np.array([0.7, -1.3, 0.4, 2.1])


def _log_pi(x):
    # a coupled, non-product target: field plus a pair term
    return x @ LOG_PI_WEIGHTS - 0.9 * x[0] * x[3] + 0.5 * x[1] * x[2]


def _index(state):
    return int(sum(int(v) << (NUM_COORDS - 1 - j) for j, v in enumerate(state)))


def _transition_matrix(path_length):
    """``P[x, y]`` of RWM-R from the module's subset probability and acceptance."""
    log_p = np.array([float(_log_pi(jnp.asarray(s, float))) for s in STATES])
    subset_p = float(jnp.exp(rwm.subset_log_prob(NUM_COORDS, path_length)))
    matrix = np.zeros((len(STATES), len(STATES)))
    for i, x in enumerate(STATES):
        for subset in itertools.combinations(range(NUM_COORDS), path_length):
            y = x.copy()
            y[list(subset)] = 1 - y[list(subset)]
            j = _index(y)
            accept = float(jnp.exp(rwm.log_accept_prob(log_p[i], log_p[j])))
            matrix[i, j] += subset_p * accept
        matrix[i, i] += 1 - matrix[i].sum()
    return matrix, np.exp(log_p - np.logaddexp.reduce(log_p))


@pytest.mark.parametrize("path_length", [1, 2, 3, 4])
def test_rwm_detailed_balance_exact(x64, path_length):
    matrix, pi = _transition_matrix(path_length)
    flow = pi[:, None] * matrix
    assert_allclose(flow, flow.T, atol=1e-10)
    assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-12)
    assert_allclose(pi @ matrix, pi, atol=1e-10)
    # all C(4, R) subsets are proposed
    assert_allclose(math.comb(NUM_COORDS, path_length) * np.exp(
        float(rwm.subset_log_prob(NUM_COORDS, path_length))), 1.0, rtol=1e-12)  # fmt: skip


def test_rwm_kernel_draws_match_transition_matrix():
    """From every state, 20000 kernel steps with R = 1, 2, 3 (buckets 1 and 4, so R > 1
    takes the top-4 branch) land on each state with the frequency of the exact transition
    matrix, and every step changes 0 or R coordinates."""
    kernel = rwm.build_kernel((1, NUM_COORDS))
    num_draws = 20000

    def step(key, x, path_length):
        state = rwm.init(x, _log_pi)
        new, info = kernel(key, state, _log_pi, path_length)
        changed = jnp.sum(new.position != x)
        return new.position, info.accept_prob, changed, info.num_changed

    run = jax.jit(jax.vmap(jax.vmap(step, (0, 0, None)), (0, 0, None)))
    keys = random.split(random.key(0), (len(STATES), num_draws))
    xs = jnp.broadcast_to(jnp.asarray(STATES)[:, None], (len(STATES), num_draws, NUM_COORDS))
    for path_length in (1, 2, 3):
        with jax.enable_x64(True):
            matrix, _ = _transition_matrix(path_length)
        new, accept, changed, num_changed = run(keys, xs, jnp.int32(path_length))
        new, changed = np.asarray(new), np.asarray(changed)
        assert np.all(changed == np.asarray(num_changed))
        assert set(np.unique(changed)) <= {0, path_length}
        assert np.all((np.asarray(accept) >= 0) & (np.asarray(accept) <= 1))
        codes = new @ (1 << np.arange(NUM_COORDS - 1, -1, -1))
        # a zero diagonal entry is 1 minus the row's other entries: -1e-15 after rounding
        matrix = np.clip(matrix, 0.0, 1.0)
        for i in range(len(STATES)):
            freq = np.bincount(codes[i], minlength=len(STATES)) / num_draws
            se = np.sqrt(matrix[i] * (1 - matrix[i]) / num_draws)
            assert np.all(np.abs(freq - matrix[i]) <= 5 * se + 1e-9), (path_length, i)


def test_sample_flips_has_exactly_r_distinct_coordinates():
    sample = jax.jit(jax.vmap(lambda key, length: rwm.sample_flips(key, 20, length, 8), (0, None)))
    keys = random.split(random.key(1), 200)
    for path_length in (0, 1, 3, 7, 8):
        masks = sample(keys, jnp.int32(path_length))
        assert np.all(np.asarray(masks).sum(axis=1) == path_length)


@pytest.mark.parametrize("family", common.FAMILIES)
def test_family_step_rounds_the_real_scale(family):
    """A family's step at a real ``R_t`` takes the path length ``floor(R_t)`` or
    ``floor(R_t) + 1``, with mean ``R_t`` (Alg. 2, line 5), and changes at most that many
    coordinates."""
    target = bernoulli_binary(16)
    fam = common.make_family(family, target, max_scale=8)
    x0 = common.random_state(random.key(0), (target.num_coords,))

    def step(key, scale):
        new, accept, length = fam.step(key, fam.init(x0), scale)
        return jnp.sum(new.position != x0), accept, length

    changed, accept, length = jax.jit(jax.vmap(step, (0, None)))(
        random.split(random.key(1), 4000), jnp.float32(2.25)
    )
    changed, accept, length = np.asarray(changed), np.asarray(accept), np.asarray(length)
    assert set(np.unique(length)) == {2, 3}
    assert abs(length.mean() - 2.25) < 0.05
    assert np.all((changed == 0) | (changed == length))
    assert np.all((accept >= 0) & (accept <= 1))


@pytest.mark.parametrize("family", common.FAMILIES)
def test_chain_program_adapts_only_when_asked(family):
    """:func:`~benchmarks.paper.common.chain_program`: with ``adapt`` the frozen scale is the
    adaptation's (within ``[1, max_scale]``, and larger than 1 on a product target where
    R = 1 accepts nearly always); without it the scale stays where it started."""
    target = bernoulli_binary(32)
    fam = common.make_family(family, target, max_scale=16)
    run = jax.jit(common.chain_program(fam))
    x0 = common.random_state(random.key(0), (target.num_coords,))
    args = (jnp.float32(common.OPTIMAL_ACCEPT[family]), jnp.int32(200), jnp.int32(100))
    _, scale, warmup_accept, accept, ejd = run(
        random.key(1), x0, jnp.float32(1.0), args[0], jnp.bool_(True), *args[1:]
    )
    assert 1.0 < float(scale) <= 16.0
    assert 0.0 <= float(warmup_accept) <= 1.0 and 0.0 <= float(accept) <= 1.0
    assert float(ejd) > 0
    _, fixed, *_ = run(random.key(1), x0, jnp.float32(1.5), args[0], jnp.bool_(False), *args[1:])
    assert float(fixed) == 1.5


def test_flat_log_densities_match_numpyro_models():
    """Differences of the flat log densities between two states equal those of the numpyro
    models' log joints (the FHMM's with w, b, sigma at their true values)."""
    rng = np.random.default_rng(0)
    flat = bernoulli_binary(12)
    model = bernoulli_target(12).model
    flat_ising, model_ising = ising_binary(4), ising_target(4).model
    data = fhmm_data(6, 2, "C2", seed=0)
    flat_fhmm = fhmm_binary(6, 2, "C2", seed=0)
    true = {"w": jnp.asarray(data.w), "b": jnp.asarray(data.b), "sigma": jnp.asarray(data.sigma)}

    def joint(model, shape, args=(), extra=None):
        # compiled once per model (eager evaluation compiles op by op)
        def log_joint(x):
            params = {"x": x.reshape(shape), **(extra or {})}
            return log_density(substitute(model, params), args, {}, {})[0]

        return jax.jit(log_joint)

    cases = [
        (flat, joint(model, (12,))),
        (flat_ising, joint(model_ising, (4, 4))),
        (flat_fhmm, joint(fhmm_model, (6, 2), (jnp.asarray(data.y), 2), true)),
    ]
    for target, model_joint in cases:
        states = jnp.asarray(rng.integers(0, 2, (2, target.num_coords)), jnp.int32)
        flat_values = jax.jit(jax.vmap(target.log_density))(states)
        model_values = jnp.stack([model_joint(x) for x in states])
        assert_allclose(
            flat_values[0] - flat_values[1], model_values[0] - model_values[1], rtol=1e-4, atol=1e-4
        )


def test_fit_loglog_recovers_a_power_law():
    x = np.array([100.0, 800.0, 6400.0])
    slope, intercept = fit_loglog(x, 3.0 * x ** (2 / 3))
    assert_allclose([slope, intercept], [2 / 3, np.log(3.0)], rtol=1e-10)


def test_fit_optimum_finds_the_vertex_near_the_top():
    a = np.linspace(0.05, 0.95, 19)
    assert_allclose(fit_optimum(a, 10 - 40 * (a - 0.57) ** 2), 0.57, atol=1e-10)
    assert fit_optimum(a, a) is None  # no maximum inside the range


def test_asymptotic_curves_peak_at_the_optimal_rates():
    """EJD = R a(R) of eq. 6-7 and eq. 20-21 is largest at acceptance 0.574 and 0.234."""
    probs = np.random.default_rng(0).uniform(0.15, 0.85, 800)
    scales = np.geomspace(1, 800, 20001)
    for (accept, ejd), optimum in (
        (lbp_theory(probs, scales), 0.574),
        (rwm_theory(probs, np.geomspace(1, 800, 200001)), 0.234),
    ):
        assert_allclose(accept[np.argmax(ejd)], optimum, atol=2e-3)


@pytest.mark.slow
def test_paper_suite_quick(tmp_path):
    """``python -m benchmarks.paper --quick``: every experiment writes finite numbers and
    its figure."""
    command = [sys.executable, "-m", "benchmarks.paper", "--quick", "--out-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in (
        "efficiency.png",
        "scaling.png",
        "efficiency.md",
        "scaling.md",
        "table.md",
        "rbm_pcd.md",
        "rbm_pcd.png",
    ):
        assert (tmp_path / name).stat().st_size > 0
    efficiency = json.loads((tmp_path / "efficiency.json").read_text())
    assert len(efficiency["summaries"]) == 8  # 4 targets x (LBP, RWM)
    for summary in efficiency["summaries"]:
        assert 0 < summary["best_acceptance"] <= 1 and summary["best_ejd"] > 0
    scaling = json.loads((tmp_path / "scaling.json").read_text())
    assert [r["kind"] for r in scaling["results"]] == ["bernoulli", "ising", "fhmm"]
    for result in scaling["results"]:
        assert all(math.isfinite(v) for v in result["slopes"].values())
    table = json.loads((tmp_path / "table.json").read_text())
    assert len(table["rows"]) == 24  # 4 targets x 6 samplers
    for row in table["rows"]:
        for field in ("ejd", "acceptance", "sampling_s"):
            assert math.isfinite(row[field]) and row[field] >= 0, (row["sampler"], field)
        # a chain of the tiny run that never moved has no ESS (JSON null)
        moved = row["ejd"] > 0
        for field in ("ess_mean", "ess_hamming"):
            assert (row[field] is not None and row[field] > 0) or not moved, (row["sampler"], field)
        if row["sampler"].endswith("-1"):
            assert row["scale"] == 1.0
    suite = json.loads((tmp_path / "suite.json").read_text())
    assert set(suite["seconds"]) == {"efficiency", "scaling", "table", "rbm_pcd"}
