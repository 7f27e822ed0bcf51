"""The hardware classes in the answer: a few lines of the screen and the JSON's `classes`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from advisor.classes import ClassPool, ClassSpeed

SPLITS = {
    "rows": "--pods split by each class's share of the TTFT rows",
    "load": "--pods split by the load each class's rows imply",
    "hardware": "pods per class as --hardware gives them",
}


def _pods(c: ClassSpeed) -> str:
    simulated = f" ({c.sim_pods} simulated)" if c.sim_pods != c.pods else ""
    return f"{c.pods} pod{'s' if c.pods != 1 else ''}{simulated}"


def _speeds(c: ClassSpeed, from_rows: bool) -> str:
    if not from_rows or not c.rows:
        return f"{c.base}'s datasheet constants"
    s = c.speeds
    unknown = f"; {c.label} is no poolsim.hardware class" if c.base != c.label else ""
    read = (
        f"{s.ttft_rows} TTFT rows without a queue, {s.tpot_rows} TPOT rows"
        if s.ttft_rows or s.tpot_rows
        else "too few rows: unscaled"
    )
    return (
        f"speeds from the rows: compute x{s.compute:.2f}, memory x{s.memory:.2f} of "
        f"{c.base}'s constants ({read}{unknown})"
    )


def class_lines(pool: ClassPool) -> list[str]:
    """Nothing for a pool of the one --hardware class, as before classes were read."""
    if not pool.shown:
        return []
    source = "the rows' pod_class" if pool.from_rows else "--hardware"
    lines = [f"classes   {pool.label} from {source} ({SPLITS[pool.split]})"]
    for c in pool.classes:
        rows = f"{c.rows:,} rows ({c.request_rows:,} TTFT)" if c.rows else "no rows"
        lines.append(f"          {c.label}: {rows}, {_pods(c)}; {_speeds(c, pool.from_rows)}")
    lines += [f"          note: {note}" for note in pool.notes]
    return lines


def class_json(pool: ClassPool | None) -> dict[str, Any] | None:
    if pool is None:
        return None
    return {
        "pool": pool.label,
        "from_rows": pool.from_rows,
        "split": pool.split,
        "notes": list(pool.notes),
        # per class: rows, pods given (of --pods, and simulated), the speeds from the rows
        # (factors on the base class's compute and memory constants) and the constants run
        "per_class": [asdict(c) for c in pool.classes],
    }
