"""Load the recorded H200 traces (benchmarks/traces/*.jsonl, described in the README
there) for benchmarks."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

TRACE_DIR = Path(__file__).resolve().parent / "traces"


def load_trace(name: str) -> list[dict[str, Any]]:
    path = TRACE_DIR / f"{name}.jsonl"
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def all_trace_rows() -> list[dict[str, Any]]:
    return [row for path in sorted(TRACE_DIR.glob("*.jsonl")) for row in load_trace(path.stem)]


def resample(rows: list[dict[str, Any]], n: int, seed: int = 0) -> list[dict[str, Any]]:
    """n rows drawn from real ones, with +-5 % jitter on the actuals so no two are identical."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        row = dict(rng.choice(rows))
        for key in ("actual_ttft_ms", "actual_tpot_ms"):
            row[key] = row[key] * rng.uniform(0.95, 1.05)
        out.append(row)
    return out


def prediction_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As the EPP sends them: no actuals, and its prediction-time constants."""
    return [
        {
            **{k: v for k, v in r.items() if not k.startswith("actual_")},
            "num_tokens_generated": 1,
            "decode_tokens_in_flight": 0,
        }
        for r in rows
    ]
