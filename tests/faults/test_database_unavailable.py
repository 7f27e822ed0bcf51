"""The store goes away under a running training server, then comes back.

PostgreSQL: the trainer reaches the database only through a TCP forwarder on 127.0.0.1
(tests.faults.tcp_cut) that the test cuts: listener closed and every connection dropped,
so new connections are refused, as when the database host or its Service goes away. The
shared PostgreSQL server itself is never touched.

SQLite: the test holds the write lock with its own `BEGIN EXCLUSIVE` (sqlite3). Root cannot
bypass a lock the way it bypasses file modes, and the file stays a valid database, so the
fault is exactly "writers cannot write". In WAL mode readers are not blocked by it, so
SELECTs (and /readyz, which is "the store answers") keep working; writers wait the busy
timeout and fail with "database is locked". The busy timeout is the URL's `timeout`
(1 s here; 5 s when the URL names none).

Both: ingestion answers 503 while the store is gone, never 202; it answers 202 again once it
is back, and retrains resume by themselves, in the same process.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy.exc import OperationalError

from devkit.processes import ServerProcess
from shared.artifact import read_current_version
from shared.schemas import TrainingEntry
from tests.conftest import PG_URL
from tests.faults.helpers import (
    data_status,
    first_bundle,
    ingest,
    marked_rows,
    metric,
    new_trainer,
    present_metric,
    published_version,
    trainer_env,
)
from tests.faults.tcp_cut import TcpCut
from tests.polling import eventually
from training_server.db import SQLITE_BUSY_TIMEOUT_SEC, make_engine, sqlite_busy_timeout
from training_server.migrate import upgrade
from training_server.store import SampleStore

INTERVAL = 1.0  # retrain interval of the PostgreSQL trainer (s)
CUT_TICKS = 3  # retrain ticks the PostgreSQL trainer goes through with the database cut
SQLITE_INTERVAL = 1.5  # SQLite: room to ingest and take the lock between two retrains


def server_address(url: str) -> tuple[str, int]:
    """Host and port of the PostgreSQL server the suite uses (5432, or its own server's)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None, url
    return parts.hostname, parts.port


def forwarded(url: str, port: int) -> str:
    host, real = server_address(url)
    return url.replace(f"@{host}:{real}/", f"@127.0.0.1:{port}/", 1)


def assert_retrains_again(trainer: ServerProcess, model_dir: Path, after: str) -> str:
    """Fresh rows are taken (202) and a retrain publishes a new version by itself."""
    reply = ingest(trainer.url, marked_rows(50_000_000, 200, seed=11))
    assert reply.status_code == 202, reply.text
    version: str = eventually(
        lambda: (v := data_status(trainer.url)["model_version"]) not in (None, after) and v,
        30,
        "a retrain publishes after the store came back",
    )
    status = data_status(trainer.url)
    assert status["retrain_failures"]["consecutive"] == 0
    assert status["retrain_failures"]["last_error"] is None
    assert status["last_retrain_detail"]["status"] == "ok"
    assert metric(trainer.url, "latency_retrain_consecutive_failures") == 0.0
    assert read_current_version(model_dir) == version
    assert published_version(model_dir) == version
    assert httpx.get(f"{trainer.url}/readyz").status_code == 200
    assert httpx.get(f"{trainer.url}/healthz").json()["status"] == "ok"
    return version


def test_sqlite_url_timeout_bounds_the_wait_for_a_locked_database(tmp_path: Path) -> None:
    """In process: the URL's `timeout` is the busy timeout (it was overridden by a fixed
    30 s, so a locked database held every ingestion call for 30 s before its 503)."""
    assert sqlite_busy_timeout("sqlite:///x.db") == SQLITE_BUSY_TIMEOUT_SEC == 5.0
    assert sqlite_busy_timeout("sqlite:///x.db?timeout=2.5") == 2.5
    with pytest.raises(ValueError):
        sqlite_busy_timeout("sqlite:///x.db?timeout=-1")
    url = f"sqlite:///{tmp_path / 'store.db'}?timeout=0.3"
    upgrade(url)
    engine = make_engine(url)
    lock = sqlite3.connect(tmp_path / "store.db", isolation_level=None, timeout=10)
    try:
        store = SampleStore(engine, test_ratio=0.1)
        entries = [TrainingEntry.model_validate(r) for r in marked_rows(0, 10, seed=5)]
        lock.execute("BEGIN EXCLUSIVE")
        t0 = time.monotonic()
        with pytest.raises(OperationalError, match="database is locked"):
            store.add_samples(entries)
        assert 0.25 <= time.monotonic() - t0 < 3.0
        assert store.counts().as_json()["training_data"]["total_samples"] == 0  # readers still read
        lock.execute("ROLLBACK")
        assert store.add_samples(entries) == 10
    finally:
        lock.close()
        engine.dispose()


def test_sqlite_locked_answers_503_and_recovers_without_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    model_dir = tmp_path / "models"
    env = trainer_env(
        tmp_path, f"sqlite:///{db}?timeout=1", LATENCY_RETRAINING_INTERVAL_SEC=str(SQLITE_INTERVAL)
    )
    trainer = new_trainer(tmp_path, env)
    lock: sqlite3.Connection | None = None
    try:
        trainer.start()
        pid = trainer.proc.pid if trainer.proc else None
        v1 = first_bundle(trainer)
        # Rows the next retrain will fit, then the lock: that retrain can read them but not
        # record itself (it is due within the interval; the first retrain just finished).
        assert ingest(trainer.url, marked_rows(1_000_000, 200, seed=2)).status_code == 202
        lock = sqlite3.connect(db, isolation_level=None, timeout=10)
        lock.execute("BEGIN EXCLUSIVE")
        locked_at = time.monotonic()

        codes, slowest = [], 0.0
        for k in range(3):
            t0 = time.monotonic()
            reply = ingest(trainer.url, marked_rows(2_000_000 + k * 200, 200, seed=3))
            slowest = max(slowest, time.monotonic() - t0)
            codes.append(reply.status_code)
            assert "sample store unavailable" in reply.json()["detail"]
        assert codes == [503, 503, 503]
        assert slowest < 5.0  # the busy timeout (1 s), not a hang
        # Readers are not blocked in WAL mode: the store still answers, so still ready.
        assert httpx.get(f"{trainer.url}/readyz").status_code == 200

        failures = eventually(
            lambda: (f := data_status(trainer.url)["retrain_failures"])["consecutive"] >= 1 and f,
            15,
            "the retrain that cannot record itself is counted as failed",
        )
        assert "database is locked" in failures["last_error"]
        assert present_metric(trainer.url, "latency_retrain_consecutive_failures") >= 1.0
        assert present_metric(trainer.url, 'latency_retrains_total{status="failed"}') >= 1.0
        # That retrain did publish (CURRENT moved before its record failed): the trainer
        # serves what CURRENT names, and does not republish the same rows at every tick.
        published = read_current_version(model_dir)
        assert published is not None
        failed_at = time.monotonic()

        def serves_current_without_retrying() -> bool:
            status = data_status(trainer.url)
            assert status["model_version"] == read_current_version(model_dir) == published
            assert status["retrain_failures"]["total"] == 1  # nothing new to fit: no more tries
            return time.monotonic() - failed_at >= 1.5 * SQLITE_INTERVAL

        # Checked at every poll for 1.5 intervals (a tick or more): the ticks that find
        # nothing new to fit leave no trace to poll for (not logged, not counted).
        eventually(
            serves_current_without_retrying,
            1.5 * SQLITE_INTERVAL + 30,
            f"{1.5 * SQLITE_INTERVAL:g} s (a retrain tick or more) after the failed record",
            interval=0.25,
        )
        status = data_status(trainer.url)
        assert status["model_version"] == published
        assert published_version(model_dir) == published
        locked_for = time.monotonic() - locked_at
        assert status["retrain_failures"]["total"] <= locked_for / SQLITE_INTERVAL + 1
        assert status["retrain_failures"]["total"] == 1  # nothing new to fit: no more tries
        assert httpx.get(f"{trainer.url}/healthz").json()["status"] == "ok"  # 1 < 3

        lock.execute("ROLLBACK")
        lock.close()
        lock = None
        unlocked_at = time.monotonic()
        v3 = assert_retrains_again(trainer, model_dir, after=published)
        print(
            f"sqlite locked {locked_for:.1f}s: ingest {codes} (slowest {slowest:.2f}s), "
            f"failures {status['retrain_failures']['total']}, served {published}; "
            f"unlocked: {v3} after {time.monotonic() - unlocked_at:.2f}s"
        )
        assert trainer.proc is not None and trainer.proc.pid == pid  # no restart
        assert v1 != published
    finally:
        if lock is not None:
            lock.close()
        trainer.stop()


@pytest.mark.postgres
def test_postgres_cut_answers_503_and_recovers_without_a_restart(
    postgres_url: str, tmp_path: Path
) -> None:
    assert postgres_url.startswith(PG_URL)
    model_dir = tmp_path / "models"
    tcp = TcpCut(server_address(postgres_url)).start()
    trainer = new_trainer(tmp_path, trainer_env(tmp_path, forwarded(postgres_url, tcp.port)))
    try:
        trainer.start()
        pid = trainer.proc.pid if trainer.proc else None
        v1 = first_bundle(trainer)
        assert data_status(trainer.url)["trainer"]["is_leader"] is True

        logged = trainer.log_path.stat().st_size
        assert tcp.cut() >= 1  # at least the leadership session and a pooled connection
        cut_at = time.monotonic()
        codes: list[int] = []

        def refused_through_retrain_ticks() -> bool:
            t0 = time.monotonic()
            reply = ingest(trainer.url, marked_rows(3_000_000 + len(codes) * 200, 200, seed=4))
            assert time.monotonic() - t0 < 5.0  # refused at once, not a hang
            codes.append(reply.status_code)
            assert httpx.get(f"{trainer.url}/readyz").status_code == 503
            # Each retrain tick asks for the pool's lease, and logs that it cannot check it.
            tail = trainer.log_path.read_bytes()[logged:]
            return tail.count(b"lease not checked: cannot reach the database") >= CUT_TICKS

        eventually(
            refused_through_retrain_ticks,
            30,
            f"{CUT_TICKS} retrain ticks with the database cut",
            interval=0.2,
        )
        assert set(codes) == {503}, codes
        # By design (training_server.leadership) an unreachable database makes this replica
        # a follower: no retrain is attempted, so none fails and it is not "degraded".
        health = httpx.get(f"{trainer.url}/healthz").json()
        assert health == {"status": "ok", "consecutive_retrain_failures": 0}
        assert read_current_version(model_dir) == v1
        assert published_version(model_dir) == v1

        tcp.restore()
        restored_at = time.monotonic()
        v2 = assert_retrains_again(trainer, model_dir, after=v1)
        print(
            f"postgres cut {restored_at - cut_at:.1f}s: ingest {len(codes)} x {set(codes)}; "
            f"restored: {v2} after {time.monotonic() - restored_at:.2f}s"
        )
        assert data_status(trainer.url)["trainer"]["is_leader"] is True
        assert trainer.proc is not None and trainer.proc.pid == pid  # no restart
    finally:
        trainer.stop()
        tcp.close()


@pytest.mark.postgres
def test_status_and_metrics_answer_while_postgres_is_gone(
    postgres_url: str, tmp_path: Path
) -> None:
    tcp = TcpCut(server_address(postgres_url)).start()
    trainer = new_trainer(tmp_path, trainer_env(tmp_path, forwarded(postgres_url, tcp.port)))
    try:
        trainer.start()
        tcp.cut()
        status = httpx.get(f"{trainer.url}/data/status", timeout=10)
        metrics = httpx.get(f"{trainer.url}/metrics", timeout=10)
        # /metrics must render without the store (scrapes matter most during an outage);
        # /data/status may say the store is unavailable, but not crash.
        assert metrics.status_code == 200
        assert "latency_retrain_consecutive_failures" in metrics.text
        assert status.status_code == 503
        assert "sample store unavailable" in status.json()["detail"]
    finally:
        trainer.stop()
        tcp.close()
