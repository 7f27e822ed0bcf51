"""The load side of benchmarks/bench_client.py: a router's picks driven through
PredictorClient at a fixed offered rate, each timed against the prediction call it waited
on, and one cell's figures."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import cpu_seconds
from devkit.processes import ServerProcess
from latency_client import (
    ClientConfig,
    PodState,
    PredictionUnavailable,
    PredictorClient,
    RequestInfo,
    percentiles,
    pick,
    prediction_rows,
)

WARMUP_S = 1.0
DRAIN_S = 10.0
POD_SETS = 20


@dataclass
class Cell:
    pick_ms: list[float] = field(default_factory=list)
    picker_ms: list[float] = field(default_factory=list)
    failed: int = 0
    done: int = 0


def pod_sets(trace: list[dict[str, Any]], pods: int, rng: random.Random) -> list[list[PodState]]:
    def one(i: int) -> PodState:
        r = rng.choice(trace)
        return PodState(
            f"pod-{i}",
            kv_cache_percentage=float(r["kv_cache_percentage"]),
            num_request_waiting=int(r["num_request_waiting"]),
            running_requests=int(r["num_request_running"]),
            prefill_tokens_in_flight=int(r["prefill_tokens_in_flight"]),
            prefix_cache_score=rng.choice((0.0, 0.0, rng.random())),
        )

    return [[one(i) for i in range(pods)] for _ in range(POD_SETS)]


def requests(trace: list[dict[str, Any]], rng: random.Random) -> list[RequestInfo]:
    return [
        RequestInfo(int(r["input_token_length"]), ttft_slo_ms=2000.0, tpot_slo_ms=50.0)
        for r in rng.sample(trace, 500)
    ]


async def one_pick(
    client: PredictorClient,
    request: RequestInfo,
    pods: list[PodState],
    rng: random.Random,
    cell: Cell,
) -> None:
    started = time.perf_counter()
    rows = prediction_rows(request, pods)
    try:
        predictions = await client.predict(rows)
    except PredictionUnavailable:
        predictions = None
        cell.failed += 1
    predicted = time.perf_counter()
    pick(request, pods, predictions, rng)
    finished = time.perf_counter()
    cell.pick_ms.append((finished - started) * 1000.0)
    cell.picker_ms.append((finished - predicted) * 1000.0)
    cell.done += 1


async def drive(
    client: PredictorClient,
    rate: float,
    seconds: float,
    workload: tuple[list[list[PodState]], list[RequestInfo]],
    rng: random.Random,
) -> tuple[Cell, float, int]:
    """Open-loop arrivals for `seconds`; returns the cell, its elapsed time, picks started."""
    sets, reqs = workload
    cell = Cell()
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    started = next_at = loop.time()
    count = 0
    for _ in range(int(1.2 * rate * seconds) + 1):
        next_at += rng.expovariate(rate)
        if next_at - started >= seconds:
            break
        delay = next_at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = loop.create_task(one_pick(client, rng.choice(reqs), rng.choice(sets), rng, cell))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        count += 1
    if tasks:
        await asyncio.wait(set(tasks), timeout=DRAIN_S)
    for task in tasks:
        task.cancel()
    return cell, loop.time() - started, count


def pct(values: list[float]) -> dict[str, float]:
    found = percentiles(values)
    return {"p50": round(found["p50"], 3), "p99": round(found["p99"], 3)} if found else {}


def series(latency_ms: dict[str, dict[str, float]], name: str) -> dict[str, float]:
    found = latency_ms[name]
    return {k: round(found[k], 3) for k in ("p50", "p99")} if found else {}


async def run_cell(
    urls: list[str],
    rate: float,
    seconds: float,
    workload: Any,
    config: ClientConfig,
    kill: ServerProcess | None,
    server_pids: list[int],
) -> dict[str, Any]:
    rng = random.Random(int(rate))
    async with PredictorClient(urls, config=config) as client:
        await drive(client, rate, WARMUP_S, workload, rng)
        if kill is not None:
            kill.kill()
        client.reset_stats()
        pids = [p for p in server_pids if Path(f"/proc/{p}").exists()]
        cpu_before = time.process_time(), sum(cpu_seconds(p) for p in pids)
        cell, elapsed, started = await drive(client, rate, seconds, workload, rng)
        cpu_after = time.process_time(), sum(cpu_seconds(p) for p in pids)
        stats = client.stats()
    c, lat = stats.counters, stats.latency_ms
    return {
        "offered_picks_per_s": rate,
        "picks_started": started,
        "picks_done": cell.done,
        "picks_per_s": round(cell.done / elapsed, 1),
        "client_added_ms": series(lat, "added"),
        "predict_ms": series(lat, "predict"),
        "http_ms": series(lat, "http"),
        "server_ms": series(lat, "server"),
        "pick_ms": pct(cell.pick_ms),
        "picker_ms": pct(cell.picker_ms),
        "http_calls": c.calls,
        "http_calls_per_1000_picks": round(1000.0 * c.calls / max(1, cell.done), 1),
        "merged_callers_per_call": round(stats.merged_callers_per_call, 2),
        "failed_picks": cell.failed + (started - cell.done),
        "failovers": c.failovers,
        "retries": c.retries,
        "timeouts": c.timeouts,
        "client_cpu_percent": round(100 * (cpu_after[0] - cpu_before[0]) / elapsed, 1),
        "servers_cpu_percent": round(100 * (cpu_after[1] - cpu_before[1]) / elapsed, 1),
    }
