"""Smoke tests: each benchmark's ``--quick`` run ends and writes a JSON report with a row of
finite numbers for every sampler. The runs are separate processes, as a user starts them:
the benchmarks switch on JAX's persistent compilation cache, a process-wide setting. They
take minutes (each compiles every sampler), so all but the budget check are slow-marked."""

import importlib
import json
import math
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

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


def _import_bench(module, monkeypatch):
    """``benchmarks.<module>``, imported with the repository on ``sys.path``."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module(f"benchmarks.{module}")


def _quick_report(module, out_dir, report=None, check_markdown=True):
    """Run ``python -m benchmarks.<module> --quick --out-dir <out_dir>`` from the repository,
    check that ``<report>.md`` is not empty (with `check_markdown`) and return the parsed
    ``<report>.json`` (`report` defaults to `module`)."""
    command = [sys.executable, "-m", f"benchmarks.{module}", "--quick", "--out-dir", str(out_dir)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = report or module
    if check_markdown:
        assert (out_dir / f"{report}.md").stat().st_size > 0
    return json.loads((out_dir / f"{report}.json").read_text())


@pytest.mark.slow
def test_bench_binary_quick(tmp_path, monkeypatch):
    bench = _import_bench("bench_binary", monkeypatch)
    result = _quick_report("bench_binary", tmp_path)
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


@pytest.mark.slow
def test_bench_chain_blocks_quick(tmp_path):
    """``benchmarks/bench_chain_blocks.py --quick`` runs its four samplers and reports the
    mean signal's ESS, R-hat and ESS/s relative to both anchors."""
    result = _quick_report(
        "bench_chain_blocks", tmp_path, "bench_chain_blocks_L12_K2", check_markdown=False
    )
    rows = {row["method"]: row for row in result["rows"]}
    assert set(rows) == {"LBPGibbs", "FFBS-Gibbs", "DiscreteHMCGibbs", "LBPGibbs[albp]"}
    for name, row in rows.items():
        for field in ("end_to_end_s", "step_ms", "ess_signal_min", "rhat_signal_max",
                      "ess_signal_per_s"):  # fmt: skip
            assert _is_finite_number(row[field]) and row[field] > 0, (name, field)
        assert set(row["signal_per_s_vs"]) == {"FFBS-Gibbs", "DiscreteHMCGibbs"}
    assert rows["FFBS-Gibbs"]["signal_per_s_vs"]["FFBS-Gibbs"] == 1.0


@pytest.mark.slow
def test_bench_fhmm_quick(tmp_path, monkeypatch):
    """``benchmarks/bench_fhmm.py --quick`` runs every sampler and reports finite ESS/s."""
    bench = _import_bench("bench_fhmm", monkeypatch)
    result = _quick_report("bench_fhmm", tmp_path, "bench_fhmm_L12_K2")
    rows = {row["method"]: row for row in result["rows"]}
    assert set(rows) == {method.name for method in bench.METHODS}
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row)
        for field in ("ess_w_min", "ess_w_within_chains", "ess_w_sorted_abs", "ess_w_per_s",
                      "sampling_s", "step_s"):  # fmt: skip
            assert _is_finite_number(row[field]) and row[field] > 0, (name, field)
        samples_x = name != "NUTS-enum"
        assert _is_finite_number(row["ess_x_hamming_per_s"]) == samples_x, name
    for ratio in ("w_per_s_vs_best_gibbs", "w_sorted_abs_per_s_vs_best_gibbs"):
        assert max(row[ratio] for row in rows.values() if row["method"] in
                   bench.GIBBS_TYPE) == 1.0  # fmt: skip


def test_bench_fhmm_budget_and_memory(monkeypatch):
    """A sampler predicted past the budget is reported, not run; so is one out of memory."""
    bench = _import_bench("bench_fhmm", monkeypatch)
    from jax import random

    models = (bench.fhmm_model, bench.fhmm_enumerated_model)
    monkeypatch.setattr(bench, "step_cost", lambda *args, **kwargs: 2.0)
    kwargs = {"num_warmup": 10, "num_samples": 10, "num_chunks": 2, "budget": 30.0}
    row = bench.run_method(bench.METHODS[0], models, (), random.key(0), reference=None, **kwargs)
    assert row.status == "over budget" and row.predicted_s == 40.0

    def oom(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(bench, "step_cost", oom)
    row = bench.run_method(bench.METHODS[0], models, (), random.key(0), reference=None, **kwargs)
    assert row.status == "out of memory"


def test_bench_fhmm_equal_sampling_time_plan(monkeypatch):
    """With ``--sampling-seconds``, a sampler gets the steps that fill that time at its
    measured cost, thinned to at most ``--max-draws`` kept draws, in whole chunks."""
    bench = _import_bench("bench_fhmm", monkeypatch)
    from jax import random

    models = (bench.fhmm_model, bench.fhmm_enumerated_model)
    monkeypatch.setattr(bench, "step_cost", lambda *args, **kwargs: 0.01)
    kwargs = {"num_warmup": 10, "num_samples": 10, "num_chunks": 2, "budget": 30.0}
    row = bench.run_method(bench.METHODS[0], models, (), random.key(0), reference=None,
                           sampling_seconds=100.0, max_draws=4000, **kwargs)  # fmt: skip
    # 100 s / 0.01 s = 10^4 steps, thinned by 3 to 3334 draws, in two chunks of 5001
    assert (row.thinning, row.num_samples) == (3, 10002)
    assert row.status == "over budget" and row.predicted_s == pytest.approx(100.12)
    # two chains share the time: 5000 steps each, thinned by 2, in two chunks of 2500
    assert bench.sampling_plan(10, 0.01, 2, 100.0, 4000, num_chains=2) == (2, 2500)


@pytest.mark.slow
def test_bench_fhmm_stops_sampling_at_budget(monkeypatch):
    """A sampler whose pilot fits the budget but whose chunks do not stops after two
    chunks and reports the metrics of the draws it made."""
    bench = _import_bench("bench_fhmm", monkeypatch)
    from jax import random
    import jax.numpy as jnp

    data = bench.fhmm_data(8, 2, "C2", seed=0)
    models = (bench.fhmm_model, bench.fhmm_enumerated_model)
    monkeypatch.setattr(bench, "step_cost", lambda *args, **kwargs: 0.0)
    nuts_enum = next(m for m in bench.METHODS if m.name == "NUTS-enum")
    row = bench.run_method(
        nuts_enum, models, (jnp.asarray(data.y), 2), random.key(0), reference=None,
        num_warmup=10, num_samples=40, num_chunks=4, budget=1e-6,
    )  # fmt: skip
    assert row.status == "stopped at budget" and row.note.startswith("2 of 4 chunks")
    assert row.num_samples == 20 and row.ess_w_min > 0 and row.sampling_s > 0


def test_bench_fhmm_label_invariant_and_within_chain_ess(monkeypatch):
    """Two chains that mix well in mirror modes of the FHMM (the weights of two hidden chains
    swapped, one weight's sign flipped): the multi-chain ESS of ``w`` collapses, the sum of
    the chains' own ESS does not, and the order statistics of ``|w|`` agree across chains."""
    bench = _import_bench("bench_fhmm", monkeypatch)
    noise = np.random.default_rng(0).normal(0.0, 0.05, (2, 2000, 3))
    mode = np.array([0.5, 1.5, 3.0])
    w = np.stack([mode + noise[0], np.array([-1.5, 0.5, 3.0]) + noise[1]])
    raw = bench.coordinate_ess(w)
    sorted_abs = bench.coordinate_ess(bench.sorted_abs_weights(w))
    assert raw[:2].max() < 10 and raw[2] > 3000
    assert sorted_abs.min() > 3000
    assert bench.within_chain_ess(w) > 3000


@pytest.mark.slow
def test_bench_supports_quick(tmp_path):
    """``benchmarks/bench_supports.py --quick``: every sampler on the Potts and Poisson
    targets, ALBP's auto weights exact on the Potts colours and gradient on the counts."""
    result = _quick_report("bench_supports", tmp_path)
    rows = {(row["target"], row["sampler"]): row for row in result["rows"]}
    assert set(rows) == {
        *((target, name) for target in ("potts-3", "poisson-6") for name in ("ALBP", "LBP1")),
        ("poisson-6", "ALBP-exact"),
        ("potts-3", "DiscreteGibbs"),
        ("poisson-6", "DiscreteGibbs"),
    }
    assert result["weights_mode"]["potts-3/ALBP"] == "exact"
    # independent sites (1 colour), not affine in n_i: colour-batched exact ratios
    assert result["weights_mode"]["poisson-6/ALBP"] == "exact"
    assert result["weights_mode"]["poisson-6/ALBP-exact"] == "exact"
    for key, row in rows.items():
        for field in ("ess_min", "sampling_s", "ess_min_per_s", "ess_min_per_s_vs_gibbs"):
            assert _is_finite_number(row[field]) and row[field] > 0, (key, field)


@pytest.mark.slow
def test_bench_structure_quick(tmp_path, monkeypatch):
    """``benchmarks/bench_structure.py --quick``: every sampler on the elementwise Ising and
    Potts lattices with finite rates and ratios, 2 colours found on both and on their summed
    forms (sums are split into their summands before detection), the two forms equal,
    detection timed at both sizes in both forms."""
    bench = _import_bench("bench_structure", monkeypatch)
    result = _quick_report("bench_structure", tmp_path)
    _check_bench_structure(bench, result)


def _check_bench_structure(bench, result):
    rows = {(row["family"], row["sampler"]): row for row in result["rows"]}
    expected = {(f, spec.name) for f in ("ising", "potts") for spec in bench.sampler_specs(f)}
    assert set(rows) == expected and len(result["rows"]) == len(expected)
    for key, row in rows.items():
        for field in ("ess_min", "ess_min_per_step", "ms_per_step", "sampling_s",
                      "ess_min_per_s", "first_run_s", "ess_min_per_s_vs_gibbs"):  # fmt: skip
            assert _is_finite_number(row[field]) and row[field] > 0, (key, field, row[field])
        assert _is_finite_number(row["later_run_fixed_s"]), key
        assert row["num_undefined_ess"] == 0, key
        if key[0] == "ising":
            assert _is_finite_number(row["ess_min_per_s_vs_checkerboard"]), key
    assert rows["ising", bench.GIBBS]["ess_min_per_s_vs_gibbs"] == 1.0
    assert rows["ising", bench.CHECKERBOARD]["ess_min_per_s_vs_checkerboard"] == 1.0
    # affine in each spin: the gradient is exact; colours used as indices: exact ratios
    assert rows["ising", "ALBP"]["weights"] == "gradient"
    assert rows["potts", "ALBP"]["weights"] == "exact"
    for family in ("ising", "potts"):
        for sampler in ("ALBP", "ChromaticGibbs"):
            assert rows[family, sampler]["num_colours"] == 2, (family, sampler)
        # a valid colouring: every class's joint move is accepted
        assert rows[family, "ChromaticGibbs"]["acceptance"] > 0.999
    assert rows["ising", "ALBP-gradient"]["weights"] == "gradient"
    assert result["forms_agree"] and all(item["equal"] for item in result["forms_agree"])
    for summary in result["structures"]:
        assert summary["num_colours"] == 2, summary
    assert [item["form"] for item in result["detection"]] == ["elementwise", "summed"] * 2
    for item in result["detection"]:
        assert item["num_colours"] == 2
        assert _is_finite_number(item["detect_and_colour_s"]) and item["traced_peak_mb"] > 0


@pytest.mark.slow
def test_bench_scaling_quick(tmp_path, monkeypatch):
    """``benchmarks/bench_scaling.py --quick``: a row of finite numbers for every sampler at
    every point of both parts, step time growing with the chains."""
    bench = _import_bench("bench_scaling", monkeypatch)
    result = _quick_report("bench_scaling", tmp_path)
    rows = result["rows"]
    points = {(r["part"], r["sampler"], r["num_chains"], r["num_coords"]) for r in rows}
    chains, sizes = bench.QUICK["chains"], bench.QUICK["size_p"]
    assert len(points) == len(rows) == len(bench.SAMPLERS) * (len(chains) + len(sizes))
    for row in rows:
        for field in ("ms_per_step", "ess", "ess_per_s", "first_run_s", "peak_rss_mb"):
            assert _is_finite_number(row[field]) and row[field] > 0, (row["sampler"], field)
    for sampler in bench.SAMPLERS:
        by_chains = {r["num_chains"]: r for r in rows if r["part"] == "chains" and
                     r["sampler"] == sampler}  # fmt: skip
        assert by_chains[chains[0]]["step_vs_smallest"] == 1.0


@pytest.mark.slow
def test_bench_gallery_quick(tmp_path):
    """Every requested sampler has a row; ours and numpyro's run both quick models, and
    NUTS-enum runs where the gallery has an enumerable form."""
    result = _quick_report("bench_gallery", tmp_path, check_markdown=False)
    rows = {(row["model"], row["method"]): row for row in result["rows"]}
    assert len(rows) == 8
    for model in ("mixture", "ising"):
        for method in ("LBPGibbs", "DiscreteHMCGibbs"):
            row = rows[(model, method)]
            assert row["status"] == "ok", row
            for field in ("first_run_s", "step_ms", "ess_min_per_s", "rhat_max", "check_z_max"):
                assert _is_finite_number(row[field]), (model, method, field)
    assert rows[("mixture", "LBPGibbs")]["chosen"] == "CollapsedDraw"
    assert rows[("mixture", "NUTS-enum")]["status"] == "ok"
    assert rows[("ising", "NUTS-enum")]["status"] == "n/a"
    # the table's header, its separator (``| --- |``) and the 8 rows
    assert (tmp_path / "bench_gallery.md").read_text().count("\n| ") == 10


@pytest.mark.slow
def test_bench_sweeps_quick(tmp_path, monkeypatch):
    """Every sampler has a row of finite numbers on both quick lattices (THRML where it is
    installed), and the rows' means agree within their standard errors."""
    bench = _import_bench("bench_sweeps", monkeypatch)
    result = _quick_report("bench_sweeps", tmp_path, check_markdown=False)
    samplers = {"ChromaticGibbs", "checkerboard"} | ({"THRML"} if bench.THRML_INSTALLED else set())
    for model in ("ising", "potts"):
        rows = [r for r in result["rows"] if r["model"] == model]
        assert {r["sampler"] for r in rows} == samplers
        for row in rows:
            for field in ("ms_per_sweep", "compile_s", "first_run_s", "min_ess_per_s", "mean"):
                assert _is_finite_number(row[field]), (model, row["sampler"], field)
        means = np.array([r["mean"] for r in rows])
        errors = np.array([r["mean_mcse"] for r in rows])
        assert np.ptp(means) < 5 * np.sqrt(2) * errors.max()


@pytest.mark.slow
def test_bench_persistent_cache_quick(tmp_path):
    """``benchmarks/bench_persistent_cache.py --quick``: both settings, every process timed;
    with the loop checks off, the second process's later run loads numpyro's loop from the
    cache (a run of a few steps, against a compilation of at least a second in the first)."""
    result = _quick_report("bench_persistent_cache", tmp_path)
    rows = {(row["loop_checks"], row["process"]): row for row in result["rows"]}
    assert set(rows) == {(s, p) for s in ("on", "off") for p in (1, 2)}
    assert all(
        _is_finite_number(row[field]) and row[field] > 0
        for row in rows.values()
        for field in ("first_run_s", "later_run_s")
    )
    assert rows["off", 2]["later_run_s"] < 0.5 * rows["on", 2]["later_run_s"]
