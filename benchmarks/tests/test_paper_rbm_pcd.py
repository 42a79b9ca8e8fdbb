"""The RBM PCD reproduction (``benchmarks/paper/rbm_pcd.py``): its exact log partition
function against enumeration of the visible states, its threshold rule, and a ``--quick``
run in its own process (slow-marked, as the other benchmark smoke tests)."""

import importlib
import itertools
import json
import math
from pathlib import Path
import subprocess
import sys

import numpy as np
from numpy.testing import assert_allclose
import pytest

from jax import random
import jax.numpy as jnp
from jax.scipy.special import logsumexp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("benchmarks.paper.rbm_pcd")


@pytest.mark.parametrize("num_visible, num_hidden, block_bits", [(6, 3, 12), (7, 5, 2)])
def test_log_partition_matches_visible_enumeration(x64, bench, num_visible, num_hidden, block_bits):
    """Summing the hidden units by enumeration (in one block or several) gives the same
    ``log Z`` as summing ``log pi~(v)`` over all ``2^V`` visible states."""
    key_w, key_b, key_c = random.split(random.PRNGKey(3), 3)
    rbm = bench.Rbm(
        random.normal(key_w, (num_hidden, num_visible), jnp.float64),
        random.normal(key_b, (num_visible,), jnp.float64),
        random.normal(key_c, (num_hidden,), jnp.float64),
    )
    visible = jnp.asarray(list(itertools.product((0, 1), repeat=num_visible)))
    brute_force = logsumexp(bench.log_unnormalised(rbm, visible))
    exact = bench.log_partition(rbm, block_bits=block_bits)
    assert exact.dtype == jnp.float64
    assert_allclose(exact, brute_force, rtol=0, atol=1e-8)
    # and the log-likelihoods of all visible states sum to one
    log_z = bench.log_partition(rbm)
    total = logsumexp(bench.log_unnormalised(rbm, visible) - log_z)
    assert_allclose(total, 0.0, atol=1e-8)


def test_k_needed_is_the_smallest_k_at_the_threshold(bench):
    final = {"A": {1: -30.0, 4: -21.0, 16: -19.0}, "B": {1: -25.0, 2: -20.0}, "C": {1: -29.0}}
    threshold, needed = bench.k_needed(final, initial=-30.0, reference=-20.0, fraction=0.9)
    assert threshold == pytest.approx(-21.0)
    assert needed == {"A": 4, "B": 2, "C": None}


def test_batch_order_covers_each_epoch_once(bench):
    order = bench.batch_order(num_rows=10, batch_size=3, num_iterations=7, seed=0)
    assert order.shape == (7, 3)
    for epoch in range(2):  # three batches per epoch, nine of the ten rows, none twice
        rows = order[3 * epoch : 3 * epoch + 3].ravel()
        assert len(np.unique(rows)) == 9


@pytest.mark.slow
def test_paper_rbm_pcd_quick(tmp_path):
    """``python -m benchmarks.paper.rbm_pcd --quick`` trains every sampler at every ``k``
    and writes the report with finite log-likelihoods."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.paper.rbm_pcd",
        "--quick",
        "--out-dir",
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "rbm_pcd.md").stat().st_size > 0
    assert (tmp_path / "rbm_pcd.png").stat().st_size > 0
    report = json.loads((tmp_path / "rbm_pcd.json").read_text())
    labels = {(run["label"], run["k"]) for run in report["runs"]}
    assert labels == {("Gibbs", 2), *((name, k) for name in ("LBP_s-1", "ALBP_s") for k in (1, 2))}
    for run in report["runs"]:
        assert all(math.isfinite(value) for value in run["test_ll"] + run["train_ll"])
        assert run["test_ll"][-1] < 0 and len(run["iterations"]) == len(run["test_ll"])
        assert 0.0 <= run["acceptance"] <= 1.0 and run["seconds"] > 0
    assert set(report["summary"]["k_needed"]) == {"Gibbs", "LBP_s-1", "ALBP_s"}
