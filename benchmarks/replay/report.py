"""Goal tables from saved `benchmarks.replay --json` outputs, e.g. before and after a change.

    .venv/bin/python -m benchmarks.replay.report BEFORE.json [AFTER.json ...]

For each file: its code version and mode, then the accuracy goals' table (online: one row per
trace and target with the mean over runs and the range of runs; offline: as replay prints
it). Pure reading of the files; no servers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import say
from benchmarks.replay.goals import (
    OFFLINE_GOALS_HEADER,
    ONLINE_RATIO_LIMIT,
    offline_goal_row,
    online_verdict,
)

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
