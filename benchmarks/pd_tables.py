"""The tables of `benchmarks.pd_bench compare`, from the JSON of `latency-predictor simulate
--roles` runs (one document per seed): per role, and the P/D goal check."""

from __future__ import annotations

import statistics

from benchmarks.poolsim_tables import Doc, values

OURS = "latency-first"
BASELINE = "pd-heuristic"
GOALS = (  # label, path in a policy's figures, lower is better
    ("TTFT p90", ("ttft_ms", "p90"), True),
    ("TPOT p90", ("tpot_ms", "p90"), True),
    ("SLO met", ("slo_attainment",), False),
)


def _fmt(value: float, share: bool) -> str:
    if value != value:
        return "-"
    return f"{value:.1%}" if share else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _range(figures: list[float], share: bool) -> str:
    mean = statistics.mean(figures)
    return f"{_fmt(mean, share)} ({_fmt(min(figures), share)}-{_fmt(max(figures), share)})"


def role_table(docs: list[Doc]) -> str:
    lines = [
        "| policy | role (pods) | TTFT p90 ms | TPOT p90 ms | SLO met | share "
        "| served TTFT coverage | served TPOT coverage |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for policy in docs[0]["policies"]:
        for role, first in docs[0]["policies"][policy]["by_role"].items():
            cells = []
            for key, share in (
                ("ttft_ms", False),
                ("tpot_ms", False),
                ("slo_attainment", True),
                ("share", True),
                ("served_ttft_coverage", False),
                ("served_tpot_coverage", False),
            ):
                figures = values(docs, policy, "by_role", role, key)
                if all(f != f for f in figures):
                    cells.append("-")
                elif key.startswith("served"):
                    cells.append(
                        f"{statistics.mean(figures):.3f} ({min(figures):.3f}-{max(figures):.3f})"
                    )
                else:
                    cells.append(_range(figures, share))
            lines.append(f"| {policy} | {role} ({first['pods']}) | {' | '.join(cells)} |")
    return "\n".join(lines)


def _overlap(a: list[float], b: list[float]) -> bool:
    return not (max(a) < min(b) or min(a) > max(b))


def goal_table(docs: list[Doc]) -> str:
    """latency-first against pd-heuristic (no overlap of the seeds' ranges), the share of
    the baseline's gap to the oracle it closes, and against predicted-latency."""
    present = docs[0]["policies"]
    lines = [
        f"| figure | {OURS} | {BASELINE} | oracle | predicted-latency | vs {BASELINE} "
        "| gap to the oracle closed | vs predicted-latency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, path, lower in GOALS:
        share = label.startswith("SLO")
        ours, base = values(docs, OURS, *path), values(docs, BASELINE, *path)
        oracle = values(docs, "oracle", *path) if "oracle" in present else [float("nan")]
        rival = values(docs, "predicted-latency", *path) if "predicted-latency" in present else []
        better = statistics.mean(ours) < statistics.mean(base)
        if not lower:
            better = not better
        verdict = ("tie" if _overlap(ours, base) else "WIN" if better else "LOSS") + (
            " (ranges overlap)" if _overlap(ours, base) else ""
        )
        gap = statistics.mean(oracle) - statistics.mean(base)
        oracle_better = gap < -1e-9 if lower else gap > 1e-9
        closed = (
            f"{(statistics.mean(ours) - statistics.mean(base)) / gap:.0%}"
            if oracle_better
            else "- (no gap: the oracle is not better)"
        )
        if rival:
            worse = statistics.mean(ours) > statistics.mean(rival)
            if not lower:
                worse = not worse
            versus = "tie" if _overlap(ours, rival) else ("worse" if worse else "better")
        else:
            versus = "-"
        lines.append(
            f"| {label} | {_range(ours, share)} | {_range(base, share)} "
            f"| {_range(oracle, share)} | {_range(rival, share) if rival else '-'} "
            f"| {verdict} | {closed} | {versus} |"
        )
    return "\n".join(lines)
