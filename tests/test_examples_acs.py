"""Smoke test: the multimodal ACS example runs end to end on tiny sizes."""

import importlib.util
import math
from pathlib import Path

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
