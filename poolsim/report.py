"""The comparison as a Markdown table and PNG plots (matplotlib, the `sim` extra)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolsim.metrics import Percentiles, PolicyMetrics, RegretFigures

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from poolsim.pool_changes import PoolChanges

INSTALL_HINT = (
    "--plots needs matplotlib: pip install 'latency-predictor[sim]' "
    "(or pip install 'matplotlib>=3.8')"
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _triple(p: Percentiles) -> str:
    return " / ".join(_ms(p[key]) for key in ("p50", "p90", "p99"))


def _regret(r: RegretFigures) -> str:
    return " / ".join(_ms(r[key]) for key in ("p50", "p90", "mean"))


def _span(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{min(known):.0%}-{max(known):.0%}" if known else "-"


def markdown_table(results: Mapping[str, PolicyMetrics]) -> str:
    lines = [
        "| policy | TTFT p50 / p90 / p99 ms | regret p50 / p90 / mean ms "
        "| TPOT p50 / p90 / p99 ms | E2E p50 / p90 / p99 ms"
        " | SLO met | req/s | pod share (min-max) | prefix hit (min-max) | unfinished |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in results.items():
        slo = "-" if m["slo_attainment"] is None else f"{m['slo_attainment']:.1%}"
        lines.append(
            f"| {name} | {_triple(m['ttft_ms'])} | {_regret(m['regret_ms'])} "
            f"| {_triple(m['tpot_ms'])} "
            f"| {_triple(m['e2e_ms'])} | {slo} | {m['throughput_rps']:.2f} "
            f"| {_span(m['pod_share'])} | {_span(m['prefix_hit_rate'])} | {m['unfinished']} |"
        )
    return "\n".join(lines)


def encoder_table(results: Mapping[str, PolicyMetrics]) -> str | None:
    """Per policy, the pods' encoder caches (poolsim.encoder): the share of image tokens
    found cached at admission, pool-wide and per pod, and the encoder time the pods spent;
    None when no request carried images."""
    rows = {name: m["encoder"] for name, m in results.items() if "encoder" in m}
    if not rows:
        return None
    lines = [
        "| policy | encoder cache hit | per pod (min-max) | encoder s, all pods "
        "| per pod (min-max) |",
        "|---|---|---|---|---|",
    ]
    for name, e in rows.items():
        seconds = e["encode_s_per_pod"]
        lines.append(
            f"| {name} | {e['hit_rate']:.1%} | {_span(e['hit_rate_per_pod'])} "
            f"| {sum(seconds):.1f} | {min(seconds):.1f}-{max(seconds):.1f} |"
        )
    return "\n".join(lines)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def served_table(results: Mapping[str, PolicyMetrics]) -> str | None:
    """The predicted policies' own figures: coverage and pinball loss (q = 0.9) of the
    p90s the picks acted on, against what the chosen pod then measured; None when no
    policy served predictions."""
    rows = {name: m["policy"] for name, m in results.items() if "served_ttft_rows" in m["policy"]}
    if not rows:
        return None
    lines = [
        "| policy | TTFT coverage | TTFT pinball ms | TPOT coverage | TPOT pinball ms "
        "| TTFT coverage / pinball after the prior | fallbacks | routed by prior / first 3 models"
        " | model versions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in rows.items():
        lines.append(
            f"| {name} | {_share(f.get('served_ttft_coverage'))} "
            f"| {_ms(f.get('served_ttft_pinball_ms'))} "
            f"| {_share(f.get('served_tpot_coverage'))} "
            f"| {_ms(f.get('served_tpot_pinball_ms'))} "
            f"| {_share(f.get('trained_ttft_coverage'))} / "
            f"{_ms(f.get('trained_ttft_pinball_ms'))} "
            f"| {f.get('fallbacks', 0):.0f} "
            f"| {f.get('routed_by_prior', 0):.0f} / {f.get('routed_by_first_3_models', 0):.0f} "
            f"| {f.get('model_versions_served', 0):.0f} |"
        )
    return "\n".join(lines)


def pod_class_table(results: Mapping[str, PolicyMetrics]) -> str | None:
    """Per policy and hardware class: TTFT p50 / p90, SLO attainment, share of the requests,
    and the served TTFT p90s' coverage (predicted policies); None unless the pool mixes
    classes."""
    if not any(len(m.get("by_pod_class", {})) > 1 for m in results.values()):
        return None
    lines = [
        "| policy | class (pods) | TTFT p50 / p90 ms | SLO met | share | served TTFT coverage |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in results.items():
        for pod_class, f in m.get("by_pod_class", {}).items():
            slo = "-" if f["slo_attainment"] is None else f"{f['slo_attainment']:.1%}"
            ttft = f"{_ms(f['ttft_ms']['p50'])} / {_ms(f['ttft_ms']['p90'])}"
            lines.append(
                f"| {name} | {pod_class} ({f['pods']}) | {ttft} | {slo} | {f['share']:.1%} "
                f"| {_share(f['served_ttft_coverage'])} |"
            )
    return "\n".join(lines)


def pd_role_table(results: Mapping[str, PolicyMetrics]) -> str | None:
    """Per policy and P/D role: TTFT and TPOT p90s, SLO attainment and share of the
    requests that touched the role's pods; None unless the pool has roles."""
    if not any("by_role" in m for m in results.values()):
        return None
    lines = [
        "| policy | role (pods) | TTFT p90 ms | TPOT p90 ms | SLO met | share |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in results.items():
        for role, f in m.get("by_role", {}).items():
            slo = "-" if f["slo_attainment"] is None else f"{f['slo_attainment']:.1%}"
            lines.append(
                f"| {name} | {role} ({f['pods']}) | {_ms(f['ttft_ms'])} | {_ms(f['tpot_ms'])} "
                f"| {slo} | {f['share']:.1%} |"
            )
    return "\n".join(lines)


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_plots(
    ttfts: Mapping[str, Sequence[float]],
    results: Mapping[str, PolicyMetrics],
    folder: Path,
    title: str,
    changes: PoolChanges | None = None,
) -> list[Path]:
    """ttft_cdf.png (TTFT CDF per policy), pod_share.png (requests per pod),
    pod_share_over_time.png (each pod's share per minute, a panel per policy),
    regret_per_minute.png (mean decision regret per minute, a line per policy) and
    class_share_over_time.png (each hardware class's share per 30 s, a panel per policy,
    the pool's `changes` marked)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(INSTALL_HINT) from None
    folder.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Figure] = {}
    for name, draw in (("ttft_cdf.png", _ttft_cdf), ("pod_share.png", _pod_share)):
        figures[name], ax = plt.subplots(figsize=(7, 4.5))
        draw(ax, ttfts, results, title)
    figures["pod_share_over_time.png"] = _share_over_time(results, title)
    figures["regret_per_minute.png"], ax = plt.subplots(figsize=(7, 4.5))
    _regret_per_minute(ax, results, title)
    figures["class_share_over_time.png"] = _class_share_over_time(results, title, changes)
    paths = []
    for name, fig in figures.items():
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        paths.append(folder / name)
    return paths


def _ttft_cdf(
    ax: Axes,
    ttfts: Mapping[str, Sequence[float]],
    results: Mapping[str, PolicyMetrics],
    title: str,
) -> None:
    for name, values in ttfts.items():
        ordered = sorted(values)
        if ordered:
            ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (ms, log scale)")
    ax.set_ylabel("share of requests")
    ax.set_title(f"TTFT CDF: {title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def _pod_share(
    ax: Axes,
    ttfts: Mapping[str, Sequence[float]],
    results: Mapping[str, PolicyMetrics],
    title: str,
) -> None:
    width = 0.8 / max(len(results), 1)
    pods = 0
    for offset, (name, m) in enumerate(results.items()):
        pods = len(m["pod_share"])
        xs = [pod + (offset - (len(results) - 1) / 2) * width for pod in range(pods)]
        ax.bar(xs, m["pod_share"], width=width, label=name)
    ax.set_xticks(range(pods))
    ax.set_xlabel("pod")
    ax.set_ylabel("share of requests")
    ax.set_title(f"Requests per pod: {title}")
    ax.legend()


def _share_over_time(results: Mapping[str, PolicyMetrics], title: str) -> Figure:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    cols = min(3, max(len(results), 1))
    rows = -(-max(len(results), 1) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols, 3.0 * rows), sharex=True, sharey=True, squeeze=False
    )
    panels = list(axes.flat)
    for ax, (name, m) in zip(panels, results.items(), strict=False):
        pods = len(m["pod_share"])
        minutes = range(len(m["pod_share_per_minute"]))
        for pod in range(pods):
            shares = [row[pod] for row in m["pod_share_per_minute"]]
            ax.plot(minutes, shares, marker="o", markersize=2, linewidth=1, label=f"pod {pod}")
        ax.axhline(1 / max(pods, 1), color="black", linestyle="--", linewidth=1, label="fair")
        ax.set_title(name, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _finish_share_grid(axes, len(results), cols, "minute of arrival")
    fig.suptitle(f"Per-pod share over time: {title}")
    return fig


def _finish_share_grid(axes: Any, used: int, cols: int, xlabel: str) -> None:
    """Label a grid of share panels: x labels on the last row (and above an empty panel,
    which is hidden), the y label on the first column, the legend on the first panel."""
    panels = list(axes.flat)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    for index in range(used, len(panels)):  # an empty panel: the one above is last
        panels[index].set_visible(False)
        panels[index - cols].xaxis.set_tick_params(labelbottom=True)
        panels[index - cols].set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel("share of requests")
    panels[0].legend(fontsize=7, ncol=2)


def _class_share_over_time(
    results: Mapping[str, PolicyMetrics], title: str, changes: PoolChanges | None
) -> Figure:
    import matplotlib.pyplot as plt

    cols = min(3, max(len(results), 1))
    rows = -(-max(len(results), 1) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols, 3.0 * rows), sharex=True, sharey=True, squeeze=False
    )
    panels = list(axes.flat)
    marks = _change_marks(changes)
    for ax, (name, m) in zip(panels, results.items(), strict=False):
        over_time = m["class_share_over_time"]
        for pod_class, shares in over_time["classes"].items():  # a step per 30 s bin
            if not shares:
                continue
            edges = [over_time["bin_s"] * i for i in range(len(shares) + 1)]
            ax.step(edges, [*shares, shares[-1]], where="post", linewidth=1.2, label=pod_class)
        for at_s, label, style in marks:
            ax.axvline(at_s, color="black", linestyle=style, linewidth=1, label=label)
        ax.set_title(name, fontsize=10)
        ax.grid(True, alpha=0.3)
    _finish_share_grid(axes, len(results), cols, "second of arrival (30 s bins)")
    fig.suptitle(f"Per-class share over time: {title}")
    return fig


def _change_marks(changes: PoolChanges | None) -> list[tuple[float, str, str]]:
    """(time, legend label, line style) per join (dashed) and slowdown (dotted)."""
    if changes is None:
        return []
    marks = [(j.at_s, f"+{j.count} {j.hw.name}", "--") for j in changes.joins]
    marks += [(s.at_s, f"{s.class_name} x{s.factor:g} slower", ":") for s in changes.slowdowns]
    return marks


def _regret_per_minute(ax: Axes, results: Mapping[str, PolicyMetrics], title: str) -> None:
    from matplotlib.ticker import MaxNLocator

    drawn = False
    for name, m in results.items():
        rows = m["regret_ms"]["per_minute"]
        if rows:
            means = [math.nan if r["mean"] is None else r["mean"] for r in rows]
            ax.plot([r["minute"] for r in rows], means, marker="o", markersize=3, label=name)
            drawn = True
    ax.set_xlabel("minute of arrival")
    ax.set_ylabel("mean decision regret (ms)")
    ax.set_title(f"Decision regret per minute: {title}")
    ax.grid(True, alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if drawn:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "regret not measured (--no-regret)", ha="center", transform=ax.transAxes)
