"""--plots: ttft_cdf.png (the scored TTFTs of each policy's first seed) and traffic.png (the
prompt and output size histograms, and the requests per minute over the window).
matplotlib (the `sim` extra), Agg backend."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.profile import RateCurve
from advisor.simulate import Simulation

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ttft_cdf(ax: Axes, sim: Simulation) -> None:
    for runs in sim.policies:
        ordered = np.sort(np.asarray(runs.ttfts_ms))
        if len(ordered):
            ax.plot(ordered, np.arange(1, len(ordered) + 1) / len(ordered), label=runs.name)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (ms, log scale)")
    ax.set_ylabel("share of requests")
    ax.set_title("TTFT CDF per policy (first seed, after the warm-up)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def _sizes(ax: Axes, inputs: np.ndarray, outputs: np.ndarray) -> None:
    values = [v for v in (inputs, outputs) if len(v)]
    top = max(float(np.max(v)) for v in values) if values else 10.0
    bins = np.logspace(0, np.log10(max(top, 10.0)), 40).tolist()
    ax.hist(inputs, bins=bins, alpha=0.6, label="prompt tokens")
    if len(outputs):
        ax.hist(outputs, bins=bins, alpha=0.6, label="output tokens (TPOT rows)")
    ax.set_xscale("log")
    ax.set_xlabel("tokens (log scale)")
    ax.set_ylabel("rows")
    ax.set_title("Request sizes")
    ax.legend()


def _rate(ax: Axes, rate: RateCurve) -> None:
    ax.plot(range(len(rate.per_minute)), rate.per_minute, marker="o", markersize=2)
    ax.axhline(rate.mean, color="black", linestyle="--", linewidth=1, label="mean")
    ax.set_xlabel("minute of the window")
    ax.set_ylabel("requests per minute")
    ax.set_ylim(bottom=0)
    ax.set_title("Arrival rate over time")
    ax.grid(True, alpha=0.3)
    ax.legend()


def write_plots(
    folder: Path,
    sim: Simulation | None,
    inputs: np.ndarray,
    outputs: np.ndarray,
    rate: RateCurve,
) -> list[Path]:
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    if sim is not None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        _ttft_cdf(ax, sim)
        paths.append(folder / "ttft_cdf.png")
        fig.tight_layout()
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    _sizes(left, inputs, outputs)
    _rate(right, rate)
    paths.append(folder / "traffic.png")
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths
