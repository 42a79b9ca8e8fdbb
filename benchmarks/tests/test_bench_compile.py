"""``benchmarks/bench_compile.py``: the ``--quick`` run of the Ising case with ALBP and
DiscreteGibbs (each measurement a fresh subprocess: minutes, slow-marked), and its issue
checks on made-up rows."""

import importlib
import json
import math
from pathlib import Path

import pytest

from numpyro.handlers import seed, trace

ROOT = Path(__file__).resolve().parents[2]


def _bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("benchmarks.bench_compile")


def _is_finite_number(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


@pytest.mark.slow
def test_bench_compile_quick(tmp_path, monkeypatch):
    bench = _bench(monkeypatch)
    argv = [
        "--quick",
        "--cases",
        "ising",
        "--samplers",
        "ALBP,DiscreteGibbs",
        "--out",
        str(tmp_path),
    ]
    bench.main(argv)

    assert (tmp_path / "bench_compile.md").stat().st_size > 0
    result = json.loads((tmp_path / "bench_compile.json").read_text())
    rows = {(row["sampler"], row["form"]): row for row in result["rows"]}
    assert set(rows) == {("ALBP", "summed"), ("ALBP", "elementwise"), ("DiscreteGibbs", "summed")}
    for key, row in rows.items():
        assert row["errors"] == {}, (key, row["errors"])
        for name in ("import_s", "first_run_s", "per_step_s", "first_run_pb_s", "e2e_wall_s",
                     "e2e_min_ess_per_s", "x_gibbs_e2e"):  # fmt: skip
            assert _is_finite_number(row[name]) and row[name] > 0, (key, name, row[name])
        assert row["compilation_cache"]["jax_enable_compilation_cache"] is False, key
        assert row["compilation_cache"]["jax_compilation_cache_dir"] is None, key
    assert rows["DiscreteGibbs", "summed"]["x_gibbs_e2e"] == 1.0
    checks = {check["check"] for check in result["issue_targets"]}
    assert len(checks) == 4 and all(isinstance(c["met"], bool) for c in result["issue_targets"])
    assert result["environment"]["jax"] and "--quick" in result["command"]


def test_bench_compile_checks(monkeypatch):
    """The issue's targets read the right rows; a failed measurement is not met."""
    bench = _bench(monkeypatch)
    common = {"num_warmup": 10, "num_samples": 10, "later_num_samples": 50}
    albp = bench.Row("ising", "ising-50-C2", "summed", "ALBP", 2500, **common)
    albp.first_run_s, albp.later_run_fixed_s, albp.ms_per_step = 4.0, 1.5, 0.1
    albp.e2e_min_ess_per_s = 300.0
    gibbs = bench.Row("ising", "ising-50-C2", "summed", "DiscreteGibbs", 2500, **common)
    gibbs.e2e_min_ess_per_s = 10.0
    large = bench.Row("ising-large", "ising-316-C2", "summed", "ALBP", 99856, **common)
    large.errors["runs"] = "timed out after 600 s"
    rows = [albp, gibbs, large]
    bench.add_gibbs_ratios(rows)
    assert albp.x_gibbs_e2e == 30.0 and gibbs.x_gibbs_e2e == 1.0
    met = [check["met"] for check in bench.issue_checks(rows)]
    assert met == [True, False, True, True, False]
    settings = {**bench.QUICK, "gibbs_divisor": 10, "cpu_count": 2, "quick": True}
    report = bench.markdown_report(rows, bench.issue_checks(rows), settings)
    assert "FAIL: ALBP ising-316-C2 (N = 99856): first run s = n/a" in report
    assert "timed out after 600 s" in report


def test_bench_compile_gallery_checks(monkeypatch):
    """The gallery's first-run targets: at most 5 s, and at most half of DiscreteHMCGibbs's
    on the mixture and the factorial HMM (only)."""
    bench = _bench(monkeypatch)
    common = {"num_warmup": 500, "num_samples": 500, "later_num_samples": 0}
    rows = []
    for name, ours, numpyro_s in (("mixture", 4.0, 10.0), ("fhmm", 6.0, 10.0), ("hmm", 4.5, 1.0)):
        for sampler, seconds in ((bench.LBP_GIBBS_DEFAULT, ours), (bench.DHMC_GIBBS, numpyro_s)):
            row = bench.Row("gallery", f"gallery-{name}", name, sampler, 0, **common)
            row.first_run_s = seconds
            rows.append(row)
    checks = {check["check"]: check for check in bench.issue_checks(rows)}
    assert len(checks) == 5
    ratio = checks[f"{bench.LBP_GIBBS_DEFAULT} gallery-fhmm: first run s / DiscreteHMCGibbs's"]
    assert ratio["value"] == 0.6 and not ratio["met"]
    assert checks[f"{bench.LBP_GIBBS_DEFAULT} gallery-hmm: first run s"]["met"]
    assert [c["met"] for c in checks.values()] == [True, True, False, False, True]


def test_bench_compile_gallery_floor_fixes_every_discrete_site(monkeypatch):
    """The gallery's `NUTS(x known)` row: NUTS alone on the model with every discrete site
    conditioned (the floor of a first run), beside the two samplers of each model."""
    bench = _bench(monkeypatch)
    specs = bench.row_specs(["gallery"], bench.SAMPLERS, quick=True)
    assert [s.sampler for s in specs] == [
        bench.LBP_GIBBS_DEFAULT,
        bench.DHMC_GIBBS,
        bench.NUTS_KNOWN,
    ]
    model, args, _ = bench.build_model(
        {"case": "gallery", "form": "mixture", "sampler": bench.NUTS_KNOWN}
    )
    model_trace = trace(seed(model, 0)).get_trace(*args)
    latent = {
        name
        for name, site in model_trace.items()
        if site["type"] == "sample" and not site["is_observed"]
    }
    assert latent == {"weights", "locs", "sigma"}
    assert model_trace["z"]["is_observed"] and model_trace["z"]["value"].shape == (300,)


class _ScriptedMCMC:
    """What `measure_runs` touches of an ``MCMC``: the state and the run lengths."""

    post_warmup_state = last_state = None
    num_samples = 0
    thinning = 1


def _scripted_runs(monkeypatch, bench, later_seconds):
    """`measure_runs` with the first run and every later run's seconds scripted: a
    later run of ``n`` draws takes ``later_seconds(n, call)``."""
    calls = []

    def timed_run(mcmc, *args):
        calls.append(mcmc.num_samples)
        return later_seconds(mcmc.num_samples, len(calls))

    monkeypatch.setattr(bench, "first_run", lambda *args: (_ScriptedMCMC(), 5.0))
    monkeypatch.setattr(bench, "timed_run", timed_run)
    monkeypatch.setattr(bench, "later_key", lambda state: None)
    spec = {"num_warmup": 100, "num_samples": 100, "later_num_samples": 500,
            "min_long_s": 0.5, "num_coords": 10}  # fmt: skip
    return bench.measure_runs(spec, None, ()), calls


def test_long_runs_grow_past_the_fixed_cost_noise(monkeypatch):
    """A step of 0.1 ms under a fixed cost that varies by 0.3 s from run to run: the long
    run grows until its steps stand out of that noise (once, the faster of two long runs
    fell below the faster short run: a negative step)."""
    bench = _bench(monkeypatch)
    result, calls = _scripted_runs(
        monkeypatch, bench, lambda n, call: 4.0 + (0.3 if call % 2 else 0.0) + 1e-4 * n
    )
    assert result["per_step_s"] > 0
    long = result["later_num_samples"]
    assert long > 500 and calls[-2:] == [long, long]
    assert abs(result["per_step_s"] - 1e-4) < 0.1 * 1e-4


def test_unresolved_step_is_an_error(monkeypatch):
    """Steps that never stand out of the noise raise, rather than report a number."""
    bench = _bench(monkeypatch)
    with pytest.raises(RuntimeError, match="not resolved"):
        _scripted_runs(monkeypatch, bench, lambda n, call: 4.0 + (0.3 if call % 2 else 0.0))


def test_long_runs_resolve_when_their_spread_grows_with_their_length(monkeypatch):
    """On a machine shared with other work (CI's slow tier, two workers) a long run's time
    varies with its length, here by 30% of its steps from run to run: the faster of each
    pair still gives the step, where four times the pair's spread never fell below it."""
    bench = _bench(monkeypatch)
    result, _ = _scripted_runs(
        monkeypatch, bench, lambda n, call: 4.0 + 1e-4 * n * (1.3 if call % 2 else 1.0)
    )
    assert abs(result["per_step_s"] - 1e-4) < 0.01 * 1e-4
