"""Smoke tests: the ACS examples (multimodal target, RBM) run end to end on tiny sizes."""

import math

import numpy as np
import pytest

from examples_loader import load_example

# a statistical or every-chain-method run: the slow tier (`make test-slow`, CI runs it)
pytestmark = pytest.mark.slow


def test_multimodal_example(tmp_path):
    multimodal = load_example("multimodal")
    summary = multimodal.main(
        [
            "--variant", "uneven",
            "--num-side", "2",
            "--spacing", "10",
            "--sigma2", "2",
            "--window", "10",
            "--cycle-length", "4",
            "--step-size-max", "50",
            "--step-size-min", "1",
            "--dmala-step-size", "2",
            "--num-warmup", "100",
            "--num-samples", "100",
            "--out", str(tmp_path),
            "--no-progress-bar",
        ]
    )  # fmt: skip
    figure = tmp_path / "multimodal.png"
    assert summary["figure"] == str(figure)
    assert figure.is_file() and figure.stat().st_size > 0
    metrics = summary["metrics"]["uneven"]
    assert set(metrics) == {"ACS", "DMALA", "ALBP"}
    for values in metrics.values():
        assert 0.0 <= values["accept_prob"] <= 1.0
        assert 0 <= values["modes_visited"] <= 4
        assert 0.0 <= values["tv"] <= 1.0
        assert math.isfinite(values["kl"]) and values["kl"] >= -1e-12


@pytest.mark.slow
def test_rbm_example(tmp_path):
    pytest.importorskip("sklearn")
    rbm = load_example("rbm")
    summary = rbm.main(["--quick", "--out", str(tmp_path)])
    figure = tmp_path / "rbm.png"
    assert summary["figure"] == str(figure)
    assert figure.is_file() and figure.stat().st_size > 0
    assert 0.0 < summary["floor"] < 2.0
    metrics = summary["metrics"]
    assert set(metrics) == {"ACS", "ALBP", "LBP-1", "DiscreteGibbs"}
    for values in metrics.values():
        assert values["steps"] == [0, 20, 40, 60, 80]
        assert values["seconds"][0] == 0.0 and np.all(np.diff(values["seconds"]) > 0)
        # the kernel exp(-hamming / V) lies in (0, 1]: the MMD is at most sqrt(2)
        assert all(0.0 <= m <= math.sqrt(2.0) for m in values["mmd"])
        # every chain starts in the same mode, so every sampler starts at the same MMD
        assert values["mmd"][0] == metrics["ACS"]["mmd"][0]
        assert 0.0 <= values["changed_per_step"] <= 64.0
        assert values["compile_s"] > 0.0 and values["ms_per_step"] > 0.0
