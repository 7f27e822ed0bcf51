"""Soak: ingestion, prediction load, retrains and a prediction-server restart at once.

    .venv/bin/python -m benchmarks.soak [--seconds 60] [--rate 100] [--batch 1000]

Starts a training server (SQLite, a retrain every 10 s, retention that keeps every row, a
20k-row training window) and a prediction server on a shared model directory, seeds 25k rows
and a first bundle, then for `--seconds`: one `--batch`-row bulk
ingestion a second into the trainer, `--rate` 100-row /predict/bulk/strict calls a second
into the prediction server, and halfway a graceful restart of the prediction server on the
same port. Then checks: every row the trainer answered 202 for is in the store (none lost),
no 5xx from either server, calls refused while the prediction server was down counted apart,
and RSS growth of the trainer and of the restarted prediction server.

Talks only to 127.0.0.1; bounded in time and calls; ends the servers it started, by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from benchmarks.common import pin, rss_mb, say, split_cpus
from benchmarks.trace_files import all_trace_rows, prediction_rows, resample
from devkit.processes import ServerProcess, free_port

ACCEPTED = re.compile(r"Accepted (\d+) training samples")
SEED_ROWS = 25_000


def accepted_count(message: str) -> int:
    """The count in the trainer's 202 message ("Accepted N training samples ...")."""
    found = ACCEPTED.search(message)
    assert found is not None, message
    return int(found[1])


async def ingest(
    url: str, trace: list[dict[str, Any]], batch: int, seconds: float, tally: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as http:
        start = time.perf_counter()
        for k in range(int(seconds)):
            await asyncio.sleep(max(0.0, start + k - time.perf_counter()))
            rows = resample(trace, batch, seed=1_000 + k)
            tally["sent"] += len(rows)
            try:
                reply = await http.post("/add_training_data_bulk", json={"entries": rows})
            except httpx.HTTPError:
                tally["no_answer"] += len(rows)  # may or may not be stored; not counted as lost
                continue
            tally["status"][reply.status_code] = tally["status"].get(reply.status_code, 0) + 1
            if reply.status_code == 202:
                tally["accepted"] += accepted_count(reply.json()["message"])


async def predict(
    url: str, body: bytes, rate: float, seconds: float, tally: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(
        base_url=url, timeout=10, trust_env=False, limits=httpx.Limits(max_connections=16)
    ) as http:
        start = time.perf_counter()
        pending: set[asyncio.Task[None]] = set()

        async def one() -> None:
            t0 = time.perf_counter()
            try:
                reply = await http.post(
                    "/predict/bulk/strict",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
            except httpx.HTTPError:
                tally["unavailable"] += 1
                return
            tally["status"][reply.status_code] = tally["status"].get(reply.status_code, 0) + 1
            if reply.status_code == 200:
                tally["ms"].append((time.perf_counter() - t0) * 1000.0)

        for k in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + k / rate - time.perf_counter()))
            task = asyncio.create_task(one())
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.wait_for(asyncio.gather(*pending), timeout=30)


def soak_env(workdir: Path) -> dict[str, str]:
    return {
        "LATENCY_DB_URL": f"sqlite:///{workdir / 'store.db'}",
        "LATENCY_MODEL_DIR": str(workdir / "models"),
        "LATENCY_WORKERS": "1",
        "LATENCY_RETRAINING_INTERVAL_SEC": "10",
        "MODEL_SYNC_INTERVAL_SEC": "1",
        # Retention large enough to keep every row, so the store's count proves
        # none was lost (by default old rows are evicted per bucket on purpose).
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": "10000000",
        "LATENCY_MAX_TEST_DATA_SIZE": "10000000",
        # A full-size window from the first retrain on: RSS growth then shows leaks,
        # not the window filling up.
        "LATENCY_MAX_TRAINING_WINDOW": str(SEED_ROWS - 5_000),
    }


def seed_trainer(trainer: ServerProcess, trace: list[dict[str, Any]]) -> int:
    """SEED_ROWS rows and a first bundle; the rows the trainer accepted."""
    seeded = 0
    for k in range(SEED_ROWS // 1_000):
        seed = httpx.post(
            f"{trainer.url}/add_training_data_bulk",
            timeout=60,
            json={"entries": resample(trace, 1_000, seed=1 + k)},
        )
        seeded += accepted_count(seed.raise_for_status().json()["message"])
    httpx.post(f"{trainer.url}/retrain", timeout=60).raise_for_status()
    return seeded


@dataclass
class Soak:
    """One soak on running servers: the load, the restart halfway, and what was counted."""

    args: argparse.Namespace
    env: dict[str, str]
    workdir: Path
    trainer: ServerProcess
    predictors: list[ServerProcess]  # the first, then the restarted one
    predictor_cpus: list[int]
    seeded: int = 0
    trainer_rss: list[float] = field(default_factory=list)
    ingest_tally: dict[str, Any] = field(
        default_factory=lambda: {"sent": 0, "accepted": 0, "no_answer": 0, "status": {}}
    )
    predict_tally: dict[str, Any] = field(
        default_factory=lambda: {"unavailable": 0, "status": {}, "ms": []}
    )
    restart: dict[str, float] = field(default_factory=dict)

    async def restart_predictor(self) -> None:
        await asyncio.sleep(self.args.seconds / 2)
        t0 = time.perf_counter()
        first = self.predictors[0]
        await asyncio.to_thread(first.stop)
        fresh = ServerProcess(
            "prediction_server", first.port, self.env, self.workdir / "prediction2.log"
        )
        await asyncio.to_thread(fresh.start)
        pin(fresh.pid, self.predictor_cpus)
        self.predictors.append(fresh)
        self.restart["seconds"] = time.perf_counter() - t0
        self.restart["rss_start"] = rss_mb(fresh.pid)

    async def watch_rss(self) -> None:
        for _ in range(int(self.args.seconds)):
            await asyncio.sleep(1)
            self.trainer_rss.append(rss_mb(self.trainer.pid))

    async def run(self, trace: list[dict[str, Any]], body: bytes) -> None:
        args = self.args
        await asyncio.gather(
            ingest(self.trainer.url, trace, args.batch, args.seconds, self.ingest_tally),
            predict(self.predictors[0].url, body, args.rate, args.seconds, self.predict_tally),
            self.restart_predictor(),
            self.watch_rss(),
        )


def stored_and_retrains(trainer: ServerProcess) -> tuple[int, list[dict[str, Any]]]:
    status = httpx.get(f"{trainer.url}/data/status", timeout=30).json()
    stored = status["training_data"]["total_samples"] + status["test_data"]["total_samples"]
    retrains = httpx.get(f"{trainer.url}/retrains", params={"limit": 1000}, timeout=30).json()[
        "retrains"
    ]
    return int(stored), list(retrains)


def report(soak: Soak, stored: int, retrains: list[dict[str, Any]], rss_end: float) -> None:
    args, ingest_tally, predict_tally = soak.args, soak.ingest_tally, soak.predict_tally
    accepted = soak.seeded + ingest_tally["accepted"]
    lost = max(0, accepted - stored)
    ms = predict_tally["ms"]
    statuses = {**ingest_tally["status"], **predict_tally["status"]}
    server_errors = sum(n for code, n in statuses.items() if code >= 500)
    ok = [r for r in retrains if r["status"] == "ok"]
    say(
        f"## soak: {args.seconds:g} s, {args.batch} rows/s ingested, {args.rate:g} 100-row "
        f"calls/s, prediction server restarted at {args.seconds / 2:g} s"
    )
    say(
        f"ingestion: {ingest_tally['sent']} rows sent, {ingest_tally['accepted']} answered 202"
        f" (+{soak.seeded} seeded), {ingest_tally['no_answer']} without an answer, statuses "
        f"{ingest_tally['status']}; stored {stored}: lost {lost}"
    )
    say(
        f"predictions: statuses {predict_tally['status']}, refused while restarting "
        f"{predict_tally['unavailable']}, p50 {np.percentile(ms, 50):.2f} / p99 "
        f"{np.percentile(ms, 99):.2f} ms (client); restart took "
        f"{soak.restart.get('seconds', 0):.1f} s"
    )
    say(f"5xx from either server: {server_errors}; retrains ok {len(ok)} of {len(retrains)}")
    report_rss(soak, rss_end)


def report_rss(soak: Soak, rss_end: float) -> None:
    trainer_rss, restart = soak.trainer_rss, soak.restart
    growth = 100 * (max(trainer_rss) / trainer_rss[0] - 1)
    say(
        f"trainer RSS: after seeding {trainer_rss[0]:.0f} MB, max {max(trainer_rss):.0f} MB, "
        f"end {trainer_rss[-1]:.0f} MB ({growth:+.1f} % at most)"
    )
    if "rss_start" in restart:
        grown = 100 * (rss_end / restart["rss_start"] - 1)
        say(
            f"restarted prediction server RSS: {restart['rss_start']:.0f} -> "
            f"{rss_end:.0f} MB ({grown:+.1f} %)"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=100.0, help="100-row calls per second")
    parser.add_argument("--batch", type=int, default=1_000, help="rows per ingestion, 1/s")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    trace = all_trace_rows()
    body = orjson.dumps({"requests": prediction_rows(resample(trace, 100, seed=5))})
    first_cpu, other_cpus = split_cpus()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        workdir = Path(tmp)
        env = soak_env(workdir)
        trainer = ServerProcess("training_server", free_port(), env, workdir / "training.log")
        first = ServerProcess("prediction_server", free_port(), env, workdir / "prediction.log")
        soak = Soak(args, env, workdir, trainer, [first], first_cpu)
        try:
            trainer.start()
            first.start()
            pin(trainer.pid, other_cpus)
            pin(first.pid, first_cpu)
            soak.seeded = seed_trainer(trainer, trace)
            soak.trainer_rss.append(rss_mb(trainer.pid))
            asyncio.run(soak.run(trace, body))
            time.sleep(1)
            stored, retrains = stored_and_retrains(trainer)
            rss_end = rss_mb(soak.predictors[-1].pid)
        finally:
            for server in (*soak.predictors, trainer):
                server.stop()
    report(soak, stored, retrains, rss_end)


if __name__ == "__main__":
    main()
