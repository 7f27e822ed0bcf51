"""Goal tables from saved `benchmarks.replay --json` outputs, e.g. before and after a change.

    .venv/bin/python -m benchmarks.replay.report BEFORE.json [AFTER.json ...]

For each file: its code version and mode, then the accuracy goals' table (online: one row per
trace and target with the mean over runs and the range of runs; offline: as replay prints
it), and for a drift replay (--drift) one row per trace, target and run with how the p90
followed the shift. Pure reading of the files; no servers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import say
from benchmarks.replay.drift_metrics import DRIFT_SPAN_S, DRIFT_WINDOW_S
from benchmarks.replay.goals import (
    OFFLINE_GOALS_HEADER,
    ONLINE_RATIO_LIMIT,
    offline_goal_row,
    online_verdict,
)
from benchmarks.replay.tables import coverages

ONLINE_HEADER = (
    "| trace / target | runs | cov | pinball | naive | ratio overall | ratio 2nd half | "
    "cov 2nd half | goal (every run) |\n|---|---|---|---|---|---|---|---|---|"
)


def _span(values: list[float], digits: int) -> str:
    mean = f"{np.mean(values):.{digits}f}"
    if len(values) == 1:
        return mean
    return f"{mean} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def _num(values: list[float]) -> str:
    mean = float(np.mean(values))
    return f"{mean:.3g}" if mean < 100 else f"{mean:,.0f}"


def online_rows(traces: list[dict[str, Any]]) -> list[str]:
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for result in traces:
        for target, summary in result["targets"].items():
            by_key.setdefault((result["trace"], target), []).append(summary)
    lines = []
    for (trace, target), runs in by_key.items():
        verdicts = [online_verdict(target, s)["checks"] for s in runs]
        goal = ", ".join(
            f"{name} {sum(v[name] for v in verdicts)}/{len(runs)}" for name in verdicts[0]
        )
        o = [s["overall"] for s in runs]
        h = [s["second_half"] for s in runs]
        lines.append(
            f"| {trace} {target.upper()} | {len(runs)} | "
            f"{_span([p['model']['coverage'] for p in o], 3)} | "
            f"{_num([p['model']['pinball_loss'] for p in o])} | "
            f"{_num([p['naive']['pinball_loss'] for p in o])} | "
            f"{_span([p['pinball_ratio'] for p in o], 2)} | "
            f"{_span([p['pinball_ratio'] for p in h], 2)} | "
            f"{_span([p['model']['coverage'] for p in h], 3)} | "
            f"<= {ONLINE_RATIO_LIMIT[target]:g}x: {goal} |"
        )
    return lines


DRIFT_HEADER = (
    f"| trace / target | run | shift at | coverage per {DRIFT_WINDOW_S:g} s after the shift "
    f"| naive_recent's | cov {DRIFT_SPAN_S:g} s | naive_recent's | "
    f"ratio {DRIFT_SPAN_S:g} s vs naive_recent |\n|---|---|---|---|---|---|---|---|"
)


def drift_rows(traces: list[dict[str, Any]]) -> list[str]:
    """One row per trace, target and run of a drift replay (none without one)."""
    lines = []
    for result in traces:
        run = f"seed {result['seed']}" if "seed" in result else f"run {result.get('run', 1)}"
        for target, summary in result["targets"].items():
            drift = summary.get("drift")
            if drift is None:
                continue
            span = drift["span"]
            lines.append(
                f"| {result['trace']} {target.upper()} | {run} | {drift['shift_s']:g} s | "
                f"{coverages(drift['windows'])} | "
                f"{coverages(drift['windows'], 'naive_recent_coverage')} | "
                f"{_opt(span['coverage'], 3)} | {_opt(span['naive_recent_coverage'], 3)} | "
                f"{_opt(span['pinball_ratio'], 2)} |"
            )
    return lines


def _opt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(path: Path) -> None:
    data = json.loads(path.read_text())
    say(
        f"\n## {path.name}: {data['mode']}, code {data['code']}, retrain interval "
        f"{data['config'].get('retrain_interval')} s"
    )
    if data["mode"] in ("online", "inprocess"):
        say(ONLINE_HEADER)
        for line in online_rows(data["traces"]):
            say(line)
        drift = drift_rows(data["traces"])
        if drift:
            say(f"\n{DRIFT_HEADER}")
            for line in drift:
                say(line)
        return
    say(OFFLINE_GOALS_HEADER)
    for result in data["traces"]:
        for target, agg in result["targets"].items():
            say(offline_goal_row(result["trace"], target, agg))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    for path in parser.parse_args().files:
        report(path)


if __name__ == "__main__":
    main()
