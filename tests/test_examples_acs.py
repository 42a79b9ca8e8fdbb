"""Smoke tests: the ACS examples (multimodal target, RBM) run end to end on tiny sizes."""

import importlib.util
import math
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_multimodal_example(tmp_path):
    multimodal = _load("multimodal")
    summary = multimodal.main(
        [
            "--variant", "uneven",
            "--num-side", "2",
            "--spacing", "10",
            "--sigma2", "2",
            "--window", "10",
            "--cycle-length", "4",
            "--alpha-max", "50",
            "--alpha-min", "1",
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
    rbm = _load("rbm")
    summary = rbm.main(
        [
            "--visible", "6",
            "--hidden", "3",
            "--cycle-length", "4",
            "--num-warmup", "300",
            "--num-samples", "50",
            "--num-chains", "2",
            "--gibbs-chains", "200",
            "--gibbs-steps", "20",
            "--out", str(tmp_path),
            "--no-progress-bar",
        ]
    )  # fmt: skip
    figure = tmp_path / "rbm.png"
    assert summary["figure"] == str(figure)
    assert figure.is_file() and figure.stat().st_size > 0
    assert set(summary["metrics"]) == {"ACS", "DMALA", "ALBP"}
    for values in summary["metrics"].values():
        assert 0.0 <= values["accept_prob"] <= 1.0
        assert 0.0 <= values["mean_changed"] <= 6.0
        assert 0.0 <= values["rmse_mean"] <= 1.0 and 0.0 <= values["rmse_second"] <= 1.0
