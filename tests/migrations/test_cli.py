"""`latency-predictor migrate`: operators who turn start-up migrations off run them explicitly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from tests.polling import eventually
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


# Each process imports everything, says so (its ready file), then waits for the start file,
# so all migrate at once.
_RACER = """
import sys, time
from pathlib import Path
from training_server.migrate import upgrade
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()
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
    ready = [tmp_path / f"ready-{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, postgres_url, str(go), str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in ready
    ]

    def all_imported() -> bool:
        for proc in procs:
            assert proc.poll() is None, f"a racer ended early: {proc.communicate()[1][-600:]}"
        return all(path.exists() for path in ready)

    eventually(all_imported, 60, "every racer done with its imports")
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-600:] for _, err in results]
