"""Optimal scale and efficiency ratio against dimension (Sun, Dai and Schuurmans 2022, Fig. 5).

For the Bernoulli, Ising and FHMM targets at each size of the preset, LBP and RWM are swept
over target acceptance rates around their optima (the medium size reuses the efficiency
sweep). At each size ``N``:

- **optimal R** - the frozen ``R`` of the sweep point with the largest EJD (grid search);
- **efficiency ratio** - the largest LBP EJD over the largest RWM EJD;
- the same two read at the adaptive samplers' points (ALBP at 0.574, ARWM at 0.234).

A least-squares line through ``(log N, log y)`` gives each slope. Theory (Sec. 3): LBP's
optimal ``R`` grows like ``N^(2/3)``, RWM's is ``O(1)``, so the ratio grows like ``N^(2/3)``.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.paper.common import (
    FAMILIES,
    OPTIMAL_ACCEPT,
    Cache,
    Preset,
    markdown_table,
    pyplot,
    save_figure,
    write_report,
)
from benchmarks.paper.efficiency import sweeps_for

__all__ = ["SCALING_KINDS", "fit_loglog", "run"]

SCALING_KINDS = ("bernoulli", "ising", "fhmm")
THEORY_SLOPE = 2 / 3


def fit_loglog(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """``(slope, intercept)`` of the least-squares line ``log y = slope log x + intercept``."""
    log_x, log_y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    slope, intercept = np.polyfit(log_x, log_y, 1)
    return float(slope), float(intercept)


def measure(preset: Preset, kind: str, cache: Cache) -> dict[str, Any]:
    """Per size: optimal ``R`` and efficiency ratio (grid best and adaptive), and the fitted
    slopes of each against ``N``."""
    rows = []
    for size in preset.sizes[kind]:
        sweeps = {family: cache.sweep(preset, kind, size, family, near=True) for family in FAMILIES}
        best = {family: sweeps[family].best() for family in FAMILIES}
        adaptive = {family: sweeps[family].at(OPTIMAL_ACCEPT[family]) for family in FAMILIES}
        rows.append(
            {
                "target": sweeps["LBP"].target,
                "num_coords": sweeps["LBP"].num_coords,
                "lbp_best_scale": best["LBP"].scale,
                "lbp_best_acceptance": best["LBP"].acceptance,
                "rwm_best_scale": best["RWM"].scale,
                "rwm_best_acceptance": best["RWM"].acceptance,
                "best_ratio": best["LBP"].ejd / best["RWM"].ejd,
                "albp_scale": adaptive["LBP"].scale,
                "arwm_scale": adaptive["RWM"].scale,
                "adaptive_ratio": adaptive["LBP"].ejd / adaptive["RWM"].ejd,
            }
        )
    sizes = [row["num_coords"] for row in rows]
    slopes = {
        name: fit_loglog(sizes, [row[name] for row in rows])[0]
        for name in ("lbp_best_scale", "rwm_best_scale", "best_ratio", "albp_scale",
                     "arwm_scale", "adaptive_ratio")
    }  # fmt: skip
    return {"kind": kind, "rows": rows, "slopes": slopes}


def plot(results: Sequence[dict[str, Any]], path: Path) -> None:
    """Log-log: optimal ``R`` (LBP solid, RWM dashed) and the LBP / RWM EJD ratio against
    ``N``, grid-best points with their fitted lines."""
    fig, (ax_r, ax_ratio) = pyplot().subplots(1, 2, figsize=(10, 4.2))
    for i, result in enumerate(results):
        color = f"C{i}"
        sizes = np.array([row["num_coords"] for row in result["rows"]], float)
        line = np.geomspace(sizes.min(), sizes.max(), 50)
        for ax, name, style, label in (
            (ax_r, "lbp_best_scale", "o-", "LBP"),
            (ax_r, "rwm_best_scale", "s--", "RWM"),
            (ax_ratio, "best_ratio", "o-", "LBP / RWM"),
        ):
            values = np.array([row[name] for row in result["rows"]], float)
            slope, intercept = fit_loglog(sizes, values)
            ax.plot(sizes, values, style[0], color=color)
            ax.plot(line, np.exp(intercept) * line**slope, style[1:], color=color, lw=1,
                    label=f"{result['kind']} {label}: slope {slope:.2f}")  # fmt: skip
    for ax, title in ((ax_r, "optimal R (grid best)"), (ax_ratio, "EJD ratio at optima")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N (coordinates)")
        ax.set_title(f"{title}; theory slope 2/3 (LBP), 0 (RWM)", fontsize=9)
        ax.legend(fontsize=7)
    save_figure(fig, path)


def run(
    preset: Preset, out_dir: Path, cache: Cache, kinds: Sequence[str] = SCALING_KINDS
) -> dict[str, Any]:
    """Measure, fit, plot; write ``scaling.{json,md,png}`` into `out_dir`."""
    sweeps_for(preset, kinds, cache)  # the medium sizes, shared with the efficiency curves
    results = [measure(preset, kind, cache) for kind in kinds]
    out_dir.mkdir(parents=True, exist_ok=True)
    plot(results, out_dir / "scaling.png")
    size_rows = [
        [row["target"], row["num_coords"], row["lbp_best_scale"], row["lbp_best_acceptance"],
         row["rwm_best_scale"], row["rwm_best_acceptance"], row["best_ratio"],
         row["albp_scale"], row["arwm_scale"], row["adaptive_ratio"]]
        for result in results
        for row in result["rows"]
    ]  # fmt: skip
    size_header = [
        "target", "N", "LBP best R", "at acc.", "RWM best R", "at acc.", "EJD ratio (best)",
        "ALBP R", "ARWM R", "EJD ratio (adaptive)",
    ]  # fmt: skip
    slope_rows = [
        [result["kind"], s["lbp_best_scale"], s["albp_scale"], s["rwm_best_scale"],
         s["arwm_scale"], s["best_ratio"], s["adaptive_ratio"]]
        for result in results
        for s in [result["slopes"]]
    ]  # fmt: skip
    slope_header = [
        "target", "LBP R (best)", "ALBP R", "RWM R (best)", "ARWM R", "ratio (best)",
        "ratio (adaptive)",
    ]  # fmt: skip
    text = (
        markdown_table(size_header, size_rows)
        + "\n**Fitted log-log slopes** (paper: about 2/3 for LBP's R and for the ratio; "
        + "RWM's R is O(1)):\n\n"
        + markdown_table(slope_header, slope_rows)
    )
    result = {"preset": preset.name, "theory_slope": THEORY_SLOPE, "results": results}
    return write_report(out_dir, "scaling", text, result)
