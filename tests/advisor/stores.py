"""Real stores for the advise tests: filled through a real training server's
/add_training_data_bulk, with rows the simulator's pods produced (as the EPP sends them)
and arrival timestamps spread over a chosen span."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from advisor.predictor import Recording
from advisor.rows import StoreRows
from poolsim.engine import Engine
from poolsim.hardware import B200, H200, Hardware
from poolsim.policies import make_policy
from poolsim.roles import PdConfig
from poolsim.workloads import generate

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MIXED = [H200, H200, B200, B200]  # the mixed pool the class tests' rows come from


def simulated_rows(
    requests: int,
    minutes: float,
    pods: int = 2,
    hardware: Sequence[Hardware] = (),
    policy: str = "heuristic",
    roles: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Training rows of about `requests` chat requests served by `policy` on `pods`
    simulated pods (of the classes `hardware` lists, one per pod; h200 by default; a mixed
    pool's rows carry pod_class; with `roles`, one per pod, a prefill/decode pool's rows
    carry pod_type), their arrivals stretched over `minutes` (RFC 3339 timestamps)."""
    pool = list(hardware) or [H200] * (len(roles) or pods)
    duration = requests / (8.0 * len(pool))  # chat: 8 requests/s per pod
    recording = Recording(make_policy(policy, 0))
    requests_ = generate("chat", len(pool), duration, 0)
    pd = PdConfig(tuple(roles)) if roles else None
    asyncio.run(Engine(requests_, len(pool), pool, recording, regret=False, pd=pd).run())
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


def as_store_rows(rows: Sequence[dict[str, Any]]) -> StoreRows:
    """Training rows as advisor.rows reads them from a store, without the store."""

    def column(name: str) -> np.ndarray:
        return np.array([float(row[name]) for row in rows])

    stamps = [datetime.fromisoformat(row["timestamp"]).timestamp() for row in rows]
    return StoreRows(
        timestamp_s=np.array(stamps),
        input_tokens=column("input_token_length"),
        tokens_generated=column("num_tokens_generated"),
        waiting=column("num_request_waiting"),
        running=column("num_request_running"),
        kv_cache=column("kv_cache_percentage"),
        prefix_score=column("prefix_cache_score"),
        prefill_in_flight=column("prefill_tokens_in_flight"),
        ttft_ms=column("actual_ttft_ms"),
        tpot_ms=column("actual_tpot_ms"),
        pod_class=np.array([str(row.get("pod_class", "")) for row in rows], dtype=object),
        pod_type=np.array([str(row.get("pod_type", "")) for row in rows], dtype=object),
    )
