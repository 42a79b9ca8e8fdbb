"""Efficiency against acceptance rate (Sun, Dai and Schuurmans 2022, Sec. 6.1, Figs. 1-4).

For each target at its medium size and each family (LBP, RWM), :func:`run_sweep` adapts
``R`` towards every target acceptance of the preset's grid (ALBP / ARWM with that target),
freezes it and measures the acceptance and the expected jump distance (EJD) at that ``R``;
a point at ``R = 1`` is added (LBP-1 / RWM-1). The figure plots EJD against the measured
acceptance; the measured optimum is reported twice: the grid point of largest EJD, and
the vertex of a parabola fitted to the points within 80% of it (the curves are flat near
the top, so the grid point alone is noisy).

On the Bernoulli target the asymptotic curves are drawn too. LBP (Theorem 3.1, eq. 6-7):
``a(R) = 2 Phi(-lambda_1 R^(3/2) / (2 N))`` with

``lambda_1^2 = sum_j p_j w_j(1) (w_j(0) - w_j(1))^2 / (4 (E_x[sum_i w_i(x_i) / N])^2 sum_i
p_i w_i(1))``, ``w_j(x_j) = g(pi_j(1 - x_j) / pi_j(x_j))``;

RWM (Theorem 3.8 read at ``beta = 0``, eq. 20-21): ``a(R) = 2 Phi(-sqrt(kappa R) / 2)``
with ``kappa = (2 / N) sum_i (2 p_i - 1) log(p_i / (1 - p_i))``; in both, ``EJD = R a(R)``,
maximal at ``a = 0.574`` and ``a = 0.234``.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from benchmarks.paper.common import (
    BALANCING,
    FAMILIES,
    OPTIMAL_ACCEPT,
    TARGET_KINDS,
    Cache,
    Preset,
    Sweep,
    make_target,
    markdown_table,
    pyplot,
    save_figure,
    write_report,
)

__all__ = [
    "fit_optimum",
    "lbp_lambda",
    "lbp_theory",
    "run",
    "rwm_kappa",
    "rwm_theory",
    "sweeps_for",
]

NEAR_TOP = 0.8


def _balancing(name: str, t: np.ndarray) -> np.ndarray:
    return t / (1 + t) if name == "barker" else np.sqrt(t)


def lbp_lambda(probs: np.ndarray, balancing: str = BALANCING) -> float:
    """``lambda_1`` of eq. 7 for independent Bernoulli coordinates with probabilities
    `probs` and the balancing function `balancing` (``"barker"`` or ``"sqrt"``)."""
    p = np.asarray(probs, float)
    w1 = _balancing(balancing, (1 - p) / p)  # weight of flipping a coordinate at 1
    w0 = _balancing(balancing, p / (1 - p))  # ... at 0
    mean_weight = np.mean(p * w1 + (1 - p) * w0)
    lam2 = np.sum(p * w1 * (w0 - w1) ** 2) / (4 * mean_weight**2 * np.sum(p * w1))
    return float(np.sqrt(lam2))


def lbp_theory(
    probs: np.ndarray, scales: np.ndarray, balancing: str = BALANCING
) -> tuple[np.ndarray, np.ndarray]:
    """Asymptotic ``(acceptance, EJD)`` of LBP-R at the path lengths `scales` (eq. 6, 8)."""
    num_coords = len(probs)
    scales = np.asarray(scales, float)
    accept = 2 * norm.cdf(-0.5 * lbp_lambda(probs, balancing) * scales**1.5 / num_coords)
    return accept, scales * accept


def rwm_kappa(probs: np.ndarray) -> float:
    """``kappa = lambda_2^2 l / R`` (eq. 21):
    ``(2 / N) sum_i (2 p_i - 1) log(p_i / (1 - p_i))``."""
    p = np.asarray(probs, float)
    return float(2 * np.mean((2 * p - 1) * np.log(p / (1 - p))))


def rwm_theory(probs: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Asymptotic ``(acceptance, EJD)`` of RWM-R at the path lengths `scales` (eq. 20)."""
    scales = np.asarray(scales, float)
    accept = 2 * norm.cdf(-0.5 * np.sqrt(rwm_kappa(probs) * scales))
    return accept, scales * accept


def fit_optimum(acceptance: Sequence[float], ejd: Sequence[float]) -> float | None:
    """
    Acceptance at the top of a parabola fitted (least squares) to the points whose EJD is
    within ``NEAR_TOP`` of the largest; None with fewer than three such points or no
    maximum inside their range.
    """
    a, d = np.asarray(acceptance, float), np.asarray(ejd, float)
    top = d >= NEAR_TOP * d.max()
    if top.sum() < 3:
        return None
    c2, c1, _ = np.polyfit(a[top], d[top], 2)
    if c2 >= 0:
        return None
    vertex = -c1 / (2 * c2)
    if not a[top].min() <= vertex <= a[top].max():
        return None
    return float(vertex)


def sweeps_for(preset: Preset, kinds: Sequence[str], cache: Cache) -> dict[tuple[str, str], Sweep]:
    """The efficiency sweeps at the medium sizes, computed once per run (`cache`)."""
    return {
        (kind, family): cache.sweep(preset, kind, preset.medium(kind), family)
        for kind in kinds
        for family in FAMILIES
    }


def summarise(sweep: Sweep) -> dict[str, Any]:
    """Measured optimum of one sweep, and the adaptive sampler at the optimal rate."""
    points = sweep.points
    best = max(points, key=lambda p: p.ejd)
    adaptive = sweep.at(OPTIMAL_ACCEPT[sweep.family])
    return {
        "target": sweep.target,
        "family": sweep.family,
        "num_coords": sweep.num_coords,
        "best_acceptance": best.acceptance,
        "best_scale": best.scale,
        "best_ejd": best.ejd,
        "fit_acceptance": fit_optimum([p.acceptance for p in points], [p.ejd for p in points]),
        "adaptive_acceptance": adaptive.acceptance,
        "adaptive_scale": adaptive.scale,
        "adaptive_ejd": adaptive.ejd,
        "adaptive_vs_best": adaptive.ejd / best.ejd,
        "paper_optimum": OPTIMAL_ACCEPT[sweep.family],
    }


def plot(
    sweeps: dict[tuple[str, str], Sweep], kinds: Sequence[str], preset: Preset, path: Path
) -> None:
    """EJD against acceptance: one column per target, LBP on top, RWM below."""
    fig, axes = pyplot().subplots(2, len(kinds), figsize=(3.6 * len(kinds), 6.4), squeeze=False)
    for col, kind in enumerate(kinds):
        for row, family in enumerate(FAMILIES):
            ax, sweep = axes[row, col], sweeps[(kind, family)]
            points = sweep.points
            ax.plot([p.acceptance for p in points], [p.ejd for p in points], "o", ms=4,
                    label="measured")  # fmt: skip
            if kind == "bernoulli":
                probs = make_target(kind, sweep.num_coords, preset).params["probs"]
                scales = np.geomspace(1, sweep.num_coords, 400)
                theory = lbp_theory(probs, scales) if family == "LBP" else rwm_theory(probs, scales)
                ax.plot(*theory, "-", color="0.4", lw=1, label="theory (eq. 6-7 / 20-21)")
            ax.axvline(OPTIMAL_ACCEPT[family], color="C3", ls="--", lw=1,
                       label=f"{OPTIMAL_ACCEPT[family]}")  # fmt: skip
            best = summarise(sweep)
            ax.axvline(best["best_acceptance"], color="C2", ls=":", lw=1, label="measured best")
            ax.set_xlim(0, 1)
            ax.set_title(f"{sweep.target} ({family})", fontsize=9)
            ax.set_xlabel("acceptance rate")
            ax.set_ylabel("EJD")
            ax.legend(fontsize=7)
    save_figure(fig, path)


def run(
    preset: Preset, out_dir: Path, cache: Cache, kinds: Sequence[str] = TARGET_KINDS
) -> dict[str, Any]:
    """Sweep, summarise, plot; write ``efficiency.{json,md,png}`` into `out_dir`."""
    sweeps = sweeps_for(preset, kinds, cache)
    summaries = [summarise(sweeps[(kind, family)]) for kind in kinds for family in FAMILIES]
    out_dir.mkdir(parents=True, exist_ok=True)
    plot(sweeps, kinds, preset, out_dir / "efficiency.png")
    rows = [
        [
            s["target"],
            s["family"],
            s["paper_optimum"],
            s["best_acceptance"],
            s["fit_acceptance"],
            s["best_scale"],
            s["best_ejd"],
            s["adaptive_scale"],
            s["adaptive_acceptance"],
            s["adaptive_ejd"],
            s["adaptive_vs_best"],
        ]
        for s in summaries
    ]
    header = [
        "target", "sampler", "paper opt. acc.", "best acc. (grid)", "best acc. (fit)",
        "best R", "best EJD", "adaptive R", "adaptive acc.", "adaptive EJD", "adaptive / best",
    ]  # fmt: skip
    result = {
        "preset": preset.name,
        "summaries": summaries,
        "sweeps": {f"{kind}/{family}": sweep for (kind, family), sweep in sweeps.items()},
    }
    return write_report(out_dir, "efficiency", markdown_table(header, rows), result)
