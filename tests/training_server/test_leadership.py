"""Retrain leadership: a PostgreSQL advisory lock or an SQLite-side flock, one holder at a
time, freed when the holder releases or dies; and the retrainer and routes built on it."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from devkit.synthetic import synthetic_rows
from shared.artifact import read_current_version
from shared.predictor import LoadedBundle
from shared.schemas import TrainingEntry
from tests.apps import app_of
from tests.conftest import PG_URL, training_settings
from tests.polling import eventually
from tests.slots import RecordingSlot
from tests.training_server.conftest import OpenClient, ingest
from training_server.db import make_engine
from training_server.leadership import (
    AlwaysLeader,
    FileLeadership,
    Leadership,
    PostgresLeadership,
    _lock_key,
    make_leadership,
)
from training_server.metrics import TrainingMetrics
from training_server.retrain.retrainer import Retrainer
from training_server.store import SampleStore

pg = pytest.mark.postgres


@pytest.fixture
def pair(postgres_url: str) -> Iterator[tuple[PostgresLeadership, PostgresLeadership]]:
    a, b = PostgresLeadership(postgres_url), PostgresLeadership(postgres_url)
    yield a, b
    a.release()
    b.release()


def backend_pid(leadership: PostgresLeadership) -> int:
    assert leadership._conn is not None  # the one connection that holds the lock
    return int(leadership._conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def session_alive(pid: int) -> bool:
    admin = create_engine(PG_URL)
    try:
        with admin.connect() as conn:
            return bool(
                conn.execute(
                    text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
                ).scalar_one()
            )
    finally:
        admin.dispose()


# PostgreSQL ------------------------------------------------------------------------------
@pg
def test_postgres_one_holder_until_release(
    pair: tuple[PostgresLeadership, PostgresLeadership],
) -> None:
    a, b = pair
    assert (a.is_leader, b.is_leader) == (False, False)
    assert a.try_acquire() and a.is_leader
    assert a.try_acquire(), "idempotent while held"
    assert not b.try_acquire() and not b.is_leader
    assert not b.try_acquire()
    a.release()
    assert not a.is_leader
    assert b.try_acquire(), "free after release: the next try takes it"
    assert not a.try_acquire()


@pg
def test_postgres_holder_whose_connection_closes_frees_the_lock(
    pair: tuple[PostgresLeadership, PostgresLeadership],
) -> None:
    a, b = pair
    assert a.try_acquire()
    pid = backend_pid(a)
    assert a._conn is not None
    dbapi_connection = a._conn.connection.dbapi_connection
    assert dbapi_connection is not None  # a live connection: the lock was just taken on it
    # As when the holder process dies: its socket closes, with no unlock and no goodbye.
    dbapi_connection.close()
    # The server ends the session asynchronously.
    eventually(lambda: not session_alive(pid), 10, f"the end of backend {pid}'s session")
    assert b.try_acquire()
    # The old holder notices on its next try, reconnects, and finds itself a follower.
    assert not a.try_acquire()
    assert not a.is_leader and b.is_leader


@pg
def test_postgres_holder_whose_session_is_terminated_loses_it(
    pair: tuple[PostgresLeadership, PostgresLeadership],
) -> None:
    a, b = pair
    assert a.try_acquire()
    admin = create_engine(PG_URL)
    try:
        with admin.connect() as conn:  # waits (up to 5 s) until the backend has exited
            assert conn.execute(
                text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": backend_pid(a)}
            ).scalar_one()
    finally:
        admin.dispose()
    assert b.try_acquire()
    assert not a.try_acquire() and not a.is_leader
    b.release()
    assert a.try_acquire(), "reconnected, it takes the lock back once free"


@pg
def test_postgres_schemas_are_separate_deployments(postgres_url: str) -> None:
    other = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{other}"'))
    a = PostgresLeadership(postgres_url)
    c = PostgresLeadership(f"{PG_URL}?options=-csearch_path%3D{other}")
    try:
        assert a.try_acquire() and c.try_acquire()
    finally:
        a.release()
        c.release()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{other}" CASCADE'))
        admin.dispose()
    assert _lock_key("public") == _lock_key("public") != _lock_key(other)


@pg
def test_postgres_unreachable_database_means_follower() -> None:
    nobody = PostgresLeadership("postgresql+psycopg://postgres@127.0.0.1:1/test")
    try:
        assert not nobody.try_acquire() and not nobody.is_leader
    finally:
        nobody.release()


# SQLite ----------------------------------------------------------------------------------
def test_flock_one_holder_until_release(tmp_path: Path) -> None:
    a, b = (
        FileLeadership(tmp_path / "store.db.leader"),
        FileLeadership(tmp_path / "store.db.leader"),
    )
    try:
        assert a.try_acquire() and a.try_acquire() and a.is_leader
        assert not b.try_acquire() and not b.is_leader
        a.release()
        assert b.try_acquire()
        assert not a.try_acquire()
    finally:
        a.release()
        b.release()


def test_flock_of_a_killed_process_is_freed(tmp_path: Path) -> None:
    path = tmp_path / "store.db.leader"
    script = (
        "import time\n"
        "from pathlib import Path\n"
        "from training_server.leadership import FileLeadership\n"
        f"leader = FileLeadership(Path({str(path)!r}))\n"
        "assert leader.try_acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    b = FileLeadership(path)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert not b.try_acquire()
        holder.kill()  # SIGKILL: the kernel closes its descriptors, and drops the flock
        holder.wait(10)
        assert b.try_acquire()
    finally:
        b.release()
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        assert holder.stdout is not None
        holder.stdout.close()


def test_make_leadership_by_dialect(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    memory = make_engine("sqlite://")
    try:
        file_leader = make_leadership(engine)
        assert isinstance(file_leader, FileLeadership)
        assert file_leader.path == tmp_path / "store.db.leader"
        assert isinstance(make_leadership(memory), AlwaysLeader)
        assert make_leadership(memory).try_acquire()
    finally:
        engine.dispose()
        memory.dispose()
    pg_engine = make_engine(PG_URL)  # no connection is made to build it
    try:
        assert isinstance(make_leadership(pg_engine), PostgresLeadership)
    finally:
        pg_engine.dispose()


# the retrainer on top --------------------------------------------------------------------
def replica(
    tmp_path: Path, store: SampleStore, url: str, model_dir: Path, name: str
) -> tuple[Retrainer, list[LoadedBundle], TrainingMetrics]:
    metrics = TrainingMetrics()
    leadership: Leadership = make_leadership(store.engine)
    settings = training_settings(tmp_path, url, model_dir=model_dir)
    slot = RecordingSlot(settings)
    retrainer = Retrainer(settings, store, metrics, slot, leadership)
    retrainer.trainer_id = name  # both replicas live in this one process
    retrainer.resume()
    return retrainer, slot.history, metrics


def add(store: SampleStore, n: int, seed: int) -> None:
    store.add_samples([TrainingEntry.model_validate(r) for r in synthetic_rows(n, seed=seed)])


def test_only_the_leader_retrains_and_the_follower_takes_over(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    a, a_published, a_metrics = replica(tmp_path, store, migrated_url, model_dir, "a")
    b, b_published, b_metrics = replica(tmp_path, store, migrated_url, model_dir, "b")
    try:
        add(store, 400, seed=1)
        assert a.run_once() == "ok" and a.is_leader
        assert b.run_once() == "follower" and not b.is_leader
        # The follower lists what the leader published, and loads it only when asked.
        assert b_published == []
        assert b.newest_version() == a_published[-1].version
        b.refresh()
        assert [x.version for x in b_published] == [x.version for x in a_published]
        assert b.state.last_success is not None and b.state.last_success.trainer == "a"
        assert b_metrics.registry.get_sample_value("latency_trainer_is_leader") == 0
        assert a_metrics.registry.get_sample_value("latency_trainer_is_leader") == 1
        assert (
            b_metrics.registry.get_sample_value("latency_retrains_total", {"status": "follower"})
            is None
        )
        add(store, 20, seed=2)
        assert b.run_once() == "follower"
        assert a.run_once() == "ok"
        assert b.run_once() == "follower"
        assert b_published[-1].version != read_current_version(model_dir)

        a.leadership.release()  # the follower takes over on its next try
        assert not a.is_leader
        assert b.run_once() == "skipped", "the published model already saw every sample"
        assert b.is_leader
        # On taking over, it loaded the newest bundle first and resumed from it.
        assert b_published[-1].version == a_published[-1].version
        assert b_metrics.registry.get_sample_value("latency_trainer_is_leader") == 1
        add(store, 20, seed=3)
        assert b.run_once() == "ok"
        assert a.run_once() == "follower"
        rows = store.list_retrains()
        assert [r.trainer for r in rows] == ["b", "a", "a"]
        assert rows[0].version == read_current_version(model_dir) == b_published[-1].version
    finally:
        a.leadership.release()
        b.leadership.release()


def test_a_new_leader_retrains_samples_the_old_one_never_saw(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    a, _, _ = replica(tmp_path, store, migrated_url, model_dir, "a")
    b, _, _ = replica(tmp_path, store, migrated_url, model_dir, "b")
    try:
        add(store, 400, seed=4)
        assert a.run_once() == "ok"
        assert b.run_once() == "follower"
        add(store, 20, seed=5)  # accepted (by either replica) after a's last retrain
        a.leadership.release()
        assert b.run_once() == "ok"
        assert store.list_retrains()[0].max_sample_id == store.max_sample_id()
    finally:
        a.leadership.release()
        b.leadership.release()


# routes --------------------------------------------------------------------------------
def test_status_metrics_and_manual_retrain_on_leader_and_follower(
    migrated_url: str,
    open_client: OpenClient,
    tmp_path: Path,  # apps close before the schema
) -> None:
    shared = tmp_path / "shared-models"
    a = open_client(db_url=migrated_url, name="a", model_dir=shared)
    b = open_client(db_url=migrated_url, name="b", model_dir=shared)
    ingest(b, synthetic_rows(400, seed=6))  # a follower ingests like any replica
    assert a.post("/retrain").json() == {"outcome": "ok", "last_error": None}
    assert b.post("/retrain").json() == {"outcome": "follower", "last_error": None}
    # b lists a's bundle without loading it; a route asking for the model loads it.
    b_slot = app_of(b).state.pools.default.slot
    assert b_slot.published is None
    assert b.get("/pools").json()["pools"][0]["model_version"] == read_current_version(shared)
    assert b_slot.published is None

    status_a, status_b = a.get("/data/status").json(), b.get("/data/status").json()
    assert b_slot.published is not None
    assert status_a["trainer"]["is_leader"] is True
    assert status_b["trainer"]["is_leader"] is False
    assert status_a["trainer"]["id"] == status_b["trainer"]["id"]  # one process: same host:pid
    # the pool's owner: a (PostgreSQL: its lease, which both see; a second service in one
    # process leases as "host:pid#1"); SQLite's one lock: only the holder knows it holds it
    assert status_a["trainer"]["owner"].startswith(status_a["trainer"]["id"])
    pg = migrated_url.startswith("postgresql")
    assert status_b["trainer"]["owner"] == (status_a["trainer"]["owner"] if pg else None)
    assert status_b["model_version"] == status_a["model_version"] is not None
    assert status_b["last_retrain_detail"]["version"] == status_a["model_version"]
    assert a.get("/retrains").json()["retrains"][0]["trainer"] == status_a["trainer"]["id"]
    for client, value in ((a, 1.0), (b, 0.0)):
        lines = client.get("/metrics").text.splitlines()
        assert f"latency_trainer_is_leader {value}" in lines
    assert b.get("/healthz").json() == {"status": "ok", "consecutive_retrain_failures": 0}
