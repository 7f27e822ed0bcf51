"""`latency-predictor migrate`: operators who turn start-up migrations off run them explicitly."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from training_server.migrate import alembic_config


def test_migrate_command_brings_the_store_to_head(db_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "latency_cli", "migrate"],
        env={**os.environ, "LATENCY_DB_URL": db_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "newest revision" in done.stdout
    engine = create_engine(db_url)
    try:
        tables = set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            head = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
    finally:
        engine.dispose()
    assert {"samples", "retrains", "alembic_version"} <= tables
    assert head == ScriptDirectory.from_config(alembic_config(db_url)).get_current_head()


# Each process imports everything, then waits for the start file, so all migrate at once.
_RACER = """
import sys, time
from pathlib import Path
from training_server.migrate import upgrade
go = Path(sys.argv[2])
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.005)
upgrade(sys.argv[1])
"""


def test_concurrent_migrations_on_postgresql_do_not_collide(
    postgres_url: str, tmp_path: Path
) -> None:
    """Training replicas starting together all migrate; the advisory lock serialises them."""
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, postgres_url, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    time.sleep(3.0)  # let every process finish its imports
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-600:] for _, err in results]
