"""SIGKILL of the training server while clients stream bulk batches: every row answered 202
is in the store after a restart, on SQLite and on PostgreSQL.

Each row carries a unique marker, so the check is by identity, not only by count: a row that
got a 202 must be stored (exactly once); a row whose request got no answer may or may not
be; nothing else may appear.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import func, select

from tests.faults.helpers import (
    MARKER,
    data_status,
    ingest,
    marked_rows,
    new_trainer,
    trainer_env,
)
from tests.polling import eventually
from training_server.db import make_engine
from training_server.tables import samples

BATCH = 200
STREAMS = 2  # concurrent clients, so the kill lands while commits are in progress
MAX_BATCHES = 400  # per stream: bounds the stream even if the kill never came
KILL_AFTER_ACKED = 8  # batches acknowledged (all streams) before the SIGKILL


class Stream(threading.Thread):
    """One client posting 200-row batches, markers stream_id * 10^7 + running index."""

    def __init__(self, url: str, stream_id: int, stop: threading.Event):
        super().__init__(name=f"stream-{stream_id}", daemon=True)
        self.url, self.stream_id, self.stop = url, stream_id, stop
        self.template = marked_rows(0, BATCH, seed=100 + stream_id)
        self.acked: set[int] = set()
        self.unanswered: set[int] = set()  # sent, no answer: may or may not be stored
        self.other: list[int] = []  # answers other than a full 202 (none expected)

    def run(self) -> None:
        with httpx.Client(timeout=10) as client:
            for batch in range(MAX_BATCHES):
                if self.stop.is_set():
                    return
                first = self.stream_id * 10_000_000 + batch * BATCH
                rows = [{**row, MARKER: first + i} for i, row in enumerate(self.template)]
                markers = {row[MARKER] for row in rows}
                try:
                    reply = client.post(
                        f"{self.url}/add_training_data_bulk", json={"entries": rows}
                    )
                except httpx.HTTPError:
                    self.unanswered |= markers  # the server died under this call
                    return
                if (
                    reply.status_code == 202
                    and reply.json()["message"] == f"Accepted {BATCH} training samples."
                ):
                    self.acked |= markers
                else:
                    self.other.append(reply.status_code)


def stored_markers(db_url: str) -> tuple[list[int], int]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            markers = list(conn.execute(select(samples.c[MARKER])).scalars())
            total = conn.execute(select(func.count()).select_from(samples)).scalar_one()
    finally:
        engine.dispose()
    return markers, total


def test_every_row_answered_202_survives_a_sigkill(db_url: str, tmp_path: Path) -> None:
    # No retrain during the test: only ingestion is under test (and retention stays off).
    env = trainer_env(
        tmp_path, db_url, LATENCY_RETRAINING_INTERVAL_SEC="3600", LATENCY_EARLY_RETRAINS="false"
    )
    trainer = new_trainer(tmp_path, env)
    stop = threading.Event()
    streams = [Stream(trainer.url, k + 1, stop) for k in range(STREAMS)]
    try:
        trainer.start()
        pid = trainer.proc.pid if trainer.proc else None
        for stream in streams:
            stream.start()
        eventually(
            lambda: sum(len(s.acked) for s in streams) >= KILL_AFTER_ACKED * BATCH,
            30,
            "the streams land batches before the kill",
        )
        killed_at = time.monotonic()
        trainer.kill()
        stop.set()
        for stream in streams:
            stream.join(15)
        assert not any(s.is_alive() for s in streams)
        acked = set().union(*(s.acked for s in streams))
        unanswered = set().union(*(s.unanswered for s in streams))
        assert [s.other for s in streams] == [[]] * STREAMS  # nothing but 202 before the kill

        trainer.start()  # same store, same port, a new process
        restarted_in = time.monotonic() - killed_at
        assert trainer.proc is not None and trainer.proc.pid != pid
        markers, total = stored_markers(db_url)
        stored = set(markers)

        assert len(markers) == len(stored) == total  # no row stored twice
        missing = acked - stored
        assert not missing, f"{len(missing)} rows answered 202 are not in the store"
        assert stored <= acked | unanswered, "rows nobody sent are in the store"
        # At most the calls in flight at the kill (one per stream) were left unanswered.
        assert len(unanswered) <= STREAMS * BATCH
        status = data_status(trainer.url)
        assert (
            status["training_data"]["total_samples"] + status["test_data"]["total_samples"]
        ) == total
        # The restarted server takes new rows at once.
        assert ingest(trainer.url, marked_rows(90_000_000, BATCH, seed=7)).status_code == 202
        print(
            f"acked={len(acked)} unanswered={len(unanswered)} stored={len(stored)} "
            f"(of the unanswered: {len(stored & unanswered)}) restart={restarted_in:.2f}s"
        )
    finally:
        stop.set()
        trainer.stop()
