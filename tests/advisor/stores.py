"""Real stores for the advise tests: filled through a real training server's
/add_training_data_bulk, with rows the simulator's pods produced (as the EPP sends them)
and arrival timestamps spread over a chosen span."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from advisor.predictor import Recording
from poolsim.engine import Engine
from poolsim.hardware import H200
from poolsim.policies import make_policy
from poolsim.workloads import generate

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def simulated_rows(requests: int, minutes: float, pods: int = 2) -> list[dict[str, Any]]:
    """Training rows of about `requests` chat requests served by a heuristic on `pods`
    simulated pods, their arrivals stretched over `minutes` (RFC 3339 timestamps)."""
    duration = requests / (8.0 * pods)  # chat: 8 requests/s per pod
    recording = Recording(make_policy("heuristic", 0))
    asyncio.run(Engine(generate("chat", pods, duration, 0), pods, H200, recording).run())
    stretch = minutes * 60.0 / duration
    return [
        {**row, "timestamp": (START + timedelta(seconds=t * stretch)).isoformat()}
        for row, t in zip(recording.rows, recording.arrival_s, strict=True)
    ]


def advise(*args: str, timeout: float = 150.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "latency_cli", "advise", "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )
