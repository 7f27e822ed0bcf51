"""A load run on the hot path while the model changes under it.

    .venv/bin/python -m benchmarks.bench_load [--rate 200] [--seconds 60] [--idle-seconds 10]

Starts a training server (SQLite, a retrain every 10 s) and one prediction server process
(one worker, model sync every 1 s) on a shared model directory; trains a first bundle on
5,000 trace rows. Then sends 100-row /predict/bulk/strict calls at a fixed rate (open loop:
each call is due at its slot, and its latency counts from the slot), first `--idle-seconds`
with nothing else happening, then `--seconds` while 1,000 trace rows a second flow into the
trainer, so every retrain publishes a new bundle. Checks every answer: HTTP 200, and each
target's predictions equal the claimed bundle's own predictions for that body up to one
factor shared by all rows (the live calibration), so an answer mixing two bundles, or a
half-loaded one, is counted. Prints p50/p99 idle and under load, errors, mixed answers,
versions served and the prediction server's RSS over time.

Talks only to 127.0.0.1; bounded in time; ends the servers it started, by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from benchmarks.common import pin, read_response, request_bytes, rss_mb, say, split_cpus
from benchmarks.trace_files import all_trace_rows, prediction_rows, resample
from devkit.processes import ServerProcess, free_port
from shared.decoding import decode_prediction_rows
from shared.predictor import load_bundle
from shared.targets import TARGETS

CONNECTIONS = 32
PROCESSING_VERSION = re.compile(rb'"model_version":"([^"]+)"}$')


async def fire(
    port: int, request: bytes, rate: float, seconds: float, answers: list[tuple[float, int, bytes]]
) -> None:
    """Open loop: call k is due at start + k / rate; its latency counts from then."""
    slots: asyncio.Queue[float] = asyncio.Queue()
    start = time.perf_counter() + 0.05
    total = int(rate * seconds)

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while True:
                due = await slots.get()
                if due < 0:
                    return
                writer.write(request)
                head, body = await read_response(reader)
                status = int(head.split(b" ", 2)[1])
                answers.append(((time.perf_counter() - due) * 1000.0, status, body))
        finally:
            writer.close()

    workers = [asyncio.create_task(worker()) for _ in range(CONNECTIONS)]
    for k in range(total):
        due = start + k / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        slots.put_nowait(due)
    for _ in workers:
        slots.put_nowait(-1.0)
    await asyncio.wait_for(asyncio.gather(*workers), timeout=60)


def check(
    answers: list[tuple[float, int, bytes]], model_dir: Path, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    columns = decode_prediction_rows(rows)
    expected: dict[str, dict[Any, np.ndarray]] = {}
    errors = mixed = 0
    versions: dict[str, int] = {}
    server_ms = []
    for _, status, body in answers:
        if status != 200:
            errors += 1
            continue
        reply = orjson.loads(body)
        server_ms.append(reply["processing_time_ms"])
        version = reply["model_version"]
        versions[version] = versions.get(version, 0) + 1
        if version not in expected:
            expected[version] = load_bundle(model_dir, version).predict(columns)
        for target in TARGETS:
            got = np.array([p[f"{target.value}_ms"] for p in reply["predictions"]])
            ratio = got / expected[version][target]
            if not np.allclose(ratio, ratio[0], rtol=1e-6):
                mixed += 1
                break
    return {
        "errors": errors,
        "mixed": mixed,
        "versions": versions,
        "server_ms": server_ms,
        "near_swaps": near_swaps([a for a in answers if a[1] == 200]),
    }


def near_swaps(
    answers: list[tuple[float, int, bytes]], before: int = 100, after: int = 20
) -> set[int]:
    """Indexes (among these answers, all 200s) of those around each version change (0.5 s
    before, 0.1 s after at 200 calls/s): the calls a bundle load in the server could slow."""
    versions = [PROCESSING_VERSION.search(body) for _, _, body in answers]
    named = [m.group(1) if m else None for m in versions]
    near: set[int] = set()
    for i in range(1, len(named)):
        if named[i] is not None and named[i - 1] is not None and named[i] != named[i - 1]:
            near.update(range(max(0, i - before), min(len(named), i + after)))
    return near


Answers = list[tuple[float, int, bytes]]  # (latency ms from the call's slot, status, body)


@dataclass
class LoadRun:
    """What the run measured: the answers idle and under load, the prediction server's RSS
    over time (start, after idle, then one per ingested batch), the trainer's retrains."""

    idle: Answers = field(default_factory=list)
    loaded: Answers = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    retrains: list[dict[str, Any]] = field(default_factory=list)


async def feed(
    url: str, trace: list[dict[str, Any]], stop: asyncio.Event, fed: Callable[[], None]
) -> None:
    """1,000 trace rows a second into the trainer until `stop`; `fed()` after each call."""
    async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
        k = 0
        while not stop.is_set():
            batch = resample(trace, 1_000, seed=100 + k)
            await http.post(f"{url}/add_training_data_bulk", json={"entries": batch})
            fed()
            k += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)


async def fire_while_feeding(
    port: int,
    request: bytes,
    args: argparse.Namespace,
    feeder: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
) -> Answers:
    answers: Answers = []
    stop = asyncio.Event()
    feeding = asyncio.create_task(feeder(stop))
    await fire(port, request, args.rate, args.seconds, answers)
    stop.set()
    await feeding
    return answers


def start_servers(workdir: Path) -> tuple[ServerProcess, ServerProcess]:
    """A training server (a retrain every 10 s) and a prediction server (one worker, sync
    every 1 s) on one store and model directory, not started yet."""
    env = {
        "LATENCY_DB_URL": f"sqlite:///{workdir / 'store.db'}",
        "LATENCY_MODEL_DIR": str(workdir / "models"),
        "LATENCY_WORKERS": "1",
        "LATENCY_RETRAINING_INTERVAL_SEC": "10",
        "MODEL_SYNC_INTERVAL_SEC": "1",
        "LATENCY_KEEP_MODEL_VERSIONS": "50",
    }
    trainer = ServerProcess("training_server", free_port(), env, workdir / "training.log")
    predictor = ServerProcess("prediction_server", free_port(), env, workdir / "prediction.log")
    return trainer, predictor


def serve_first_bundle(
    client: httpx.Client,
    trainer: ServerProcess,
    predictor: ServerProcess,
    trace: list[dict[str, Any]],
) -> None:
    client.post(
        f"{trainer.url}/add_training_data_bulk",
        json={"entries": resample(trace, 5_000, seed=1)},
    ).raise_for_status()
    client.post(f"{trainer.url}/retrain").raise_for_status()
    deadline = time.monotonic() + 30
    while client.get(f"{predictor.url}/status").json()["cold_start"]:
        if time.monotonic() > deadline:
            raise TimeoutError("the first bundle was not served")
        time.sleep(0.2)


def load_run(
    args: argparse.Namespace,
    trainer: ServerProcess,
    predictor: ServerProcess,
    trace: list[dict[str, Any]],
    rows: list[dict[str, Any]],
) -> LoadRun:
    """First bundle, warm-up, the idle phase, then the loaded one with rows flowing in."""
    client = httpx.Client(timeout=30, trust_env=False)
    serve_first_bundle(client, trainer, predictor, trace)
    request = request_bytes(predictor.port, orjson.dumps({"requests": rows}))
    asyncio.run(fire(predictor.port, request, args.rate, 3.0, []))  # warm-up, unscored
    run = LoadRun(rss=[rss_mb(predictor.pid)])
    asyncio.run(fire(predictor.port, request, args.rate, args.idle_seconds, run.idle))
    run.rss.append(rss_mb(predictor.pid))

    def feeder(stop: asyncio.Event) -> Coroutine[Any, Any, None]:
        return feed(trainer.url, trace, stop, lambda: run.rss.append(rss_mb(predictor.pid)))

    run.loaded = asyncio.run(fire_while_feeding(predictor.port, request, args, feeder))
    retrains = client.get(f"{trainer.url}/retrains", params={"limit": 1000}).json()
    run.retrains = retrains["retrains"]
    return run


def report(
    args: argparse.Namespace, run: LoadRun, idle_check: dict[str, Any], load_check: dict[str, Any]
) -> None:
    idle_ms = [a[0] for a in run.idle]
    load_ms = [a[0] for a in run.loaded]
    p = np.percentile
    ok = [r for r in run.retrains if r["status"] == "ok"]
    say(
        f"## load run: 100-row calls at {args.rate:g}/s; idle {args.idle_seconds:g} s, then "
        f"{args.seconds:g} s with 1,000 rows/s into the trainer ({len(ok)} retrains)"
    )
    idle_s, load_s = idle_check["server_ms"], load_check["server_ms"]
    say(
        f"idle: {len(idle_ms)} calls, client p50 {p(idle_ms, 50):.2f} / p99 "
        f"{p(idle_ms, 99):.2f} ms, server p50 {p(idle_s, 50):.2f} / p99 {p(idle_s, 99):.2f} ms,"
        f" errors {idle_check['errors']}, mixed answers {idle_check['mixed']}"
    )
    say(
        f"load: {len(load_ms)} calls, client p50 {p(load_ms, 50):.2f} / p99 "
        f"{p(load_ms, 99):.2f} ms ({p(load_ms, 99) / p(idle_ms, 99):.2f}x idle), server p50 "
        f"{p(load_s, 50):.2f} / p99 {p(load_s, 99):.2f} ms ({p(load_s, 99) / p(idle_s, 99):.2f}x"
        f" idle), errors {load_check['errors']}, mixed answers {load_check['mixed']}, "
        f"versions served {len(load_check['versions'])}"
    )
    report_swaps_and_rss(load_check, run.rss)


def report_swaps_and_rss(load_check: dict[str, Any], rss: list[float]) -> None:
    p = np.percentile
    load_s = load_check["server_ms"]
    near = load_check["near_swaps"]
    around = [v for i, v in enumerate(load_s) if i in near]
    away = [v for i, v in enumerate(load_s) if i not in near]
    if around:
        say(
            f"load, server side: {len(around)} calls around bundle swaps p50 "
            f"{p(around, 50):.2f} / p99 {p(around, 99):.2f} ms; {len(away)} others p50 "
            f"{p(away, 50):.2f} / p99 {p(away, 99):.2f} ms"
        )
    say(
        f"prediction server RSS: start {rss[0]:.0f} MB, after idle {rss[1]:.0f} MB, "
        f"max {max(rss):.0f} MB, end {rss[-1]:.0f} MB"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="100-row calls per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    trace = all_trace_rows()
    rows = prediction_rows(resample(trace, 100, seed=11))
    first, others = split_cpus()
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        workdir = Path(tmp)
        trainer, predictor = start_servers(workdir)
        try:
            trainer.start()
            predictor.start()
            pin(predictor.pid, first)
            pin(trainer.pid, others)
            pin(os.getpid(), others)
            run = load_run(args, trainer, predictor, trace, rows)
            model_dir = workdir / "models"
            idle_check = check(run.idle, model_dir, rows)
            load_check = check(run.loaded, model_dir, rows)
        finally:
            for server in (predictor, trainer):
                server.stop()
    report(args, run, idle_check, load_check)


if __name__ == "__main__":
    main()
