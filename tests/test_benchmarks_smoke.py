"""Smoke test: ``benchmarks/bench_binary.py --quick`` runs end to end and writes a JSON
report with a row of finite numbers for every (target, sampler) pair."""

import importlib
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NUMERIC_FIELDS = (
    "ejd",
    "ess_mean",
    "ess_min",
    "ess_hamming",
    "warmup_s",
    "compile_s",
    "sampling_s",
    "ess_min_per_s",
    "ess_hamming_per_s",
    "ess_min_per_s_vs_gibbs",
    "ess_hamming_per_s_vs_gibbs",
)


def _is_finite_number(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def test_bench_binary_quick(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    bench = importlib.import_module("benchmarks.bench_binary")
    bench.main(["--quick", "--out-dir", str(tmp_path)])

    assert (tmp_path / "bench_binary.md").stat().st_size > 0
    result = json.loads((tmp_path / "bench_binary.json").read_text())
    rows = {(row["target"], row["sampler"]): row for row in result["rows"]}
    targets = {row["target"] for row in result["rows"]}
    samplers = [spec.name for spec in bench.sampler_specs()]
    assert len(targets) == 2 and len(samplers) == 5
    assert set(rows) == {(target, sampler) for target in targets for sampler in samplers}
    assert len(result["rows"]) == len(rows)

    for (target, sampler), row in rows.items():
        for field in NUMERIC_FIELDS:
            assert _is_finite_number(row[field]), (target, sampler, field, row[field])
        assert row["sampling_s"] > 0 and row["ess_min"] > 0
        assert row["num_samples"] > 0 and row["num_undefined_ess"] == 0
        if row["family"] == "DiscreteGibbs":
            assert row["acceptance"] is None and row["final_R"] is None
            assert row["ess_min_per_s_vs_gibbs"] == 1.0
        else:
            assert 0.0 <= row["acceptance"] <= 1.0
            assert 1.0 <= row["final_R"] <= row["num_coords"]
            # the EJD from the samples matches the kernel's count of changed coordinates
            assert abs(row["ejd"] - row["mean_num_changed"]) <= 0.05 * row["num_coords"]

    ratios = result["ejd_ratios"]
    assert {(item["target"], item["balancing"]) for item in ratios} == {
        (target, balancing) for target in targets for balancing in ("sqrt", "barker")
    }
    assert all(_is_finite_number(item["ratio"]) for item in ratios)
