"""latency_client on a router's hot path: picks/s, the client's own added latency, HTTP
calls per 1,000 picks and merged callers per call, at 500 and 2,000 picks/s offered, with
both prediction replicas up and with one of them killed.

    .venv/bin/python -m benchmarks.bench_client [--json] [--seconds 5] [--rates 500,2000]
        [--pods 100] [--bare-only] [--bare-calls 2000] [--bare-rounds 10]
        [--compare-pool FILE]...

Setup: a training server and two prediction servers (LATENCY_WORKERS=1 each) on 127.0.0.1
share a model directory and a SQLite store in a temp dir; the trainer is fed every row of
benchmarks/traces/ through /add_training_data_bulk and the run waits until both
predictors serve the model it publishes. With two CPUs or more, the servers are pinned to
the first and this process (the router) to the second (os.sched_setaffinity), unless
--no-pin: pinning isolates on a quiet machine, but on one that other jobs load it only
forbids this process from escaping to the less busy core.

Load, per cell: picks arrive open loop (exponential gaps) at the offered rate for
`--seconds` (and at most 1.2 x rate x seconds picks), after a 1 s warm-up that is not
counted. A pick is what a router does per request: one prediction row per pod for `--pods`
pods (pod states and prompts drawn from the traces), PredictorClient.predict (through the
coalescer, default ClientConfig), then latency_client.pick. One client per cell. The
"one replica down" cells SIGKILL the first prediction server after their warm-up, so the
client meets it with live keep-alive connections, then connection refusals.

Figures (milliseconds, p50/p99 over the cell's picks):
- client_added_ms: the client's own added latency. Per pick, the wall time of predict()
  minus the HTTP exchange that answered it (encode + httpx POST + decode, timed around the
  call): what the client adds to a bare call of those rows, i.e. waiting for the coalescing
  window or a free call slot, failed attempts before a failover, fan-out and event-loop
  scheduling. This is PredictorClient.stats()'s "added" series.
- predict_ms (predict() wall), http_ms (one exchange), server_ms (the server's own
  processing_time_ms), pick_ms (the whole pick: rows + predict + picker), picker_ms.
- bare_call_ms: the reference, one POST of `--pods` rows at a time, sequential, before the
  cells (encode + POST + decode), through the client's transport (http11),
  httpx.AsyncClient and any `--compare-pool` module, in interleaved rounds, each with the
  CPU time it costs this process per call (benchmarks/bare_calls.py). `--bare-only` stops
  after it.
- http_calls_per_1000_picks, merged_callers_per_call, failed_picks (picks that got no
  prediction and fell back to the composite score), failovers.
- client_cpu_percent (this process, one core = 100) and servers_cpu_percent (the three
  servers together, from /proc): where a cell saturates.
Targets (the client's goals): client_added p99 <= 1 ms at 500 picks/s; >= 5 merged callers per call
at 2,000 picks/s; 0 failed picks with one replica down. Timings are only as quiet as the
machine: the output carries the load averages before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from benchmarks.bare_calls import bare_calls
from benchmarks.client_load import pod_sets, requests, run_cell
from benchmarks.common import allowed_cpus, pin, say
from benchmarks.trace_files import all_trace_rows
from devkit.processes import ServerProcess, free_port
from latency_client import ClientConfig, prediction_rows


def train(
    trainer: ServerProcess, predictors: list[ServerProcess], trace: list[dict[str, Any]]
) -> str:
    for i in range(0, len(trace), 2000):
        reply = httpx.post(
            f"{trainer.url}/add_training_data_bulk",
            json={"entries": trace[i : i + 2000]},
            timeout=60,
        )
        assert reply.status_code == 202, reply.text
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        version = httpx.get(f"{trainer.url}/data/status", timeout=10).json()["model_version"]
        served = {
            httpx.get(f"{p.url}/status", timeout=10).json()["model_version"] for p in predictors
        }
        if version and served == {version}:
            return str(version)
        time.sleep(0.5)
    raise TimeoutError("no trained model served by both predictors within 120 s")


def start_servers(workdir: Path) -> tuple[ServerProcess, list[ServerProcess]]:
    env = {
        "LATENCY_DB_URL": f"sqlite:///{workdir / 'store.db'}",
        "LATENCY_MODEL_DIR": str(workdir / "models"),
        "LATENCY_WORKERS": "1",
        "LATENCY_RETRAINING_INTERVAL_SEC": "2",
        "MODEL_SYNC_INTERVAL_SEC": "0.5",
    }
    trainer = ServerProcess("training_server", free_port(), env, workdir / "training.log")
    predictors = [
        ServerProcess("prediction_server", free_port(), env, workdir / f"prediction-{i}.log")
        for i in range(2)
    ]
    trainer.start()
    for server in predictors:
        server.start()
    return trainer, predictors


def pin_all(servers: list[ServerProcess]) -> dict[str, list[int]]:
    cpus = allowed_cpus()
    if len(cpus) < 2:
        return {"servers": cpus, "client": cpus}
    for server in servers:
        assert server.proc is not None
        pin(server.proc.pid, cpus[:1])
    pin(os.getpid(), cpus[1:2])
    return {"servers": cpus[:1], "client": cpus[1:2]}


def measure(
    args: argparse.Namespace,
    trainer: ServerProcess,
    predictors: list[ServerProcess],
    trace: list[dict[str, Any]],
) -> dict[str, Any]:
    rng = random.Random(16)
    workload = (pod_sets(trace, args.pods, rng), requests(trace, rng))
    urls = [p.url for p in predictors]
    bare_rows = prediction_rows(workload[1][0], workload[0][0])
    result: dict[str, Any] = {
        "model_version": train(trainer, predictors, trace),
        "cpus": pin_all([trainer, *predictors]) if args.pin else "not pinned",
        "bare_call_ms": asyncio.run(
            bare_calls(urls[0], bare_rows, args.bare_calls, args.bare_rounds, args.compare_pool)
        ),
        "cells": [],
    }
    if args.bare_only:
        return result
    default = ClientConfig()
    go_rule = ClientConfig(min_expected_merge=0.0)  # the Go client's rule, for comparison
    plan: list[tuple[float, int, ClientConfig, ServerProcess | None]]
    plan = [(rate, 2, default, None) for rate in args.rates]
    plan.append((args.rates[0], 2, go_rule, None))
    plan += [
        (rate, 1, default, predictors[0] if i == 0 else None) for i, rate in enumerate(args.rates)
    ]
    for rate, up, config, kill in plan:
        pids = [s.proc.pid for s in (trainer, *predictors) if s.proc is not None]
        cell = asyncio.run(run_cell(urls, rate, args.seconds, workload, config, kill, pids))
        cell["replicas_up"] = up
        cell["window_rule"] = "go" if config.min_expected_merge == 0 else "default"
        result["cells"].append(cell)
        if not args.json:
            say(
                f"{rate:6.0f}/s offered, {up} up, {cell['window_rule']:7}: "
                f"{cell['picks_per_s']:7.1f} picks/s, added p50/p99 "
                f"{cell['client_added_ms']}, {cell['http_calls_per_1000_picks']} calls/1000, "
                f"{cell['merged_callers_per_call']} callers/call, failed {cell['failed_picks']}"
            )
    return result


def targets(result: dict[str, Any], rates: list[float]) -> dict[str, Any]:
    def cell(rate: float, up: int) -> dict[str, Any]:
        return next(
            c
            for c in result["cells"]
            if c["offered_picks_per_s"] == rate
            and c["replicas_up"] == up
            and c["window_rule"] == "default"
        )

    low, high = rates[0], rates[-1]
    added = cell(low, 2)["client_added_ms"].get("p99", float("inf"))
    merged = cell(high, 2)["merged_callers_per_call"]
    found: dict[str, Any] = {
        f"client_added_p99_ms_at_{low:.0f}": {"value": added, "goal": "<= 1", "met": added <= 1},
        f"merged_callers_per_call_at_{high:.0f}": {
            "value": merged,
            "goal": ">= 5",
            "met": merged >= 5,
        },
    }
    for rate in rates:  # per rate, beside the same rate with both up: a cell over capacity
        down, up = cell(rate, 1)["failed_picks"], cell(rate, 2)["failed_picks"]  # fails both
        found[f"failed_picks_one_replica_down_at_{rate:.0f}"] = {
            "value": down,
            "goal": "0",
            "met": down == 0,
            "with_both_up": up,
        }
    return found


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="500,2000")
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--bare-only", action="store_true", help="only bare_call_ms, no cells")
    parser.add_argument("--bare-calls", type=int, default=2000, help="per transport")
    parser.add_argument("--bare-rounds", type=int, default=10)
    parser.add_argument(
        "--compare-pool",
        type=Path,
        action="append",
        default=[],
        help="a module file with another Http11Connections to add to bare_call_ms (repeatable)",
    )
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="leave CPU placement to the kernel (on a machine others load)",
    )
    args = parser.parse_args()
    args.rates = [float(r) for r in args.rates.split(",")]
    return args


def main() -> None:
    args = parse_args()
    trace = all_trace_rows()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
        trainer, predictors = start_servers(Path(tmp))
        try:
            result = measure(args, trainer, predictors, trace)
        finally:
            for server in (trainer, *predictors):
                server.stop()
    result = {
        "pods_per_pick": args.pods,
        "seconds_per_cell": args.seconds,
        **result,
        "targets": {} if args.bare_only else targets(result, args.rates),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    say(
        orjson.dumps(result).decode()
        if args.json
        else orjson.dumps(result, option=orjson.OPT_INDENT_2).decode()
    )


if __name__ == "__main__":
    main()
