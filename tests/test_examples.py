"""Smoke tests: the example scripts run end to end on tiny sizes (the ACS examples, the
multimodal target and the RBM, among them)."""

import math
import re

import numpy as np
import pytest

from examples_loader import load_example


def run_example(name: str, out_dir, *args: str) -> dict:
    """``examples/<name>.py`` run with `args`, writing to `out_dir`, without progress bars;
    its printed summary as a dict."""
    return load_example(name).main([*args, "--out", str(out_dir), "--no-progress-bar"])


def assert_saved_figure(summary: dict, tmp_path, name: str) -> None:
    """The example saved its figure, `name`.png, in the output folder and reported it."""
    figure = tmp_path / f"{name}.png"
    assert summary["figure"] == str(figure)
    assert figure.is_file() and figure.stat().st_size > 0


@pytest.mark.slow
def test_ising_example(tmp_path):
    summary = run_example(
        "ising",
        tmp_path,
        "--p", "6",
        "--num-warmup", "30",
        "--num-samples", "20",
        "--num-chains", "1",
    )  # fmt: skip
    assert_saved_figure(summary, tmp_path, "ising")
    assert summary["num_coords"] == 36 and summary["num_draws"] == 20
    assert 0.0 <= summary["accept_prob"] <= 1.0
    assert 1.0 <= summary["final_R"] <= 36.0
    assert -1.0 <= summary["magnetisation"] <= 1.0
    for key in ("mean_changed", "warmup_time", "sample_time"):
        assert math.isfinite(summary[key])


@pytest.mark.slow
def test_fhmm_example(tmp_path):
    summary = run_example(
        "fhmm",
        tmp_path,
        "--L", "20",
        "--K", "2",
        "--num-warmup", "30",
        "--num-samples", "20",
        "--num-chains", "2",
    )  # fmt: skip
    assert_saved_figure(summary, tmp_path, "fhmm")
    assert summary["num_draws"] == 40 and len(summary["w_mean"]) == 2
    assert summary["discrete_kernel"] == "BlockGibbs"  # LBPGibbs's choice from the structure
    # chain blocks draw exact conditionals: every move is accepted
    assert summary["accept_prob"] > 0.999
    assert 0.0 <= summary["wrong_state_fraction"] <= 1.0
    for key in ("mean_changed", "mean_nuts_steps", "warmup_time", "sample_time"):
        assert math.isfinite(summary[key])
    assert summary["signal_max_r_hat"] > 0 and summary["signal_min_n_eff"] > 0


@pytest.mark.slow
def test_hmm_example(tmp_path):
    summary = run_example(
        "hmm",
        tmp_path,
        "--T", "40",
        "--K", "2",
        "--num-warmup", "30",
        "--num-samples", "30",
    )  # fmt: skip
    assert (tmp_path / "hmm.png").is_file()
    # LBPGibbs's choice from the structure: the chain summed out, then drawn
    assert summary["discrete_kernel"] == "CollapsedDraw"
    assert summary["blocks"] == {"x": "1 chain(s) of 40 along axis 0"}
    for name in ("LBPGibbs(NUTS)", "NUTS, x enumerated"):
        assert math.isfinite(summary[name]["min_ess_per_s"])


def test_fhmm_relabelling_undoes_permutations_and_flips():
    """A draw that is the truth with its chains permuted and one chain flipped
    (``x -> 1 - x``, ``w -> -w``, ``b -> b + w``) is mapped back to the truth."""
    fhmm = load_example("fhmm")
    rng = np.random.default_rng(0)
    w_true, b_true = np.array([0.7, 1.4, 2.8]), 0.3
    x_true = rng.integers(0, 2, (6, 3))
    perm = np.array([2, 0, 1])
    w, x = w_true[perm].copy(), x_true[:, perm].copy()
    b = b_true + w[1]
    w[1], x[:, 1] = -w[1], 1 - x[:, 1]
    # the relabelled-away draw emits the same signal as the truth
    np.testing.assert_allclose(x @ w + b, x_true @ w_true + b_true)
    w_back, b_back, x_back = fhmm.relabel_draws(w_true, w[None], np.array([b]), x[None])
    np.testing.assert_allclose(w_back[0], w_true)
    np.testing.assert_allclose(b_back[0], b_true)
    np.testing.assert_array_equal(x_back[0], x_true)


def test_segmentation_example(tmp_path, capsys):
    summary = run_example(
        "segmentation",
        tmp_path,
        "--p", "8",
        "--num-warmup", "10",
        "--num-samples", "10",
        # one chain: with the progress bar off, numpyro compiles each chain's loop
        "--num-chains", "1",
        "--compare-seconds", "0.1",
    )  # fmt: skip
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"max r_hat: \d+\.\d+", last_line), last_line
    assert float(last_line.split(": ")[1]) == pytest.approx(summary["max_r_hat"], abs=1e-3)
    assert_saved_figure(summary, tmp_path, "segmentation")
    assert 0.0 <= summary["pixel_error"] <= 1.0
    assert 0.0 <= summary["mean"]["foreground"] <= 1.0
    assert summary["mean"]["mu_1"] > summary["mean"]["mu_0"]
    # at least 4 + 4 steps per chain, whatever the time it was given
    assert summary["numpyro"]["num_warmup"] >= 4 and summary["numpyro"]["num_samples"] >= 4
    assert math.isfinite(summary["numpyro"]["max_r_hat"])


def test_segmentation_summaries_are_label_free():
    """Foreground fraction and boundary length of a known image."""
    segmentation = load_example("segmentation")
    x = np.array([[0, 1, 1], [0, 1, 0], [0, 0, 0]])
    foreground, boundary = segmentation.label_invariant(x)
    assert foreground == pytest.approx(3 / 9)
    # disagreeing pairs, right: 1 + 2 + 0 by row; down: 0 + 1 + 1 by column
    assert boundary == 5


@pytest.mark.slow
def test_multimodal_example(tmp_path):
    summary = run_example(
        "multimodal",
        tmp_path,
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
    )  # fmt: skip
    assert_saved_figure(summary, tmp_path, "multimodal")
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
    assert_saved_figure(summary, tmp_path, "rbm")
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
